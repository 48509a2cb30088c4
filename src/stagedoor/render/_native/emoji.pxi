# Included by stagedoor/_render.pyx, after type3.pxi.  Emoji in colour (issue 39 item 3).
#
# Which characters form one emoji is stagedoor/render/emoji.py's rule (read into C here at
# import).  para_init (shape.pxi) calls emoji_faces: each sequence goes to the colour
# face (NotoColorEmoji.ttf: CBDT/CBLC PNGs), which HarfBuzz shapes into the font's one
# glyph (a flag, a skin tone, a family, a keycap); without a colour face the sequence
# keeps its base's monochrome face and the rest is shaped as U+200B (invisible; the
# text layer still carries it), a flag as U+1F3F3.
#
# A colour glyph is still a Type 3 glyph, so the layout, the codes and ToUnicode (the
# text layer: pdftotext returns the whole sequence) are those of every other glyph; its
# procedure is `w 0 d0 q W 0 0 H x y cm /E<face>_<gid> Do Q` (d0: it paints its own
# colours) and the Type 3 font's /Resources name the image XObject.  The PNG (from
# hb_ot_color_glyph_reference_png) is decoded once per glyph per process (zlib inflate,
# PNG filters, palette + tRNS), split into RGB and an alpha /SMask, each deflated once:
# those bytes are cached with the procedure (GlyphProc.img, .mask) like an outline, and
# an order that uses the glyph writes two image objects around them (put_emoji_images).

from libc.string cimport memcmp

from stagedoor.render import emoji as _emoji

cdef enum:
    MAX_PRESENTATION = 128
    MAX_COLOUR = 8
    EMOJI_ZLIB_LEVEL = 6        # images: deflated once per glyph (shaped/emoji.py too)
    PNG_MAX_SIDE = 1024         # a bigger bitmap is not an emoji strike: not drawn

cdef unsigned int PRES_LO[MAX_PRESENTATION]
cdef unsigned int PRES_HI[MAX_PRESENTATION]
cdef int NPRES = 0
cdef int COLOUR_FACES[MAX_COLOUR]
cdef int NCOLOUR = 0


cdef void _load_emoji_tables() noexcept:
    global NPRES
    cdef int i
    if len(_emoji.PRESENTATION) > MAX_PRESENTATION:
        raise ImportError("stagedoor._render: render.emoji.PRESENTATION outgrew the C table")
    for i, (lo, hi) in enumerate(_emoji.PRESENTATION):
        PRES_LO[i] = lo
        PRES_HI[i] = hi
    NPRES = len(_emoji.PRESENTATION)
    if (_emoji.ZWJ, _emoji.VS16, _emoji.KEYCAP, _emoji.HIDDEN, _emoji.FLAG,
            _emoji.JOIN_MIN) != (0x200D, 0xFE0F, 0x20E3, 0x200B, 0x1F3F3, 0x2000):
        raise ImportError("stagedoor._render: render.emoji is not the rule built in")


_load_emoji_tables()


def configure_emoji(faces):
    """The colour emoji faces of the plan (FontPlan.emoji), first usable one wins."""
    global NCOLOUR
    cdef int i
    NCOLOUR = min(len(faces), MAX_COLOUR)
    for i in range(NCOLOUR):
        COLOUR_FACES[i] = faces[i]


cdef int colour_face() noexcept nogil:
    """The colour emoji face (opened on first use), -1 when none is configured or opens."""
    cdef int i
    for i in range(NCOLOUR):
        if face_open(COLOUR_FACES[i]) and FACES[COLOUR_FACES[i]].colour:
            return COLOUR_FACES[i]
    return -1


def emoji_face_path():
    """The file of the colour emoji face the renderer uses, None without one (doctor)."""
    cdef int f = colour_face()
    if f < 0:
        return None
    return os.fsdecode(FACES[f].path)


# -- which characters form one emoji (render/emoji.py spans) ------------------------------

cdef inline int emoji_presentation(unsigned int cp) noexcept nogil:
    cdef int lo = 0, hi = NPRES - 1, mid
    if 0x1F3FB <= cp <= 0x1F3FF:
        return 1
    if cp < 0x231A:
        return 0
    while lo <= hi:
        mid = (lo + hi) >> 1
        if cp < PRES_LO[mid]:
            hi = mid - 1
        elif cp > PRES_HI[mid]:
            lo = mid + 1
        else:
            return 1
    return 0


