# Included by stagedoor/_render.pyx.  The boundary to libunibreak: line-break
# opportunities (UAX #14) of a field, never handing the library the input that aborts it.
#
# libunibreak 1.1 (Debian's and Ubuntu's libunibreak1, still current there) aborts the
# process on valid text, through two assertions its release build keeps:
#
# - a regional indicator (U+1F1E6..U+1F1FF, the letters of a flag emoji such as 🇯🇵):
#   its data gives them class RI, but its pair table stops at JT, so set_linebreaks
#   hits `assert(lbcNew <= LBP_JT)` (or lbcCur, when the field starts with one):
#   SIGABRT, the whole worker with every job it held (issue 25);
# - U+FFFF (a noncharacter, but a code point JSON can carry as "\uffff"): the library
#   uses 0xFFFF as its end-of-string marker, so it stops there and fails
#   `assert(posLast == posCur - 1 && posCur <= len)`; as the first character it
#   returns without writing the break classes at all.
#
# Every other code point, first or after any other, goes through it without an abort:
# tests/render/test_render_crash.py::test_libunibreak_every_code_point_in_a_subprocess checks
# all 1,114,112 of them against the installed library.  So the guard is a substitution,
# not a second implementation: when a field has either character, the library gets a
# copy with each regional indicator as U+4E00 (class ID, the class whose pair-table row
# is the regional indicators' in UAX #14 but for LB30a) and U+FFFF as U+FFFE (class XX,
# as U+FFFF is), and LB30a is applied after it: no break inside a pair of regional
# indicators (a flag), a break allowed between pairs.  Newer libunibreak releases
# implement RI; the same substitution gives the same result there, so the break
# classes do not depend on the library's version.  stagedoor.render.shaped.libs
# line_breaks does the same through ctypes (the reference renderer).

cdef enum:
    UB_EOS = 0xFFFF             # libunibreak 1.x's end of string
    UB_AS_EOS = 0xFFFE          # class XX, like U+FFFF
    RI_FIRST = 0x1F1E6
    RI_LAST = 0x1F1FF
    UB_AS_RI = 0x4E00           # class ID


cdef inline bint is_regional_indicator(unsigned int c) noexcept nogil:
    return RI_FIRST <= c <= RI_LAST


cdef void line_breaks(const unsigned int* u, int n, char* brk,
                      unsigned int* tmp) noexcept nogil:
    """libunibreak's break classes of u[:n] into brk; tmp: room for n code points, used
    only when u has a character the library cannot take (see above).  From the
    per-process cache when the same text came before (breakcache.pxi)."""
    cdef unsigned int h = 0
    if brk_cached(u, n, brk, &h, BRK_PLAIN):
        return
    line_breaks_of(u, n, brk, tmp)
    if h != 0:
        brk_cache_put(u, n, brk, h, BRK_PLAIN)


cdef void line_breaks_of(const unsigned int* u, int n, char* brk,
                         unsigned int* tmp) noexcept nogil:
    """line_breaks, from libunibreak itself."""
    cdef int i, pairs = 0
    cdef unsigned int c
    cdef bint hazard = False
    for i in range(n):
        c = u[i]
        if c == UB_EOS or is_regional_indicator(c):
            hazard = True
            break
    if not hazard:
        set_linebreaks_utf32(u, n, NULL, brk)
        return
    for i in range(n):
        c = u[i]
        tmp[i] = UB_AS_RI if is_regional_indicator(c) else (UB_AS_EOS if c == UB_EOS else c)
    set_linebreaks_utf32(tmp, n, NULL, brk)
    # LB30a: regional indicators pair up from the start of a run of them
    for i in range(n - 1):
        if is_regional_indicator(u[i]) and is_regional_indicator(u[i + 1]):
            pairs += 1
            brk[i] = LINEBREAK_NOBREAK if pairs & 1 else LINEBREAK_ALLOWBREAK
        else:
            pairs = 0
