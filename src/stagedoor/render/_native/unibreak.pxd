# libunibreak's C API (UAX #14 line break opportunities), callable without the GIL:
# breaks.pxi, breakcache.pxi and the wrap in layout.pxi.  Linked through pkg-config.

cdef extern from "linebreak.h" nogil:
    int LINEBREAK_MUSTBREAK
    int LINEBREAK_ALLOWBREAK
    int LINEBREAK_NOBREAK
    void init_linebreak()
    void set_linebreaks_utf32(const unsigned int* s, size_t len, const char* lang,
                              char* brks)
