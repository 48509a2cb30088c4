# Included by stagedoor/_render.pyx.  Fitting a shaped field in its box (the cut points
# are clusters.pxi's, the operators that draw the result place.pxi's).
#
# Every field has a box (tables.FIELD_BOXES: left, right, baseline, size, weight, lines;
# tables.FIELD_INK: bottom and top): the text is drawn at its size when it fits; else
# shrunk to fit, down to 6 pt (the small print, 5 pt, is never shrunk); else wrapped at
# the UAX #14 break opportunities libunibreak gives, and inside Thai at the word
# boundaries of libthai's dictionary (thai.pxi), inside Lao, Myanmar and Khmer at those
# of ICU's dictionaries (dictbreaks.pxi); a word longer than a line is cut at a
# grapheme cluster boundary, never inside a conjunct (boundary(), clusters.pxi); at most
# FIELD_BOX lines; what still does not fit ends in an ellipsis, cut the same way, and the
# field's full text is in its /ActualText.
#
# What fits is measured by the ink, not the advances: each glyph's outline box (the
# d1 box of its Type 3 procedure, glyphs.pxi) at its pen position and HarfBuzz offsets
# (line_ink).  Across, a line's ink must fit the box's width and starts at the box's
# left edge, under the field's label, whichever way it reads (place_lines).  Up
# and down, lines are spaced by their ink (at least LEAD, and LINE_GAP of air between
# the ink of two lines), the block is moved into FIELD_INK, and a block taller than
# that is laid out again at the size where it fits (fitting_size), and if that is still
# too tall, drawn smaller as it is.  Runs of more than MARKS_PER_BASE marks are cut to
# MARKS_PER_BASE first (cap_marks, clusters.pxi), so no cluster is a tower that shrinks
# the field.  An ellipsis goes after the last whole word that fits (word_cut).  The
# admission code is never cut: it breaks after a hyphen (or, with none, between
# clusters) and is set smaller, down to CODE_FLOOR, until its lines hold all of it.
# stagedoor.render.shaped.layout makes the same decisions (the tests compare the files
# byte for byte).

cdef enum:
    NTEXT = 11                  # the ten fields and the small print
    ELLIPSIS = 0x2026
    # At most this many combining marks are drawn on one base: real text stacks fewer
    # (Vietnamese 2, Thai and Lao 2-4, Hebrew with cantillation 5, Myanmar 5: ly-hso
    # lj+h+o+aa+dot), a tower of 40 would shrink the whole field to fit its height.
    # The marks past it are dropped from the drawing, not from the text layer: a
    # left-to-right field keeps them in its /ActualText (docs/text-layer.md).
    MARKS_PER_BASE = 6
    CODE_FLOOR = 3000           # the admission code is set this small before it is cut
    CODE_FIELD = 9              # the admission code's field
    LEAD = 1200                 # the least distance between two baselines, 1/1000 em
    LINE_GAP = 100              # the least air between the ink of two lines, 1/1000 em

# tables.FIELD_BOXES: left, right, baseline (points), size (milli-points), bold, lines
cdef int FIELD_BOX[NTEXT][6]
cdef int MIN_SIZE = _tables.MIN_SIZE
# tables.FIELD_INK: where the field's ink may go, bottom and top (milli-points)
cdef int FIELD_INK[NTEXT][2]
for _i in range(NTEXT):
    for _j in range(6):
        FIELD_BOX[_i][_j] = _tables.FIELD_BOXES[_i][_j]
    FIELD_INK[_i][0] = _tables.FIELD_INK[_i][0]
    FIELD_INK[_i][1] = _tables.FIELD_INK[_i][1]

cdef const char* FIELD_COLOUR[NTEXT]
FIELD_COLOUR[0] = b"1 1 1 rg"
for _i in range(1, NTEXT - 1):
    FIELD_COLOUR[_i] = b"0 0 0 rg"
FIELD_COLOUR[NTEXT - 1] = b"0.3 0.3 0.3 rg"