cdef inline int is_ri(unsigned int c) noexcept nogil:
    return 0x1F1E6 <= c <= 0x1F1FF


cdef int emoji_extend(const unsigned int* u, int n, int j) noexcept nogil:
    while True:
        if j < n and u[j] == 0xFE0F:
            j += 1
        if j < n and 0x1F3FB <= u[j] <= 0x1F3FF:
            j += 1
        while j < n and 0xE0020 <= u[j] <= 0xE007F:
            j += 1
        if j + 1 < n and u[j] == 0x200D and u[j + 1] >= 0x2000:
            j += 2
            continue
        return j


cdef int emoji_next(const unsigned int* u, int n, int i, int* end) noexcept nogil:
    """The start of the first emoji sequence at or after i (its end in *end); n: none."""
    cdef unsigned int c, nxt
    while i < n:
        c = u[i]
        nxt = u[i + 1] if i + 1 < n else 0
        if is_ri(c):
            if is_ri(nxt):
                end[0] = i + 2
                return i
            i += 1
            continue
        if (0x30 <= c <= 0x39) or c == 0x23 or c == 0x2A:
            if nxt == 0x20E3:
                end[0] = i + 2
                return i
            if nxt == 0xFE0F and i + 2 < n and u[i + 2] == 0x20E3:
                end[0] = i + 3
                return i
            i += 1
            continue
        if emoji_presentation(c) or (nxt == 0xFE0F and c >= 0xA9):
            end[0] = emoji_extend(u, n, i + 1)
            return i
        i += 1
    return n


cdef int emoji_faces(Para* p, const int* of) noexcept nogil:
    """After the faces of para_init: each emoji sequence to the colour face, or its base
    alone visible (render/emoji.py apply).  p.su is then the text HarfBuzz shapes."""
    cdef int lo, hi = 0, j, base, cf = -2, f, changed = 0
    cdef unsigned int g
    cdef const unsigned int* u = p.u
    p.su = p.u
    lo = emoji_next(u, p.n, 0, &hi)
    while lo < p.n:
        if cf == -2:
            cf = colour_face()
        if cf >= 0 and hb_font_get_nominal_glyph(FACES[cf].font, u[lo], &g):
            for j in range(lo, hi):
                p.face[j] = cf
                if not hb_font_get_nominal_glyph(FACES[cf].font, u[j], &p.gid[j]):
                    p.gid[j] = 0
        elif hi - lo >= 2:
            if not changed:
                memcpy(p.sbuf, u, p.n * sizeof(unsigned int))
                changed = 1
            base = lo
            if is_ri(u[lo]):
                f = pick_face(0x1F3F3, HB_SCRIPT_COMMON, p.face[lo - 1] if lo > 0 else -1,
                              of, p.bold, &g)
                if f >= 0:
                    p.sbuf[lo] = 0x1F3F3
                    p.face[lo] = f
                    p.gid[lo] = g
            if p.face[base] >= 0:
                for j in range(base + 1, hi):
                    p.sbuf[j] = 0x200B
                    p.face[j] = p.face[base]
                    p.gid[j] = 0
        lo = emoji_next(u, p.n, hi, &hi)
    if changed:
        p.su = p.sbuf
    return 0


# -- a colour glyph: its PNG as an image the Type 3 procedure paints ----------------------

cdef inline unsigned int be32(const unsigned char* b) noexcept nogil:
    return ((<unsigned int>b[0] << 24) | (<unsigned int>b[1] << 16)
            | (<unsigned int>b[2] << 8) | <unsigned int>b[3])


cdef inline int paeth(int a, int b, int c) noexcept nogil:
    cdef int pp = a + b - c
    cdef int pa = pp - a if pp > a else a - pp
    cdef int pb = pp - b if pp > b else b - pp
    cdef int pc = pp - c if pp > c else c - pp
    if pa <= pb and pa <= pc:
        return a
    if pb <= pc:
        return b
    return c


