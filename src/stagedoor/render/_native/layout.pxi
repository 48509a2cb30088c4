# Included by stagedoor/_render.pyx.  Layout of a shaped field in its box.
#
# Every field has a box (tables.FIELD_BOXES: left, right, baseline, size, weight, lines):
# the text is drawn at its size when it fits; else shrunk to fit, down to 6 pt (the small
# print, 5 pt, is never shrunk); else wrapped at the UAX #14 break opportunities
# libunibreak gives, and inside Thai at the word boundaries of libthai's dictionary
# (thai.pxi; Lao, Khmer and Myanmar words have no breaks without a dictionary: those are
# cut at a character cluster), at most FIELD_BOX lines; what still does not fit ends
# in an ellipsis, and the field's full text is in its /ActualText.  A right-to-left
# paragraph is aligned right.  stagedoor.render.shaped.layout_field makes the same
# decisions (the tests compare the files byte for byte).

cdef extern from "hb.h" nogil:
    ctypedef enum hb_unicode_general_category_t:
        HB_UNICODE_GENERAL_CATEGORY_SPACING_MARK
        HB_UNICODE_GENERAL_CATEGORY_ENCLOSING_MARK
        HB_UNICODE_GENERAL_CATEGORY_NON_SPACING_MARK
    hb_unicode_general_category_t hb_unicode_general_category(hb_unicode_funcs_t* u,
                                                              hb_codepoint_t cp)

cdef enum:
    NTEXT = 11                  # the ten fields and the small print
    MAX_LINES = 12
    ELLIPSIS = 0x2026

# tables.FIELD_BOXES: left, right, baseline (points), size (milli-points), bold, lines
cdef int FIELD_BOX[NTEXT][6]
cdef int MIN_SIZE = _tables.MIN_SIZE
for _i in range(NTEXT):
    for _j in range(6):
        FIELD_BOX[_i][_j] = _tables.FIELD_BOXES[_i][_j]

cdef const char* FIELD_COLOUR[NTEXT]
FIELD_COLOUR[0] = b"1 1 1 rg"
for _i in range(1, NTEXT - 1):
    FIELD_COLOUR[_i] = b"0 0 0 rg"
FIELD_COLOUR[NTEXT - 1] = b"0.3 0.3 0.3 rg"


cdef struct FLine:
    int g0
    int ng
    int width                   # 1/1000 em
    long x                      # milli-points
    long y

cdef struct FieldOut:
    int shaped
    int actual                  # the field needs its /ActualText (see layout_field)
    int size                    # milli-points
    int nlines
    FLine line[MAX_LINES]


cdef inline int is_mark(unsigned int cp) noexcept nogil:
    cdef hb_unicode_general_category_t k = hb_unicode_general_category(UFUNCS, cp)
    return (k == HB_UNICODE_GENERAL_CATEGORY_NON_SPACING_MARK
            or k == HB_UNICODE_GENERAL_CATEGORY_SPACING_MARK
            or k == HB_UNICODE_GENERAL_CATEGORY_ENCLOSING_MARK)


cdef int shaped_line(TextCtx* c, Para* p, int s, int e, FLine* ln) noexcept nogil:
    """Shape p[s:e] into the order's glyphs and register them; -1: no memory."""
    cdef int g0 = c.gv.n
    cdef int w = shape_line(p, c.hb, s, e, &c.gv)
    if w < 0 or register_glyphs(c, g0, p.u) != 0:
        return -1
    ln.g0 = g0
    ln.ng = c.gv.n - g0
    ln.width = w
    return 0


