# Layout of a shaped field in its box, and the per-order glyph registry.
#
# Every field has a box (FIELD_BOX below: left, right, baseline, size, weight, lines):
# the text is drawn at its size when it fits; else shrunk to fit, down to 6 pt (the small
# print, 5 pt, is never shrunk); else wrapped at the UAX #14 break opportunities
# libunibreak gives (Thai, Lao, Khmer and Myanmar words have none without a dictionary:
# those are only shrunk and cut), at most FIELD_BOX lines; what still does not fit ends
# in an ellipsis, and the field's full text is in its /ActualText.  A right-to-left
# paragraph is aligned right.  stagedoor.render.layout_field makes the same decisions
# (tests compare them).

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
    MIN_SIZE = 6000             # milli-points
    ELLIPSIS = 0x2026

# left, right, baseline (points), size (milli-points), bold, most lines
cdef int FIELD_BOX[NTEXT][6]
_BOXES = ((24, 334, 262, 14000, 1, 2),    # event, in the header bar, left of STAGEDOOR
          (24, 280, 227, 11000, 1, 2),    # venue (the QR code starts at x = 288)
          (24, 280, 201, 11000, 0, 2),    # starts_at
          (24, 126, 175, 11000, 1, 2),    # section
          (130, 176, 175, 11000, 1, 2),   # row
          (180, 280, 175, 11000, 1, 2),   # seat
          (24, 280, 149, 11000, 1, 2),    # buyer
          (24, 126, 123, 11000, 0, 2),    # price
          (130, 280, 123, 11000, 0, 2),   # order_id
          (24, 396, 97, 10000, 1, 2),     # admission_code (below the QR code)
          (24, 396, 80, 5000, 0, 11))     # small print: 6 pt leading down to y = 20
for _i in range(NTEXT):
    for _j in range(6):
        FIELD_BOX[_i][_j] = _BOXES[_i][_j]

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


cdef struct RegEntry:
    int face
    unsigned int gid
    int toff                    # its text in the pool
    int tlen
    int proc                    # index of its glyph procedure in the order
    unsigned int h

cdef struct Registry:
    RegEntry* e
    int n
    int cap
    int* tab                    # open addressing: entry index + 1, 0 empty
    int tmask
    unsigned int* pool
    int plen
    int pcap
    int* ptab                   # (face, gid) -> procedure index + 1
    int pmask
    int* pface
    unsigned int* pgid
    int nproc
    int proccap
    int failed

cdef struct TextCtx:
    Para p
    Para p2
    hb_buffer_t* hb
    GlyphVec gv
    Registry reg
    const int* han
    int nhan
    unsigned int* tmp
    int tmpcap


cdef inline unsigned int mix(unsigned int h, unsigned int v) noexcept nogil:
    return (h ^ v) * 16777619u


cdef int reg_grow_tab(int** tab, int* mask, int n) noexcept nogil:
    """Make sure the table has room for n + 1 entries at half load; rehash is by the
    caller (the tables are rebuilt from the entries)."""
    cdef int size = (mask[0] + 1) if tab[0] != NULL else 0
    if tab[0] != NULL and (n + 1) * 2 <= size:
        return 0
    size = size * 2 if size else 512
    while (n + 1) * 2 > size:
        size *= 2
    free(tab[0])
    tab[0] = <int*>calloc(size, sizeof(int))
    if tab[0] == NULL:
        return -1
    mask[0] = size - 1
    return 1


cdef int reg_proc(Registry* r, int face, unsigned int gid) noexcept nogil:
    cdef unsigned int h = mix(mix(2166136261u, <unsigned int>face), gid)
    cdef int i, k, rc
    k = <int>(h & <unsigned int>r.pmask) if r.ptab != NULL else 0
    if r.ptab != NULL:
        while r.ptab[k]:
            i = r.ptab[k] - 1
            if r.pface[i] == face and r.pgid[i] == gid:
                return i
            k = (k + 1) & r.pmask
    if r.nproc == r.proccap:
        r.proccap = r.proccap * 2 if r.proccap else 256
        r.pface = <int*>realloc(r.pface, r.proccap * sizeof(int))
        r.pgid = <unsigned int*>realloc(r.pgid, r.proccap * sizeof(unsigned int))
        if r.pface == NULL or r.pgid == NULL:
            r.failed = 1
            return -1
    i = r.nproc
    r.pface[i] = face
    r.pgid[i] = gid
    r.nproc += 1
    rc = reg_grow_tab(&r.ptab, &r.pmask, r.nproc)
    if rc < 0:
        r.failed = 1
        return -1
    if rc > 0:
        for k in range(r.nproc):
            h = mix(mix(2166136261u, <unsigned int>r.pface[k]), r.pgid[k])
            rc = <int>(h & <unsigned int>r.pmask)
            while r.ptab[rc]:
                rc = (rc + 1) & r.pmask
            r.ptab[rc] = k + 1
    else:
        k = <int>(h & <unsigned int>r.pmask)
        while r.ptab[k]:
            k = (k + 1) & r.pmask
        r.ptab[k] = i + 1
    return i