cdef int png_decode(const unsigned char* d, Py_ssize_t n, int* w, int* h,
                    unsigned char** rgb, unsigned char** alpha) noexcept nogil:
    """An 8-bit truecolour (2, tRNS), RGBA (6) or palette (3, 1-8 bits, tRNS) PNG
    without interlace into RGB and alpha planes (malloc'd); -1 for anything else
    (shaped/emoji.py accepts the same, from the IHDR, before Pillow decodes it)."""
    cdef Py_ssize_t pos = 8
    cdef unsigned int clen, x, y, k
    cdef int depth = 0, ctype = -1, bpp, rowlen, nplte = 0, ok = 0, rc
    cdef unsigned char plte[768]
    cdef unsigned char trns[256]
    cdef int key_r = -1, key_g = -1, key_b = -1     # truecolour tRNS: that colour clear
    cdef Buf idat
    cdef unsigned char* raw = NULL
    cdef unsigned char* row
    cdef unsigned char* prior
    cdef z_stream zs
    cdef int a, b, c, ft, v, idx, shift
    memset(&idat, 0, sizeof(Buf))
    memset(trns, 255, 256)
    if n < 8 or memcmp(d, b"\x89PNG\r\n\x1a\n", 8) != 0:
        return -1
    while pos + 12 <= n:
        clen = be32(d + pos)
        if clen > n - pos - 12:
            break
        if memcmp(d + pos + 4, b"IHDR", 4) == 0 and clen >= 13:
            w[0] = <int>be32(d + pos + 8)
            h[0] = <int>be32(d + pos + 12)
            depth = d[pos + 16]
            ctype = d[pos + 17]
            if d[pos + 20] != 0:        # interlaced
                ctype = -1
        elif memcmp(d + pos + 4, b"PLTE", 4) == 0 and clen <= 768:
            memcpy(plte, d + pos + 8, clen)
            nplte = clen // 3
        elif memcmp(d + pos + 4, b"tRNS", 4) == 0 and clen <= 256:
            memcpy(trns, d + pos + 8, clen)
            if clen == 6:
                key_r = d[pos + 9]
                key_g = d[pos + 11]
                key_b = d[pos + 13]
        elif memcmp(d + pos + 4, b"IDAT", 4) == 0:
            buf_put(&idat, <const char*>(d + pos + 8), clen)
        elif memcmp(d + pos + 4, b"IEND", 4) == 0:
            break
        pos += 12 + clen
    if ctype == 3 and depth in (1, 2, 4, 8):
        bpp = 1
        rowlen = (w[0] * depth + 7) // 8
    elif ctype == 2 and depth == 8:
        bpp = 3
        rowlen = w[0] * 3
    elif ctype == 6 and depth == 8:
        bpp = 4
        rowlen = w[0] * 4
    else:
        free(idat.data)
        return -1
    if w[0] <= 0 or h[0] <= 0 or w[0] > PNG_MAX_SIDE or h[0] > PNG_MAX_SIDE or idat.failed:
        free(idat.data)
        return -1
    raw = <unsigned char*>malloc(<size_t>(rowlen + 1) * h[0])
    rgb[0] = <unsigned char*>malloc(<size_t>w[0] * h[0] * 3)
    alpha[0] = <unsigned char*>malloc(<size_t>w[0] * h[0])
    memset(&zs, 0, sizeof(z_stream))
    if raw != NULL and rgb[0] != NULL and alpha[0] != NULL and inflateInit(&zs) == Z_OK:
        zs.next_in = <Bytef*>idat.data
        zs.avail_in = <uInt>idat.len
        zs.next_out = raw
        zs.avail_out = <uInt>((rowlen + 1) * h[0])
        rc = inflate(&zs, Z_FINISH)
        ok = (rc == Z_STREAM_END or rc == Z_OK) and zs.avail_out == 0
        inflateEnd(&zs)
    free(idat.data)
    if ok:
        # undo the filters in place: row y's bytes at raw + y * (rowlen + 1) + 1
        for y in range(<unsigned int>h[0]):
            row = raw + y * (rowlen + 1)
            ft = row[0]
            row += 1
            prior = row - (rowlen + 1) if y > 0 else NULL
            for x in range(<unsigned int>rowlen):
                a = row[x - bpp] if x >= <unsigned int>bpp else 0
                b = prior[x] if prior != NULL else 0
                c = prior[x - bpp] if prior != NULL and x >= <unsigned int>bpp else 0
                if ft == 1:
                    row[x] = <unsigned char>(row[x] + a)
                elif ft == 2:
                    row[x] = <unsigned char>(row[x] + b)
                elif ft == 3:
                    row[x] = <unsigned char>(row[x] + ((a + b) >> 1))
                elif ft == 4:
                    row[x] = <unsigned char>(row[x] + paeth(a, b, c))
                elif ft != 0:
                    ok = 0
            for x in range(<unsigned int>w[0]):
                k = y * w[0] + x
                if bpp == 1:
                    shift = 8 - depth - <int>((x * depth) & 7)
                    idx = (row[(x * depth) >> 3] >> shift) & ((1 << depth) - 1)
                    if idx >= nplte:
                        ok = 0
                        idx = 0
                    rgb[0][3 * k] = plte[3 * idx]
                    rgb[0][3 * k + 1] = plte[3 * idx + 1]
                    rgb[0][3 * k + 2] = plte[3 * idx + 2]
                    alpha[0][k] = trns[idx]
                else:
                    v = x * bpp
                    rgb[0][3 * k] = row[v]
                    rgb[0][3 * k + 1] = row[v + 1]
                    rgb[0][3 * k + 2] = row[v + 2]
                    if bpp == 4:
                        alpha[0][k] = row[v + 3]
                    elif row[v] == key_r and row[v + 1] == key_g and row[v + 2] == key_b:
                        alpha[0][k] = 0
                    else:
                        alpha[0][k] = 255
    free(raw)
    if not ok:
        free(rgb[0])
        free(alpha[0])
        rgb[0] = NULL
        alpha[0] = NULL
        return -1
    return 0


