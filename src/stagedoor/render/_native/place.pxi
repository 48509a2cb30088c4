# Included by stagedoor/_render.pyx, after layout.pxi.  A laid-out field as PDF text
# operators: where each glyph is placed and in which order it is written.  put_field_ops
# writes a field's BT .. ET, walk_line a line's glyphs in logical order at their visual
# places (with the bridges pdfminer.six needs: put_bridges), put_glyph one glyph into the
# line's TJ array.  stagedoor.render.shaped.pdf writes the same operators in Python.


cdef int* logical_order(TextCtx* c, int g0, int ng) noexcept nogil:
    """The indices (0..ng-1) of glyphs g0.. in logical order: by the first character each
    stands for, glyphs of one character in visual order (a stable counting sort; lines
    come from the bidi algorithm, so a right-to-left run is in falling order).  Then
    c.lpos[k] is glyph k's visual x (1/1000 em from the line's start).  NULL: no memory."""
    cdef int k, lo = 0, hi = 0, span, need, pen = 0, t, acc
    cdef int* cnt
    cdef SGlyph* g
    for k in range(ng):
        g = &c.gv.g[g0 + k]
        if k == 0 or g.ci < lo:
            lo = g.ci
        if k == 0 or g.ci > hi:
            hi = g.ci
    span = hi - lo + 1
    need = 2 * ng + span
    if need > c.ordcap:
        free(c.ord)
        c.ord = <int*>malloc(need * sizeof(int))
        if c.ord == NULL:
            c.ordcap = 0
            return NULL
        c.ordcap = need
    c.lpos = c.ord + ng
    cnt = c.ord + 2 * ng
    memset(cnt, 0, span * sizeof(int))
    for k in range(ng):
        g = &c.gv.g[g0 + k]
        c.lpos[k] = pen + g.xoff
        pen += g.adv
        cnt[g.ci - lo] += 1
    acc = 0
    for k in range(span):
        t = cnt[k]
        cnt[k] = acc
        acc += t
    for k in range(ng):
        t = c.gv.g[g0 + k].ci - lo
        c.ord[cnt[t]] = k
        cnt[t] += 1
    return c.ord


