# Included by stagedoor/_render.pyx, after layout.pxi.  The text layer of right-to-left
# lines the glyph order of walk_line cannot make readable (docs/text-layer.md):
#
# - Cascading lines (Nastaliq: letters raised and lowered along each word, overlapping
#   their neighbours).  pdfminer.six splits their words where a letter sits right of the
#   one before, poppler where one overlaps or leaves a gap (`فی ض اح مدف ی ض` for
#   `فیض احمد فیض`).  Such a line is written flat: every character on an invisible
#   glyph (the face's space) of its own, in logical order, on the baseline, marching
#   leftwards from the line's right end; the visible glyphs after them, standing for no
#   text; then one invisible glyph with no text at the left end, so that the line's
#   /ActualText span (below) runs along the baseline from end to end.
# - Lines whose right-to-left letters poppler does not know as right-to-left.  Its
#   table (poppler/UnicodeTypeTable.cc, unicodeTypeR) has Hebrew, Arabic, Syriac and
#   Thaana only: N'Ko is neutral, every character past U+FFFF (Adlam) is neither, and
#   its bidi pass (TextOutputDev.cc, reorderText) keeps those in position order, left
#   to right: reversed letter by letter.
#
# Both get an /ActualText span per line: poppler replaces the glyphs' text by it and
# spreads it over the span's box left to right (ActualText::end, TextPage::addChar),
# then runs reorderText over the line; pdfminer.six ignores it and reads the glyphs.
# Without a poppler right-to-left letter the span holds the text as it is (reorderText
# leaves it alone); a cascading line with right-to-left letters holds its characters in
# visual order (the glyphs left to right, a right-to-left glyph's characters reversed),
# which reorderText turns into logical order as it would glyphs drawn one per
# character: exactly for right-to-left letters and neutrals on a line that reads right
# to left (a crop of the field), and with its own placement of the spaces around a run
# of digits or Latin (as for any right-to-left text; docs/text-layer.md).
# stagedoor.render.shaped.layout (flat, line_span) makes the same decisions.

cdef int flat_line(TextCtx* c, int g0, int ng) noexcept nogil:
    """Whether the line is written flat: its letters cascade (a right-to-left glyph with
    an advance raised or lowered, as in Nastaliq; marks alone do not count) and the
    face of every glyph that stands for a character has a space to carry it."""
    cdef int k, cascades = 0
    cdef unsigned int space
    cdef SGlyph* g
    for k in range(g0, g0 + ng):
        g = &c.gv.g[k]
        if g.rtl and g.adv != 0 and g.yoff != 0:
            cascades = 1
            break
    if not cascades:
        return 0
    for k in range(g0, g0 + ng):
        g = &c.gv.g[k]
        if g.cn > 0 and not face_has(g.face, 32, &space):
            return 0
    return 1


cdef int register_flat(TextCtx* c, int g0, const unsigned int* text) noexcept nogil:
    """register_glyphs for a line written flat (flat_line): each glyph's code with no
    text, each of its characters on a code of the face's space (its moved characters,
    in c.xc).  0, or -1: no memory."""
    cdef int i, j, cap, code
    cdef unsigned int space
    cdef SGlyph* g
    cdef int* t
    for i in range(g0, c.gv.n):
        g = &c.gv.g[i]
        code = reg_code(&c.reg, g.face, g.gid, NULL, 0)
        if code < 0:
            return -1
        g.code = code
        if glyph_proc(g.face, g.gid) == NULL:
            return -1
        g.xi = 0
        g.xn = 0
        if g.cn == 0:
            continue
        face_has(g.face, 32, &space)
        if c.nxc + g.cn > c.xccap:
            cap = (c.nxc + g.cn) * 2 + 64
            t = <int*>realloc(c.xc, cap * sizeof(int))
            if t == NULL:
                return -1
            c.xc = t
            c.xccap = cap
        g.xi = c.nxc
        g.xn = g.cn
        for j in range(g.cn):
            c.xc[c.nxc] = reg_code(&c.reg, g.face, space, text + g.ci + j, 1)
            if c.xc[c.nxc] < 0:
                return -1
            c.nxc += 1
        if glyph_proc(g.face, space) == NULL:
            return -1
    return 0


