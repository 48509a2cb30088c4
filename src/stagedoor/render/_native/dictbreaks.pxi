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
# is only added where libunibreak had none.  An iterator is opened per run (ubrk_open
# takes a few microseconds: ICU caches the rules and dictionaries after the first; it is
# thread-safe, so no lock and nothing to drop after fork).  The headers rename every
# call to its versioned symbol (ubrk_open_72), set by pkg-config's icu-uc flags.
# stagedoor.render.shaped.libs dict_breaks asks the same library through ctypes.

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
    cdef UErrorCode status
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
        status = 0
        bi = ubrk_open(UBRK_LINE, "", w, i - s, &status)
        if bi == NULL or U_FAILURE(status):
            if bi != NULL:
                ubrk_close(bi)
            continue
        b = ubrk_next(bi)
        while 0 < b < i - s:
            if brk[s + b - 1] == LINEBREAK_NOBREAK:
                brk[s + b - 1] = LINEBREAK_ALLOWBREAK
            b = ubrk_next(bi)
        ubrk_close(bi)
    free(w)
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