cdef void put_glyph(Buf* b, TJ* s, int code, int x, int width, int yoff) noexcept nogil:
    """Show code with its origin at x (1/1000 em from the line's start), yoff up."""
    cdef int font = code >> 8, adjust
    cdef long rise
    if font != s.cur or yoff != s.rise:
        if s.cur >= 0:
            buf_puts(b, b">] TJ" if s.inhex else b"] TJ")
        if font != s.cur:
            buf_puts(b, b" /T")
            buf_int(b, font)
            buf_byte(b, b' ')
            buf_milli(b, s.size)
            buf_puts(b, b" Tf")
            s.cur = font
        if yoff != s.rise:
            s.rise = yoff
            buf_byte(b, b' ')
            # rounded down, as the reference's // (C's / truncates a negative rise)
            rise = <long>yoff * s.size
            buf_milli(b, rise // 1000 if rise >= 0 else -((999 - rise) // 1000))
            buf_puts(b, b" Ts")
        buf_puts(b, b" [")
        s.inhex = 0
    adjust = x - s.at
    if adjust != 0:
        if s.inhex:
            buf_byte(b, b'>')
            s.inhex = 0
        buf_int(b, -adjust)
    if not s.inhex:
        buf_byte(b, b'<')
        s.inhex = 1
    put_hex2(b, code & 255)
    s.at = x + width


# pdfminer.six puts two consecutive glyphs on one line when they are less than twice the
# wider one's width apart and their boxes (an em tall) overlap by half an em; a bridge
# (the face's space, no text, no ink) goes between two that would not be
cdef enum:
    BRIDGE_RISE = 500
    # pdfminer.six reads a space where a glyph starts more than a tenth of an em (its
    # word_margin) right of the one before: a gap after a mark wider than this gets a
    # bridge (half that, to stay clear of rounding)
    MARK_GAP = 50


cdef inline int floor_half(int v) noexcept nogil:
    return v // 2 if v >= 0 else -((1 - v) // 2)


cdef enum:
    MOVE_STEP = 20              # moved characters' invisible glyphs: 1/50 em apart


cdef int put_bridges(TextCtx* c, Buf* b, TJ* s, const WItem* it, int at0, int at1,
                     int rise0) noexcept nogil:
    """The bridges (the face's space, no text, no ink) between the box at0..at1 written
    last (at rise0) and the next item, so that pdfminer.six keeps them on one line: it
    does while two consecutive glyphs are less than twice the wider one's width apart
    (never two of no width) and their boxes, an em tall, overlap by half an em; bridged
    by half that distance already, to stay clear of rounding.  b NULL: only register the
    code.  -1: no memory."""
    cdef unsigned int sid
    cdef GlyphProc* proc
    cdef int sw, gap, n, i, bridge = -1, wide, x = it.x, w = it.w, rise = it.rise
    if not face_has(it.face, 32, &sid):
        return 0
    proc = glyph_proc(it.face, sid)
    if proc == NULL:
        return -1
    sw = proc.width
    n = 0
    if sw > 0:
        if x > at1:
            gap = x - at1
        elif x + w < at0:
            gap = at0 - x - w
        else:
            gap = 0
        wide = at1 - at0 if at1 - at0 > w else w
        if at1 == at0 and x > at1 and gap > MARK_GAP:
            # after a mark of no width drawn left of its pen (a Tibetan vowel sign),
            # pdfminer.six would read the gap to the next letter as a word space:
            # bridged all the way
            n = (gap + sw - 1) // sw
        elif gap >= wide:
            n = gap // sw if gap // sw > 1 else 1
    if n > 0 or rise - rise0 >= BRIDGE_RISE or rise0 - rise >= BRIDGE_RISE:
        bridge = reg_code(&c.reg, it.face, sid, NULL, 0)
        if bridge < 0:
            return -1
    if b == NULL:
        return 0
    for i in range(n):
        if x > at1:
            put_glyph(b, s, bridge, at1 + i * sw, sw, rise0)
        elif x + w < at0:
            put_glyph(b, s, bridge, at0 - (i + 1) * sw, sw, rise0)
        else:
            put_glyph(b, s, bridge, at0 if at0 < x else x, sw, rise0)
    if rise - rise0 >= BRIDGE_RISE or rise0 - rise >= BRIDGE_RISE:
        put_glyph(b, s, bridge, x, sw, floor_half(rise0 + rise))
    return 0


cdef int code_width(TextCtx* c, int code) noexcept nogil:
    """The advance of the glyph a code shows, as the font's /Widths gives it
    (put_text_objects in type3.pxi): the pen of every glyph written after it moves by
    exactly this much.  (An invisible glyph carrying a character moved off a group is
    its own glyph's face's space, not the face of the group's first glyph.)  -1: no
    memory."""
    cdef GlyphProc* proc = glyph_proc(c.reg.e[code].face, c.reg.e[code].gid)
    if proc == NULL:
        return -1
    return proc.width


cdef int walk_line(TextCtx* c, int g0, int ng, Buf* b, TJ* s) noexcept nogil:
    """Glyphs g0..g0+ng-1 in the order put_field_ops writes them (x in 1/1000 em from the
    line's start).  The glyphs go in logical order at their visual places.  A
    right-to-left glyph with an advance is written with the marks after it that stand
    for nothing (moved, or the second glyph of a cluster): first those, right to left,
    then it, then the invisible glyphs of the characters moved off the group, in
    logical order, MOVE_STEP apart leftwards from its left edge on its baseline (poppler,
    which reads right to left by position, puts them after it; pdfminer.six, which reads
    in writing order, too).  Before each, the bridges pdfminer.six needs.  b NULL: only
    register the bridges' codes (at layout, so that the fonts are complete before any
    page is written).  -1: no memory."""
    cdef int* order
    cdef int i, j, k, m, gs, nm, base, ni = 0, need, at0 = 0, at1 = 0, rise0 = 0, t
    cdef SGlyph* g
    cdef SGlyph* h
    cdef WItem* it
    if flat_line(c, g0, ng):
        return walk_flat(c, g0, ng, b, s)      # a cascading line (linetext.pxi)
    order = logical_order(c, g0, ng)
    if order == NULL:
        return -1
    need = ng + c.nxc
    if need > c.itemcap:
        free(c.items)
        c.items = <WItem*>malloc(need * sizeof(WItem))
        if c.items == NULL:
            c.itemcap = 0
            return -1
        c.itemcap = need
    i = 0
    while i < ng:
        g = &c.gv.g[g0 + order[i]]
        gs = i
        i += 1
        if g.rtl and g.adv != 0:
            while i < ng:
                h = &c.gv.g[g0 + order[i]]
                if not h.rtl or h.adv != 0 or h.cn != h.xn:
                    break
                i += 1
        nm = i - gs - 1
        base = ni
        ni += nm + 1
        # the moved characters of the group, in logical order
        t = 0
        for m in range(gs, i):
            h = &c.gv.g[g0 + order[m]]
            t += h.xn
        if t > 0:
            t = 0
            for m in range(gs, i):
                h = &c.gv.g[g0 + order[m]]
                for j in range(h.xn):
                    t += 1
                    it = &c.items[ni]
                    it.face = g.face
                    it.code = c.xc[h.xi + j]
                    it.x = c.lpos[order[gs]] - t * MOVE_STEP
                    it.w = code_width(c, it.code)
                    if it.w < 0:
                        return -1
                    it.rise = g.yoff
                    ni += 1
        # the marks, right to left (an insertion sort: a handful at most)
        for m in range(gs + 2, i):
            k = order[m]
            j = m - 1
            while j > gs and (c.lpos[order[j]] < c.lpos[k]
                              or (c.lpos[order[j]] == c.lpos[k] and order[j] > k)):
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = k
        for m in range(nm + 1):
            k = order[gs + 1 + m] if m < nm else order[gs]
            h = &c.gv.g[g0 + k]
            it = &c.items[base + m]
            it.face = h.face
            it.code = h.code
            it.x = c.lpos[k]
            it.w = code_width(c, h.code)
            if it.w < 0:
                return -1
            it.rise = h.yoff
    for j in range(ni):
        it = &c.items[j]
        if j > 0 and put_bridges(c, b, s, it, at0, at1, rise0) != 0:
            return -1
        if b != NULL:
            put_glyph(b, s, it.code, it.x, it.w, it.rise)
        at0 = it.x
        at1 = it.x + it.w
        rise0 = it.rise
    return 0


cdef void put_field_ops(Buf* b, TextCtx* c, const FieldOut* fo, int f) noexcept nogil:
    """BT .. ET drawing a laid-out field: per line one TJ array per font, HarfBuzz's
    offsets as TJ adjustments (x) and text rise (y).  The glyphs go in logical order,
    each moved to its visual place by a TJ adjustment (walk_line): a reader that takes
    the content stream's order (pdfminer.six) gets the text in reading order, one that
    sorts by position (poppler) the same glyphs (docs/text-layer.md)."""
    cdef int i, span
    cdef const FLine* ln
    cdef TJ s
    buf_puts(b, b"BT ")
    buf_puts(b, FIELD_COLOUR[f])
    for i in range(fo.nlines):
        ln = &fo.line[i]
        if ln.ng == 0:
            continue
        # the line's own /ActualText, where poppler needs one (linetext.pxi)
        span = line_span(c, ln.g0, ln.ng, b)
        if span < 0:
            b.failed = 1
            return
        buf_puts(b, b" 1 0 0 1 ")
        buf_milli(b, ln.x)
        buf_byte(b, b' ')
        buf_milli(b, ln.y)
        buf_puts(b, b" Tm")
        s.cur = -1
        s.rise = 0
        s.at = 0
        s.inhex = 0
        s.size = fo.size
        if walk_line(c, ln.g0, ln.ng, b, &s) != 0:
            b.failed = 1
            return
        if s.cur >= 0:
            buf_puts(b, b">] TJ" if s.inhex else b"] TJ")
        if s.rise != 0:
            buf_puts(b, b" 0 Ts")
        if span:
            buf_puts(b, b" EMC")
    buf_puts(b, b" ET\n")