cdef int reg_code(Registry* r, int face, unsigned int gid, const unsigned int* t,
                  int tlen) noexcept nogil:
    """The code (font * 256 + byte) of this glyph standing for this text; -1: no memory."""
    cdef unsigned int h = mix(mix(2166136261u, <unsigned int>face), gid)
    cdef int i, k, j, rc, same
    cdef RegEntry* e
    for j in range(tlen):
        h = mix(h, t[j])
    h = mix(h, <unsigned int>tlen)
    if r.tab != NULL:
        k = <int>(h & <unsigned int>r.tmask)
        while r.tab[k]:
            e = &r.e[r.tab[k] - 1]
            if e.h == h and e.face == face and e.gid == gid and e.tlen == tlen:
                same = 1
                for j in range(tlen):
                    if r.pool[e.toff + j] != t[j]:
                        same = 0
                        break
                if same:
                    return r.tab[k] - 1
            k = (k + 1) & r.tmask
    if r.n == r.cap:
        r.cap = r.cap * 2 if r.cap else 256
        r.e = <RegEntry*>realloc(r.e, r.cap * sizeof(RegEntry))
        if r.e == NULL:
            r.failed = 1
            return -1
    if r.plen + tlen > r.pcap:
        r.pcap = (r.pcap + tlen) * 2 + 256
        r.pool = <unsigned int*>realloc(r.pool, r.pcap * sizeof(unsigned int))
        if r.pool == NULL:
            r.failed = 1
            return -1
    i = r.n
    e = &r.e[i]
    e.face = face
    e.gid = gid
    e.toff = r.plen
    e.tlen = tlen
    e.h = h
    e.proc = reg_proc(r, face, gid)
    if e.proc < 0:
        return -1
    memcpy(r.pool + r.plen, t, tlen * sizeof(unsigned int))
    r.plen += tlen
    r.n += 1
    rc = reg_grow_tab(&r.tab, &r.tmask, r.n)
    if rc < 0:
        r.failed = 1
        return -1
    if rc > 0:
        for j in range(r.n):
            k = <int>(r.e[j].h & <unsigned int>r.tmask)
            while r.tab[k]:
                k = (k + 1) & r.tmask
            r.tab[k] = j + 1
    else:
        k = <int>(h & <unsigned int>r.tmask)
        while r.tab[k]:
            k = (k + 1) & r.tmask
        r.tab[k] = i + 1
    return i


cdef void reg_free(Registry* r) noexcept nogil:
    free(r.e); free(r.tab); free(r.pool); free(r.ptab); free(r.pface); free(r.pgid)
    memset(r, 0, sizeof(Registry))


cdef int register_glyphs(TextCtx* c, int g0, const unsigned int* text) noexcept nogil:
    cdef int i, j, code
    cdef unsigned int rev[16]
    cdef SGlyph* g
    for i in range(g0, c.gv.n):
        g = &c.gv.g[i]
        if g.rtl and 1 < g.cn <= 16:
            # text extraction reverses right-to-left runs character by character: a
            # ligature's text (lam-alef) is given reversed so that it comes out right
            for j in range(g.cn):
                rev[j] = text[g.ci + g.cn - 1 - j]
            code = reg_code(&c.reg, g.face, g.gid, rev, g.cn)
        else:
            code = reg_code(&c.reg, g.face, g.gid, text + g.ci, g.cn)
        if code < 0:
            return -1
        g.code = code
        if glyph_proc(g.face, g.gid) == NULL:
            return -1
    return 0


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
    # /ActualText: always when glyphs leave text out (an ellipsis, a replacement mark);
    # else for left-to-right text (Thai and Devanagari reorder vowel signs, which the
    # ToUnicode map alone cannot undo), but not for right-to-left text: poppler
    # spreads an ActualText over the span's glyphs left to right and then reverses it
    # as right-to-left text, while the ToUnicode map of the glyphs comes out exact
    out.actual = lossy or not p.any_rtl
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


