# Included by stagedoor/_render.pyx.  Field text to what the page shows: cp1252 (WinAnsi)
# plus the Central European letters of tables.EXTRA_GLYPHS, straight from the str data,
# in the fast path's fonts (fastfont.pxi: Noto Sans as Type 3) when every character has
# a byte and the field fits its box; anything else is the shaped path (NFC, UTF-32 for
# layout.pxi, the exact text as /ActualText).  Also the QR payload's bytes.

cdef int keep_push(Keep* k, object o) except -1:
    cdef PyObject** grown
    if k.n == k.cap:
        grown = <PyObject**>realloc(k.p, (2 * k.cap + 16) * sizeof(PyObject*))
        if grown == NULL:
            raise MemoryError()
        k.p = grown
        k.cap = 2 * k.cap + 16
    Py_INCREF(o)
    k.p[k.n] = <PyObject*>o
    k.n += 1
    return 0


cdef void keep_release(Keep* k) noexcept:
    cdef Py_ssize_t i
    for i in range(k.n):
        Py_XDECREF(k.p[i])
    free(k.p)
    k.p = NULL
    k.n = k.cap = 0


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


cdef inline int winansi_byte(Py_UCS4 c) noexcept nogil:
    """The font encoding's byte for c (controls as a space); -1 when it has none."""
    cdef int j
    if c < 0x20 or c == 0x7F:
        return 0x20
    if c < 0x80 or 0xA0 <= c <= 0xFF:
        return <int>c
    for j in range(36):
        if EXTRA_CP[j] == c:
            return EXTRA_BYTE[j]
    for j in range(CP1252_HIGH_N):
        if CP1252_HIGH_CP[j] == c:
            return CP1252_HIGH_BYTE[j]
    return -1


cdef object encode_winansi(str value):
    """render.encode_text for text it shows exactly (no ActualText); None otherwise.

    Scans before it allocates: a Cyrillic, Arabic or CJK field fails at its first
    character, and this runs under the GIL (see shape_src)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(value), i
    cdef int kind = PyUnicode_KIND(value)
    cdef void* data = PyUnicode_DATA(value)
    for i in range(n):
        if winansi_byte(PyUnicode_READ(kind, data, i)) < 0:
            return None
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n)
    cdef char* p = PyBytes_AS_STRING(out)
    for i in range(n):
        p[i] = <char>winansi_byte(PyUnicode_READ(kind, data, i))
    return out


cdef inline bint has_controls(const char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if <unsigned char>p[i] < 0x20 or p[i] == 0x7F:
            return True
    return False


cdef inline bint fits_fast(const char* p, Py_ssize_t n, int f) noexcept nogil:
    """Whether the fast path's text fits field f's box at its size, in its font
    (fastfont.pxi); False when the face lacks one of its glyphs, or one would leave
    the field's ink limits."""
    cdef const int* w = &FAST_FW[f][0]
    cdef long total = 0
    cdef Py_ssize_t i
    cdef int a
    for i in range(n):
        a = w[<unsigned char>p[i]]
        if a < 0:
            return False
        total += a
    return total * FIELD_BOX[f][3] // 1000 <= (FIELD_BOX[f][1] - FIELD_BOX[f][0]) * 1000


cdef bint small_print_fits(const char* s, Py_ssize_t n) noexcept nogil:
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
            if FAST_FW[SMALL_PRINT][<unsigned char>s[i]] < 0:
                return False
            width += FAST_FW[SMALL_PRINT][<unsigned char>s[i]]
        lines += 1
        if width * FIELD_BOX[SMALL_PRINT][3] // 1000 > box or lines > FIELD_BOX[SMALL_PRINT][5]:
            return False
        pos = end
    return True


cdef inline bint fits(const char* p, Py_ssize_t n, int f) noexcept nogil:
    return small_print_fits(p, n) if f == SMALL_PRINT else fits_fast(p, n, f)


cdef const char* HEX = b"0123456789ABCDEF"

# What encode_text tells the caller besides the Text it filled.
cdef enum:
    NOT_SHAPED = 0
    SHAPED = 1
    SHAPED_KANA = 2   # the text has kana (a Japanese order: its Han take the Japanese face)


cdef inline char* put_hex4(char* a, unsigned int unit) noexcept nogil:
    a[0] = HEX[(unit >> 12) & 15]
    a[1] = HEX[(unit >> 8) & 15]
    a[2] = HEX[(unit >> 4) & 15]
    a[3] = HEX[unit & 15]
    return a + 4


cdef int shape_src(str value, Keep* keep, Text* t) except -1:
    """The shaped path, its GIL half: NFC, and where the normalised text's characters
    are (shaped_fill does the rest without the GIL).  Returns SHAPED or SHAPED_KANA.

    Why so little here: what runs under the GIL is what two render threads cannot
    overlap, and a thread that finds the GIL taken sleeps a futex round trip while its
    core idles (what that cost: docs/benchmarks.md, "Moved from comments").  The UTF-32
    and /ActualText buffers, two bytes objects a field made and freed here, now live in
    the render's scratch."""
    cdef Py_ssize_t n, i
    cdef int kind
    cdef void* data
    cdef unsigned int c
    if not PyUnicode_IS_ASCII(value):
        value = unicodedata.normalize("NFC", value)
        keep_push(keep, value)
    n = PyUnicode_GET_LENGTH(value)
    kind = PyUnicode_KIND(value)
    data = PyUnicode_DATA(value)
    t.src = data
    t.kind = kind
    t.srcn = n
    t.s = NULL
    t.n = 0
    if kind != PyUnicode_1BYTE_KIND:
        for i in range(n):
            c = <unsigned int>PyUnicode_READ(kind, data, i)
            if 0x3040 <= c <= 0x30FF or 0x31F0 <= c <= 0x31FF:
                return SHAPED_KANA
    return SHAPED


