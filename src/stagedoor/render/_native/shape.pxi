# Included by stagedoor/_render.pyx.  Itemise, order and shape one line of a field: every character gets a face
# (pick_face), the paragraph gets its bidi levels from fribidi, each line is reordered
# by fribidi_reorder_line, cut into runs of one face, script and level, and each run is
# shaped by HarfBuzz with the whole field as context (so Arabic joins across runs).
# The glyphs come out in visual order, left to right, positions in 1/1000 em.

cdef int gv_reserve(GlyphVec* v, int extra) noexcept nogil:
    cdef int cap
    cdef SGlyph* p
    if v.failed:
        return -1
    if v.n + extra <= v.cap:
        return 0
    cap = v.cap * 2 if v.cap else 256
    while cap < v.n + extra:
        cap *= 2
    p = <SGlyph*>realloc(v.g, cap * sizeof(SGlyph))
    if p == NULL:
        v.failed = 1
        return -1
    v.g = p
    v.cap = cap
    return 0


cdef int para_reserve(Para* p, int n) noexcept nogil:
    cdef int cap = n + 8
    if cap <= p.cap:
        return 0
    para_free(p)
    p.bt = <FriBidiCharType*>malloc(cap * sizeof(FriBidiCharType))
    p.brt = <FriBidiBracketType*>malloc(cap * sizeof(FriBidiBracketType))
    p.lev = <FriBidiLevel*>malloc(cap * sizeof(FriBidiLevel))
    p.lev2 = <FriBidiLevel*>malloc(cap * sizeof(FriBidiLevel))
    p.map = <FriBidiStrIndex*>malloc(cap * sizeof(FriBidiStrIndex))
    p.script = <hb_script_t*>malloc(cap * sizeof(hb_script_t))
    p.face = <int*>malloc(cap * sizeof(int))
    p.gid = <unsigned int*>malloc(cap * sizeof(unsigned int))
    p.adv = <int*>malloc(cap * sizeof(int))
    p.brk = <char*>malloc(cap)
    p.ub = <unsigned int*>malloc(cap * sizeof(unsigned int))
    p.sbuf = <unsigned int*>malloc(cap * sizeof(unsigned int))
    if (p.sbuf == NULL or p.bt == NULL or p.brt == NULL or p.lev == NULL or p.lev2 == NULL or p.map == NULL
            or p.script == NULL or p.face == NULL or p.gid == NULL or p.adv == NULL
            or p.brk == NULL or p.ub == NULL):
        para_free(p)
        return -1
    p.cap = cap
    return 0


cdef void para_free(Para* p) noexcept nogil:
    free(p.bt); free(p.brt); free(p.lev); free(p.lev2); free(p.map)
    free(p.script); free(p.face); free(p.gid); free(p.adv); free(p.brk); free(p.ub)
    free(p.sbuf)
    p.sbuf = NULL
    p.bt = NULL; p.brt = NULL; p.lev = NULL; p.lev2 = NULL; p.map = NULL
    p.script = NULL; p.face = NULL; p.gid = NULL; p.adv = NULL; p.brk = NULL
    p.ub = NULL
    p.cap = 0


cdef enum:
    # fribidi's types (fribidi-bidi-types.h, FRIBIDI_TYPE_*_VAL; part of its ABI) that
    # are neither right to left, nor Arabic numbers, nor explicit embeddings, overrides
    # or isolates
    BIDI_LTR = 0x110
    BIDI_EN = 0x220
    BIDI_ES = 0x10420
    BIDI_ET = 0x20420
    BIDI_CS = 0x40420
    BIDI_NSM = 0x80020
    BIDI_BN = 0x100820
    BIDI_BS = 0x202840
    BIDI_SS = 0x402840
    BIDI_WS = 0x800840
    BIDI_ON = 0x40


