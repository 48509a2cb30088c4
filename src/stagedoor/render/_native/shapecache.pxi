# Included by stagedoor/_render.pyx, before shape.pxi.  HarfBuzz's output for a run,
# cached per process: shape_run asks here first.
#
# Why: HarfBuzz dominates a worst-case page's time (a long venue shaped whole, then line
# by line, then cut; its share: docs/benchmarks.md, "Moved from comments"), and an order's long values -- venue, event, section, small print -- are the same on
# most orders.  What a run shapes to depends only on its face, script, direction,
# language and its characters with the context HarfBuzz reads around them (at most
# HB_BUFFER_CONTEXT_LENGTH = 5 code points each side of the run; shape_run passes the
# whole field), all in the key, so a hit is the glyphs HarfBuzz would give, byte for
# byte (the reference renderer shapes every time; tests/render/test_render.py compares).
#
# Bounded: runs of at most RUN_MAX characters, at most CACHE_BYTES in all (the table, its
# bounds and its lock are cachetable.pxi's, shared with breakcache.pxi).  Emptied when
# the fonts are configured again (face numbers change meaning).

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

# a run as shape_cached and shape_cache_put look it up: its text is p.u[a:b]
cdef struct SKey:
    const Para* p
    int face
    int lo
    int hi
    int rtl
    int a
    int b

cdef inline void sc_key(SKey* k, const Para* p, int face, int lo, int hi,
                        int rtl) noexcept nogil:
    k.p = p
    k.face = face
    k.lo = lo
    k.hi = hi
    k.rtl = rtl
    k.a = lo - HB_CONTEXT if lo > HB_CONTEXT else 0
    k.b = hi + HB_CONTEXT if hi + HB_CONTEXT < p.n else p.n


cdef CacheTable SHAPE_CACHE
cache_init(&SHAPE_CACHE, CACHE_SLOTS, CACHE_BYTES)


cdef void shape_cache_clear() noexcept nogil:
    """Empty the table (with no render running: configure)."""
    cache_clear(&SHAPE_CACHE)


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


cdef bint sc_same(const void* entry, const void* key, unsigned int h) noexcept nogil:
    cdef const CEntry* e = <const CEntry*>entry
    cdef const SKey* k = <const SKey*>key
    cdef const Para* p = k.p
    if (e.h != h or e.face != k.face or e.script != p.script[k.lo] or e.rtl != k.rtl
            or e.lang != p.lang or e.pre != k.lo - k.a or e.len != k.hi - k.lo
            or e.post != k.b - k.hi):
        return False
    return memcmp(e.text, p.u + k.a, (k.b - k.a) * sizeof(unsigned int)) == 0


cdef int shape_cached(Para* p, int face, int lo, int hi, int rtl, GlyphVec* out,
                      unsigned int* hp) noexcept nogil:
    """The run's glyphs appended from the cache (and p.adv updated as shape_run does):
    their width; -1 not cached (*hp: the key's hash, for shape_cache_put); -2 no memory."""
    cdef SKey key
    cdef int k, width = 0
    cdef CEntry* e
    cdef SGlyph* g
    if hi - lo > RUN_MAX:
        return -1
    sc_key(&key, p, face, lo, hi, rtl)
    hp[0] = sc_hash(p, face, lo, hi, rtl, key.a, key.b)
    e = <CEntry*>cache_find(&SHAPE_CACHE, hp[0], sc_same, &key)
    if e == NULL:
        cache_release(&SHAPE_CACHE)
        return -1
    if gv_reserve(out, e.ng) != 0:
        cache_release(&SHAPE_CACHE)
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
    cache_release(&SHAPE_CACHE)
    return width


cdef void shape_cache_put(const Para* p, int face, int lo, int hi, int rtl,
                          const SGlyph* g, int ng, unsigned int h) noexcept nogil:
    """Keep the glyphs shape_run just made for this run (a failed malloc keeps nothing)."""
    cdef SKey key
    cdef Py_ssize_t size
    cdef CEntry* e
    cdef int k, a, b
    if hi - lo > RUN_MAX:
        return
    sc_key(&key, p, face, lo, hi, rtl)
    a = key.a
    b = key.b
    size = sizeof(CEntry) + (b - a) * sizeof(unsigned int) + ng * sizeof(CGlyph)
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
    cache_put(&SHAPE_CACHE, h, e, size, sc_same, &key)


def shape_cache_stats():
    """{"entries", "bytes", "hits", "misses"} of the shaped-run cache (shapecache.pxi)."""
    return cache_stats(&SHAPE_CACHE)


def _shape_cache_after_fork_in_child():
    cache_after_fork(&SHAPE_CACHE)


os.register_at_fork(after_in_child=_shape_cache_after_fork_in_child)
