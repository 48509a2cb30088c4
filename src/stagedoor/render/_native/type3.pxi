# Included by stagedoor/_render.pyx.  The glyphs of an order as Type 3 fonts.
#
# Why Type 3 and not an embedded TrueType/CFF subset: hb-subset of a ticket's glyphs of
# the Noto CJK collection costs many times a whole shaped ticket, and its preprocessed
# plan a large share of memory per CJK face (docs/benchmarks.md, "Moved from
# comments"); writing a CIDFontType2 subset by hand works for the glyf fonts but not
# for the CJK fonts, which are CFF (a CIDFontType0C subset needs the charstrings
# desubroutinised or the subroutines carried whole).  A Type 3 glyph is a small content
# stream of the outline, which HarfBuzz draws for any outline format
# (hb_font_get_glyph_shape): made and deflated once per glyph per process (glyphs.pxi), an
# order's font is then a memcpy per glyph it uses plus its dictionary, /Widths and a
# ToUnicode CMap.  So only the glyphs used are embedded, one font per 256 glyphs of the
# order, shared by its pages, and the text extracts.  The cost: no hinting (the outlines
# are filled paths; at print and screen sizes of 6-14 pt they read well, tesseract
# included).
#
# Each font is named as a subset (ISO 32000-1 9.6.4: six uppercase letters, '+', the
# PostScript name): the tag is a hash of the font's glyphs and texts (so the same glyph
# set gets the same tag, different fonts of one file different tags), the name the
# PostScript names of the faces its glyphs come from.  The Type 3 dictionary of the spec
# has no /BaseFont (its /Name is the obsolescent resource name, /T0 here), but a reader
# ignores a key it does not use, qpdf --check stays clean, and poppler, which takes every
# font's name from /BaseFont, then lists the fonts as "Type 3, emb yes, sub yes".
#
# A code stands for one glyph *and* the text it stands for: the same glyph may carry
# different text in different clusters, so the key is (face, glyph, text); codes of one
# glyph share its procedure.

cdef void put_hex2(Buf* b, int v) noexcept nogil:
    cdef const char* hx = b"0123456789ABCDEF"
    buf_byte(b, hx[(v >> 4) & 15])
    buf_byte(b, hx[v & 15])


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


cdef inline int moved(const SGlyph* g, unsigned int* space, int* keep) noexcept nogil:
    """Whether some of a glyph's characters go on invisible glyphs (the face's space,
    *space), from the *keep-th on: a right-to-left mark (no advance) gives all of its,
    so that the mark glyph, maybe raised onto a baseline of its own, stands for
    nothing; a right-to-left glyph of several characters (lam-alef) keeps its first.
    poppler reorders a right-to-left line by position, and would put a mark before its
    letter and reverse a ligature's characters; walk_line (place.pxi) puts the
    invisible glyphs just left of their letter, where poppler and pdfminer.six both
    read them after it."""
    if not g.rtl or g.cn == 0 or (g.adv != 0 and g.cn < 2):
        return 0
    keep[0] = 0 if g.adv == 0 else 1
    return face_has(g.face, 32, space)


cdef int register_glyphs(TextCtx* c, int g0, const unsigned int* text) noexcept nogil:
    """Codes for the glyphs from g0 on (one line).  A glyph's text is its characters in
    logical order, as put_field_ops writes glyphs in logical order; a glyph that stands
    for no character of its own (the second glyph of a cluster) gets a code too, with an
    empty ToUnicode entry; characters moved off a glyph (moved) get codes of the face's
    invisible space; then walk_line registers the bridges it will need (the face's space
    with no text)."""
    cdef int i, j, code, cap, keep
    cdef unsigned int space
    cdef SGlyph* g
    cdef int* t
    if c.gv.n > g0 and flat_line(c, g0, c.gv.n - g0):
        # a cascading line: its characters on invisible glyphs (linetext.pxi)
        if register_flat(c, g0, text) != 0:
            return -1
        return walk_flat(c, g0, c.gv.n - g0, NULL, NULL)
    for i in range(g0, c.gv.n):
        g = &c.gv.g[i]
        g.xi = 0
        g.xn = 0
        if moved(g, &space, &keep):
            code = reg_code(&c.reg, g.face, g.gid, text + g.ci, keep)
            if c.nxc + g.cn > c.xccap:
                cap = (c.nxc + g.cn) * 2 + 64
                t = <int*>realloc(c.xc, cap * sizeof(int))
                if t == NULL:
                    return -1
                c.xc = t
                c.xccap = cap
            g.xi = c.nxc
            g.xn = g.cn - keep
            for j in range(keep, g.cn):
                c.xc[c.nxc] = reg_code(&c.reg, g.face, space, text + g.ci + j, 1)
                if c.xc[c.nxc] < 0:
                    return -1
                c.nxc += 1
            if glyph_proc(g.face, space) == NULL:
                return -1
        else:
            code = reg_code(&c.reg, g.face, g.gid, text + g.ci, g.cn)
        if code < 0:
            return -1
        g.code = code
        if glyph_proc(g.face, g.gid) == NULL:
            return -1
    if c.gv.n > g0:
        return walk_line(c, g0, c.gv.n - g0, NULL, NULL)
    return 0


