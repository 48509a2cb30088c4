# Included by stagedoor/_render.pyx, after type3.pxi (its hash).  The line-break classes
# of a field's text, cached per process: line_breaks (breaks.pxi) asks here first.
#
# Why: libunibreak was a quarter of a worst-case page's CPU time (perf over
# bench.ticket_corpus's indic-north page, 24 %: libunibreak 1.x looks each character's
# class up by a binary search over its whole table), and an order's long values -- venue,
# event, section, small print -- are mostly the same from order to order.  The classes
# depend on the text alone (no language is passed), so a hit is what the library gives.
#
# Bounded: texts of at most BRK_TEXT_MAX characters, and when the entries hold
# BRK_CACHE_BYTES the table is emptied and fills again (no LRU bookkeeping on the hot
# path).
#
# Two kinds of entry share the table: BRK_PLAIN, libunibreak's classes (line_breaks), and
# BRK_WRAP, those with the dictionary breaks of Thai, Lao, Myanmar and Khmer added
# (wrap_breaks, dictbreaks.pxi), which a wrapped field asks for.  Why the second: ICU's
# line break iterator and libthai are a wrapped Lao or Myanmar field's largest cost
# (perf over bench.ticket_corpus's southeast-asian page: libicuuc 18 % of its CPU), and
# like the classes they depend on the text alone.  One lock, held for a lookup or an insert, never while libunibreak runs; a new
# one in a forked child.

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

cdef BrkEntry** BC_TAB = <BrkEntry**>calloc(BRK_SLOTS, sizeof(BrkEntry*))
cdef int BC_N = 0
cdef Py_ssize_t BC_BYTES = 0
cdef long BC_HITS = 0
cdef long BC_MISSES = 0
cdef PyThread_type_lock BC_LOCK = PyThread_allocate_lock()


cdef void brk_cache_clear() noexcept nogil:
    """Empty the table (under BC_LOCK)."""
    global BC_N, BC_BYTES
    cdef int i
    for i in range(BRK_SLOTS):
        if BC_TAB[i] != NULL:
            free(BC_TAB[i])
            BC_TAB[i] = NULL
    BC_N = 0
    BC_BYTES = 0


cdef inline unsigned int brk_hash(const unsigned int* u, int n, int kind) noexcept nogil:
    cdef unsigned int h = mix(mix(2166136261u, <unsigned int>n), <unsigned int>kind)
    cdef int i
    for i in range(n):
        h = mix(h, u[i])
    return fmix(h)


cdef int brk_cached(const unsigned int* u, int n, char* brk, unsigned int* hp,
                    int kind) noexcept nogil:
    """1 with brk filled from the cache's entry of that kind; 0 not cached (*hp: the hash
    for brk_cache_put)."""
    global BC_HITS, BC_MISSES
    cdef unsigned int h
    cdef int slot
    cdef BrkEntry* e
    if n > BRK_TEXT_MAX or n == 0:
        return 0
    h = brk_hash(u, n, kind)
    hp[0] = h
    PyThread_acquire_lock(BC_LOCK, WAIT_LOCK)
    slot = <int>(h & (BRK_SLOTS - 1))
    while BC_TAB[slot] != NULL:
        e = BC_TAB[slot]
        if (e.h == h and e.n == n and e.kind == kind
                and memcmp(e.text, u, n * sizeof(unsigned int)) == 0):
            memcpy(brk, e.brk, n)
            BC_HITS += 1
            PyThread_release_lock(BC_LOCK)
            return 1
        slot = (slot + 1) & (BRK_SLOTS - 1)
    BC_MISSES += 1
    PyThread_release_lock(BC_LOCK)
    return 0


cdef void brk_cache_put(const unsigned int* u, int n, const char* brk,
                        unsigned int h, int kind) noexcept nogil:
    """Keep the classes line_breaks (or wrap_breaks) just computed (a failed malloc keeps
    nothing)."""
    global BC_N, BC_BYTES
    cdef Py_ssize_t size = sizeof(BrkEntry) + n * (sizeof(unsigned int) + 1)
    cdef BrkEntry* e
    cdef int slot
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
    PyThread_acquire_lock(BC_LOCK, WAIT_LOCK)
    if BC_N * 2 >= BRK_SLOTS or BC_BYTES + size > BRK_CACHE_BYTES:
        brk_cache_clear()
    slot = <int>(h & (BRK_SLOTS - 1))
    while BC_TAB[slot] != NULL:
        if (BC_TAB[slot].h == h and BC_TAB[slot].n == n and BC_TAB[slot].kind == kind
                and memcmp(BC_TAB[slot].text, u, n * sizeof(unsigned int)) == 0):
            PyThread_release_lock(BC_LOCK)      # another thread put it meanwhile
            free(e)
            return
        slot = (slot + 1) & (BRK_SLOTS - 1)
    BC_TAB[slot] = e
    BC_N += 1
    BC_BYTES += size
    PyThread_release_lock(BC_LOCK)


def break_cache_stats():
    """{"entries", "bytes", "hits", "misses"} of the line-break cache (breakcache.pxi)."""
    return {"entries": BC_N, "bytes": BC_BYTES, "hits": BC_HITS, "misses": BC_MISSES}


def _break_cache_after_fork_in_child():
    global BC_LOCK
    BC_LOCK = PyThread_allocate_lock()


os.register_at_fork(after_in_child=_break_cache_after_fork_in_child)
