# Included by stagedoor/_render.pyx.  A growable byte buffer (Buf, in _render.pxd) and
# the number formats the PDF uses, all nogil; a failed allocation sets b.failed once.

cdef int buf_reserve(Buf* b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap
    cdef char* p
    if b.failed:
        return -1
    if b.len + extra <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < b.len + extra:
        cap *= 2
    p = <char*>realloc(b.data, cap)
    if p == NULL:
        b.failed = 1
        return -1
    b.data = p
    b.cap = cap
    return 0


cdef inline void buf_put(Buf* b, const char* s, Py_ssize_t n) noexcept nogil:
    if buf_reserve(b, n) == 0:
        memcpy(b.data + b.len, s, n)
        b.len += n


cdef inline void buf_puts(Buf* b, const char* s) noexcept nogil:
    buf_put(b, s, <Py_ssize_t>strlen(s))


cdef inline void buf_byte(Buf* b, char c) noexcept nogil:
    if buf_reserve(b, 1) == 0:
        b.data[b.len] = c
        b.len += 1


cdef void buf_int(Buf* b, long v) noexcept nogil:
    cdef char tmp[24]
    cdef int i = 24
    cdef unsigned long u
    if v < 0:
        buf_byte(b, b'-')
        u = <unsigned long>(-v)
    else:
        u = <unsigned long>v
    while True:
        i -= 1
        tmp[i] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    buf_put(b, tmp + i, 24 - i)


cdef void buf_int10(Buf* b, long v) noexcept nogil:
    """Ten digits, zero padded (xref offsets)."""
    cdef char tmp[10]
    cdef int i
    for i in range(9, -1, -1):
        tmp[i] = <char>(48 + v % 10)
        v //= 10
    buf_put(b, tmp, 10)


cdef void buf_milli(Buf* b, long v) noexcept nogil:
    """v / 1000 with three decimals, no locale involved."""
    if v < 0:
        buf_byte(b, b'-')
        v = -v
    buf_int(b, v // 1000)
    buf_byte(b, b'.')
    buf_byte(b, <char>(48 + (v // 100) % 10))
    buf_byte(b, <char>(48 + (v // 10) % 10))
    buf_byte(b, <char>(48 + v % 10))