cdef int bidi_flat(const FriBidiCharType* bt, int n, FriBidiParType* base) noexcept nogil:
    """1 when every character of a paragraph has level 0 by the bidi algorithm, read
    from its types alone: none is R, AL, AN or an explicit embedding, override or
    isolate.  Then numbers take the L before them or sos (W7), neutrals and brackets
    resolve to L (N0-N2), so the levels are fribidi's without its call (the larger part
    of a left-to-right field's bidi time: perf over the indic-north corpus page);
    *base becomes what fribidi gives, LTR when a strong L is there, else left as ON.
    0: ask fribidi."""
    cdef int i, strong = 0
    cdef FriBidiCharType t
    for i in range(n):
        t = bt[i]
        if t == BIDI_LTR:
            strong = 1
        elif not (t == BIDI_EN or t == BIDI_ES or t == BIDI_ET or t == BIDI_CS
                  or t == BIDI_NSM or t == BIDI_BN or t == BIDI_BS or t == BIDI_SS
                  or t == BIDI_WS or t == BIDI_ON):
            return 0
    if strong:
        base[0] = FRIBIDI_PAR_LTR
    return 1


cdef int para_init(Para* p, const unsigned int* u, int n, int bold,
                   const int* of, int breaks=1) noexcept nogil:
    """Scripts, faces and bidi levels of a field's text, and its line-break classes
    unless breaks is 0 (p.brk then left as it is: a probe that is only measured).
    -1: out of memory."""
    cdef int i, prev = -1, j
    cdef hb_script_t s, last = HB_SCRIPT_COMMON
    if para_reserve(p, n) != 0:
        return -1
    p.u = u
    p.n = n
    p.bold = bold
    p.missing = 0
    p.any_rtl = 0
    p.lang = order_language(of)
    # scripts: Common and Inherited characters take the script before them (or, at the
    # start, the first real one after them)
    for i in range(n):
        s = hb_unicode_script(UFUNCS, u[i])
        p.script[i] = s
    for i in range(n):
        if p.script[i] != HB_SCRIPT_COMMON and p.script[i] != HB_SCRIPT_INHERITED:
            last = p.script[i]
            break
    for i in range(n):
        s = p.script[i]
        if s == HB_SCRIPT_COMMON or s == HB_SCRIPT_INHERITED or s == HB_SCRIPT_UNKNOWN:
            # the face choice below still sees the character's own script
            p.face[i] = pick_face(u[i], s, prev, of, bold, &p.gid[i])
            p.script[i] = last
        else:
            last = s
            p.face[i] = pick_face(u[i], s, prev, of, bold, &p.gid[i])
        if p.face[i] >= 0:
            prev = p.face[i]
        else:
            p.missing = 1
    # emoji sequences: to the colour face, or their base alone (emoji.pxi)
    emoji_faces(p, of)
    # a character no face has takes the face of its neighbours when shaping (HarfBuzz
    # gives .notdef); it is drawn as the replacement glyph, see shape_run
    fribidi_get_bidi_types(<const FriBidiChar*>u, n, p.bt)
    p.base = FRIBIDI_PAR_ON
    p.flat = bidi_flat(p.bt, n, &p.base)
    if p.flat:
        memset(p.lev, 0, n * sizeof(FriBidiLevel))
    else:
        fribidi_get_bracket_types(<const FriBidiChar*>u, n, p.bt, p.brt)
        if n and fribidi_get_par_embedding_levels_ex(p.bt, p.brt, n, &p.base, p.lev) == 0:
            return -1
    p.rtl = p.base == FRIBIDI_PAR_RTL
    for j in range(n):
        if p.lev[j] & 1:
            p.any_rtl = 1
            break
    if breaks:
        line_breaks(u, n, p.brk, p.ub)  # never libunibreak itself: breaks.pxi
    for j in range(n):
        p.adv[j] = 0
    return 0


