# Included by stagedoor/_render.pyx.  Word breaks from ICU's dictionaries for Lao,
# Myanmar and Khmer, for the wrap (layout.pxi).
#
# These scripts are written without spaces between words (Myanmar puts them between
# phrases), and UAX #14 leaves the breaks inside them to a dictionary (class SA):
# libunibreak gives none, so a wrapped field was cut at a grapheme cluster, mid-syllable
# (`…ရန်ကု` / `န်…`).  ICU's line break iterator has a dictionary for each (Lao's
# and Khmer's word lists, Burmese's; part of libicudata, compiled in: no file to
# miss) and breaks only between words or syllables it recognises, never inside a
# cluster.  Thai keeps libthai's segmenter (thai.pxi), as before.
#
# Only a field that wraps asks, only runs of these scripts are given to ICU, and a break
# is only added where libunibreak had none.  Iterators are kept in a small pool and
# given each run by ubrk_setText: opening one (ubrk_open) looks its rules up through
# ICU's resource bundles again each time, which dominated a wrapped Lao or Myanmar
# field's ICU time (docs/benchmarks.md, "Moved from comments"), while
# setText only resets the iterator (the same breaks as a fresh one).  An iterator is
# used by one thread at a time; the pool's lock is held only to take or give one back,
# and a forked child gets a new lock and keeps the pool (plain memory).  A wrapped
# field's breaks, with libthai's (thai.pxi), are cached per text (wrap_breaks,
# breakcache.pxi).  The headers rename every
# call to its versioned symbol (ubrk_open_72), set by pkg-config's icu-uc flags.
# stagedoor.render.shaped.libs dict_breaks asks the same library through ctypes.

cdef enum:
    UBRK_POOL_MAX = 8             # idle iterators kept (more threads open more)

cdef UBreakIterator* UBRK_POOL[UBRK_POOL_MAX]
cdef int UBRK_POOL_N = 0
cdef PyThread_type_lock UBRK_LOCK = PyThread_allocate_lock()


cdef UBreakIterator* ubrk_take(const UChar* w, int n) noexcept nogil:
    """A line break iterator over w[:n], from the pool or new; NULL if ICU fails."""
    global UBRK_POOL_N
    cdef UBreakIterator* bi = NULL
    cdef UErrorCode status = 0
    PyThread_acquire_lock(UBRK_LOCK, WAIT_LOCK)
    if UBRK_POOL_N > 0:
        UBRK_POOL_N -= 1
        bi = UBRK_POOL[UBRK_POOL_N]
    PyThread_release_lock(UBRK_LOCK)
    if bi != NULL:
        ubrk_setText(bi, w, n, &status)
        if not U_FAILURE(status):
            return bi
        ubrk_close(bi)
        status = 0
    bi = ubrk_open(UBRK_LINE, "", w, n, &status)
    if bi != NULL and U_FAILURE(status):
        ubrk_close(bi)
        bi = NULL
    return bi


cdef void ubrk_give(UBreakIterator* bi) noexcept nogil:
    """Back to the pool (closed when the pool is full)."""
    global UBRK_POOL_N
    PyThread_acquire_lock(UBRK_LOCK, WAIT_LOCK)
    if UBRK_POOL_N < UBRK_POOL_MAX:
        UBRK_POOL[UBRK_POOL_N] = bi
        UBRK_POOL_N += 1
        bi = NULL
    PyThread_release_lock(UBRK_LOCK)
    if bi != NULL:
        ubrk_close(bi)


def _ubrk_after_fork_in_child():
    global UBRK_LOCK
    UBRK_LOCK = PyThread_allocate_lock()


os.register_at_fork(after_in_child=_ubrk_after_fork_in_child)


cdef inline int is_dict_script(unsigned int cp) noexcept nogil:
    """Lao, Myanmar (and its extensions) or Khmer (and its symbols): the scripts without
    spaces between words whose breaks come from ICU's dictionaries."""
    return (0x0E80 <= cp <= 0x0EFF or 0x1000 <= cp <= 0x109F or 0xA9E0 <= cp <= 0xA9FF
            or 0xAA60 <= cp <= 0xAA7F or 0x1780 <= cp <= 0x17FF or 0x19E0 <= cp <= 0x19FF)


cdef int dict_breaks(const unsigned int* u, int n, char* brk) noexcept nogil:
    """Allow a line break at every boundary ICU's line break iterator finds inside a run
    of Lao, Myanmar or Khmer of u[:n] (brk: libunibreak's classes, changed in place).
    -1: out of memory; if ICU fails otherwise, nothing is added."""
    cdef int i, s, b, found = 0
    cdef UChar* w
    cdef UBreakIterator* bi
    for i in range(n):
        if is_dict_script(u[i]):
            found = 1
            break
    if not found:
        return 0
    w = <UChar*>malloc((n + 1) * sizeof(UChar))
    if w == NULL:
        return -1
    i = 0
    while i < n:
        if not is_dict_script(u[i]):
            i += 1
            continue
        s = i
        while i < n and is_dict_script(u[i]):
            w[i - s] = <UChar>u[i]          # all in the BMP: one UTF-16 unit each
            i += 1
        bi = ubrk_take(w, i - s)
        if bi == NULL:
            continue
        b = ubrk_next(bi)
        while 0 < b < i - s:
            if brk[s + b - 1] == LINEBREAK_NOBREAK:
                brk[s + b - 1] = LINEBREAK_ALLOWBREAK
            b = ubrk_next(bi)
        ubrk_give(bi)
    free(w)
    return 0


cdef int wrap_breaks(const unsigned int* u, int n, char* brk) noexcept nogil:
    """The break classes of a field that wraps: brk, libunibreak's classes of u[:n]
    (line_breaks), with libthai's and ICU's dictionary breaks added in place; from the
    per-process cache when the same text wrapped before.  -1: out of memory."""
    cdef unsigned int h = 0
    if brk_cached(u, n, brk, &h, BRK_WRAP):
        return 0
    if thai_breaks(u, n, brk) != 0 or dict_breaks(u, n, brk) != 0:
        return -1
    if h != 0:
        brk_cache_put(u, n, brk, h, BRK_WRAP)
    return 0


def dictionary_breaks(str text):
    """The indices inside text before which a line may break by ICU's dictionaries
    (dict_breaks on text alone, libunibreak's opportunities left out): the doctor asks
    this of a sample in each script to see the dictionaries are there."""
    cdef int n = len(text), i
    cdef unsigned int* u = <unsigned int*>malloc((n + 1) * sizeof(unsigned int))
    cdef char* brk = <char*>malloc(n + 1)
    if u == NULL or brk == NULL:
        free(u)
        free(brk)
        raise MemoryError()
    for i in range(n):
        u[i] = ord(text[i])
        brk[i] = LINEBREAK_NOBREAK
    try:
        if dict_breaks(u, n, brk) != 0:
            raise MemoryError()
        return [i + 1 for i in range(n - 1) if brk[i] == LINEBREAK_ALLOWBREAK]
    finally:
        free(u)
        free(brk)