cdef int deflate_copy(const unsigned char* src, Py_ssize_t n, char** out,
                      int* outlen) noexcept nogil:
    """src deflated (zlib format, EMOJI_ZLIB_LEVEL) into a malloc'd copy; -1 on failure."""
    cdef z_stream zs
    cdef uLong bound
    cdef int rc = -1
    memset(&zs, 0, sizeof(z_stream))
    out[0] = NULL
    if deflateInit2(&zs, EMOJI_ZLIB_LEVEL, Z_DEFLATED, 15, 8, Z_DEFAULT_STRATEGY) != Z_OK:
        return -1
    bound = deflateBound(&zs, <uLong>n)
    out[0] = <char*>malloc(bound)
    if out[0] != NULL:
        zs.next_in = <Bytef*>src
        zs.avail_in = <uInt>n
        zs.next_out = <Bytef*>out[0]
        zs.avail_out = <uInt>bound
        if deflate(&zs, Z_FINISH) == Z_STREAM_END:
            outlen[0] = <int>(bound - zs.avail_out)
            rc = 0
    deflateEnd(&zs)
    if rc != 0:
        free(out[0])
        out[0] = NULL
    return rc


cdef GlyphProc* make_colour_proc(Face* f, int face, unsigned int gid) noexcept nogil:
    """The procedure of a colour glyph with its image; NULL when the glyph has no PNG
    this can read (the caller draws its outline: none, an empty glyph)."""
    cdef hb_blob_t* blob = hb_ot_color_glyph_reference_png(f.font, gid)
    cdef unsigned int blen = 0
    cdef const char* data = hb_blob_get_data(blob, &blen)
    cdef int w = 0, h = 0, rc
    cdef unsigned char* rgb = NULL
    cdef unsigned char* alpha = NULL
    cdef hb_glyph_extents_t ext
    cdef GlyphProc* g
    cdef Buf head, obj
    if blen == 0:
        hb_blob_destroy(blob)
        return NULL
    rc = png_decode(<const unsigned char*>data, blen, &w, &h, &rgb, &alpha)
    hb_blob_destroy(blob)
    if rc != 0 or not hb_font_get_glyph_extents(f.font, gid, &ext):
        free(rgb)
        free(alpha)
        return NULL
    g = <GlyphProc*>calloc(1, sizeof(GlyphProc))
    if g == NULL:
        free(rgb)
        free(alpha)
        return NULL
    g.width = hb_font_get_glyph_h_advance(f.font, gid)
    # the ink box the layout measures: the image's, one unit of slack each way as an
    # outline's d1 box has (make_proc)
    g.x0 = ext.x_bearing - 1
    g.y1 = ext.y_bearing + 1
    g.x1 = ext.x_bearing + ext.width + 1
    g.y0 = ext.y_bearing + ext.height - 1
    g.iw = w
    g.ih = h
    rc = deflate_copy(rgb, <Py_ssize_t>w * h * 3, &g.img, &g.imglen)
    if rc == 0:
        rc = deflate_copy(alpha, <Py_ssize_t>w * h, &g.mask, &g.masklen)
    free(rgb)
    free(alpha)
    memset(&head, 0, sizeof(Buf))
    memset(&obj, 0, sizeof(Buf))
    buf_int(&head, g.width)
    buf_puts(&head, b" 0 d0\nq ")
    buf_int(&head, ext.width)
    buf_puts(&head, b" 0 0 ")
    buf_int(&head, -ext.height)
    buf_byte(&head, b' ')
    buf_int(&head, ext.x_bearing)
    buf_byte(&head, b' ')
    buf_int(&head, ext.y_bearing + ext.height)
    buf_puts(&head, b" cm /E")
    buf_int(&head, face)
    buf_byte(&head, b'_')
    buf_int(&head, gid)
    buf_puts(&head, b" Do Q\n")
    buf_puts(&obj, b"<< /Length ")
    buf_int(&obj, <long>head.len)
    buf_puts(&obj, b" >>\nstream\n")
    buf_put(&obj, head.data, head.len)
    buf_puts(&obj, b"\nendstream\nendobj\n")
    free(head.data)
    if rc == 0 and not head.failed and not obj.failed:
        g.obj = <char*>malloc(obj.len)
        if g.obj != NULL:
            memcpy(g.obj, obj.data, obj.len)
            g.objlen = <int>obj.len
    free(obj.data)
    if g.obj == NULL:
        free(g.img)
        free(g.mask)
        free(g)
        return NULL
    return g