cdef int line_ink(TextCtx* c, int g0, int ng, int width, FLine* ln) noexcept nogil:
    """The ink of glyphs g0..g0+ng-1 laid end to end: each glyph's outline box (its
    Type 3 d1) at its pen position and offsets; the origin and the advance are always
    inside.  -1: no memory."""
    cdef int k, x = 0, gx, lo = 0, bot = 0, hi = 0, top = 0
    cdef SGlyph* g
    cdef GlyphProc* pr
    for k in range(g0, g0 + ng):
        g = &c.gv.g[k]
        pr = glyph_proc(g.face, g.gid)
        if pr == NULL:
            return -1
        if pr.x0 != 0 or pr.y0 != 0 or pr.x1 != 0 or pr.y1 != 0:
            gx = x + g.xoff
            lo = min(lo, gx + pr.x0)
            hi = max(hi, gx + pr.x1)
            bot = min(bot, g.yoff + pr.y0)
            top = max(top, g.yoff + pr.y1)
        x += g.adv
    ln.lo = lo
    ln.bot = bot
    ln.hi = max(hi, x)
    ln.top = top
    ln.width = width
    return 0


cdef int shaped_line(TextCtx* c, Para* p, int s, int e, FLine* ln) noexcept nogil:
    """Shape p[s:e] into the order's glyphs and register them; -1: no memory."""
    cdef int g0 = c.gv.n
    cdef int w = shape_line(p, c.hb, s, e, &c.gv)
    if w < 0 or register_glyphs(c, g0, p.u) != 0:
        return -1
    ln.g0 = g0
    ln.ng = c.gv.n - g0
    return line_ink(c, g0, ln.ng, w, ln)


cdef int word_cut(const unsigned int* u, const char* brk, int s, int e,
                  int best) noexcept nogil:
    """Where the ellipsis goes, given that u[s:best] fits before it: at the last break
    opportunity in there (a word boundary; in Thai, libthai's), trailing spaces
    dropped, when that keeps at least half of it; else at best, a cluster boundary
    (scripts written without spaces, one long word).  shaped.layout._word_cut."""
    cdef int n
    if best >= e or best <= s:
        return best
    n = best
    while n > s:
        if brk[n - 1] == LINEBREAK_MUSTBREAK or brk[n - 1] == LINEBREAK_ALLOWBREAK:
            while n > s and u[n - 1] == 32:
                n -= 1
            return n if 2 * (n - s) >= best - s else best
        n -= 1
    return best


cdef int ellipsised(TextCtx* c, int s, int e, int limit, FLine* ln) noexcept nogil:
    """The longest start of c.p[s:e] whose ink fits limit with an ellipsis after it."""
    cdef Para* p = &c.p
    cdef int lo = s, hi = e, mid, w, g0 = c.gv.n, n, best = s
    cdef unsigned int* t
    cdef FLine probe
    if e - s + 1 > c.tmpcap:
        t = <unsigned int*>realloc(c.tmp, (e - s + 1) * sizeof(unsigned int))
        if t == NULL:
            return -1
        c.tmp = t
        c.tmpcap = e - s + 1
    # binary search on the cut; only at a cluster boundary (boundary()), trailing
    # spaces dropped
    while lo <= hi:
        mid = (lo + hi) // 2
        n = mid
        while n > s and n < e and not boundary(p.u, p.n, n):
            n -= 1
        while n > s and p.u[n - 1] == 32:
            n -= 1
        memcpy(c.tmp, p.u + s, (n - s) * sizeof(unsigned int))
        c.tmp[n - s] = ELLIPSIS
        # only measured: no break classes (each probe's text is new to their cache)
        if para_init(&c.p2, c.tmp, n - s + 1, p.bold, c.of, 0) != 0:
            return -1
        w = shape_line(&c.p2, c.hb, 0, n - s + 1, &c.gv)
        if w < 0 or line_ink(c, g0, c.gv.n - g0, w, &probe) != 0:
            return -1
        c.gv.n = g0
        if probe.hi - probe.lo <= limit:
            best = n
            lo = mid + 1
        else:
            hi = mid - 1
    best = word_cut(p.u, p.brk, s, e, best)
    memcpy(c.tmp, p.u + s, (best - s) * sizeof(unsigned int))
    c.tmp[best - s] = ELLIPSIS
    if para_init(&c.p2, c.tmp, best - s + 1, p.bold, c.of) != 0:
        return -1
    return shaped_line(c, &c.p2, 0, best - s + 1, ln)


