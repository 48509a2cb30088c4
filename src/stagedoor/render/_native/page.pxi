# Included by stagedoor/_render.pyx.  One page's content stream, as
# stagedoor/render/reference.py draws it: the fields (escaped, with /ActualText spans),
# the wrapped small print, the QR code as greedy filled rectangles.

# Page geometry, in points; the same numbers as stagedoor/render/reference.py.
cdef enum:
    WRAP = 110
    PAGE_W = 420
    PAGE_H = 298
    QR_X = 288
    QR_TOP = 246
    QR_SIDE = 116

# The static page content and the field operators are stagedoor.render.tables'
# bytes (one copy for both renderers); the module keeps them
# alive, C reads them through these pointers.
cdef bytes _STATIC_CONTENT = _tables.STATIC_CONTENT
cdef const char* STATIC_CONTENT = _STATIC_CONTENT
cdef tuple _FIELD_OPS = tuple([ops for _name, ops in _tables.FIELDS])
cdef const char* FIELD_OPS[NFIELDS]
for _i in range(NFIELDS):
    FIELD_OPS[_i] = <bytes>_FIELD_OPS[_i]
cdef bytes _SMALL_PRINT_OPS = _tables.SMALL_PRINT_OPS
cdef const char* SMALL_PRINT_OPS = _SMALL_PRINT_OPS

cdef void put_escaped(Buf* b, const char* s, Py_ssize_t n) noexcept nogil:
    """( ) \\ escaped; codes 10 and 13 (letters of EXTRA_GLYPHS) as \\n and \\r."""
    cdef Py_ssize_t i
    cdef char c
    if buf_reserve(b, 2 * n) != 0:
        return
    for i in range(n):
        c = s[i]
        if c == b'(' or c == b')' or c == b'\\':
            b.data[b.len] = b'\\'
            b.len += 1
        elif c == 10 or c == 13:
            b.data[b.len] = b'\\'
            b.data[b.len + 1] = b'n' if c == 10 else b'r'
            b.len += 2
            continue
        b.data[b.len] = c
        b.len += 1


cdef inline void span_open(Buf* b, const Text* t) noexcept nogil:
    if t.an:
        buf_puts(b, b"/Span << /ActualText <")
        buf_put(b, t.act, t.an)
        buf_puts(b, b"> >> BDC\n")


cdef inline void span_close(Buf* b, const Text* t) noexcept nogil:
    if t.an:
        buf_puts(b, b"EMC\n")


cdef void put_shaped(Buf* b, TextCtx* tc, const FieldOut* fo, const Text* t,
                     int f) noexcept nogil:
    if fo.actual:
        span_open(b, t)
    put_field_ops(b, tc, fo, f)
    if fo.actual:
        span_close(b, t)


cdef void put_small_print(Buf* b, const Text* t) noexcept nogil:
    cdef Py_ssize_t pos = 0, n = t.n, i, cut, first = 1
    cdef const char* s = t.s
    while pos < n:
        while pos < n and s[pos] == b' ':
            pos += 1
        if pos >= n:
            break
        if first:
            span_open(b, t)
            buf_puts(b, b"BT ")
            buf_puts(b, SMALL_PRINT_OPS)
            buf_puts(b, b" (")
            first = 0
        else:
            buf_puts(b, b" T* (")
        if n - pos <= WRAP:
            put_escaped(b, s + pos, n - pos)
            buf_puts(b, b") Tj")
            break
        cut = -1
        for i in range(pos + WRAP, pos - 1, -1):
            if s[i] == b' ':
                cut = i
                break
        if cut <= pos:
            put_escaped(b, s + pos, WRAP)
            pos += WRAP
        else:
            put_escaped(b, s + pos, cut - pos)
            pos = cut
        buf_puts(b, b") Tj")
    if not first:
        buf_puts(b, b" ET\n")
        span_close(b, t)


cdef inline char* put_small(char* p, int v) noexcept nogil:
    """Decimal of 0 <= v < 1000000 at p; returns the end."""
    cdef char tmp[8]
    cdef int i = 8
    while True:
        i -= 1
        tmp[i] = <char>(48 + v % 10)
        v //= 10
        if v == 0:
            break
    memcpy(p, tmp + i, 8 - i)
    return p + 8 - i


cdef void put_qr(Buf* b, QR* q, unsigned char* used) noexcept nogil:
    """The dark modules as filled rectangles: greedy, each as wide, then as tall, as it
    can grow over modules not yet covered (a third fewer than one per run)."""
    cdef int size = q.size, x, y, i, h, start, ok, yy
    cdef long scale = QR_SIDE * 1000 // (size + 8)
    cdef const unsigned char* dark = q.dark
    cdef char* p
    buf_puts(b, b"q 0 0 0 rg ")
    buf_milli(b, scale)
    buf_puts(b, b" 0 0 ")
    buf_milli(b, -scale)
    buf_byte(b, b' ')
    buf_milli(b, QR_X * 1000 + 4 * scale)
    buf_byte(b, b' ')
    buf_milli(b, QR_TOP * 1000 - 4 * scale)
    buf_puts(b, b" cm\n")
    memset(used, 0, size * size)
    for y in range(size):
        x = 0
        while x < size:
            if not dark[y * size + x] or used[y * size + x]:
                x += 1
                continue
            start = x
            while x < size and dark[y * size + x] and not used[y * size + x]:
                x += 1
            h = 1
            while y + h < size:
                ok = 1
                for i in range(start, x):
                    if not dark[(y + h) * size + i] or used[(y + h) * size + i]:
                        ok = 0
                        break
                if not ok:
                    break
                h += 1
            for yy in range(y, y + h):
                memset(used + yy * size + start, 1, x - start)
            if buf_reserve(b, 40) != 0:
                return
            p = b.data + b.len
            p = put_small(p, start)
            p[0] = b' '
            p = put_small(p + 1, y)
            p[0] = b' '
            p = put_small(p + 1, x - start)
            p[0] = b' '
            p = put_small(p + 1, h)
            memcpy(p, b" re\n", 4)
            b.len = (p + 4) - b.data
    buf_puts(b, b"f Q\n")
