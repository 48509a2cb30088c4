# ICU's C API as far as the renderer calls it (the line break iterator, for Lao,
# Myanmar and Khmer word breaks), callable without the GIL: dictbreaks.pxi.  The headers
# rename every call to its versioned symbol (ubrk_open_72), set by pkg-config's icu-uc
# flags (setup.py).

cdef extern from "unicode/utypes.h" nogil:
    ctypedef unsigned short UChar
    ctypedef int UErrorCode
    bint U_FAILURE(UErrorCode code)

cdef extern from "unicode/ubrk.h" nogil:
    ctypedef struct UBreakIterator
    ctypedef enum UBreakIteratorType:
        UBRK_LINE
    UBreakIterator* ubrk_open(UBreakIteratorType type, const char* locale,
                              const UChar* text, int textLength, UErrorCode* status)
    void ubrk_setText(UBreakIterator* bi, const UChar* text, int textLength,
                      UErrorCode* status)
    int ubrk_next(UBreakIterator* bi)
    void ubrk_close(UBreakIterator* bi)