cdef int put_carrier(TextCtx* c, Buf* b, TJ* s, int code, int x, int* px, int step,
                     int bridge, int bw) noexcept nogil:
    """Write a character's invisible glyph at x; when that is more than a slot left of
    the last one (*px, after a left-to-right run), bridges (no text) a slot apart in
    between, so pdfminer.six keeps the line whole.  -1: no memory."""
    cdef int w = code_width(c, code)
    if w < 0:
        return -1
    while px[0] - step > x:
        px[0] -= step
        put_glyph(b, s, bridge, px[0], bw, 0)
    put_glyph(b, s, code, x, w, 0)
    px[0] = x
    return 0


cdef int walk_flat(TextCtx* c, int g0, int ng, Buf* b, TJ* s) noexcept nogil:
    """walk_line for a cascading line registered by register_flat: the characters'
    invisible glyphs in logical order on the baseline, in slots from the line's right
    end leftwards, each the line's width / characters left of the one before (at most
    the first one's width: pdfminer.six keeps touching glyphs on one line), a
    left-to-right run's in its slots reversed (put_carrier bridges the jumps); then
    the visible glyphs
    at their places; then the face's space with no text at the line's left end.  b
    NULL: only register that last code.  -1: no memory."""
    cdef int* order = logical_order(c, g0, ng)
    cdef int k, j, n = 0, width = 0, step, w, last = -1, face = -1, code, bw, px, slot
    cdef int m, e, i, t
    cdef unsigned int space
    cdef SGlyph* g
    if order == NULL:
        return -1
    for k in range(ng):
        g = &c.gv.g[g0 + k]
        width += g.adv
        n += g.xn
        if g.xn > 0:
            last = k
    if last < 0:
        return 0
    face = c.gv.g[g0 + last].face
    face_has(face, 32, &space)
    code = reg_code(&c.reg, face, space, NULL, 0)
    if code < 0:
        return -1
    if b == NULL:
        return 0
    step = width // n
    for k in range(ng):
        g = &c.gv.g[g0 + order[k]]
        if g.xn > 0:
            w = code_width(c, c.xc[g.xi])
            if w < 0:
                return -1
            step = step if step < w else w
            break
    if step < 1:
        step = 1
    bw = code_width(c, code)
    if bw < 0:
        return -1
    px = width
    slot = 0
    k = 0
    while k < ng:
        g = &c.gv.g[g0 + order[k]]
        if g.rtl:
            for j in range(g.xn):
                slot += 1
                if put_carrier(c, b, s, c.xc[g.xi + j], width - slot * step, &px, step,
                               code, bw) != 0:
                    return -1
            k += 1
            continue
        # a left-to-right run (digits, Latin): its characters take their slots in
        # reverse, so that they read left to right by position too
        m = 0
        e = k
        while e < ng and not c.gv.g[g0 + order[e]].rtl:
            m += c.gv.g[g0 + order[e]].xn
            e += 1
        i = 0
        for t in range(k, e):
            g = &c.gv.g[g0 + order[t]]
            for j in range(g.xn):
                if put_carrier(c, b, s, c.xc[g.xi + j], width - (slot + m - i) * step, &px,
                               step, code, bw) != 0:
                    return -1
                i += 1
        slot += m
        k = e
    for k in range(ng):
        g = &c.gv.g[g0 + k]
        w = code_width(c, g.code)
        if w < 0:
            return -1
        put_glyph(b, s, g.code, c.lpos[k], w, g.yoff)
    w = code_width(c, code)
    if w < 0:
        return -1
    put_glyph(b, s, code, 0, w, 0)
    return 0