def png_planes(bytes data):
    """(width, height, RGB bytes, alpha bytes) of a PNG as png_decode reads it, None when
    it does not (tests/render/test_emoji.py holds it to Pillow's reading)."""
    cdef int w = 0, h = 0, rc
    cdef unsigned char* rgb = NULL
    cdef unsigned char* alpha = NULL
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = len(data)
    with nogil:
        rc = png_decode(p, n, &w, &h, &rgb, &alpha)
    if rc != 0:
        return None
    try:
        return (w, h, PyBytes_FromStringAndSize(<char*>rgb, w * h * 3),
                PyBytes_FromStringAndSize(<char*>alpha, w * h))
    finally:
        free(rgb)
        free(alpha)


# -- the order's images (put_text_objects in type3.pxi) -----------------------------------

cdef void put_emoji_resources(Buf* out, Registry* r, int lo, int hi,
                              const int* img_num) noexcept nogil:
    """The /XObject resources of the font of codes lo..hi: its colour procedures."""
    cdef int i, j, any_ = 0
    cdef RegEntry* e
    for i in range(lo, hi):
        e = &r.e[i]
        if img_num[e.proc] == 0:
            continue
        for j in range(lo, i):
            if r.e[j].proc == e.proc:
                break
        else:
            if not any_:
                buf_puts(out, b"/XObject << ")
                any_ = 1
            buf_puts(out, b"/E")
            buf_int(out, e.face)
            buf_byte(out, b'_')
            buf_int(out, e.gid)
            buf_byte(out, b' ')
            buf_int(out, img_num[e.proc])
            buf_puts(out, b" 0 R ")
    if any_:
        buf_puts(out, b">> ")


cdef void put_image(Buf* out, int num, int w, int h, const char* cs, int smask,
                    const char* data, int n) noexcept nogil:
    buf_int(out, num)
    buf_puts(out, b" 0 obj\n<< /Type /XObject /Subtype /Image /Width ")
    buf_int(out, w)
    buf_puts(out, b" /Height ")
    buf_int(out, h)
    buf_puts(out, b" /ColorSpace ")
    buf_puts(out, cs)
    buf_puts(out, b" /BitsPerComponent 8")
    if smask:
        buf_puts(out, b" /SMask ")
        buf_int(out, smask)
        buf_puts(out, b" 0 R")
    buf_puts(out, b" /Length ")
    buf_int(out, n)
    buf_puts(out, b" /Filter /FlateDecode >>\nstream\n")
    buf_put(out, data, n)
    buf_puts(out, b"\nendstream\nendobj\n")


cdef void put_emoji_images(Buf* out, Registry* r, const int* img_num, Py_ssize_t* offsets,
                           Py_ssize_t* nobj) noexcept nogil:
    """Each colour procedure's image and its alpha /SMask, in procedure order."""
    cdef int i
    cdef GlyphProc* g
    for i in range(r.nproc):
        if img_num[i] == 0:
            continue
        g = glyph_proc(r.pface[i], r.pgid[i])
        offsets[nobj[0]] = out.len
        nobj[0] += 1
        put_image(out, img_num[i], g.iw, g.ih, b"/DeviceRGB", img_num[i] + 1, g.img,
                  g.imglen)
        offsets[nobj[0]] = out.len
        nobj[0] += 1
        put_image(out, img_num[i] + 1, g.iw, g.ih, b"/DeviceGray", 0, g.mask, g.masklen)
