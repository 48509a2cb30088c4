# Included by stagedoor/_render.pyx.  The PDF file around the pages: the fixed objects,
# deflate streams through libdeflate with pooled per-call scratch memory, the
# object table and the xref; render_c writes a whole order inside `with nogil:`.

cdef enum:
    ZLIB_LEVEL = 1               # libdeflate's fastest: its level 1 is smaller than zlib's 6 here
    FIRST_PAGE_OBJ = 7

# The fixed objects are stagedoor.render.tables' bytes (one copy for both renderers).
cdef bytes _HEADER = _tables.HEADER
cdef const char* HEADER = _HEADER
# STATIC_OBJECTS: 1 the catalog, 3 the resources (4 and 5, the fast path's fonts, are
# written per order: fastfont.pxi)
cdef tuple _OBJECTS = tuple(_tables.STATIC_OBJECTS)
cdef const char* OBJ_CATALOG = <bytes>_OBJECTS[0]
cdef const char* OBJ_FONTS = <bytes>_OBJECTS[1]


# object 6, built and compressed once at import
cdef Buf STATIC_STREAM


# -- scratch pool -------------------------------------------------------------------------

cdef enum:
    POOL_MAX = 16                 # idle scratch areas kept (more threads allocate more)
    KEEP_BUF_MAX = 1 << 20        # buffers grown beyond this are freed, not pooled

cdef PyThread_type_lock POOL_LOCK = PyThread_allocate_lock()
cdef Scratch* POOL = NULL
cdef int POOL_SIZE = 0

# Each thread keeps the scratch area it used last (a pthread key; the pool is for the
# rest).  Why: from the shared pool two render threads can swap areas, and a thread
# handed the other's deflate window, hash and buffers pulls their lines across from the
# other core's cache.  (Not measured on its own: this VM has no cache-miss counters; it
# came in with the GIL trim of text.pxi, measured together: docs/benchmarks.md, "Moved
# from comments".)  A thread that
# ends gives its area back to the pool (the key's destructor); a forked child keeps the
# forking thread's, plain memory like the pool's.
cdef extern from *:
    """
    #include <pthread.h>
    static pthread_key_t sd_scratch_key;
    static int sd_scratch_key_ok = 0;
    static int sd_scratch_key_init(void (*dtor)(void*)) {
        sd_scratch_key_ok = pthread_key_create(&sd_scratch_key, dtor) == 0;
        return sd_scratch_key_ok;
    }
    static inline void* sd_scratch_take(void) {
        void* s;
        if (!sd_scratch_key_ok) return NULL;
        s = pthread_getspecific(sd_scratch_key);
        if (s != NULL) pthread_setspecific(sd_scratch_key, NULL);
        return s;
    }
    static inline int sd_scratch_keep(void* s) {
        if (!sd_scratch_key_ok || pthread_getspecific(sd_scratch_key) != NULL) return 0;
        return pthread_setspecific(sd_scratch_key, s) == 0;
    }
    """
    int sd_scratch_key_init(void (*dtor)(void*) noexcept nogil) noexcept nogil
    void* sd_scratch_take() noexcept nogil
    int sd_scratch_keep(void* s) noexcept nogil


cdef inline void buf_trim(Buf* b) noexcept nogil:
    if b.failed or b.cap > KEEP_BUF_MAX:
        free(b.data)
        memset(b, 0, sizeof(Buf))
    b.len = 0


cdef void scratch_free(Scratch* s) noexcept nogil:
    if s.zc != NULL:
        libdeflate_free_compressor(s.zc)
    if s.text != NULL:
        text_ctx_free(<TextCtx*>s.text)
        free(s.text)
    free(s.content.data)
    free(s.z.data)
    free(s.out.data)
    free(s.prep.data)
    free(s)


cdef Scratch* scratch_get() noexcept nogil:
    global POOL, POOL_SIZE
    cdef Scratch* s = <Scratch*>sd_scratch_take()
    if s != NULL:
        return s
    PyThread_acquire_lock(POOL_LOCK, WAIT_LOCK)
    if POOL != NULL:
        s = POOL
        POOL = s.next
        POOL_SIZE -= 1
    PyThread_release_lock(POOL_LOCK)
    if s == NULL:
        s = <Scratch*>calloc(1, sizeof(Scratch))
    return s


cdef void scratch_put(Scratch* s) noexcept nogil:
    buf_trim(&s.content)
    buf_trim(&s.z)
    buf_trim(&s.out)
    buf_trim(&s.prep)
    if sd_scratch_keep(s):
        return
    scratch_pool_put(s)