cdef inline int poppler_r(unsigned int cp) noexcept nogil:
    """poppler's unicodeTypeR (UnicodeTypeTable.cc): right-to-left for its bidi pass."""
    return (cp == 0x05BE or cp == 0x05C0 or cp == 0x05C3 or 0x05C5 <= cp <= 0x0603
            or cp == 0x060D or 0x0616 <= cp <= 0x064A or 0x066D <= cp <= 0x066F
            or 0x0671 <= cp <= 0x06D5 or cp == 0x06DD or 0x06E5 <= cp <= 0x06E6
            or 0x06EE <= cp <= 0x06EF or 0x06FA <= cp <= 0x070D or cp == 0x0710
            or 0x0712 <= cp <= 0x072F or 0x074B <= cp <= 0x07A5 or cp == 0x07B1
            or cp == 0x200F or cp == 0x202B or cp == 0x202E or 0xFB18 <= cp <= 0xFB1D
            or 0xFB1F <= cp <= 0xFB28 or 0xFB2A <= cp <= 0xFD3D or 0xFD40 <= cp <= 0xFDFC
            or 0xFE6C <= cp <= 0xFEFC)


cdef inline void put_utf16_hex(Buf* b, unsigned int cp) noexcept nogil:
    if cp > 0xFFFF:
        cp -= 0x10000
        put_hex2(b, (0xD800 + (cp >> 10)) >> 8)
        put_hex2(b, (0xD800 + (cp >> 10)) & 255)
        put_hex2(b, (0xDC00 + (cp & 0x3FF)) >> 8)
        put_hex2(b, (0xDC00 + (cp & 0x3FF)) & 255)
    else:
        put_hex2(b, cp >> 8)
        put_hex2(b, cp & 255)


cdef int line_span(TextCtx* c, int g0, int ng, Buf* b) noexcept nogil:
    """Open the line's /ActualText span (see above) if it needs one: 1 if opened, 0
    not, -1 no memory.  Its text: the glyphs' characters in logical order (each glyph's
    code's text, then its moved characters')."""
    cdef int* order = logical_order(c, g0, ng)
    cdef int k, j, t, t0, rtl = 0, nr = 0, flat, n = 0, m
    cdef unsigned int cp
    cdef unsigned int* chars
    cdef SGlyph* g
    cdef RegEntry* e
    if order == NULL:
        return -1
    for k in range(ng):
        g = &c.gv.g[g0 + k]
        rtl |= g.rtl
        n += c.reg.e[g.code].tlen + g.xn
    if not rtl or n == 0:
        return 0
    chars = <unsigned int*>malloc(n * sizeof(unsigned int))
    if chars == NULL:
        return -1
    m = 0
    for k in range(ng):
        g = &c.gv.g[g0 + order[k]]
        e = &c.reg.e[g.code]
        for t in range(e.tlen):
            chars[m] = c.reg.pool[e.toff + t]
            m += 1
        for j in range(g.xn):
            e = &c.reg.e[c.xc[g.xi + j]]
            for t in range(e.tlen):
                chars[m] = c.reg.pool[e.toff + t]
                m += 1
    for k in range(n):
        if poppler_r(chars[k]):
            nr += 1
    flat = flat_line(c, g0, ng)
    if nr > 0 and not flat:
        free(chars)
        return 0
    if nr > 0:
        # visual order: the glyphs left to right, a right-to-left glyph's characters
        # reversed (poppler's reorderText turns a line read by position into logical
        # order, as it would the glyphs themselves, drawn one per character)
        m = 0
        for k in range(ng):
            g = &c.gv.g[g0 + k]
            t0 = m
            e = &c.reg.e[g.code]
            for t in range(e.tlen):
                chars[m] = c.reg.pool[e.toff + t]
                m += 1
            for j in range(g.xn):
                e = &c.reg.e[c.xc[g.xi + j]]
                for t in range(e.tlen):
                    chars[m] = c.reg.pool[e.toff + t]
                    m += 1
            if g.rtl:
                t = m - 1
                while t0 < t:
                    cp = chars[t0]
                    chars[t0] = chars[t]
                    chars[t] = cp
                    t0 += 1
                    t -= 1
    buf_puts(b, b" /Span << /ActualText <FEFF")
    for k in range(n):
        put_utf16_hex(b, chars[k])
    buf_puts(b, b"> >> BDC")
    free(chars)
    return 1
