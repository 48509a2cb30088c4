# Included by stagedoor/_render.pyx, after glyphs.pxi and layout.pxi.  The fast path's
# two fonts, F1 (regular) and F2 (bold): the plan's Latin face (Noto Sans) and its bold,
# embedded as Type 3 fonts of the codes an order shows (stagedoor/render/fastfont.py
# says why, and holds the bytes both renderers write).  Set up under the GIL when the
# fonts are configured (fast_configure); read without it by the fit test (text.pxi) and
# render_c (pdf.pxi).

from stagedoor.render import fastfont as _fastfont

cdef int FAST_FACE[2]
cdef unsigned int FAST_GID[2][256]
cdef int FAST_W[2][256]             # advance, 1/1000 em; -1: the face has no glyph for it
cdef int FAST_FW[NTEXT][256]        # per field: FAST_W of its font, -1 where the glyph's
                                    # ink leaves the field's limits (fastfont.inside)
cdef unsigned char FAST_STATIC[2][256]   # the codes the static page content shows
cdef object _FAST_KEEP = [b"", b""]      # the heads' bytes, alive while C points at them
cdef const char* FAST_HEAD[2]
cdef Py_ssize_t FAST_HEAD_LEN[2]
cdef bytes _FAST_TOUNI = _fastfont.TOUNICODE_BODY
cdef const char* FAST_TOUNI = _FAST_TOUNI
cdef Py_ssize_t FAST_TOUNI_LEN = len(_FAST_TOUNI)

for _i in range(2):
    for _j in range(256):
        FAST_STATIC[_i][_j] = 1 if _j in _fastfont.STATIC_CODES[_i] else 0
        FAST_W[_i][_j] = -1


cdef int fast_configure(object plan) except -1:
    """Under the GIL, after configure_fonts: each code's glyph and advance in the Latin
    face and its bold, and the heads of their dictionaries."""
    cdef int k, c, face, f
    cdef unsigned int gid
    cdef GlyphProc* proc
    regular = _fastfont.latin_face(plan)
    for k in range(2):
        face = -1 if regular < 0 else regular if k == 0 else FACES[regular].bold
        FAST_FACE[k] = face
        if face < 0:
            # no face at all: nothing to draw the labels with, every field is shaped
            for c in range(256):
                FAST_GID[k][c] = 0
                FAST_W[k][c] = -1
                FAST_STATIC[k][c] = 0
            for f in range(NTEXT):
                for c in range(256):
                    FAST_FW[f][c] = -1
            _FAST_KEEP[k] = _fastfont.head(k, b"F", [0] * 256)
            FAST_HEAD[k] = <bytes>_FAST_KEEP[k]
            FAST_HEAD_LEN[k] = len(<bytes>_FAST_KEEP[k])
            continue
        for c in range(256):
            FAST_STATIC[k][c] = 1 if c in _fastfont.STATIC_CODES[k] else 0
        if not face_open(face):
            raise RuntimeError(f"the Latin face {plan.faces[face][0]} cannot be opened")
        for c in range(256):
            ch = _fastfont.CODE_CHARS[c]
            FAST_GID[k][c] = 0
            FAST_W[k][c] = -1
            gid = 0
            if ch is not None and ch not in _fastfont.SHAPED_ONLY \
                    and hb_font_get_nominal_glyph(FACES[face].font, ord(ch), &gid) \
                    and gid != 0:
                proc = glyph_proc(face, gid)
                if proc == NULL:
                    raise MemoryError()
                FAST_GID[k][c] = gid
                FAST_W[k][c] = proc.width
        for f in range(NTEXT):
            if FIELD_BOX[f][4] != k:
                continue
            for c in range(256):
                FAST_FW[f][c] = FAST_W[k][c]
                if FAST_W[k][c] >= 0:
                    proc = glyph_proc(face, FAST_GID[k][c])
                    if not _fastfont.inside(f, (proc.x0, proc.y0, proc.x1, proc.y1)):
                        FAST_FW[f][c] = -1
        name = <bytes>(<char*>FACES[face].psname)
        proc = glyph_proc(face, 0)
        if proc == NULL:
            raise MemoryError()
        drawn = _fastfont.drawn_widths(k, [FAST_W[k][c] for c in range(256)], proc.width)
        head = _fastfont.head(k, name, drawn)
        _FAST_KEEP[k] = head
        FAST_HEAD[k] = <bytes>head
        FAST_HEAD_LEN[k] = len(head)
    return 0


cdef int fast_used(const TicketC* tickets, Py_ssize_t n,
                   unsigned char* used) noexcept nogil:
    """used[font * 256 + code] = 1 for the codes the order shows in F1 and F2 (the labels
    and the bytes of the fast fields, as reference.render_order counts them); returns
    how many."""
    cdef Py_ssize_t k, i
    cdef int f, c, count = 0
    cdef unsigned char* u
    cdef const Text* t
    memcpy(used, FAST_STATIC, 512)
    for k in range(n):
        for f in range(NFIELDS + 1):
            t = &tickets[k].text[f]
            if t.u != NULL or t.s == NULL:
                continue
            u = used + 256 * FIELD_BOX[f][4]
            for i in range(t.n):
                u[<unsigned char>t.s[i]] = 1
    for c in range(512):
        count += used[c]
    return count


cdef void fast_font_object(Buf* out, int k, const unsigned char* used, int first_proc,
                           int tounicode) noexcept nogil:
    """Object 4 + k: fastfont.font_object."""
    cdef int c, i = 0
    buf_int(out, 4 + k)
    buf_puts(out, b" 0 obj\n")
    buf_put(out, FAST_HEAD[k], FAST_HEAD_LEN[k])
    for c in range(256):
        if used[c]:
            buf_puts(out, b" /c")
            put_hex2(out, c)
            buf_byte(out, b' ')
            buf_int(out, first_proc + i)
            buf_puts(out, b" 0 R")
            i += 1
    buf_puts(out, b" >>\n/Encoding << /Type /Encoding /Differences [")
    for c in range(256):
        if used[c]:
            buf_byte(out, b' ')
            buf_int(out, c)
            buf_puts(out, b" /c")
            put_hex2(out, c)
    buf_puts(out, b" ] >>\n/ToUnicode ")
    buf_int(out, tounicode)
    buf_puts(out, b" 0 R >>\nendobj\n")


cdef int fast_objects(Buf* out, const unsigned char* used, int first,
                      Py_ssize_t* offsets, Py_ssize_t* nobj) noexcept nogil:
    """The procedures of the used codes (F1's, then F2's) from object `first` on, then
    the shared ToUnicode; -1: no memory."""
    cdef int k, c, num = first
    cdef GlyphProc* proc
    for k in range(2):
        if FAST_FACE[k] < 0:
            continue        # no face: no code used (fast_configure)
        # opened again on first use in a forked child (fonts.pxi drops the parent's)
        if not face_open(FAST_FACE[k]):
            return -1
        for c in range(256):
            if used[256 * k + c]:
                proc = glyph_proc(FAST_FACE[k], FAST_GID[k][c])
                if proc == NULL:
                    return -1
                offsets[nobj[0]] = out.len
                nobj[0] += 1
                buf_int(out, num)
                buf_puts(out, b" 0 obj\n")
                buf_put(out, proc.obj, proc.objlen)
                num += 1
    offsets[nobj[0]] = out.len
    nobj[0] += 1
    buf_int(out, num)
    buf_puts(out, b" 0 obj\n")
    buf_put(out, FAST_TOUNI, FAST_TOUNI_LEN)
    return 0