cdef inline unsigned int fmix(unsigned int h) noexcept nogil:
    # murmur3's finaliser: every bit of the FNV state reaches the letters
    h ^= h >> 16
    h *= 0x85EBCA6Bu
    h ^= h >> 13
    h *= 0xC2B2AE35u
    h ^= h >> 16
    return h


cdef enum:
    TAG_SPACE = 308915776       # 26 ** 6
    FONT_NAME_MAX = 127         # a PDF name's length limit (ISO 32000-1 C.2)


cdef unsigned int font_tag(Registry* r, int lo, int hi, const unsigned int* earlier,
                           int nearlier) noexcept nogil:
    """The subset tag (0 .. 26**6 - 1) of the font of codes lo..hi: a hash of each code's
    face, glyph and text, moved on until no earlier font of the file has it."""
    cdef unsigned int h = 2166136261u, tag
    cdef int i, t, clash = 1
    cdef RegEntry* e
    for i in range(lo, hi):
        e = &r.e[i]
        h = mix(mix(h, <unsigned int>e.face), e.gid)
        for t in range(e.tlen):
            h = mix(h, r.pool[e.toff + t])
        h = mix(h, <unsigned int>e.tlen)
    h = fmix(h)
    while clash:
        tag = h % TAG_SPACE
        clash = 0
        for i in range(nearlier):
            if earlier[i] == tag:
                clash = 1
                h = fmix(h + 1)
                break
    return tag


cdef void put_font_name(Buf* out, Registry* r, int lo, int hi, unsigned int tag) noexcept nogil:
    """/BaseFont /TAG+Face1_Face2: the PostScript names of the faces in the order their
    first glyph comes, as many whole names as fit in a PDF name."""
    cdef int i, j, n = 7, len_
    cdef u64 seen = 0
    cdef const char* name
    buf_puts(out, b" /BaseFont /")
    for j in range(6):
        buf_byte(out, <char>(65 + tag % 26))        # 'A'..
        tag //= 26
    buf_byte(out, b'+')
    for i in range(lo, hi):
        j = r.e[i].face
        if seen & (<u64>1 << j):
            continue
        seen |= <u64>1 << j
        name = FACES[j].psname
        len_ = <int>strlen(name)
        if n + len_ + (n > 7) > FONT_NAME_MAX:
            break
        if n > 7:
            buf_byte(out, b'_')
            n += 1
        buf_put(out, name, len_)
        n += len_


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
    cdef unsigned int* tags = <unsigned int*>malloc((nf + 1) * sizeof(unsigned int))
    # per procedure, the object number of its image (emoji.pxi), 0 for an outline: the
    # images follow the fonts, two objects each (the image, its /SMask)
    cdef int* img_num = <int*>calloc(r.nproc + 1, sizeof(int))
    cdef int nimg = first + r.nproc + 2 * nf
    if tags == NULL or img_num == NULL:
        free(tags)
        free(img_num)
        return -1
    for i in range(r.nproc):
        proc = glyph_proc(r.pface[i], r.pgid[i])
        if proc.img != NULL:
            img_num[i] = nimg
            nimg += 2
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
        buf_puts(out, b" 0 obj\n<< /Type /Font /Subtype /Type3")
        tags[k] = font_tag(r, lo, hi, tags, k)
        put_font_name(out, r, lo, hi, tags[k])
        buf_puts(out, b" /FontBBox [0 0 0 0] "
                      b"/FontMatrix [0.001 0 0 0.001 0 0] /Resources << ")
        put_emoji_resources(out, r, lo, hi, img_num)
        buf_puts(out, b">>\n/CharProcs <<")
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
            # every code, a glyph standing for no character of its own included
            # (<XX> <>: nothing), so that no reader falls back to the raw code
            cnt = hi - i if hi - i < 100 else 100
            buf_int(&cm, cnt)
            buf_puts(&cm, b" beginbfchar\n")
            cnt = 0
            while i < hi and cnt < 100:
                e = &r.e[i]
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
            free(tags)
            free(img_num)
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
    free(tags)
    put_emoji_images(out, r, img_num, offsets, nobj)
    num = nimg
    free(img_num)
    return num - first


cdef void text_ctx_free(TextCtx* c) noexcept nogil:
    para_free(&c.p)
    para_free(&c.p2)
    if c.hb != NULL:
        hb_buffer_destroy(c.hb)
    free(c.gv.g)
    free(c.tmp)
    free(c.ord)
    free(c.xc)
    free(c.items)
    reg_free(&c.reg)
    memset(c, 0, sizeof(TextCtx))


cdef int text_ctx_reset(TextCtx* c, const int* of) noexcept nogil:
    """Ready for a new order (keeping the memory of the last one); -1: no memory."""
    cdef int* t1 = c.reg.tab
    cdef int* t2 = c.reg.ptab
    if c.hb == NULL:
        c.hb = hb_buffer_create()
        if not hb_buffer_allocation_successful(c.hb):
            return -1
    c.gv.n = 0
    c.gv.failed = 0
    c.of = of
    if c.reg.tab != NULL:
        memset(c.reg.tab, 0, (c.reg.tmask + 1) * sizeof(int))
    if c.reg.ptab != NULL:
        memset(c.reg.ptab, 0, (c.reg.pmask + 1) * sizeof(int))
    c.reg.n = 0
    c.reg.plen = 0
    c.reg.nproc = 0
    c.reg.failed = 0
    c.nxc = 0
    return 0
