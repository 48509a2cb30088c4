# Included by stagedoor/_render.pyx, after type3.pxi (its hash).  The line-break classes
# of a field's text, cached per process: line_breaks (breaks.pxi) asks here first.
#
# Why: libunibreak's lookup dominates a long field's breaks (1.x looks each character's
# class up by a binary search over its whole table; its share of a worst-case page:
# docs/benchmarks.md, "Moved from comments"), and an order's long values -- venue,
# event, section, small print -- are mostly the same from order to order.  The classes
# depend on the text alone (no language is passed), so a hit is what the library gives.
#
# Bounded: texts of at most BRK_TEXT_MAX characters, at most BRK_CACHE_BYTES in all (the
# table, its bounds and its lock are cachetable.pxi's, shared with shapecache.pxi).
#
# Two kinds of entry share the table: BRK_PLAIN, libunibreak's classes (line_breaks), and
# BRK_WRAP, those with the dictionary breaks of Thai, Lao, Myanmar and Khmer added
# (wrap_breaks, dictbreaks.pxi), which a wrapped field asks for: ICU's line break iterator
# and libthai are a wrapped Lao or Myanmar field's largest cost (docs/benchmarks.md), and
# like the classes they depend on the text alone.

cdef enum:
    BRK_TEXT_MAX = 1024
    BRK_SLOTS = 8192            # a power of two; at most half of them used
    BRK_CACHE_BYTES = 2 << 20
    BRK_PLAIN = 0
    BRK_WRAP = 1

cdef struct BrkEntry:
    unsigned int h
    int n
    int kind                    # BRK_PLAIN or BRK_WRAP
    unsigned int* text          # n code points, then n break classes
    char* brk

cdef struct BrkKey:
    const unsigned int* u
    int n
    int kind

cdef CacheTable BRK_CACHE
cache_init(&BRK_CACHE, BRK_SLOTS, BRK_CACHE_BYTES)


cdef inline unsigned int brk_hash(const unsigned int* u, int n, int kind) noexcept nogil:
    cdef unsigned int h = mix(mix(2166136261u, <unsigned int>n), <unsigned int>kind)
    cdef int i
    for i in range(n):
        h = mix(h, u[i])
    return fmix(h)


cdef bint brk_same(const void* entry, const void* key, unsigned int h) noexcept nogil:
    cdef const BrkEntry* e = <const BrkEntry*>entry
    cdef const BrkKey* k = <const BrkKey*>key
    return e.h == h and e.n == k.n and e.kind == k.kind and memcmp(e.text, k.u, k.n * sizeof(unsigned int)) == 0


cdef int brk_cached(const unsigned int* u, int n, char* brk, unsigned int* hp,
                    int kind) noexcept nogil:
    """1 with brk filled from the cache's entry of that kind; 0 not cached (*hp: the hash
    for brk_cache_put)."""
    cdef BrkKey k
    cdef BrkEntry* e
    if n > BRK_TEXT_MAX or n == 0:
        return 0
    k.u = u
    k.n = n
    k.kind = kind
    hp[0] = brk_hash(u, n, kind)
    e = <BrkEntry*>cache_find(&BRK_CACHE, hp[0], brk_same, &k)
    if e != NULL:
        memcpy(brk, e.brk, n)
    cache_release(&BRK_CACHE)
    return e != NULL


cdef void brk_cache_put(const unsigned int* u, int n, const char* brk,
                        unsigned int h, int kind) noexcept nogil:
    """Keep the classes line_breaks (or wrap_breaks) just computed (a failed malloc keeps
    nothing)."""
    cdef Py_ssize_t size = sizeof(BrkEntry) + n * (sizeof(unsigned int) + 1)
    cdef BrkEntry* e
    cdef BrkKey k
    if n > BRK_TEXT_MAX or n == 0:
        return
    e = <BrkEntry*>malloc(size)
    if e == NULL:
        return
    e.h = h
    e.n = n
    e.kind = kind
    e.text = <unsigned int*>(<char*>e + sizeof(BrkEntry))
    e.brk = <char*>(e.text + n)
    memcpy(e.text, u, n * sizeof(unsigned int))
    memcpy(e.brk, brk, n)
    k.u = u
    k.n = n
    k.kind = kind
    cache_put(&BRK_CACHE, h, e, size, brk_same, &k)


def break_cache_stats():
    """{"entries", "bytes", "hits", "misses"} of the line-break cache (breakcache.pxi)."""
    return cache_stats(&BRK_CACHE)


def _break_cache_after_fork_in_child():
    cache_after_fork(&BRK_CACHE)


os.register_at_fork(after_in_child=_break_cache_after_fork_in_child)
