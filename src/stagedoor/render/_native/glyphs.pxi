# Included by stagedoor/_render.pyx, after fonts.pxi.  A glyph as a Type 3 procedure:
# its outline drawn through hb_font_get_glyph_shape at 1000 units per em into PDF path
# operators, deflated once, cached per face and glyph for the life of the process
# (fonts.pxi opens the faces and drops the cache in a forked child; type3.pxi says why
# Type 3).  glyph_proc() is what the shaper, the layout and the font writer call.

# -- outlines -> PDF path operators ------------------------------------------------------

cdef struct Pen:
    Buf* b
    float x0, y0, x1, y1        # bounding box of the points
    int any


cdef inline void pen_pt(Pen* p, float x, float y) noexcept nogil:
    if not p.any or x < p.x0:
        p.x0 = x
    if not p.any or y < p.y0:
        p.y0 = y
    if not p.any or x > p.x1:
        p.x1 = x
    if not p.any or y > p.y1:
        p.y1 = y
    p.any = 1
    buf_int(p.b, <long>(x + 0.5 if x >= 0 else x - 0.5))
    buf_byte(p.b, b' ')
    buf_int(p.b, <long>(y + 0.5 if y >= 0 else y - 0.5))
    buf_byte(p.b, b' ')


cdef void _move_to(hb_draw_funcs_t* d, void* data, hb_draw_state_t* st, float x, float y,
                   void* u) noexcept nogil:
    pen_pt(<Pen*>data, x, y)
    buf_puts((<Pen*>data).b, b"m\n")


cdef void _line_to(hb_draw_funcs_t* d, void* data, hb_draw_state_t* st, float x, float y,
                   void* u) noexcept nogil:
    pen_pt(<Pen*>data, x, y)
    buf_puts((<Pen*>data).b, b"l\n")


cdef void _quad_to(hb_draw_funcs_t* d, void* data, hb_draw_state_t* st, float cx, float cy,
                   float x, float y, void* u) noexcept nogil:
    # a quadratic Bezier is the cubic with controls 2/3 of the way to its control point
    cdef hb_draw_state_fields* s = <hb_draw_state_fields*>st
    cdef Pen* p = <Pen*>data
    pen_pt(p, s.current_x + 2.0 / 3.0 * (cx - s.current_x),
           s.current_y + 2.0 / 3.0 * (cy - s.current_y))
    pen_pt(p, x + 2.0 / 3.0 * (cx - x), y + 2.0 / 3.0 * (cy - y))
    pen_pt(p, x, y)
    buf_puts(p.b, b"c\n")


cdef void _cubic_to(hb_draw_funcs_t* d, void* data, hb_draw_state_t* st, float c1x,
                    float c1y, float c2x, float c2y, float x, float y,
                    void* u) noexcept nogil:
    cdef Pen* p = <Pen*>data
    pen_pt(p, c1x, c1y)
    pen_pt(p, c2x, c2y)
    pen_pt(p, x, y)
    buf_puts(p.b, b"c\n")


cdef void _close(hb_draw_funcs_t* d, void* data, hb_draw_state_t* st,
                 void* u) noexcept nogil:
    buf_puts((<Pen*>data).b, b"h\n")


cdef void _init_draw_funcs() noexcept:
    global DRAW_FUNCS
    DRAW_FUNCS = hb_draw_funcs_create()
    hb_draw_funcs_set_move_to_func(DRAW_FUNCS, _move_to, NULL, NULL)
    hb_draw_funcs_set_line_to_func(DRAW_FUNCS, _line_to, NULL, NULL)
    hb_draw_funcs_set_quadratic_to_func(DRAW_FUNCS, _quad_to, NULL, NULL)
    hb_draw_funcs_set_cubic_to_func(DRAW_FUNCS, _cubic_to, NULL, NULL)
    hb_draw_funcs_set_close_path_func(DRAW_FUNCS, _close, NULL, NULL)
    hb_draw_funcs_make_immutable(DRAW_FUNCS)


_init_draw_funcs()


