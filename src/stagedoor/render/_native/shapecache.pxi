# Included by stagedoor/_render.pyx, before shape.pxi.  HarfBuzz's output for a run,
# cached per process: shape_run asks here first.
#
# Why: HarfBuzz was 58 % of a worst-case page's time (perf over bench.ticket_corpus's
# indic-north page: a 240-character venue shaped whole, then line by line, then cut),
# and an order's long values -- venue, event, section, small print -- are the same on
# most orders.  What a run shapes to depends only on its face, script, direction,
# language and its characters with the context HarfBuzz reads around them (at most
# HB_BUFFER_CONTEXT_LENGTH = 5 code points each side of the run; shape_run passes the
# whole field), all in the key, so a hit is the glyphs HarfBuzz would give, byte for
# byte (the reference renderer shapes every time; tests/test_render.py compares).
#
# Bounded: runs of at most RUN_MAX characters are cached, and when the entries hold
# CACHE_BYTES the table is emptied and fills again (no LRU bookkeeping on the hot path).
# One lock, held for a lookup or an insert, never while shaping.  Emptied when the fonts
# are configured again (face numbers change meaning); the lock is new in a forked child.

cdef enum:
    HB_CONTEXT = 5              # HB_BUFFER_CONTEXT_LENGTH (hb-buffer.hh)
    RUN_MAX = 512               # longer runs are shaped every time
    CACHE_SLOTS = 16384         # a power of two; at most half of them used
    CACHE_BYTES = 4 << 20

cdef struct CGlyph:
    unsigned int gid
    int adv
    int xoff
    int yoff
    int cl                      # its cluster, from the run's first character
    int cn

cdef struct CEntry:
    unsigned int h
    int face
    hb_script_t script
    hb_language_t lang
    int rtl
    int pre                     # context characters before the run in `text`
    int len                     # the run's characters
    int post                    # context characters after it
    int ng                      # glyphs
    unsigned int* text          # pre + len + post code points, then the glyphs
    CGlyph* g

cdef CEntry** SC_TAB = <CEntry**>calloc(CACHE_SLOTS, sizeof(CEntry*))
cdef int SC_N = 0
cdef Py_ssize_t SC_BYTES = 0
cdef long SC_HITS = 0
cdef long SC_MISSES = 0
cdef PyThread_type_lock SC_LOCK = PyThread_allocate_lock()


cdef void shape_cache_clear() noexcept nogil:
    """Empty the table (under SC_LOCK, or with no render running)."""
    global SC_N, SC_BYTES
    cdef int i
    for i in range(CACHE_SLOTS):
        if SC_TAB[i] != NULL:
            free(SC_TAB[i])
            SC_TAB[i] = NULL
    SC_N = 0
    SC_BYTES = 0


cdef inline unsigned int sc_hash(const Para* p, int face, int lo, int hi, int rtl,
                                 int a, int b) noexcept nogil:
    cdef unsigned int h = mix(mix(mix(2166136261u, <unsigned int>face),
                                  <unsigned int>p.script[lo]), <unsigned int>rtl)
    cdef int i
    h = mix(h, <unsigned int>(<size_t>p.lang))
    h = mix(mix(h, <unsigned int>(lo - a)), <unsigned int>(b - hi))
    for i in range(a, b):
        h = mix(h, p.u[i])
    return fmix(h)


cdef inline bint sc_same(const CEntry* e, unsigned int h, const Para* p, int face, int lo,
                         int hi, int rtl, int a, int b) noexcept nogil:
    if (e.h != h or e.face != face or e.script != p.script[lo] or e.rtl != rtl
            or e.lang != p.lang or e.pre != lo - a or e.len != hi - lo
            or e.post != b - hi):
        return False
    return memcmp(e.text, p.u + a, (b - a) * sizeof(unsigned int)) == 0


