# libthai's C API (Thai word breaks from its dictionary), callable without the GIL:
# thai.pxi.  Linked through pkg-config (setup.py).

cdef extern from "thai/thbrk.h" nogil:
    ctypedef unsigned char thchar_t
    ctypedef struct ThBrk
    ThBrk* th_brk_new(const char* dictpath)
    void th_brk_delete(ThBrk* brk)
    int th_brk_find_breaks(ThBrk* brk, const thchar_t* s, int* pos, size_t pos_sz)

cdef extern from "thai/thwchar.h" nogil:
    thchar_t th_uni2tis(int wc)