cdef int shaped_fill(TicketC* tc, Py_ssize_t nt, Buf* prep) noexcept nogil:
    """The shaped path, its C half: for every field shape_src pointed at, the UTF-32 of
    the text (controls as spaces, lone surrogates as U+FFFD) and the /ActualText (a
    BOM, then the UTF-16BE code units in upper-case hex, lone surrogates as
    themselves), in one pass over the str's data into `prep`.  0, or -1: no memory.
    The reference (stagedoor.render.shaped) is the oracle the tests hold this to,
    byte for byte."""
    cdef Py_ssize_t need = 0, pos, i, k
    cdef int f, kind
    cdef Text* t
    cdef const void* data
    cdef unsigned int c
    cdef unsigned int* u
    cdef char* a
    for k in range(nt):
        for f in range(NFIELDS + 1):
            if tc[k].text[f].src != NULL:
                # 4 bytes a character, and at most two 4-hex-digit units each, + the BOM
                need += 12 * tc[k].text[f].srcn + 4
    prep.len = 0
    if buf_reserve(prep, need) != 0:
        return -1
    pos = 0
    for k in range(nt):
        for f in range(NFIELDS + 1):
            t = &tc[k].text[f]
            if t.src == NULL:
                continue
            data = t.src
            kind = t.kind
            u = <unsigned int*>(prep.data + pos)      # pos stays a multiple of 4
            a = prep.data + pos + 4 * t.srcn         # the ActualText right after it
            t.act = a
            a = put_hex4(a, 0xFEFF)
            for i in range(t.srcn):
                c = <unsigned int>PyUnicode_READ_nogil(kind, data, i)
                if c < 0x20 or c == 0x7F:
                    c = 0x20
                if c > 0xFFFF:
                    a = put_hex4(a, 0xD800 + ((c - 0x10000) >> 10))
                    a = put_hex4(a, 0xDC00 + ((c - 0x10000) & 0x3FF))
                else:
                    a = put_hex4(a, c)
                u[i] = 0xFFFD if 0xD800 <= c <= 0xDFFF else c
            t.u = u
            t.un = <int>t.srcn
            t.an = a - t.act
            pos += 4 * t.srcn + t.an
    prep.len = pos
    return 0


cdef int encode_text(object value, Keep* keep, Text* t, int f) except -1:
    """Point t at the text of field f: fast-path bytes when every
    character is in the fonts' encoding and it fits; else the shaped path.  Returns
    NOT_SHAPED, SHAPED or SHAPED_KANA."""
    cdef Py_ssize_t n
    cdef const char* p
    if type(value) is not str:
        value = str(value)
        keep_push(keep, value)     # (the caller keeps `value` as it came)
    t.act = NULL
    t.an = 0
    t.u = NULL
    t.un = 0
    t.src = NULL
    t.undecided = 0
    if PyUnicode_IS_ASCII(value):
        p = PyUnicode_AsUTF8AndSize(value, &n)   # the ASCII data itself, no copy
        if not has_controls(p, n):
            # whether it fits its box is decided without the GIL (decide_ascii)
            t.s = p
            t.n = n
            t.undecided = 1
            return NOT_SHAPED
    raw = encode_winansi(<str>value)
    if raw is not None and fits(<const char*>(<bytes>raw), len(<bytes>raw), f):
        keep_push(keep, raw)
        t.s = <const char*>(<bytes>raw)
        t.n = len(<bytes>raw)
        return NOT_SHAPED
    return shape_src(<str>value, keep, t)


cdef int decide_ascii(TicketC* tc, Py_ssize_t nt) noexcept nogil:
    """The rest of encode_text for its ASCII fields without control characters,
    without the GIL (see shape_src for why): the fast path when the text fits its box,
    else the shaped path (ASCII is its own NFC: shaped_fill reads it as it is).
    Returns SHAPED when a field went the shaped way, else NOT_SHAPED."""
    cdef Py_ssize_t k
    cdef int f, out = NOT_SHAPED
    cdef Text* t
    for k in range(nt):
        for f in range(NFIELDS + 1):
            t = &tc[k].text[f]
            if not t.undecided:
                continue
            t.undecided = 0
            if not fits(t.s, t.n, f):
                t.src = t.s
                t.kind = PyUnicode_1BYTE_KIND
                t.srcn = t.n
                t.s = NULL
                t.n = 0
                out = SHAPED
    return out


cdef int qr_bytes(object code, Keep* keep, const unsigned char** p,
                  Py_ssize_t* n) except -1:
    """The QR payload's bytes: the ASCII data itself, else UTF-8 (the caller keeps `code`)."""
    cdef const char* s
    if type(code) is str and PyUnicode_IS_ASCII(code):
        s = PyUnicode_AsUTF8AndSize(code, n)
        p[0] = <const unsigned char*>s
        return 0
    raw = str(code).encode("utf-8", "surrogatepass")
    keep_push(keep, raw)
    p[0] = <const unsigned char*>(<bytes>raw)
    n[0] = len(<bytes>raw)
    return 0
