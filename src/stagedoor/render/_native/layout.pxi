# Included by stagedoor/_render.pyx.  Layout of a shaped field in its box.
#
# Every field has a box (tables.FIELD_BOXES: left, right, baseline, size, weight, lines;
# tables.FIELD_INK: bottom and top): the text is drawn at its size when it fits; else
# shrunk to fit, down to 6 pt (the small print, 5 pt, is never shrunk); else wrapped at
# the UAX #14 break opportunities libunibreak gives, and inside Thai at the word
# boundaries of libthai's dictionary (thai.pxi), inside Lao, Myanmar and Khmer at those
# of ICU's dictionaries (dictbreaks.pxi); a word longer than a line is cut at a
# grapheme cluster boundary, never inside a conjunct (boundary()); at most FIELD_BOX
# lines; what still does not fit ends
# in an ellipsis, cut the same way, and the field's full text is in its /ActualText.
#
# What fits is measured by the ink, not the advances: each glyph's outline box (the
# d1 box of its Type 3 procedure, glyphs.pxi) at its pen position and HarfBuzz offsets
# (line_ink).  Across, a line's ink must fit the box's width and starts at the box's
# left edge, under the field's label, whichever way it reads (place_lines).  Up
# and down, lines are spaced by their ink (at least LEAD, and LINE_GAP of air between
# the ink of two lines), the block is moved into FIELD_INK, and a block taller than
# that is laid out again at the size where it fits (fitting_size), and if that is still
# too tall, drawn smaller as it is.  Runs of more than MARKS_PER_BASE marks are cut to
# MARKS_PER_BASE first (cap_marks), so no cluster is a tower that shrinks the field.  An
# ellipsis goes after the last whole word that fits (word_cut).  The admission code is
# never cut: it breaks after a hyphen (or, with none, between clusters) and is set
# smaller, down to CODE_FLOOR, until its lines hold all of it.
# stagedoor.render.shaped.layout makes the same decisions (the tests compare the files
# byte for byte).

cdef extern from "hb.h" nogil:
    ctypedef enum hb_unicode_general_category_t:
        HB_UNICODE_GENERAL_CATEGORY_SPACING_MARK
        HB_UNICODE_GENERAL_CATEGORY_ENCLOSING_MARK
        HB_UNICODE_GENERAL_CATEGORY_NON_SPACING_MARK
        HB_UNICODE_GENERAL_CATEGORY_LOWERCASE_LETTER
        HB_UNICODE_GENERAL_CATEGORY_MODIFIER_LETTER
        HB_UNICODE_GENERAL_CATEGORY_OTHER_LETTER
        HB_UNICODE_GENERAL_CATEGORY_TITLECASE_LETTER
        HB_UNICODE_GENERAL_CATEGORY_UPPERCASE_LETTER
    hb_unicode_general_category_t hb_unicode_general_category(hb_unicode_funcs_t* u,
                                                              hb_codepoint_t cp)
    unsigned int hb_unicode_combining_class(hb_unicode_funcs_t* u, hb_codepoint_t cp)

cdef enum:
    NTEXT = 11                  # the ten fields and the small print
    MAX_LINES = 12
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


cdef struct FLine:
    int g0
    int ng
    int width                   # 1/1000 em
    int lo, bot, hi, top        # its ink, 1/1000 em from its origin (line_ink)
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


cdef inline int is_letter(unsigned int cp) noexcept nogil:
    cdef hb_unicode_general_category_t k = hb_unicode_general_category(UFUNCS, cp)
    return (k == HB_UNICODE_GENERAL_CATEGORY_LOWERCASE_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_MODIFIER_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_OTHER_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_TITLECASE_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_UPPERCASE_LETTER)


cdef int cap_marks(unsigned int* u, int n) noexcept nogil:
    """Drop, in place, the marks past the MARKS_PER_BASE-th of a run (joiners inside the
    run neither count nor end it): a tower of marks would otherwise make the whole field
    shrink to fit its height.  The new length.  shaped.layout.cap_marks in Python."""
    cdef int i, j = 0, run = 0
    for i in range(n):
        if is_mark(u[i]):
            run += 1
            if run > MARKS_PER_BASE:
                continue
        elif u[i] != 0x200C and u[i] != 0x200D:
            run = 0
        u[j] = u[i]
        j += 1
    return j


cdef inline int jamo(unsigned int cp) noexcept nogil:
    """Hangul syllable type for UAX #29: 1 L, 2 V, 3 T, 4 LV, 5 LVT, 0 none."""
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return 1
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return 2
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return 3
    if 0xAC00 <= cp <= 0xD7A3:
        return 4 if (cp - 0xAC00) % 28 == 0 else 5
    return 0


cdef inline int extends(unsigned int cp) noexcept nogil:
    """Grapheme_Cluster_Break Extend, SpacingMark or ZWJ as far as a cut needs them."""
    return (is_mark(cp) or cp == 0x200C or cp == 0x200D or cp == 0x0E33 or cp == 0x0EB3
            or 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F)


cdef inline int is_killer(unsigned int cp) noexcept nogil:
    """Viramas that end a syllable visibly rather than join the next consonant into a
    conjunct (Indic_Syllabic_Category Pure_Killer, and Sinhala's al-lakuna, which joins
    only through a ZWJ): shaped.layout.KILLERS."""
    return cp == 0x0E3A or cp == 0x0BCD or cp == 0x0DCA or cp == 0x0F84 or cp == 0x103A


cdef int boundary(const unsigned int* u, int len_, int n) noexcept nogil:
    """Whether a line or an ellipsis may cut u before u[n]: at an extended grapheme
    cluster boundary (UAX #29: not before a mark or a joiner, not inside a Hangul
    syllable's jamo, not after a ZWJ, not between the two regional indicators of a
    flag) that is not inside an Indic conjunct (not after a virama, canonical
    combining class 9, when a letter follows, but for the killers: is_killer), nor
    inside a Myanmar syllable (not before a consonant its asat kills).
    shaped.layout.boundary in Python."""
    cdef unsigned int c, b
    cdef int jb, jc, k
    if n <= 0 or n >= len_:
        return 1
    c = u[n]
    b = u[n - 1]
    if extends(c) or b == 0x200D:
        return 0
    if hb_unicode_combining_class(UFUNCS, b) == 9 and not is_killer(b) and is_letter(c):
        return 0
    if 0x1000 <= c <= 0x1021:
        # a Myanmar consonant killed by asat (under a dot below or not) closes the
        # syllable before it: ကုန် is one syllable, never ကု + န်
        k = n + 1
        while k < len_ and u[k] == 0x1037:
            k += 1
        if k < len_ and u[k] == 0x103A:
            return 0
    jb = jamo(b)
    jc = jamo(c)
    if jb and jc and ((jb == 1 and jc != 3) or ((jb == 2 or jb == 4) and (jc == 2 or jc == 3))
                      or ((jb == 3 or jb == 5) and jc == 3)):
        return 0
    if 0x1F1E6 <= b <= 0x1F1FF and 0x1F1E6 <= c <= 0x1F1FF:
        k = n - 1
        while k > 0 and 0x1F1E6 <= u[k - 1] <= 0x1F1FF:
            k -= 1
        return (n - k) % 2 == 0
    return 1


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


