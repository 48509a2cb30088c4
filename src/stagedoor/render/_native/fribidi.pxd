# fribidi's C API (the Unicode bidi algorithm), callable without the GIL: shape.pxi
# orders a field's runs with it.  Linked through pkg-config (setup.py).

cdef extern from "fribidi.h" nogil:
    ctypedef unsigned int FriBidiChar
    ctypedef int FriBidiStrIndex
    ctypedef unsigned int FriBidiCharType
    ctypedef unsigned int FriBidiParType
    ctypedef unsigned int FriBidiBracketType
    ctypedef signed char FriBidiLevel
    ctypedef unsigned int FriBidiFlags
    FriBidiParType FRIBIDI_PAR_ON
    FriBidiParType FRIBIDI_PAR_RTL
    FriBidiParType FRIBIDI_PAR_LTR
    void fribidi_get_bidi_types(const FriBidiChar* s, FriBidiStrIndex len,
                                FriBidiCharType* btypes)
    void fribidi_get_bracket_types(const FriBidiChar* s, FriBidiStrIndex len,
                                   const FriBidiCharType* types, FriBidiBracketType* btypes)
    FriBidiLevel fribidi_get_par_embedding_levels_ex(
        const FriBidiCharType* bidi_types, const FriBidiBracketType* bracket_types,
        FriBidiStrIndex len, FriBidiParType* pbase_dir, FriBidiLevel* embedding_levels)
    FriBidiLevel fribidi_reorder_line(
        FriBidiFlags flags, const FriBidiCharType* bidi_types, FriBidiStrIndex len,
        FriBidiStrIndex off, FriBidiParType base_dir, FriBidiLevel* embedding_levels,
        FriBidiChar* visual_str, FriBidiStrIndex* map)