cdef GlyphProc* make_proc(Face* f, unsigned int gid) noexcept nogil:
    """The glyph's Type 3 procedure as a finished stream object body; NULL: no memory."""
    cdef Buf path, head, obj
    cdef Pen pen
    cdef z_stream zs
    cdef GlyphProc* g
    cdef int width = hb_font_get_glyph_h_advance(f.font, gid), use_z = 0
    cdef uLong bound
    cdef int bx0 = 0, by0 = 0, bx1 = 0, by1 = 0
    memset(&path, 0, sizeof(Buf))
    memset(&head, 0, sizeof(Buf))
    memset(&obj, 0, sizeof(Buf))
    memset(&pen, 0, sizeof(Pen))
    memset(&zs, 0, sizeof(z_stream))
    pen.b = &path
    hb_font_get_glyph_shape(f.font, gid, DRAW_FUNCS, &pen)
    # d1: the glyph is a shape painted in the colour of the text that shows it
    buf_int(&head, width)
    buf_puts(&head, b" 0 ")
    if pen.any:
        # the layout measures the ink by this box (layout.pxi, line_ink)
        bx0 = <int>(<long>pen.x0 - 1)
        by0 = <int>(<long>pen.y0 - 1)
        bx1 = <int>(<long>pen.x1 + 1)
        by1 = <int>(<long>pen.y1 + 1)
        buf_int(&head, bx0)
        buf_byte(&head, b' ')
        buf_int(&head, by0)
        buf_byte(&head, b' ')
        buf_int(&head, bx1)
        buf_byte(&head, b' ')
        buf_int(&head, by1)
        buf_puts(&head, b" d1\n")
        buf_put(&head, path.data, path.len)
        buf_puts(&head, b"f\n")
    else:
        buf_puts(&head, b"0 0 0 0 d1\n")
    free(path.data)
    memset(&path, 0, sizeof(Buf))           # reused below for the deflated bytes
    if head.failed:
        free(head.data)
        return NULL
    # deflated when that is smaller (it is, but for the emptiest glyphs)
    if deflateInit2(&zs, 9, Z_DEFLATED, 15, 8, Z_DEFAULT_STRATEGY) == Z_OK:
        bound = deflateBound(&zs, <uLong>head.len)
        if buf_reserve(&path, <Py_ssize_t>bound) == 0:
            zs.next_in = <Bytef*>head.data
            zs.avail_in = <uInt>head.len
            zs.next_out = <Bytef*>path.data
            zs.avail_out = <uInt>bound
            if deflate(&zs, Z_FINISH) == Z_STREAM_END:
                path.len = <Py_ssize_t>(bound - zs.avail_out)
                use_z = path.len + 22 < head.len
        deflateEnd(&zs)
    buf_puts(&obj, b"<< /Length ")
    if use_z:
        buf_int(&obj, <long>path.len)
        buf_puts(&obj, b" /Filter /FlateDecode >>\nstream\n")
        buf_put(&obj, path.data, path.len)
    else:
        buf_int(&obj, <long>head.len)
        buf_puts(&obj, b" >>\nstream\n")
        buf_put(&obj, head.data, head.len)
    buf_puts(&obj, b"\nendstream\nendobj\n")
    free(path.data)
    free(head.data)
    # kept for the life of the process: an exact copy, not the buffer (a buffer's
    # minimum is several times a glyph's bytes, which adds up over many cached glyphs)
    g = <GlyphProc*>calloc(1, sizeof(GlyphProc))
    if obj.failed or g == NULL:
        free(obj.data)
        free(g)
        return NULL
    g.obj = <char*>malloc(obj.len)
    if g.obj == NULL:
        free(obj.data)
        free(g)
        return NULL
    memcpy(g.obj, obj.data, obj.len)
    free(obj.data)
    g.objlen = <int>obj.len
    g.width = width
    g.x0 = bx0
    g.y0 = by0
    g.x1 = bx1
    g.y1 = by1
    return g


cdef GlyphProc* glyph_proc(int face, unsigned int gid) noexcept nogil:
    """The cached procedure of a glyph of an open face, made on first use; NULL: no memory."""
    cdef Face* f = &FACES[face]
    cdef GlyphProc* g
    if gid >= f.nglyphs:
        gid = 0
    g = <GlyphProc*>sd_load_ptr(<void**>&f.glyphs[gid])
    if g != NULL:
        return g
    PyThread_acquire_lock(f.lock, WAIT_LOCK)
    g = f.glyphs[gid]
    if g == NULL:
        if f.colour:
            g = make_colour_proc(f, face, gid)     # emoji.pxi; NULL: no PNG, an outline
        if g == NULL:
            g = make_proc(f, gid)
        sd_store_ptr(<void**>&f.glyphs[gid], g)
    PyThread_release_lock(f.lock)
    return g
