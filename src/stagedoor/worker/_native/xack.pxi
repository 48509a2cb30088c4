# worker/_entries.pyx: XACK packed as RESP (pack_xack), what hiredis.pack_command packs.

cdef inline Py_ssize_t _put_len(char* p, char mark, Py_ssize_t n) noexcept:
    """Write "<mark><n>\\r\\n" at p (n >= 0) and return its length: by hand, since
    snprintf's "%zd" costs far more per XACK (docs/benchmarks.md, "Moved from comments")."""
    cdef char digits[24]
    cdef Py_ssize_t k = 0, i
    while True:
        digits[k] = <char>(48 + n % 10)
        k += 1
        n //= 10
        if n == 0:
            break
    p[0] = mark
    for i in range(k):
        p[1 + i] = digits[k - 1 - i]
    p[1 + k] = 13
    p[2 + k] = 10
    return k + 3


cdef inline Py_ssize_t _put_bulk(char* p, object x) noexcept:
    cdef Py_ssize_t k = PyBytes_GET_SIZE(x)
    cdef Py_ssize_t at = _put_len(p, 36, k)  # '$'
    memcpy(p + at, PyBytes_AS_STRING(x), k)
    p[at + k] = 13
    p[at + k + 1] = 10
    return at + k + 2


def pack_xack(bytes stream, bytes group, list ids):
    """RESP for XACK stream group id...: what hiredis.pack_command packs, for bytes ids,
    at a fraction of its cost (tests/worker/test_entries.py compares them)."""
    cdef Py_ssize_t n = len(ids), size = 0
    cdef object x
    for x in ids:
        if not PyBytes_CheckExact(x):
            raise TypeError("ids must be bytes")
        size += PyBytes_GET_SIZE(x) + 26  # "$" + up to 20 digits + 2 CRLF + the id
    size += 3 * 26 + PyBytes_GET_SIZE(stream) + PyBytes_GET_SIZE(group) + 32
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* p = PyBytes_AS_STRING(out)
    cdef Py_ssize_t at = _put_len(p, 42, n + 3)  # '*'
    memcpy(p + at, b"$4\r\nXACK\r\n", 10)
    at += 10
    at += _put_bulk(p + at, stream)
    at += _put_bulk(p + at, group)
    for x in ids:
        at += _put_bulk(p + at, x)
    return out[:at]
