# Atomic loads, stores and adds (GCC's __atomic builtins) for the per-process state that
# render threads read without a lock: a face's state and glyphs (fonts.pxi, glyphs.pxi),
# the Thai breaker's (thai.pxi), the missing-glyph count (layout.pxi).  Inline C: it is
# compiled into the module that cimports it.

cdef extern from *:
    """
    static inline int sd_load_int(int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void sd_store_int(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline void* sd_load_ptr(void** p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void sd_store_ptr(void** p, void* v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline long sd_add_long(long* p, long v) { return __atomic_add_fetch(p, v, __ATOMIC_RELAXED); }
    """
    int sd_load_int(int* p) noexcept nogil
    void sd_store_int(int* p, int v) noexcept nogil
    void* sd_load_ptr(void** p) noexcept nogil
    void sd_store_ptr(void** p, void* v) noexcept nogil
    long sd_add_long(long* p, long v) noexcept nogil