cdef int shape_cached(Para* p, int face, int lo, int hi, int rtl, GlyphVec* out,
                      unsigned int* hp) noexcept nogil:
    """The run's glyphs appended from the cache (and p.adv updated as shape_run does):
    their width; -1 not cached (*hp: the key's hash, for shape_cache_put); -2 no memory."""
    global SC_HITS, SC_MISSES
    cdef int a = lo - HB_CONTEXT if lo > HB_CONTEXT else 0
    cdef int b = hi + HB_CONTEXT if hi + HB_CONTEXT < p.n else p.n
    cdef unsigned int h
    cdef int k, slot, width = 0
    cdef CEntry* e
    cdef SGlyph* g
    if hi - lo > RUN_MAX:
        return -1
    h = sc_hash(p, face, lo, hi, rtl, a, b)
    hp[0] = h
    PyThread_acquire_lock(SC_LOCK, WAIT_LOCK)
    slot = <int>(h & (CACHE_SLOTS - 1))
    while SC_TAB[slot] != NULL:
        e = SC_TAB[slot]
        if sc_same(e, h, p, face, lo, hi, rtl, a, b):
            if gv_reserve(out, e.ng) != 0:
                PyThread_release_lock(SC_LOCK)
                return -2
            for k in range(e.ng):
                g = &out.g[out.n]
                out.n += 1
                g.face = face
                g.gid = e.g[k].gid
                g.adv = e.g[k].adv
                g.xoff = e.g[k].xoff
                g.yoff = e.g[k].yoff
                g.ci = lo + e.g[k].cl
                g.cn = e.g[k].cn
                g.rtl = rtl
                p.adv[g.ci] += g.adv
                width += g.adv
            SC_HITS += 1
            PyThread_release_lock(SC_LOCK)
            return width
        slot = (slot + 1) & (CACHE_SLOTS - 1)
    SC_MISSES += 1
    PyThread_release_lock(SC_LOCK)
    return -1


cdef void shape_cache_put(const Para* p, int face, int lo, int hi, int rtl,
                          const SGlyph* g, int ng, unsigned int h) noexcept nogil:
    """Keep the glyphs shape_run just made for this run (a failed malloc keeps nothing)."""
    global SC_N, SC_BYTES
    cdef int a = lo - HB_CONTEXT if lo > HB_CONTEXT else 0
    cdef int b = hi + HB_CONTEXT if hi + HB_CONTEXT < p.n else p.n
    cdef Py_ssize_t size = sizeof(CEntry) + (b - a) * sizeof(unsigned int) + ng * sizeof(CGlyph)
    cdef CEntry* e
    cdef int k, slot
    if hi - lo > RUN_MAX:
        return
    e = <CEntry*>malloc(size)
    if e == NULL:
        return
    e.h = h
    e.face = face
    e.script = p.script[lo]
    e.lang = p.lang
    e.rtl = rtl
    e.pre = lo - a
    e.len = hi - lo
    e.post = b - hi
    e.ng = ng
    e.text = <unsigned int*>(<char*>e + sizeof(CEntry))
    # the glyphs after the text, aligned for their ints (the text is whole ints too)
    e.g = <CGlyph*>(<char*>e.text + (b - a) * sizeof(unsigned int))
    memcpy(e.text, p.u + a, (b - a) * sizeof(unsigned int))
    for k in range(ng):
        e.g[k].gid = g[k].gid
        e.g[k].adv = g[k].adv
        e.g[k].xoff = g[k].xoff
        e.g[k].yoff = g[k].yoff
        e.g[k].cl = g[k].ci - lo
        e.g[k].cn = g[k].cn
    PyThread_acquire_lock(SC_LOCK, WAIT_LOCK)
    if SC_N * 2 >= CACHE_SLOTS or SC_BYTES + size > CACHE_BYTES:
        shape_cache_clear()
    slot = <int>(h & (CACHE_SLOTS - 1))
    while SC_TAB[slot] != NULL:
        if sc_same(SC_TAB[slot], h, p, face, lo, hi, rtl, a, b):
            # another thread shaped it meanwhile: keep theirs
            PyThread_release_lock(SC_LOCK)
            free(e)
            return
        slot = (slot + 1) & (CACHE_SLOTS - 1)
    SC_TAB[slot] = e
    SC_N += 1
    SC_BYTES += size
    PyThread_release_lock(SC_LOCK)


def shape_cache_stats():
    """{"entries", "bytes", "hits", "misses"} of the shaped-run cache (shapecache.pxi)."""
    return {"entries": SC_N, "bytes": SC_BYTES, "hits": SC_HITS, "misses": SC_MISSES}


def _shape_cache_after_fork_in_child():
    global SC_LOCK
    SC_LOCK = PyThread_allocate_lock()


os.register_at_fork(after_in_child=_shape_cache_after_fork_in_child)
