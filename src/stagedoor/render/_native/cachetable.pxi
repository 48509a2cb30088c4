# Included by stagedoor/_render.pyx, before breakcache.pxi and shapecache.pxi.  The table
# both per-process caches keep their entries in: the line-break classes of a text
# (breakcache.pxi) and HarfBuzz's glyphs of a run (shapecache.pxi).
#
# Open addressing over malloc'ed entries, keyed by a hash the cache computes and matched
# by its `same` function (the table itself knows nothing of keys).  Bounded: at most half
# of the slots used and at most max_bytes held, and when an insert would pass either the
# table is emptied and fills again (no LRU bookkeeping on the hot path).  One lock, held
# for a lookup (while the caller copies out of the entry) or an insert, never while the
# cache's library runs; a new one in a forked child (cache_after_fork).

cdef int cache_init(CacheTable* t, int slots, Py_ssize_t max_bytes) except -1:
    """An empty table of `slots` slots (a power of two) holding at most max_bytes."""
    t.tab = <void**>calloc(slots, sizeof(void*))
    t.lock = PyThread_allocate_lock()
    if t.tab == NULL or t.lock == NULL:
        raise MemoryError()
    t.slots = slots
    t.n = 0
    t.bytes = 0
    t.max_bytes = max_bytes
    t.hits = 0
    t.misses = 0
    return 0


cdef void cache_clear(CacheTable* t) noexcept nogil:
    """Empty the table (under t.lock, or with no render running)."""
    cdef int i
    for i in range(t.slots):
        if t.tab[i] != NULL:
            free(t.tab[i])
            t.tab[i] = NULL
    t.n = 0
    t.bytes = 0


cdef inline void* cache_find(CacheTable* t, unsigned int h, cache_same_fn same,
                             const void* key) noexcept nogil:
    """The entry `same` finds equal to key (a hit), else NULL (a miss); returns with
    t.lock held either way: the caller copies what it needs, then cache_release."""
    cdef int slot = <int>(h & <unsigned int>(t.slots - 1))
    PyThread_acquire_lock(t.lock, WAIT_LOCK)
    while t.tab[slot] != NULL:
        if same(t.tab[slot], key, h):
            t.hits += 1
            return t.tab[slot]
        slot = (slot + 1) & (t.slots - 1)
    t.misses += 1
    return NULL


cdef inline void cache_release(CacheTable* t) noexcept nogil:
    PyThread_release_lock(t.lock)


cdef inline void cache_put(CacheTable* t, unsigned int h, void* e, Py_ssize_t size,
                           cache_same_fn same, const void* key) noexcept nogil:
    """Keep entry e (malloc'ed, size bytes, equal to key) under hash h: the table owns it
    from now on, and frees it at once when another thread put its equal meanwhile."""
    cdef int slot
    PyThread_acquire_lock(t.lock, WAIT_LOCK)
    if t.n * 2 >= t.slots or t.bytes + size > t.max_bytes:
        cache_clear(t)
    slot = <int>(h & <unsigned int>(t.slots - 1))
    while t.tab[slot] != NULL:
        if same(t.tab[slot], key, h):
            PyThread_release_lock(t.lock)
            free(e)
            return
        slot = (slot + 1) & (t.slots - 1)
    t.tab[slot] = e
    t.n += 1
    t.bytes += size
    PyThread_release_lock(t.lock)


cdef dict cache_stats(const CacheTable* t):
    return {"entries": t.n, "bytes": t.bytes, "hits": t.hits, "misses": t.misses}


cdef void cache_after_fork(CacheTable* t) noexcept:
    """In a forked child: a new lock (the parent's may have been held by another thread
    at the fork)."""
    t.lock = PyThread_allocate_lock()