cdef int ellipsised(TextCtx* c, int s, int e, int limit, FLine* ln) noexcept nogil:
    """The longest start of c.p[s:e] that fits limit with an ellipsis after it."""
    cdef Para* p = &c.p
    cdef int lo = s, hi = e, mid, w, g0 = c.gv.n, n, best = s
    cdef unsigned int* t
    if e - s + 1 > c.tmpcap:
        t = <unsigned int*>realloc(c.tmp, (e - s + 1) * sizeof(unsigned int))
        if t == NULL:
            return -1
        c.tmp = t
        c.tmpcap = e - s + 1
    # binary search on the cut; never inside a cluster of marks, trailing spaces dropped
    while lo <= hi:
        mid = (lo + hi) // 2
        n = mid
        while n > s and n < e and is_mark(p.u[n]):
            n -= 1
        while n > s and p.u[n - 1] == 32:
            n -= 1
        memcpy(c.tmp, p.u + s, (n - s) * sizeof(unsigned int))
        c.tmp[n - s] = ELLIPSIS
        if para_init(&c.p2, c.tmp, n - s + 1, p.bold, c.han, c.nhan) != 0:
            return -1
        w = shape_line(&c.p2, c.hb, 0, n - s + 1, &c.gv)
        c.gv.n = g0
        if w < 0:
            return -1
        if w <= limit:
            best = n
            lo = mid + 1
        else:
            hi = mid - 1
    memcpy(c.tmp, p.u + s, (best - s) * sizeof(unsigned int))
    c.tmp[best - s] = ELLIPSIS
    if para_init(&c.p2, c.tmp, best - s + 1, p.bold, c.han, c.nhan) != 0:
        return -1
    return shaped_line(c, &c.p2, 0, best - s + 1, ln)