cdef void scratch_pool_put(Scratch* s) noexcept nogil:
    global POOL, POOL_SIZE
    PyThread_acquire_lock(POOL_LOCK, WAIT_LOCK)
    if POOL_SIZE < POOL_MAX:
        s.next = POOL
        POOL = s
        POOL_SIZE += 1
        s = NULL
    PyThread_release_lock(POOL_LOCK)
    if s != NULL:
        scratch_free(s)


cdef void _scratch_thread_exit(void* s) noexcept nogil:
    scratch_pool_put(<Scratch*>s)


sd_scratch_key_init(_scratch_thread_exit)


cdef int put_stream(Buf* out, int num, const char* content, Py_ssize_t n,
                    Scratch* s) noexcept nogil:
    """Object `num`: content deflated (zlib format, level ZLIB_LEVEL) into out."""
    cdef size_t bound, made
    if s.zc == NULL:
        s.zc = libdeflate_alloc_compressor(ZLIB_LEVEL)
        if s.zc == NULL:
            return -1
    bound = libdeflate_zlib_compress_bound(s.zc, <size_t>n)
    s.z.len = 0
    if buf_reserve(&s.z, <Py_ssize_t>bound) != 0:
        return -1
    made = libdeflate_zlib_compress(s.zc, content, <size_t>n, s.z.data, bound)
    if made == 0:
        return -2
    s.z.len = <Py_ssize_t>made
    buf_int(out, num)
    buf_puts(out, b" 0 obj\n<< /Length ")
    buf_int(out, <long>s.z.len)
    buf_puts(out, b" /Filter /FlateDecode >>\nstream\n")
    buf_put(out, s.z.data, s.z.len)
    buf_puts(out, b"\nendstream\nendobj\n")
    return 0


