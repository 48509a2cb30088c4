# Included by stagedoor/_render.pyx, before layout.pxi.  Where a line or an ellipsis may
# cut a shaped field's text: grapheme cluster boundaries (UAX #29) that are not inside an
# Indic conjunct or a Myanmar syllable (boundary()), and the runs of marks drawn on one
# base, bounded by MARKS_PER_BASE (cap_marks).  stagedoor.render.shaped.layout has the
# same rules in Python.


cdef inline int is_mark(unsigned int cp) noexcept nogil:
    cdef hb_unicode_general_category_t k = hb_unicode_general_category(UFUNCS, cp)
    return (k == HB_UNICODE_GENERAL_CATEGORY_NON_SPACING_MARK
            or k == HB_UNICODE_GENERAL_CATEGORY_SPACING_MARK
            or k == HB_UNICODE_GENERAL_CATEGORY_ENCLOSING_MARK)


cdef inline int is_letter(unsigned int cp) noexcept nogil:
    cdef hb_unicode_general_category_t k = hb_unicode_general_category(UFUNCS, cp)
    return (k == HB_UNICODE_GENERAL_CATEGORY_LOWERCASE_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_MODIFIER_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_OTHER_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_TITLECASE_LETTER
            or k == HB_UNICODE_GENERAL_CATEGORY_UPPERCASE_LETTER)


cdef int cap_marks(unsigned int* u, int n) noexcept nogil:
    """Drop, in place, the marks past the MARKS_PER_BASE-th of a run (joiners inside the
    run neither count nor end it): a tower of marks would otherwise make the whole field
    shrink to fit its height.  The new length.  shaped.layout.cap_marks in Python."""
    cdef int i, j = 0, run = 0
    for i in range(n):
        if is_mark(u[i]):
            run += 1
            if run > MARKS_PER_BASE:
                continue
        elif u[i] != 0x200C and u[i] != 0x200D:
            run = 0
        u[j] = u[i]
        j += 1
    return j


cdef inline int jamo(unsigned int cp) noexcept nogil:
    """Hangul syllable type for UAX #29: 1 L, 2 V, 3 T, 4 LV, 5 LVT, 0 none."""
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return 1
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return 2
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return 3
    if 0xAC00 <= cp <= 0xD7A3:
        return 4 if (cp - 0xAC00) % 28 == 0 else 5
    return 0


cdef inline int extends(unsigned int cp) noexcept nogil:
    """Grapheme_Cluster_Break Extend, SpacingMark or ZWJ as far as a cut needs them."""
    return (is_mark(cp) or cp == 0x200C or cp == 0x200D or cp == 0x0E33 or cp == 0x0EB3
            or 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F)


cdef inline int is_killer(unsigned int cp) noexcept nogil:
    """Viramas that end a syllable visibly rather than join the next consonant into a
    conjunct (Indic_Syllabic_Category Pure_Killer, and Sinhala's al-lakuna, which joins
    only through a ZWJ): shaped.layout.KILLERS."""
    return cp == 0x0E3A or cp == 0x0BCD or cp == 0x0DCA or cp == 0x0F84 or cp == 0x103A


cdef int boundary(const unsigned int* u, int len_, int n) noexcept nogil:
    """Whether a line or an ellipsis may cut u before u[n]: at an extended grapheme
    cluster boundary (UAX #29: not before a mark or a joiner, not inside a Hangul
    syllable's jamo, not after a ZWJ, not between the two regional indicators of a
    flag) that is not inside an Indic conjunct (not after a virama, canonical
    combining class 9, when a letter follows, but for the killers: is_killer), nor
    inside a Myanmar syllable (not before a consonant its asat kills).
    shaped.layout.boundary in Python."""
    cdef unsigned int c, b
    cdef int jb, jc, k
    if n <= 0 or n >= len_:
        return 1
    c = u[n]
    b = u[n - 1]
    if extends(c) or b == 0x200D:
        return 0
    if hb_unicode_combining_class(UFUNCS, b) == 9 and not is_killer(b) and is_letter(c):
        return 0
    if 0x1000 <= c <= 0x1021:
        # a Myanmar consonant killed by asat (under a dot below or not) closes the
        # syllable before it: ကုန် is one syllable, never ကု + န်
        k = n + 1
        while k < len_ and u[k] == 0x1037:
            k += 1
        if k < len_ and u[k] == 0x103A:
            return 0
    jb = jamo(b)
    jc = jamo(c)
    if jb and jc and ((jb == 1 and jc != 3) or ((jb == 2 or jb == 4) and (jc == 2 or jc == 3))
                      or ((jb == 3 or jb == 5) and jc == 3)):
        return 0
    if 0x1F1E6 <= b <= 0x1F1FF and 0x1F1E6 <= c <= 0x1F1FF:
        k = n - 1
        while k > 0 and 0x1F1E6 <= u[k - 1] <= 0x1F1FF:
            k -= 1
        return (n - k) % 2 == 0
    return 1

