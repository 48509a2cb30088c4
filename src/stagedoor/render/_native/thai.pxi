# Included by stagedoor/_render.pyx.  Thai word breaks for the wrap (layout.pxi).
#
# Thai is written without spaces between words, and UAX #14 leaves the breaks inside it
# to a dictionary (class SA): libunibreak gives none, so a wrapped Thai field was cut at
# a character cluster, mid-word.  libthai's dictionary segmenter (th_brk_find_breaks,
# maximal matching over the libthai-data trie) finds the word boundaries; its C API runs
# without the GIL, and one breaker is shared by every thread (libthai: create and delete
# it under a lock, its methods may run in parallel during its lifetime).
#
# Only a field that wraps asks (layout_field's wrap branch), only runs of Thai letters
# are given to it (TIS-620, which th_uni2tis maps), and it only adds break
# opportunities where libunibreak had none.  The breaker (the trie, ~1 MB) is loaded
# on first use in the process that renders and dropped in a fork child, like the faces.
# stagedoor.render.shaped.thai_breaks asks the same library through ctypes.

cdef ThBrk* THBRK = NULL
cdef int THBRK_STATE = 0          # 0 not loaded yet, 1 loaded, -1 cannot be loaded
cdef PyThread_type_lock THAI_LOCK = PyThread_allocate_lock()


cdef inline int is_thai(unsigned int cp) noexcept nogil:
    """A Thai character TIS-620 has (the Thai block but its four unassigned points)."""
    return 0x0E01 <= cp <= 0x0E5B and not (0x0E3B <= cp <= 0x0E3E)


cdef ThBrk* thai_breaker() noexcept nogil:
    global THBRK
    cdef ThBrk* b
    if sd_load_int(&THBRK_STATE) == 0:
        PyThread_acquire_lock(THAI_LOCK, WAIT_LOCK)
        if THBRK_STATE == 0:
            b = th_brk_new(NULL)
            sd_store_ptr(<void**>&THBRK, b)
            sd_store_int(&THBRK_STATE, 1 if b != NULL else -1)
        PyThread_release_lock(THAI_LOCK)
    return THBRK if sd_load_int(&THBRK_STATE) > 0 else NULL


cdef int thai_breaks(const unsigned int* u, int n, char* brk) noexcept nogil:
    """Allow a line break after every word libthai finds inside a run of Thai letters of
    u[:n] (brk: libunibreak's classes, changed in place).  -1: out of memory; without
    its dictionary (libthai-data) nothing is added."""
    cdef int i, s, k, m, found = 0
    cdef ThBrk* tb
    cdef thchar_t* tis
    cdef int* pos
    for i in range(n):
        if is_thai(u[i]):
            found = 1
            break
    if not found:
        return 0
    tb = thai_breaker()
    if tb == NULL:
        return 0
    tis = <thchar_t*>malloc(n + 1)
    pos = <int*>malloc((n + 1) * sizeof(int))
    if tis == NULL or pos == NULL:
        free(tis)
        free(pos)
        return -1
    i = 0
    while i < n:
        if not is_thai(u[i]):
            i += 1
            continue
        s = i
        while i < n and is_thai(u[i]):
            tis[i - s] = th_uni2tis(<int>u[i])
            i += 1
        tis[i - s] = 0
        m = th_brk_find_breaks(tb, tis, pos, <size_t>(i - s))
        for k in range(m):
            if 0 < pos[k] < i - s and brk[s + pos[k] - 1] == LINEBREAK_NOBREAK:
                brk[s + pos[k] - 1] = LINEBREAK_ALLOWBREAK
    free(tis)
    free(pos)
    return 0


def _thai_after_fork_in_child():
    global THAI_LOCK, THBRK, THBRK_STATE
    THAI_LOCK = PyThread_allocate_lock()
    if THBRK != NULL:
        th_brk_delete(THBRK)          # the child's copy of the parent's trie
    THBRK = NULL
    THBRK_STATE = 0


os.register_at_fork(after_in_child=_thai_after_fork_in_child)


def thai_stats():
    """{"loaded": 0/1}: whether this process has loaded libthai's dictionary."""
    return {"loaded": int(sd_load_int(&THBRK_STATE) > 0)}
