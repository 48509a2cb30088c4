# HarfBuzz's C API as the renderer calls it (fonts, shaping, outlines, colour PNGs,
# Unicode properties), every function callable without the GIL.  Cimported by
# stagedoor/_render.pxd and the render/_native/*.pxi that call it; setup.py links it
# through pkg-config.
#
# Why the C API and not uharfbuzz: a whole shaped ticket costs a fraction of a
# millisecond here; through the Python binding every run would hold the GIL (render
# threads would queue on it) and make Python objects per call.

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

    # fonts.pxi: what the installed fonts cover
    ctypedef struct hb_set_t:
        pass
    hb_set_t* hb_set_create()
    void hb_set_destroy(hb_set_t* s)
    hb_bool_t hb_set_next_range(const hb_set_t* s, hb_codepoint_t* first,
                                hb_codepoint_t* last)
    void hb_face_collect_unicodes(hb_face_t* face, hb_set_t* out)

    # glyphs.pxi: the fields of hb_draw_state_t it reads (the current point, for
    # quadratic curves)
    ctypedef struct hb_draw_state_fields "hb_draw_state_t":
        hb_bool_t path_open
        float path_start_x
        float path_start_y
        float current_x
        float current_y

    # emoji.pxi: a colour glyph's box and PNG bytes
    ctypedef struct hb_glyph_extents_t:
        hb_position_t x_bearing
        hb_position_t y_bearing
        hb_position_t width
        hb_position_t height
    hb_bool_t hb_font_get_glyph_extents(hb_font_t* font, hb_codepoint_t glyph,
                                        hb_glyph_extents_t* extents)
    const char* hb_blob_get_data(hb_blob_t* blob, unsigned int* length)

    # clusters.pxi: the general category and combining class of a character
    ctypedef enum hb_unicode_general_category_t:
        HB_UNICODE_GENERAL_CATEGORY_SPACING_MARK
        HB_UNICODE_GENERAL_CATEGORY_ENCLOSING_MARK
        HB_UNICODE_GENERAL_CATEGORY_NON_SPACING_MARK
        HB_UNICODE_GENERAL_CATEGORY_LOWERCASE_LETTER
        HB_UNICODE_GENERAL_CATEGORY_MODIFIER_LETTER
        HB_UNICODE_GENERAL_CATEGORY_OTHER_LETTER
        HB_UNICODE_GENERAL_CATEGORY_TITLECASE_LETTER
        HB_UNICODE_GENERAL_CATEGORY_UPPERCASE_LETTER
    hb_unicode_general_category_t hb_unicode_general_category(hb_unicode_funcs_t* u,
                                                              hb_codepoint_t cp)
    unsigned int hb_unicode_combining_class(hb_unicode_funcs_t* u, hb_codepoint_t cp)


cdef extern from "hb-ot.h" nogil:
    # fonts.pxi: a face's PostScript name
    unsigned int hb_ot_name_get_utf8(hb_face_t* face, unsigned int name_id,
                                     hb_language_t language, unsigned int* text_size,
                                     char* text)
    # emoji.pxi: colour glyphs as PNGs (CBDT)
    hb_bool_t hb_ot_color_has_png(hb_face_t* face)
    hb_blob_t* hb_ot_color_glyph_reference_png(hb_font_t* font, hb_codepoint_t glyph)