cdef int layout_lines(TextCtx* c, int f, const unsigned int* u, int n, int size,
                      int count, FieldOut* out) noexcept nogil:
    """Across: field f at size on one line, else shrunk, else wrapped, else cut, by the
    lines' ink (not only their advances); sets out.size, out.nlines and, in out.actual,
    whether text was lost.  count: add the missing characters to the font stats.
    -1: no memory.  shaped.layout._fit in Python."""
    cdef Para* p = &c.p
    cdef int x0 = FIELD_BOX[f][0] * 1000, x1 = FIELD_BOX[f][1] * 1000
    cdef int bold = FIELD_BOX[f][4], maxl = FIELD_BOX[f][5]
    cdef int g0 = c.gv.n, w, i, start, end, last, nl = 0, limit, k
    cdef long box = x1 - x0, acc, span
    cdef int* adv
    cdef int lossy = 0, code = f == CODE_FIELD, retry, cut
    out.nlines = 0
    if para_init(p, u, n, bold, c.of) != 0:
        return -1
    if p.missing:
        lossy = 1
        if count:
            for i in range(n):
                if p.face[i] < 0:
                    sd_add_long(&MISSING_GLYPHS, 1)
    w = shape_line(p, c.hb, 0, n, &c.gv)
    if w < 0 or line_ink(c, g0, c.gv.n - g0, w, &out.line[0]) != 0:
        return -1
    span = out.line[0].hi - out.line[0].lo
    if span * size // 1000 > box:
        if size > MIN_SIZE and span * MIN_SIZE // 1000 <= box:
            size = <int>(box * 1000 // span) // 10 * 10      # shrunk, in 1/100 pt steps
        elif size > MIN_SIZE:
            size = MIN_SIZE
    if span * size // 1000 <= box:
        if register_glyphs(c, g0, u) != 0:
            return -1
        out.line[0].g0 = g0
        out.line[0].ng = c.gv.n - g0
        nl = 1
    else:
        # wrap: greedy over the break opportunities, by the advances of the whole line
        c.gv.n = g0
        if wrap_breaks(u, n, p.brk) != 0:
            return -1
        if code:
            # the code breaks after each hyphen too (UAX #14 has none before a digit)
            for i in range(n - 1):
                if u[i] == 0x2D:
                    p.brk[i] = LINEBREAK_ALLOWBREAK
        adv = <int*>malloc((n + 1) * sizeof(int))
        if adv == NULL:
            return -1
        memcpy(adv, p.adv, n * sizeof(int))
        while True:
            limit = <int>(box * 1000 // size)
            # the admission code is never cut: where a cut would be, smaller and again
            retry = code and size > CODE_FLOOR
            cut = 0
            nl = 0
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
                elif last > start and (not code or 2 * (last - start) >= i - start):
                    end = last
                else:
                    # no opportunity (or, in the code, one that leaves the line half empty)
                    end = i
                    while end > start + 1 and not boundary(u, n, end):
                        end -= 1
                    if not boundary(u, n, end):
                        # one cluster wider than the line: the whole of it (then cut below)
                        end = i
                        while end < n and not boundary(u, n, end):
                            end += 1
                k = end
                while k > start and u[k - 1] == 32:
                    k -= 1
                if nl == maxl - 1 and end < n:
                    if retry:
                        cut = 1
                        break
                    # the last line there is room for: the rest, with an ellipsis
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
                if out.line[nl].hi - out.line[nl].lo > limit:
                    if retry:
                        cut = 1
                        break
                    # shaping made it wider than the estimate: cut it
                    c.gv.n = out.line[nl].g0
                    if ellipsised(c, start, k, limit, &out.line[nl]) != 0:
                        free(adv)
                        return -1
                    lossy = 1
                nl += 1
                start = end
            if not cut:
                break
            c.gv.n = g0
            size = max(<int>CODE_FLOOR, size * 9 // 10 // 10 * 10)
        free(adv)
    out.nlines = nl
    out.size = size
    out.actual = lossy
    return 0


cdef inline long line_off(const FieldOut* fo, int i) noexcept nogil:
    """Line i's baseline below the first's, 1/1000 em: at least LEAD apart, and more
    where the ink of one line would come within LINE_GAP of the next's."""
    cdef long o = 0
    cdef int k
    for k in range(1, i + 1):
        o += max(<int>LEAD, fo.line[k].top - fo.line[k - 1].bot + <int>LINE_GAP)
    return o


cdef int fitting_size(int f, const FieldOut* fo, int size) noexcept nogil:
    """size, or the largest smaller one (in 1/100 pt steps) at which the lines' ink fits
    the field's box from bottom to top (FIELD_INK)."""
    cdef long o = 0, hi = 0, lo = 0, height, room = FIELD_INK[f][1] - FIELD_INK[f][0] - 10
    cdef int i
    if fo.nlines == 0:
        return size
    for i in range(fo.nlines):
        if i > 0:
            o += max(<int>LEAD, fo.line[i].top - fo.line[i - 1].bot + <int>LINE_GAP)
        if i == 0 or fo.line[i].top - o > hi:
            hi = fo.line[i].top - o
        if i == 0 or fo.line[i].bot - o < lo:
            lo = fo.line[i].bot - o
    height = hi - lo
    if height * size // 1000 <= room:
        return size
    # never 0: a size is divided by (layout_lines' limit)
    return min(size, max(10, <int>(room * 1000 // height) // 10 * 10))


cdef void place_lines(int f, FieldOut* fo, int rtl) noexcept nogil:
    """The ink from the left edge, under the field's label; a right-to-left paragraph's
    lines right-aligned to each other, the block's ink from the left edge too (beside
    a narrow column's left-aligned label, a value right-aligned in the column read as
    one phrase with the next column's value: issue 39); the small print, which has no
    label, right-aligned at the right edge.  The block centred on the x-height middle
    of the field's one-line position (the small print hangs from its first baseline),
    then moved into its box (FIELD_INK).  shaped.layout._place in Python."""
    cdef long x0 = FIELD_BOX[f][0] * 1000, x1 = FIELD_BOX[f][1] * 1000, y0, y, t, bt
    cdef long ink_top = 0, ink_bot = 0, size = fo.size, span = 0
    cdef int i
    if fo.nlines == 0:
        return
    if f != NTEXT - 1:
        for i in range(fo.nlines):
            span = max(span, fo.line[i].hi - fo.line[i].lo)
        x1 = x0 + span * size // 1000
    if f == NTEXT - 1:
        y0 = FIELD_BOX[f][2] * 1000
    else:
        y0 = (FIELD_BOX[f][2] * 1000 + FIELD_BOX[f][3] * 35 // 100 - size * 35 // 100
              + line_off(fo, fo.nlines - 1) * size // 1000 // 2)
    for i in range(fo.nlines):
        y = y0 - line_off(fo, i) * size // 1000
        t = y + fo.line[i].top * size // 1000
        bt = y + fo.line[i].bot * size // 1000           # toward zero (cdivision)
        if i == 0 or t > ink_top:
            ink_top = t
        if i == 0 or bt < ink_bot:
            ink_bot = bt
    if ink_top > FIELD_INK[f][1]:
        y0 -= ink_top - FIELD_INK[f][1]
    elif ink_bot < FIELD_INK[f][0]:
        y0 += FIELD_INK[f][0] - ink_bot
    for i in range(fo.nlines):
        if rtl:
            fo.line[i].x = x1 - fo.line[i].hi * size // 1000
        else:
            fo.line[i].x = x0 - fo.line[i].lo * size // 1000      # toward zero (cdivision)
        fo.line[i].y = y0 - line_off(fo, i) * size // 1000


cdef int layout_field(TextCtx* c, int f, const unsigned int* u, int n,
                      FieldOut* out) noexcept nogil:
    """Shape field f (text u[:n], NFC) and fit it in its box; -1: no memory.

    Across by layout_lines; up and down by the ink: when the lines' ink is taller than
    the field's box (FIELD_INK), laid out again at the size where it fits (it may then
    take fewer lines), and if that is still too tall, the same lines smaller."""
    cdef Para* p = &c.p
    cdef int g0 = c.gv.n, i, k, size, need, lossy, safe
    cdef SGlyph* g
    out.shaped = 1
    # the field's own UTF-32 (text.pxi, shaped_fill): its marks bounded in place
    safe = cap_marks(<unsigned int*>u, n)
    if layout_lines(c, f, u, safe, FIELD_BOX[f][3], 1, out) != 0:
        return -1
    need = fitting_size(f, out, out.size)
    if need < out.size:
        c.gv.n = g0
        if layout_lines(c, f, u, safe, need, 0, out) != 0:
            return -1
        out.size = fitting_size(f, out, out.size)
    lossy = out.actual or safe != n
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
        for i in range(out.nlines):
            for k in range(out.line[i].g0, out.line[i].g0 + out.line[i].ng):
                g = &c.gv.g[k]
                if g.cn != 1 or g.adv == 0 or g.xoff != 0 or g.yoff != 0:
                    out.actual = 1
    place_lines(f, out, p.rtl)
    return 0