cdef int layout_field(TextCtx* c, int f, const unsigned int* u, int n,
                      FieldOut* out) noexcept nogil:
    """Shape field f (text u[:n], NFC) and fit it in its box; -1: no memory."""
    cdef Para* p = &c.p
    cdef int x0 = FIELD_BOX[f][0] * 1000, x1 = FIELD_BOX[f][1] * 1000
    cdef int size = FIELD_BOX[f][3], bold = FIELD_BOX[f][4], maxl = FIELD_BOX[f][5]
    cdef int g0 = c.gv.n, w, i, start, end, last, nl = 0, limit, k
    cdef long box = x1 - x0, acc, lead, centre
    cdef int* adv
    cdef int lossy = 0
    cdef SGlyph* g
    out.shaped = 1
    out.nlines = 0
    if para_init(p, u, n, bold, c.han, c.nhan) != 0:
        return -1
    if p.missing:
        lossy = 1
        for i in range(n):
            if p.face[i] < 0:
                sd_add_long(&MISSING_GLYPHS, 1)
    w = shape_line(p, c.hb, 0, n, &c.gv)
    if w < 0:
        return -1
    if <long>w * size // 1000 > box:
        if size > MIN_SIZE and <long>w * MIN_SIZE // 1000 <= box:
            size = <int>(box * 1000 // w) // 10 * 10      # shrunk, in 1/100 pt steps
        elif size > MIN_SIZE:
            size = MIN_SIZE
    if <long>w * size // 1000 <= box:
        if register_glyphs(c, g0, u) != 0:
            return -1
        out.line[0].g0 = g0
        out.line[0].ng = c.gv.n - g0
        out.line[0].width = w
        nl = 1
    else:
        # wrap: greedy over the break opportunities, by the advances of the whole line
        c.gv.n = g0
        if thai_breaks(u, n, p.brk) != 0:
            return -1
        limit = <int>(box * 1000 // size)
        adv = <int*>malloc((n + 1) * sizeof(int))
        if adv == NULL:
            return -1
        memcpy(adv, p.adv, n * sizeof(int))
        start = 0
        while start < n and nl < maxl:
            while start < n and u[start] == 32:
                start += 1
            if start >= n:
                break
            acc = 0
            last = -1
            i = start
            while i < n:
                if acc + adv[i] > limit and i > start:
                    break
                acc += adv[i]
                if p.brk[i] == LINEBREAK_ALLOWBREAK or p.brk[i] == LINEBREAK_MUSTBREAK:
                    last = i + 1
                i += 1
            if i >= n:
                end = n
            elif last > start:
                end = last
            else:
                end = i                                   # no opportunity: cut
                while end > start + 1 and is_mark(u[end]):
                    end -= 1
            k = end
            while k > start and u[k - 1] == 32:
                k -= 1
            if nl == maxl - 1 and end < n:
                # the last line there is room for: the rest, with an ellipsis
                while end < n and u[end] == 32:
                    end += 1
                if ellipsised(c, start, n, limit, &out.line[nl]) != 0:
                    free(adv)
                    return -1
                lossy = 1
                nl += 1
                start = n
                break
            if shaped_line(c, p, start, k, &out.line[nl]) != 0:
                free(adv)
                return -1
            if out.line[nl].width > limit:
                # shaping made it wider than the estimate: cut it
                c.gv.n = out.line[nl].g0
                if ellipsised(c, start, k, limit, &out.line[nl]) != 0:
                    free(adv)
                    return -1
                lossy = 1
            nl += 1
            start = end
        free(adv)
    out.nlines = nl
    out.size = size
    # /ActualText: for left-to-right text when glyphs leave text out (an ellipsis, a
    # replacement mark) or clusters are not one glyph per character (ligatures; Thai and
    # Devanagari reorder vowel signs, which the ToUnicode map alone cannot undo); never
    # for right-to-left text, even cut: poppler spreads an ActualText over the span's
    # glyphs left to right and then reverses it letter by letter as right-to-left
    # text, while the glyphs, written in logical order (walk_line), read back exactly
    # (docs/text-layer.md).  When every glyph stands for exactly one character and
    # sits on its own, the ToUnicode map alone gives the text back: no /ActualText.
    out.actual = lossy and not p.any_rtl
    if not lossy and not p.any_rtl:
        for i in range(nl):
            for k in range(out.line[i].g0, out.line[i].g0 + out.line[i].ng):
                g = &c.gv.g[k]
                if g.cn != 1 or g.adv == 0 or g.xoff != 0 or g.yoff != 0:
                    out.actual = 1
    # placement: right-aligned when the paragraph is right to left; lines centred on
    # the x-height middle of the field's one-line position (the small print hangs from
    # its first baseline)
    lead = size * 6 // 5
    centre = FIELD_BOX[f][2] * 1000 + FIELD_BOX[f][3] * 35 // 100
    for i in range(nl):
        acc = <long>out.line[i].width * size // 1000
        out.line[i].x = (x1 - acc) if p.rtl else x0
        if f == NTEXT - 1:
            out.line[i].y = FIELD_BOX[f][2] * 1000 - i * lead
        else:
            out.line[i].y = centre - size * 35 // 100 + ((nl - 1) * lead) // 2 - i * lead
    return 0


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


cdef struct TJ:
    # the TJ state of one line: current font, rise, pen (1/1000 em), inside <hex>
    int cur
    int rise
    int at
    int inhex
    int size


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
        if gap >= wide:
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
    cdef int* order = logical_order(c, g0, ng)
    cdef int i, j, k, m, gs, nm, base, ni = 0, need, at0 = 0, at1 = 0, rise0 = 0, sw, t
    cdef unsigned int sid
    cdef SGlyph* g
    cdef SGlyph* h
    cdef GlyphProc* proc
    cdef WItem* it
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
            if not face_has(g.face, 32, &sid):
                sid = 0
            proc = glyph_proc(g.face, sid)
            if proc == NULL:
                return -1
            sw = proc.width
            t = 0
            for m in range(gs, i):
                h = &c.gv.g[g0 + order[m]]
                for j in range(h.xn):
                    t += 1
                    it = &c.items[ni]
                    it.face = g.face
                    it.code = c.xc[h.xi + j]
                    it.x = c.lpos[order[gs]] - t * MOVE_STEP
                    it.w = sw
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
            proc = glyph_proc(h.face, h.gid)
            if proc == NULL:
                return -1
            it = &c.items[base + m]
            it.face = h.face
            it.code = h.code
            it.x = c.lpos[k]
            it.w = proc.width
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
    cdef int i
    cdef const FLine* ln
    cdef TJ s
    buf_puts(b, b"BT ")
    buf_puts(b, FIELD_COLOUR[f])
    for i in range(fo.nlines):
        ln = &fo.line[i]
        if ln.ng == 0:
            continue
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
    buf_puts(b, b" ET\n")


