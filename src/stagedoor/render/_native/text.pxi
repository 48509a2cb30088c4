# Included by stagedoor/_render.pyx.  Field text to what the page shows: cp1252 (WinAnsi)
# plus the Central European letters of tables.EXTRA_GLYPHS, straight from the str data,
# in the standard Helvetica fonts (the fast path) when every character has a byte and
# the field fits its box; anything else is the shaped path (NFC, UTF-32 for
# layout.pxi, the exact text as /ActualText).  Also the QR payload's bytes.

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


# tables.HELVETICA_WIDTHS / HELVETICA_BOLD_WIDTHS, by byte
cdef short HELV_W[256]
cdef short HELV_BOLD_W[256]
for _i in range(256):
    HELV_W[_i] = _tables.HELVETICA_WIDTHS[_i]
    HELV_BOLD_W[_i] = _tables.HELVETICA_BOLD_WIDTHS[_i]


cdef inline bint fits_helvetica(const char* p, Py_ssize_t n, int f) noexcept:
    """Whether the fast path's Helvetica text fits field f's box at its size."""
    cdef const short* w = &HELV_W[0]
    if FIELD_BOX[f][4]:
        w = &HELV_BOLD_W[0]
    cdef long total = 0
    cdef Py_ssize_t i
    for i in range(n):
        total += w[<unsigned char>p[i]]
    return total * FIELD_BOX[f][3] // 1000 <= (FIELD_BOX[f][1] - FIELD_BOX[f][0]) * 1000


cdef bint small_print_fits(const char* s, Py_ssize_t n) noexcept:
    """Whether put_small_print's lines (WRAP bytes at most) fit the box and its lines."""
    cdef Py_ssize_t pos = 0, i, cut, end
    cdef int lines = 0
    cdef long width, box = (FIELD_BOX[SMALL_PRINT][1] - FIELD_BOX[SMALL_PRINT][0]) * 1000
    while pos < n:
        while pos < n and s[pos] == b' ':
            pos += 1
        if pos >= n:
            break
        if n - pos <= WRAP:
            end = n
        else:
            cut = -1
            for i in range(pos + WRAP, pos - 1, -1):
                if s[i] == b' ':
                    cut = i
                    break
            end = pos + WRAP if cut <= pos else cut
        width = 0
        for i in range(pos, end):
            width += HELV_W[<unsigned char>s[i]]
        lines += 1
        if width * FIELD_BOX[SMALL_PRINT][3] // 1000 > box or lines > FIELD_BOX[SMALL_PRINT][5]:
            return False
        pos = end
    return True


cdef inline bint fits(const char* p, Py_ssize_t n, int f) noexcept:
    return small_print_fits(p, n) if f == SMALL_PRINT else fits_helvetica(p, n, f)


cdef const char* HEX = b"0123456789ABCDEF"

# What shape_text tells the caller besides the Text it filled.
cdef enum:
    NOT_SHAPED = 0
    SHAPED = 1
    SHAPED_KANA = 2   # the text has kana (a Japanese order: its Han take the Japanese face)


cdef inline char* put_hex4(char* a, unsigned int unit) noexcept:
    a[0] = HEX[(unit >> 12) & 15]
    a[1] = HEX[(unit >> 8) & 15]
    a[2] = HEX[(unit >> 4) & 15]
    a[3] = HEX[unit & 15]
    return a + 4


cdef int shape_text(str value, list keep, Text* t) except -1:
    """The shaped path: NFC, controls as spaces, UTF-32 for the C side, ActualText.

    One pass in C over the normalised str's data fills both buffers: the UTF-32 of
    the text (controls as spaces, lone surrogates as U+FFFD) and the ActualText (a BOM,
    then the UTF-16BE code units in upper-case hex, lone surrogates as themselves).
    This runs under the GIL, so it has to be short: the same steps in Python (two
    regex substitutions, three encodes, hex()) took ~2 us a field and were most of the
    time two render threads could not overlap (bench.scripts_measure's 2-thread
    scaling).  The reference (stagedoor.render.shaped) is the oracle the tests hold
    this to, byte for byte."""
    cdef Py_ssize_t n, i, units = 0
    cdef int kind, kana = 0
    cdef void* data
    cdef unsigned int c  # not Py_UCS4: Cython makes a str of that in arithmetic
    cdef unsigned char* u
    cdef char* a
    if not PyUnicode_IS_ASCII(value):
        value = unicodedata.normalize("NFC", value)
    n = PyUnicode_GET_LENGTH(value)
    kind = PyUnicode_KIND(value)
    data = PyUnicode_DATA(value)
    for i in range(n):
        units += 2 if PyUnicode_READ(kind, data, i) > 0xFFFF else 1
    raw = PyBytes_FromStringAndSize(NULL, 4 * n)
    act = PyBytes_FromStringAndSize(NULL, 4 * (units + 1))
    u = <unsigned char*>PyBytes_AS_STRING(raw)
    a = put_hex4(PyBytes_AS_STRING(act), 0xFEFF)
    for i in range(n):
        c = <unsigned int>PyUnicode_READ(kind, data, i)
        if c < 0x20 or c == 0x7F:
            c = 0x20
        elif 0x3040 <= c <= 0x30FF or 0x31F0 <= c <= 0x31FF:
            kana = 1
        if c > 0xFFFF:
            a = put_hex4(a, 0xD800 + ((c - 0x10000) >> 10))
            a = put_hex4(a, 0xDC00 + ((c - 0x10000) & 0x3FF))
        else:
            a = put_hex4(a, c)
        if 0xD800 <= c <= 0xDFFF:
            c = 0xFFFD
        u[4 * i] = c & 0xFF            # little-endian whatever the host: what
        u[4 * i + 1] = (c >> 8) & 0xFF  # str.encode("utf-32-le") wrote
        u[4 * i + 2] = (c >> 16) & 0xFF
        u[4 * i + 3] = (c >> 24) & 0xFF
    keep.append(act)
    keep.append(raw)
    t.act = <const char*>(<bytes>act)
    t.an = len(<bytes>act)
    t.u = <const unsigned int*>(<const char*>(<bytes>raw))
    t.un = <int>n
    t.s = NULL
    t.n = 0
    return SHAPED_KANA if kana else SHAPED


cdef int encode_text(object value, list keep, Text* t, int f) except -1:
    """Point t at the text of field f: Helvetica bytes (the fast path) when every
    character is in the fonts' encoding and it fits; else the shaped path.  Returns
    NOT_SHAPED, SHAPED or SHAPED_KANA."""
    cdef Py_ssize_t n
    cdef const char* p
    if type(value) is not str:
        value = str(value)
    t.act = NULL
    t.an = 0
    t.u = NULL
    t.un = 0
    if PyUnicode_IS_ASCII(value):
        p = PyUnicode_AsUTF8AndSize(value, &n)   # the ASCII data itself, no copy
        if not has_controls(p, n) and fits(p, n, f):
            keep.append(value)
            t.s = p
            t.n = n
            return NOT_SHAPED
    raw = encode_winansi(<str>value)
    if raw is not None and fits(<const char*>(<bytes>raw), len(<bytes>raw), f):
        keep.append(raw)
        t.s = <const char*>(<bytes>raw)
        t.n = len(<bytes>raw)
        return NOT_SHAPED
    return shape_text(<str>value, keep, t)


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