cdef void put_hex2(Buf* b, int v) noexcept nogil:
    cdef const char* hx = b"0123456789ABCDEF"
    buf_byte(b, hx[(v >> 4) & 15])
    buf_byte(b, hx[v & 15])


cdef void put_field_ops(Buf* b, TextCtx* c, const FieldOut* fo, int f) noexcept nogil:
    """BT .. ET drawing a laid-out field: per line one TJ array per font, HarfBuzz's
    offsets as TJ adjustments (x) and text rise (y)."""
    cdef int i, k, font, cur, rise, pend, inhex, adjust
    cdef const FLine* ln
    cdef SGlyph* g
    cdef GlyphProc* proc
    buf_puts(b, b"BT ")
    buf_puts(b, FIELD_COLOUR[f])
    for i in range(fo.nlines):
        ln = &fo.line[i]
        if ln.ng == 0:
            continue
        cur = -1
        rise = 0
        pend = 0
        inhex = 0
        buf_puts(b, b" 1 0 0 1 ")
        buf_milli(b, ln.x)
        buf_byte(b, b' ')
        buf_milli(b, ln.y)
        buf_puts(b, b" Tm")
        for k in range(ln.g0, ln.g0 + ln.ng):
            g = &c.gv.g[k]
            font = g.code >> 8
            proc = glyph_proc(g.face, g.gid)
            if font != cur or g.yoff != rise:
                if cur >= 0:
                    buf_puts(b, b">] TJ" if inhex else b"] TJ")
                if font != cur:
                    buf_puts(b, b" /T")
                    buf_int(b, font)
                    buf_byte(b, b' ')
                    buf_milli(b, fo.size)
                    buf_puts(b, b" Tf")
                    cur = font
                if g.yoff != rise:
                    rise = g.yoff
                    buf_byte(b, b' ')
                    buf_milli(b, <long>rise * fo.size // 1000)
                    buf_puts(b, b" Ts")
                buf_puts(b, b" [")
                inhex = 0
            adjust = pend + g.xoff
            if adjust != 0:
                if inhex:
                    buf_byte(b, b'>')
                    inhex = 0
                buf_int(b, -adjust)
            if not inhex:
                buf_byte(b, b'<')
                inhex = 1
            put_hex2(b, g.code & 255)
            pend = g.adv - g.xoff - proc.width
        if cur >= 0:
            buf_puts(b, b">] TJ" if inhex else b"] TJ")
        if rise != 0:
            buf_puts(b, b" 0 Ts")
    buf_puts(b, b" ET\n")


cdef int put_text_objects(Buf* out, TextCtx* c, int first, Py_ssize_t* offsets,
                          Py_ssize_t* nobj) noexcept nogil:
    """The glyph procedures (objects first ..), then per font of 256 codes its dictionary
    and its ToUnicode map.  Returns the number of objects written."""
    cdef Registry* r = &c.reg
    cdef int i, k, nf = (r.n + 255) // 256, lo, hi, num = first, j, t, cnt
    cdef GlyphProc* proc
    cdef RegEntry* e
    cdef unsigned int cp
    cdef Buf cm
    for i in range(r.nproc):
        proc = glyph_proc(r.pface[i], r.pgid[i])
        offsets[nobj[0]] = out.len
        nobj[0] += 1
        buf_int(out, num)
        buf_puts(out, b" 0 obj\n")
        buf_put(out, proc.obj, proc.objlen)
        num += 1
    memset(&cm, 0, sizeof(Buf))
    for k in range(nf):
        lo = k * 256
        hi = min(r.n, lo + 256)
        offsets[nobj[0]] = out.len
        nobj[0] += 1
        buf_int(out, num)
        buf_puts(out, b" 0 obj\n<< /Type /Font /Subtype /Type3 /FontBBox [0 0 0 0] "
                      b"/FontMatrix [0.001 0 0 0.001 0 0] /Resources << >>\n/CharProcs <<")
        # CharProcs: each procedure used by this font, once
        for i in range(lo, hi):
            e = &r.e[i]
            for j in range(lo, i):
                if r.e[j].proc == e.proc:
                    break
            else:
                buf_puts(out, b" /g")
                buf_int(out, e.proc)
                buf_byte(out, b' ')
                buf_int(out, first + e.proc)
                buf_puts(out, b" 0 R")
        buf_puts(out, b" >>\n/Encoding << /Type /Encoding /Differences [0")
        for i in range(lo, hi):
            buf_puts(out, b" /g")
            buf_int(out, r.e[i].proc)
        buf_puts(out, b"] >>\n/FirstChar 0 /LastChar ")
        buf_int(out, hi - lo - 1)
        buf_puts(out, b" /Widths [")
        for i in range(lo, hi):
            proc = glyph_proc(r.e[i].face, r.e[i].gid)
            if i > lo:
                buf_byte(out, b' ')
            buf_int(out, proc.width)
        buf_puts(out, b"]\n/ToUnicode ")
        buf_int(out, num + 1)
        buf_puts(out, b" 0 R >>\nendobj\n")
        # the ToUnicode CMap: each code -> the UTF-16 of the text its glyph stands for
        cm.len = 0
        buf_puts(&cm, b"/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
                      b"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
                      b"/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
                      b"1 begincodespacerange\n<00> <FF>\nendcodespacerange\n")
        i = lo
        while i < hi:
            cnt = 0
            for j in range(i, hi):
                if r.e[j].tlen > 0:
                    cnt += 1
                    if cnt == 100:
                        break
            if cnt == 0:
                break
            buf_int(&cm, cnt)
            buf_puts(&cm, b" beginbfchar\n")
            cnt = 0
            while i < hi and cnt < 100:
                e = &r.e[i]
                if e.tlen > 0:
                    buf_byte(&cm, b'<')
                    put_hex2(&cm, i - lo)
                    buf_puts(&cm, b"> <")
                    for t in range(e.tlen):
                        cp = r.pool[e.toff + t]
                        if cp >= 0x10000:
                            cp -= 0x10000
                            put_hex2(&cm, 0xD8 | (cp >> 18))
                            put_hex2(&cm, (cp >> 10) & 0xFF)
                            put_hex2(&cm, 0xDC | ((cp >> 8) & 3))
                            put_hex2(&cm, cp & 0xFF)
                        else:
                            put_hex2(&cm, cp >> 8)
                            put_hex2(&cm, cp & 0xFF)
                    buf_puts(&cm, b">\n")
                    cnt += 1
                i += 1
            buf_puts(&cm, b"endbfchar\n")
        buf_puts(&cm, b"endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n")
        if cm.failed:
            free(cm.data)
            return -1
        offsets[nobj[0]] = out.len
        nobj[0] += 1
        buf_int(out, num + 1)
        buf_puts(out, b" 0 obj\n<< /Length ")
        buf_int(out, <long>cm.len)
        buf_puts(out, b" >>\nstream\n")
        buf_put(out, cm.data, cm.len)
        buf_puts(out, b"\nendstream\nendobj\n")
        num += 2
    free(cm.data)
    return num - first


cdef void text_ctx_free(TextCtx* c) noexcept nogil:
    para_free(&c.p)
    para_free(&c.p2)
    if c.hb != NULL:
        hb_buffer_destroy(c.hb)
    free(c.gv.g)
    free(c.tmp)
    reg_free(&c.reg)
    memset(c, 0, sizeof(TextCtx))


cdef int text_ctx_reset(TextCtx* c, const int* han, int nhan) noexcept nogil:
    """Ready for a new order (keeping the memory of the last one); -1: no memory."""
    cdef int* t1 = c.reg.tab
    cdef int* t2 = c.reg.ptab
    if c.hb == NULL:
        c.hb = hb_buffer_create()
        if not hb_buffer_allocation_successful(c.hb):
            return -1
    c.gv.n = 0
    c.gv.failed = 0
    c.han = han
    c.nhan = nhan
    if c.reg.tab != NULL:
        memset(c.reg.tab, 0, (c.reg.tmask + 1) * sizeof(int))
    if c.reg.ptab != NULL:
        memset(c.reg.ptab, 0, (c.reg.pmask + 1) * sizeof(int))
    c.reg.n = 0
    c.reg.plen = 0
    c.reg.nproc = 0
    c.reg.failed = 0
    return 0
