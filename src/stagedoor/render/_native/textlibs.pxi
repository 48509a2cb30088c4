# Included by stagedoor/_render.pyx.  C APIs of the text stack, all callable without the
# GIL: HarfBuzz (fonts, shaping, outlines), fribidi (the Unicode bidi algorithm),
# libunibreak (UAX #14 line breaks).  setup.py finds them with pkg-config and stops with
# a clear message when one is missing.
#
# Why the C APIs and not uharfbuzz / python-bidi: a whole shaped ticket costs ~0.15 ms
# here; through the Python bindings every run and every paragraph would hold the GIL
# (render threads would queue on it) and cost a few microseconds of object churn per
# call.  The libraries do all the work we do not write: shaping, bidi, line breaking.

cdef extern from "hb.h" nogil:
    ctypedef unsigned int hb_codepoint_t
    ctypedef int hb_position_t
    ctypedef unsigned int hb_mask_t
    ctypedef int hb_bool_t
    ctypedef unsigned int hb_tag_t
    ctypedef hb_tag_t hb_script_t
    ctypedef void* hb_language_t
    ctypedef struct hb_blob_t
    ctypedef struct hb_face_t
    ctypedef struct hb_font_t
    ctypedef struct hb_buffer_t
    ctypedef struct hb_unicode_funcs_t
    ctypedef struct hb_draw_funcs_t
    ctypedef struct hb_draw_state_t
    ctypedef enum hb_direction_t:
        HB_DIRECTION_LTR
        HB_DIRECTION_RTL
    ctypedef enum hb_buffer_cluster_level_t:
        HB_BUFFER_CLUSTER_LEVEL_MONOTONE_GRAPHEMES
        HB_BUFFER_CLUSTER_LEVEL_MONOTONE_CHARACTERS
    ctypedef struct hb_glyph_info_t:
        hb_codepoint_t codepoint
        unsigned int cluster
    ctypedef struct hb_glyph_position_t:
        hb_position_t x_advance
        hb_position_t y_advance
        hb_position_t x_offset
        hb_position_t y_offset
    hb_script_t HB_SCRIPT_COMMON
    hb_script_t HB_SCRIPT_INHERITED
    hb_script_t HB_SCRIPT_UNKNOWN
    hb_script_t HB_SCRIPT_LATIN
    hb_script_t HB_SCRIPT_HAN
    hb_script_t HB_SCRIPT_HIRAGANA
    hb_script_t HB_SCRIPT_KATAKANA
    hb_script_t HB_SCRIPT_BOPOMOFO
    hb_script_t HB_SCRIPT_HANGUL

    hb_blob_t* hb_blob_create_from_file_or_fail(const char* file_name)
    void hb_blob_destroy(hb_blob_t* blob)
    unsigned int hb_face_count(hb_blob_t* blob)
    hb_face_t* hb_face_create(hb_blob_t* blob, unsigned int index)
    void hb_face_destroy(hb_face_t* face)
    unsigned int hb_face_get_upem(const hb_face_t* face)
    unsigned int hb_face_get_glyph_count(const hb_face_t* face)
    hb_font_t* hb_font_create(hb_face_t* face)
    void hb_font_destroy(hb_font_t* font)
    void hb_font_set_scale(hb_font_t* font, int x_scale, int y_scale)
    void hb_font_make_immutable(hb_font_t* font)
    hb_bool_t hb_font_get_nominal_glyph(hb_font_t* font, hb_codepoint_t u,
                                        hb_codepoint_t* glyph)
    hb_position_t hb_font_get_glyph_h_advance(hb_font_t* font, hb_codepoint_t glyph)
    void hb_font_get_glyph_shape(hb_font_t* font, hb_codepoint_t glyph,
                                 hb_draw_funcs_t* dfuncs, void* draw_data)

    ctypedef void (*hb_draw_move_to_func_t)(hb_draw_funcs_t* dfuncs, void* draw_data,
                                           hb_draw_state_t* st, float to_x, float to_y,
                                           void* user_data)
    ctypedef void (*hb_draw_line_to_func_t)(hb_draw_funcs_t* dfuncs, void* draw_data,
                                           hb_draw_state_t* st, float to_x, float to_y,
                                           void* user_data)
    ctypedef void (*hb_draw_quadratic_to_func_t)(hb_draw_funcs_t* dfuncs, void* draw_data,
                                                hb_draw_state_t* st, float cx, float cy,
                                                float to_x, float to_y, void* user_data)
    ctypedef void (*hb_draw_cubic_to_func_t)(hb_draw_funcs_t* dfuncs, void* draw_data,
                                            hb_draw_state_t* st, float c1x, float c1y,
                                            float c2x, float c2y, float to_x, float to_y,
                                            void* user_data)
    ctypedef void (*hb_draw_close_path_func_t)(hb_draw_funcs_t* dfuncs, void* draw_data,
                                              hb_draw_state_t* st, void* user_data)
    hb_draw_funcs_t* hb_draw_funcs_create()
    void hb_draw_funcs_set_move_to_func(hb_draw_funcs_t* f, hb_draw_move_to_func_t fn,
                                        void* user_data, void* destroy)
    void hb_draw_funcs_set_line_to_func(hb_draw_funcs_t* f, hb_draw_line_to_func_t fn,
                                        void* user_data, void* destroy)
    void hb_draw_funcs_set_quadratic_to_func(hb_draw_funcs_t* f,
                                             hb_draw_quadratic_to_func_t fn,
                                             void* user_data, void* destroy)
    void hb_draw_funcs_set_cubic_to_func(hb_draw_funcs_t* f, hb_draw_cubic_to_func_t fn,
                                         void* user_data, void* destroy)
    void hb_draw_funcs_set_close_path_func(hb_draw_funcs_t* f, hb_draw_close_path_func_t fn,
                                           void* user_data, void* destroy)
    void hb_draw_funcs_make_immutable(hb_draw_funcs_t* f)

    hb_buffer_t* hb_buffer_create()
    void hb_buffer_destroy(hb_buffer_t* buffer)
    void hb_buffer_clear_contents(hb_buffer_t* buffer)
    hb_bool_t hb_buffer_allocation_successful(hb_buffer_t* buffer)
    void hb_buffer_add_utf32(hb_buffer_t* buffer, const unsigned int* text, int text_length,
                             unsigned int item_offset, int item_length)
    void hb_buffer_set_direction(hb_buffer_t* buffer, hb_direction_t direction)
    void hb_buffer_set_script(hb_buffer_t* buffer, hb_script_t script)
    void hb_buffer_set_language(hb_buffer_t* buffer, hb_language_t language)
    void hb_buffer_set_cluster_level(hb_buffer_t* buffer, hb_buffer_cluster_level_t level)
    unsigned int hb_buffer_get_length(hb_buffer_t* buffer)
    hb_glyph_info_t* hb_buffer_get_glyph_infos(hb_buffer_t* buffer, unsigned int* length)
    hb_glyph_position_t* hb_buffer_get_glyph_positions(hb_buffer_t* buffer,
                                                       unsigned int* length)
    void hb_shape(hb_font_t* font, hb_buffer_t* buffer, const void* features,
                  unsigned int num_features)
    hb_language_t hb_language_from_string(const char* s, int len)
    hb_unicode_funcs_t* hb_unicode_funcs_get_default()
    hb_script_t hb_unicode_script(hb_unicode_funcs_t* ufuncs, hb_codepoint_t unicode)
    const char* hb_version_string()


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


cdef extern from "linebreak.h" nogil:
    int LINEBREAK_MUSTBREAK
    int LINEBREAK_ALLOWBREAK
    int LINEBREAK_NOBREAK
    void init_linebreak()
    void set_linebreaks_utf32(const unsigned int* s, size_t len, const char* lang,
                              char* brks)