cdef int render_c(const TicketC* tickets, Py_ssize_t n, Scratch* s,
                  const int* of) noexcept nogil:
    """The whole PDF into s.out. 0, -1 out of memory, -2 zlib error, -3 QR too long."""
    cdef Buf* out = &s.out
    cdef Buf* content = &s.content
    cdef Py_ssize_t k, i, nobj = 0, nshaped = 0
    cdef int page, rc = 0, f, first_text, nfonts = 0, nfast, first_fast, ntext = 0
    cdef unsigned char used[512]
    cdef const TicketC* t
    cdef TextCtx* tc = NULL
    cdef FieldOut* fo = NULL
    cdef Py_ssize_t* offsets = NULL
    for k in range(n):
        for f in range(NFIELDS + 1):
            if tickets[k].text[f].u != NULL:
                nshaped += 1
    if nshaped:
        # phase 1: shape and lay out every shaped field, so that the fonts (their glyphs
        # and codes) are known before the first object that names them
        if s.text == NULL:
            s.text = calloc(1, sizeof(TextCtx))
            if s.text == NULL:
                return -1
        tc = <TextCtx*>s.text
        fo = <FieldOut*>malloc(n * (NFIELDS + 1) * sizeof(FieldOut))
        if fo == NULL or text_ctx_reset(tc, of) != 0:
            free(fo)
            return -1
        for k in range(n):
            for f in range(NFIELDS + 1):
                fo[k * (NFIELDS + 1) + f].shaped = 0
                if tickets[k].text[f].u != NULL:
                    if layout_field(tc, f, tickets[k].text[f].u, tickets[k].text[f].un,
                                    &fo[k * (NFIELDS + 1) + f]) != 0:
                        free(fo)
                        return -1
        nfonts = (tc.reg.n + 255) // 256
    first_text = FIRST_PAGE_OBJ + 2 * <int>n
    if nfonts:
        # the shaped path's objects: its procedures, a font and a CMap per 256 codes, and
        # two objects (an image and its /SMask) per colour emoji procedure (emoji.pxi)
        ntext = tc.reg.nproc + 2 * nfonts
        for i in range(tc.reg.nproc):
            if glyph_proc(tc.reg.pface[i], tc.reg.pgid[i]).img != NULL:
                ntext += 2
    # the fast path's fonts: their glyphs after the shaped path's objects, then their
    # shared ToUnicode
    nfast = fast_used(tickets, n, used)
    first_fast = first_text + ntext
    offsets = <Py_ssize_t*>malloc((6 + 2 * n + ntext + nfast + 1) * sizeof(Py_ssize_t))
    if offsets == NULL:
        free(fo)
        return -1
    out.len = 0
    buf_puts(out, HEADER)
    offsets[nobj] = out.len; nobj += 1
    buf_puts(out, OBJ_CATALOG)
    offsets[nobj] = out.len; nobj += 1
    buf_puts(out, b"2 0 obj\n<< /Type /Pages /Kids [")
    for k in range(n):
        if k:
            buf_byte(out, b' ')
        buf_int(out, FIRST_PAGE_OBJ + 2 * k)
        buf_puts(out, b" 0 R")
    buf_puts(out, b"] /Count ")
    buf_int(out, n)
    buf_puts(out, b" >>\nendobj\n")
    offsets[nobj] = out.len; nobj += 1
    if nfonts == 0:
        buf_puts(out, OBJ_FONTS)
    else:
        buf_puts(out, b"3 0 obj\n<< /Font << /F1 4 0 R /F2 5 0 R")
        for f in range(nfonts):
            buf_puts(out, b" /T")
            buf_int(out, f)
            buf_byte(out, b' ')
            buf_int(out, first_text + tc.reg.nproc + 2 * f)
            buf_puts(out, b" 0 R")
        buf_puts(out, b" >> >>\nendobj\n")
    f = 0
    for i in range(256):
        f += used[i]
    offsets[nobj] = out.len; nobj += 1
    fast_font_object(out, 0, used, first_fast, first_fast + nfast)
    offsets[nobj] = out.len; nobj += 1
    fast_font_object(out, 1, used + 256, first_fast + f, first_fast + nfast)
    offsets[nobj] = out.len; nobj += 1
    buf_put(out, STATIC_STREAM.data, STATIC_STREAM.len)
    for k in range(n):
        t = &tickets[k]
        page = FIRST_PAGE_OBJ + 2 * <int>k
        offsets[nobj] = out.len; nobj += 1
        buf_int(out, page)
        buf_puts(out, b" 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ")
        buf_int(out, PAGE_W)
        buf_byte(out, b' ')
        buf_int(out, PAGE_H)
        buf_puts(out, b"] /Resources 3 0 R /Contents [6 0 R ")
        buf_int(out, page + 1)
        buf_puts(out, b" 0 R] >>\nendobj\n")
        content.len = 0
        for i in range(NFIELDS):
            if t.text[i].u != NULL:
                put_shaped(content, tc, &fo[k * (NFIELDS + 1) + i], &t.text[i], <int>i)
                continue
            span_open(content, &t.text[i])
            buf_puts(content, b"BT ")
            buf_puts(content, FIELD_OPS[i])
            buf_puts(content, b" (")
            put_escaped(content, t.text[i].s, t.text[i].n)
            buf_puts(content, b") Tj ET\n")
            span_close(content, &t.text[i])
        if t.text[SMALL_PRINT].u != NULL:
            put_shaped(content, tc, &fo[k * (NFIELDS + 1) + SMALL_PRINT],
                       &t.text[SMALL_PRINT], SMALL_PRINT)
        else:
            put_small_print(content, &t.text[SMALL_PRINT])
        if qr_encode(&s.q, t.qr, t.nqr) != 0:
            rc = -3
            break
        put_qr(content, &s.q, s.used)
        if content.failed:
            rc = -1
            break
        offsets[nobj] = out.len; nobj += 1
        rc = put_stream(out, page + 1, content.data, content.len, s)
        if rc != 0:
            break
    if rc == 0 and nfonts:
        if put_text_objects(out, tc, first_text, offsets, &nobj) < 0:
            rc = -1
    if rc == 0 and fast_objects(out, used, first_fast, offsets, &nobj) < 0:
        rc = -1
    if rc == 0:
        k = out.len
        buf_puts(out, b"xref\n0 ")
        buf_int(out, nobj + 1)
        buf_puts(out, b"\n0000000000 65535 f \n")
        for i in range(nobj):
            buf_int10(out, offsets[i])
            buf_puts(out, b" 00000 n \n")
        buf_puts(out, b"trailer\n<< /Size ")
        buf_int(out, nobj + 1)
        buf_puts(out, b" /Root 1 0 R >>\nstartxref\n")
        buf_int(out, k)
        buf_puts(out, b"\n%%EOF\n")
        if out.failed:
            rc = -1
    free(fo)
    free(offsets)
    return rc


cdef void _init_static() except *:
    cdef Scratch* s = scratch_get()
    cdef int rc
    if s == NULL:
        raise MemoryError()
    memset(&STATIC_STREAM, 0, sizeof(Buf))
    rc = put_stream(&STATIC_STREAM, 6, STATIC_CONTENT, <Py_ssize_t>strlen(STATIC_CONTENT), s)
    scratch_put(s)
    if rc != 0 or STATIC_STREAM.failed:
        raise MemoryError("cannot build the static page content")


_init_static()
