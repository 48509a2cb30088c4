# Included by stagedoor/_render.pyx.  Field text to bytes the page shows: cp1252 (WinAnsi)
# plus the Central European letters of tables.EXTRA_GLYPHS, straight from the str
# data; anything else goes through reference.encode_text (approximation + ActualText).
# Also the QR payload's bytes.

cdef object _fallback = None

# cp1252 bytes 0x80-0x9f (the rest of cp1252 is Latin-1): code point -> byte, taken from
# Python's own codec so the fast encoder below agrees with str.encode("cp1252").
cdef Py_UCS4 CP1252_HIGH_CP[32]
cdef unsigned char CP1252_HIGH_BYTE[32]
cdef int CP1252_HIGH_N = 0


cdef void _init_cp1252() except *:
    global CP1252_HIGH_N
    for b in range(0x80, 0xA0):
        try:
            ch = bytes([b]).decode("cp1252")
        except UnicodeDecodeError:
            continue
        CP1252_HIGH_CP[CP1252_HIGH_N] = ord(ch)
        CP1252_HIGH_BYTE[CP1252_HIGH_N] = b
        CP1252_HIGH_N += 1


_init_cp1252()


# tables.EXTRA_GLYPHS: the letters, and their codes (the same order)
cdef Py_UCS4 EXTRA_CP[36]
cdef unsigned char EXTRA_BYTE[36]
for _i in range(36):
    EXTRA_CP[_i] = ord(_tables.EXTRA_GLYPHS[_i][0])
    EXTRA_BYTE[_i] = _tables.EXTRA_CODES[_i]


cdef object encode_winansi(str value):
    """render.encode_text for text it shows exactly (no ActualText); None otherwise."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(value), i
    cdef int kind = PyUnicode_KIND(value), j
    cdef void* data = PyUnicode_DATA(value)
    cdef Py_UCS4 c
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n)
    cdef char* p = PyBytes_AS_STRING(out)
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if c < 0x20 or c == 0x7F:
            p[i] = b' '
            continue
        if c < 0x80 or 0xA0 <= c <= 0xFF:
            p[i] = <char>c
            continue
        for j in range(36):
            if EXTRA_CP[j] == c:
                p[i] = <char>EXTRA_BYTE[j]
                break
        else:
            for j in range(CP1252_HIGH_N):
                if CP1252_HIGH_CP[j] == c:
                    p[i] = <char>CP1252_HIGH_BYTE[j]
                    break
            else:
                return None
    return out


cdef inline bint has_controls(const char* p, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if <unsigned char>p[i] < 0x20 or p[i] == 0x7F:
            return True
    return False


cdef object encode_text(object value, list keep, Text* t):
    """Point t at the shown bytes of value (kept alive in keep), with ActualText if needed."""
    global _fallback
    cdef Py_ssize_t n
    cdef const char* p
    if type(value) is not str:
        value = str(value)
    t.act = NULL
    t.an = 0
    if PyUnicode_IS_ASCII(value):
        p = PyUnicode_AsUTF8AndSize(value, &n)   # the ASCII data itself, no copy
        if not has_controls(p, n):
            keep.append(value)
            t.s = p
            t.n = n
            return None
    raw = encode_winansi(<str>value)
    if raw is None:
        if _fallback is None:
            from stagedoor.render.reference import encode_text as fallback
            _fallback = fallback
        raw, act = _fallback(value)
        keep.append(act)
        t.act = <const char*>(<bytes>act)
        t.an = len(<bytes>act)
    keep.append(raw)
    t.s = <const char*>(<bytes>raw)
    t.n = len(<bytes>raw)
    return None


cdef object qr_bytes(object code, list keep, const unsigned char** p, Py_ssize_t* n):
    cdef const char* s
    if type(code) is str and PyUnicode_IS_ASCII(code):
        s = PyUnicode_AsUTF8AndSize(code, n)
        keep.append(code)
        p[0] = <const unsigned char*>s
        return None
    raw = str(code).encode("utf-8", "surrogatepass")
    keep.append(raw)
    p[0] = <const unsigned char*>(<bytes>raw)
    n[0] = len(<bytes>raw)
    return None