cdef int shape_run(Para* p, hb_buffer_t* hb, int lo, int hi, int level,
                   GlyphVec* out) noexcept nogil:
    """Glyphs of characters lo..hi-1 (one face, script and level) in visual order; their
    total advance, or -1 when out of memory."""
    cdef int face = p.face[lo], i, k, width = 0, c, end, rtl = level & 1, n0
    cdef unsigned int n, gid, h = 0
    cdef hb_glyph_info_t* info
    cdef hb_glyph_position_t* pos
    cdef SGlyph* g
    cdef GlyphProc* proc
    if face < 0:
        # no face has these characters: one replacement mark each, the text kept
        face = replacement(&gid)
        if face < 0:
            return 0        # no face opens at all: nothing to draw (the text is ActualText)
        proc = glyph_proc(face, gid)
        if proc == NULL or gv_reserve(out, hi - lo) != 0:
            return -1
        for i in range(hi - lo):
            g = &out.g[out.n]
            out.n += 1
            g.face = face
            g.gid = gid
            g.adv = proc.width
            g.xoff = 0
            g.yoff = 0
            g.ci = (hi - 1 - i) if rtl else (lo + i)
            g.cn = 1
            g.rtl = rtl
            p.adv[g.ci] += proc.width
            width += proc.width
        return width
    width = shape_cached(p, face, lo, hi, rtl, out, &h)     # shapecache.pxi
    if width != -1:
        return width
    width = 0
    n0 = out.n
    hb_buffer_clear_contents(hb)
    hb_buffer_add_utf32(hb, p.su, p.n, lo, hi - lo)
    hb_buffer_set_direction(hb, HB_DIRECTION_RTL if rtl else HB_DIRECTION_LTR)
    hb_buffer_set_script(hb, p.script[lo])
    if p.lang != NULL:
        hb_buffer_set_language(hb, p.lang)
    hb_buffer_set_cluster_level(hb, HB_BUFFER_CLUSTER_LEVEL_MONOTONE_CHARACTERS)
    hb_shape(FACES[face].font, hb, NULL, 0)
    if not hb_buffer_allocation_successful(hb):
        return -1
    info = hb_buffer_get_glyph_infos(hb, &n)
    pos = hb_buffer_get_glyph_positions(hb, &n)
    if gv_reserve(out, <int>n) != 0:
        return -1
    for k in range(<int>n):
        c = <int>info[k].cluster
        # the cluster's characters: up to the next cluster of the run (clusters are
        # monotone: increasing along the glyphs left to right, decreasing right to left)
        end = hi
        if rtl:
            i = k - 1
            while i >= 0 and <int>info[i].cluster == c:
                i -= 1
            if i >= 0:
                end = <int>info[i].cluster
        else:
            i = k + 1
            while i < <int>n and <int>info[i].cluster == c:
                i += 1
            if i < <int>n:
                end = <int>info[i].cluster
        g = &out.g[out.n]
        g.face = face
        g.gid = info[k].codepoint
        g.adv = pos[k].x_advance
        g.xoff = pos[k].x_offset
        g.yoff = pos[k].y_offset
        g.ci = c
        g.cn = end - c
        # an emoji's glyph stands for its whole sequence in logical order, as a
        # left-to-right glyph does: no character moved off it (moved in type3.pxi), which
        # split a skin tone or a family between two glyphs in a right-to-left line
        g.rtl = 0 if FACES[face].colour else rtl
        # the first glyph of a cluster (in the order drawn) stands for its text
        if k > 0 and <int>info[k - 1].cluster == c:
            g.cn = 0
        out.n += 1
        p.adv[c] += g.adv
        width += g.adv
    if h != 0:
        shape_cache_put(p, face, lo, hi, rtl, out.g + n0, out.n - n0, h)
    return width


cdef int shape_line(Para* p, hb_buffer_t* hb, int s, int e, GlyphVec* out) noexcept nogil:
    """Glyphs of the line s..e-1 of p in visual order; its advance (1/1000 em), -1: OOM."""
    cdef int n = e - s, v, v0, li, prev, lo, hi, lvl, w, width = 0
    if n <= 0:
        return 0
    for v in range(n):
        p.lev2[v] = p.lev[s + v]
        p.map[v] = v
    # every level 0 (bidi_flat): fribidi_reorder_line would leave the map as it is
    if not p.flat and fribidi_reorder_line(0, p.bt + s, n, 0, p.base, p.lev2, NULL,
                                           p.map) == 0:
        return -1
    v0 = 0
    while v0 < n:
        li = p.map[v0]
        lvl = p.lev2[li]
        lo = hi = li
        prev = li
        v = v0 + 1
        while v < n:
            li = p.map[v]
            if (p.lev2[li] != lvl or p.face[s + li] != p.face[s + prev]
                    or p.script[s + li] != p.script[s + prev]
                    or li != prev + (-1 if lvl & 1 else 1)):
                break
            prev = li
            if li < lo:
                lo = li
            if li > hi:
                hi = li
            v += 1
        w = shape_run(p, hb, s + lo, s + hi + 1, lvl, out)
        if w < 0:
            return -1
        width += w
        v0 = v
    return width
