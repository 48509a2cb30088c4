# Included by stagedoor/_render.pyx.  Font faces of the shaped-text path, the face
# that draws each character, and the per-glyph cache's storage (glyphs.pxi fills it;
# type3.pxi says why glyphs become Type 3 procedures).
#
# A face is one (file, index) of the configured fonts.  It is opened on first use only
# (hb_blob_create_from_file_or_fail memory-maps the file read-only, so a 19 MB CJK
# collection costs the pages of the glyphs drawn, not 19 MB), by whichever thread needs
# it, under the face's lock.  Per glyph the cache keeps the finished PDF stream object of
# its outline (drawn through hb_font_get_glyph_shape at 1000 units per em, deflated once)
# and its advance: built once per process on first use, never per order.
#
# Never across fork(): configure_fonts() runs in the process that renders, and an
# os.register_at_fork hook drops every face and glyph in a child (the mmaps and locks of
# the parent are not the child's to use).

cdef enum:
    MAX_FACES = 1024            # every installed face may be in the plan (fonts.py)
    MAX_SCRIPTS = 256           # every script Unicode defines (~170), with room
    SCRIPT_SLOTS = 512          # the script table's hash slots (a power of two)
    MAX_LANGS = 256
    MAX_SCRIPT_FACES = 8
    MAX_HAN = 8
    EM = 1000                   # glyph space units per em of every face (hb scale)
    PS_NAME = 6                 # the name table's PostScript name

cdef Face FACES[MAX_FACES]
cdef int NFACES = 0
cdef hb_script_t SCRIPT_TAG[MAX_SCRIPTS]
cdef int SCRIPT_FACE[MAX_SCRIPTS][MAX_SCRIPT_FACES]
cdef int SCRIPT_NFACE[MAX_SCRIPTS]
cdef int NSCRIPTS = 0
# script tag -> index in SCRIPT_TAG, open addressing: the plan names ~170 scripts now,
# so pick_face's linear scan over them would cost each character up to 170 compares
cdef hb_script_t SLOT_TAG[SCRIPT_SLOTS]
cdef int SLOT_INDEX[SCRIPT_SLOTS]
# the HarfBuzz languages of the orders' locales (index 0: none); append-only, filled
# under the GIL before an order that names one is rendered
cdef hb_language_t LANGS[MAX_LANGS]
cdef int NLANGS = 1
cdef int FALLBACK[MAX_SCRIPT_FACES]
cdef int NFALLBACK = 0
cdef int HAN_DEFAULT[MAX_HAN]
cdef int NHAN_DEFAULT = 0
cdef int REPL_FACE = -2           # face and glyph of the replacement mark; -2 not looked up
cdef unsigned int REPL_GID = 0
cdef PyThread_type_lock FONT_LOCK = PyThread_allocate_lock()
cdef long MISSING_GLYPHS = 0      # code points no face covers, drawn as the replacement
cdef hb_draw_funcs_t* DRAW_FUNCS = NULL
cdef hb_unicode_funcs_t* UFUNCS = hb_unicode_funcs_get_default()


cdef int face_open(int i) noexcept nogil:
    """1 when face i is usable (opening it on first use), 0 when it cannot be."""
    cdef Face* f = &FACES[i]
    cdef int st = sd_load_int(&f.state)
    cdef hb_blob_t* blob
    if st != 0:
        return st > 0
    PyThread_acquire_lock(f.lock, WAIT_LOCK)
    if f.state == 0:
        blob = hb_blob_create_from_file_or_fail(f.path)
        if blob == NULL or <unsigned int>f.index >= hb_face_count(blob):
            if blob != NULL:
                hb_blob_destroy(blob)
            sd_store_int(&f.state, -1)
        else:
            f.blob = blob
            f.face = hb_face_create(blob, f.index)
            f.font = hb_font_create(f.face)
            hb_font_set_scale(f.font, EM, EM)
            hb_font_make_immutable(f.font)
            f.nglyphs = hb_face_get_glyph_count(f.face)
            f.colour = hb_ot_color_has_png(f.face)
            face_psname(f, i)
            f.glyphs = <GlyphProc**>calloc(f.nglyphs + 1, sizeof(GlyphProc*))
            sd_store_int(&f.state, 1 if f.glyphs != NULL else -1)
    PyThread_release_lock(f.lock)
    return f.state > 0


cdef void face_psname(Face* f, int i) noexcept nogil:
    """The face's PostScript name (name ID 6) with only the characters [A-Za-z0-9._-]
    kept, so that it is a PDF name as it is; "F<i>" when that leaves nothing
    (stagedoor.render.shaped.Face.psname does the same with fontTools)."""
    cdef char raw[PS_NAME_MAX + 1]
    cdef unsigned int size = PS_NAME_MAX + 1
    cdef int k, j = 0
    cdef char ch
    hb_ot_name_get_utf8(f.face, PS_NAME, NULL, &size, raw)
    for k in range(<int>size):
        ch = raw[k]
        if (b'A' <= ch <= b'Z' or b'a' <= ch <= b'z' or b'0' <= ch <= b'9' or ch == b'.'
                or ch == b'_' or ch == b'-'):
            f.psname[j] = ch
            j += 1
    f.psname[j] = 0
    if j == 0:
        snprintf(f.psname, PS_NAME_MAX + 1, "F%d", i)


cdef inline int face_has(int i, Py_UCS4 cp, unsigned int* gid) noexcept nogil:
    return face_open(i) and hb_font_get_nominal_glyph(FACES[i].font, cp, gid)


cdef inline int face_text(int i, Py_UCS4 cp, unsigned int* gid) noexcept nogil:
    """face_has for text: a colour emoji face draws only the emoji sequences emoji.pxi
    gives it (its digits and space are not text glyphs)."""
    return face_open(i) and not FACES[i].colour and hb_font_get_nominal_glyph(
        FACES[i].font, cp, gid)


# -- which face draws a character ------------------------------------------------------------

cdef inline int is_han_script(hb_script_t s) noexcept nogil:
    return (s == HB_SCRIPT_HAN or s == HB_SCRIPT_HIRAGANA or s == HB_SCRIPT_KATAKANA
            or s == HB_SCRIPT_BOPOMOFO)


cdef inline int script_index(hb_script_t script) noexcept nogil:
    """The index of script in SCRIPT_TAG, -1 when the plan has no faces for it."""
    cdef unsigned int h = ((<unsigned int>script * 2654435761u) >> 16) & (SCRIPT_SLOTS - 1)
    while SLOT_TAG[h] != 0:
        if SLOT_TAG[h] == script:
            return SLOT_INDEX[h]
        h = (h + 1) & (SCRIPT_SLOTS - 1)
    return -1


# An order's fonts (OrderFonts in _render.pyx builds it per locale): one int array,
#   [language index, nhan, han faces..., npref, (script tag, face)...]
# so that a single pointer crosses prepare() -> render_c -> para_init.
cdef enum:
    OF_LANG = 0
    OF_NHAN = 1


cdef inline int is_default_ignorable(Py_UCS4 c) noexcept nogil:
    """Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt; stable by
    policy), as faces.DEFAULT_IGNORABLE in the reference renderer."""
    if c < 0xAD:
        return 0
    return (c == 0xAD or c == 0x34F or c == 0x61C or 0x115F <= c <= 0x1160
            or 0x17B4 <= c <= 0x17B5 or 0x180B <= c <= 0x180F or 0x200B <= c <= 0x200F
            or 0x202A <= c <= 0x202E or 0x2060 <= c <= 0x206F or c == 0x3164
            or 0xFE00 <= c <= 0xFE0F or c == 0xFEFF or c == 0xFFA0
            or 0xFFF0 <= c <= 0xFFF8 or 0x1BCA0 <= c <= 0x1BCA3
            or 0x1D173 <= c <= 0x1D17A or 0xE0000 <= c <= 0xE0FFF)


cdef int pick_face(Py_UCS4 cp, hb_script_t script, int prev, const int* of,
                   int bold, unsigned int* gid) noexcept nogil:
    """The face for cp: the previous character's face when it has it and cp belongs to no
    script of its own; else the order language's face for the script (Urdu: Nastaliq),
    the script's faces (Han: the order's locale face first), then the fallback faces,
    then any face; -1 when none has it."""
    cdef int i, k, f, nhan = 0, npref = 0
    cdef const int* han = NULL
    cdef const int* pref = NULL
    if of != NULL:
        nhan = of[OF_NHAN]
        han = of + 2
        npref = of[2 + nhan]
        pref = of + 3 + nhan
    if prev >= 0 and (script == HB_SCRIPT_COMMON or script == HB_SCRIPT_INHERITED):
        if hb_font_get_nominal_glyph(FACES[prev].font, cp, gid):
            return prev
    for i in range(npref):
        if <hb_script_t>pref[2 * i] == script:
            f = FACES[pref[2 * i + 1]].bold if bold else pref[2 * i + 1]
            if face_text(f, cp, gid):
                return f
    if is_han_script(script):
        for i in range(nhan):
            f = FACES[han[i]].bold if bold else han[i]
            if face_text(f, cp, gid):
                return f
    k = script_index(script)
    if k >= 0:
        for i in range(SCRIPT_NFACE[k]):
            f = FACES[SCRIPT_FACE[k][i]].bold if bold else SCRIPT_FACE[k][i]
            if face_text(f, cp, gid):
                return f
    for i in range(NFALLBACK):
        f = FACES[FALLBACK[i]].bold if bold else FALLBACK[i]
        if face_text(f, cp, gid):
            return f
    if prev >= 0 and hb_font_get_nominal_glyph(FACES[prev].font, cp, gid):
        return prev
    if prev >= 0 and is_default_ignorable(cp):
        # invisible by definition (tag characters of a flag, variation selectors): it
        # stays with its neighbour, and HarfBuzz, finding no glyph for it, hides it;
        # not a replacement mark (the England flag printed as the flag and six of them)
        gid[0] = 0
        return prev
    # last, any configured face (a sign like the baht sign is Common but only the Thai
    # font has it); this opens faces, which only a character missing above pays for
    for f in range(NFACES):
        if face_text(f, cp, gid):
            return f
    return -1


cdef inline hb_language_t order_language(const int* of) noexcept nogil:
    return LANGS[of[OF_LANG]] if of != NULL and of[OF_LANG] > 0 else NULL


cdef int replacement(unsigned int* gid) noexcept nogil:
    """Face of the visible replacement mark: U+FFFD from the first face that has it, else
    the .notdef box (glyph 0) of the first face that opens; -1 when no face opens."""
    global REPL_FACE, REPL_GID
    cdef int i, face = -1
    cdef unsigned int g = 0
    if sd_load_int(&REPL_FACE) != -2:
        gid[0] = REPL_GID
        return REPL_FACE
    PyThread_acquire_lock(FONT_LOCK, WAIT_LOCK)
    if REPL_FACE == -2:
        for i in range(NFALLBACK):
            if face_text(FALLBACK[i], 0xFFFD, &g):
                face = FALLBACK[i]
                break
        if face < 0:
            for i in range(NFACES):
                if face_text(i, 0xFFFD, &g):
                    face = i
                    break
        if face < 0:
            g = 0
            for i in range(NFACES):
                if face_open(i):
                    face = i
                    break
        REPL_GID = g
        sd_store_int(&REPL_FACE, face)
    PyThread_release_lock(FONT_LOCK)
    gid[0] = REPL_GID
    return REPL_FACE


cdef void drop_faces() noexcept nogil:
    """Forget every face and glyph (after fork in the child, and on reconfiguration)."""
    global NFACES, NSCRIPTS, NFALLBACK, NHAN_DEFAULT, REPL_FACE
    cdef int i
    cdef unsigned int g
    cdef Face* f
    for i in range(NFACES):
        f = &FACES[i]
        if f.state > 0:
            for g in range(f.nglyphs):
                if f.glyphs[g] != NULL:
                    free(f.glyphs[g].obj)
                    free(f.glyphs[g].img)
                    free(f.glyphs[g].mask)
                    free(f.glyphs[g])
            free(f.glyphs)
            hb_font_destroy(f.font)
            hb_face_destroy(f.face)
            hb_blob_destroy(f.blob)
        free(f.path)
        memset(f, 0, sizeof(Face))
    NFACES = NSCRIPTS = NFALLBACK = NHAN_DEFAULT = 0
    memset(SLOT_TAG, 0, sizeof(SLOT_TAG))
    REPL_FACE = -2


def configure_fonts(faces, scripts, fallback, han_default):
    """Set the faces: faces is [(path, index, bold_face_number)], scripts {tag: [face
    numbers]}, fallback and han_default [face numbers].  Nothing is opened here."""
    global NFACES, NSCRIPTS, NFALLBACK, NHAN_DEFAULT, FONT_LOCK
    cdef int i, k
    cdef bytes p
    cdef unsigned int h
    if len(faces) > MAX_FACES or len(scripts) > MAX_SCRIPTS:
        raise ValueError("too many fonts configured")
    drop_faces()
    for i, (path, index, bold) in enumerate(faces):
        p = os.fsencode(path)
        FACES[i].path = <char*>malloc(len(p) + 1)
        if FACES[i].path == NULL:
            raise MemoryError()
        memcpy(FACES[i].path, <const char*>p, len(p) + 1)
        FACES[i].index = index
        FACES[i].bold = bold
        FACES[i].lock = PyThread_allocate_lock()
        NFACES = i + 1
    for k, (tag, nums) in enumerate(scripts.items()):
        SCRIPT_TAG[k] = int.from_bytes(tag.encode("ascii"), "big")
        SCRIPT_NFACE[k] = min(len(nums), MAX_SCRIPT_FACES)
        for i in range(SCRIPT_NFACE[k]):
            SCRIPT_FACE[k][i] = nums[i]
        NSCRIPTS = k + 1
        h = ((<unsigned int>SCRIPT_TAG[k] * 2654435761u) >> 16) & (SCRIPT_SLOTS - 1)
        while SLOT_TAG[h] != 0 and SLOT_TAG[h] != SCRIPT_TAG[k]:
            h = (h + 1) & (SCRIPT_SLOTS - 1)
        SLOT_TAG[h] = SCRIPT_TAG[k]
        SLOT_INDEX[h] = k
    NFALLBACK = min(len(fallback), MAX_SCRIPT_FACES)
    for i in range(NFALLBACK):
        FALLBACK[i] = fallback[i]
    NHAN_DEFAULT = min(len(han_default), MAX_HAN)
    for i in range(NHAN_DEFAULT):
        HAN_DEFAULT[i] = han_default[i]


def _after_fork_in_child():
    global FONT_LOCK
    cdef int i
    FONT_LOCK = PyThread_allocate_lock()
    for i in range(NFACES):
        FACES[i].lock = PyThread_allocate_lock()
    # the parent's faces and glyphs: closed and forgotten; they are opened again on use
    drop_faces_keep_config()


cdef void drop_faces_keep_config() noexcept nogil:
    global REPL_FACE
    cdef int i
    cdef unsigned int g
    cdef Face* f
    for i in range(NFACES):
        f = &FACES[i]
        if f.state > 0:
            for g in range(f.nglyphs):
                if f.glyphs[g] != NULL:
                    free(f.glyphs[g].obj)
                    free(f.glyphs[g].img)
                    free(f.glyphs[g].mask)
                    free(f.glyphs[g])
            free(f.glyphs)
            hb_font_destroy(f.font)
            hb_face_destroy(f.face)
            hb_blob_destroy(f.blob)
        f.glyphs = NULL
        f.font = NULL
        f.face = NULL
        f.blob = NULL
        f.state = 0
    REPL_FACE = -2


os.register_at_fork(after_in_child=_after_fork_in_child)


def missing_glyphs():
    """Characters drawn as replacement marks in this process so far (every thread).

    The per-job counter: font_stats() walks every open face's glyph table, a cost that
    grows with the faces open and that render_tickets paid per job."""
    return sd_add_long(&MISSING_GLYPHS, 0)


def font_stats():
    """{"faces_open": n, "glyphs_cached": n, "missing_glyphs": n} of this process
    (walks every open face's glyph table: for inspection, not per job)."""
    cdef int i, open_ = 0
    cdef unsigned int g
    cdef long cached = 0
    for i in range(NFACES):
        if FACES[i].state > 0:
            open_ += 1
            for g in range(FACES[i].nglyphs):
                cached += FACES[i].glyphs[g] != NULL
    return {"faces_open": open_, "glyphs_cached": cached,
            "missing_glyphs": sd_add_long(&MISSING_GLYPHS, 0)}


def face_covers(int face, str text):
    """The characters of text that face does not have (for --check-fonts)."""
    cdef unsigned int gid
    if face < 0 or face >= NFACES or not face_open(face):
        return text
    return "".join(ch for ch in text if not hb_font_get_nominal_glyph(FACES[face].font,
                                                                      ord(ch), &gid))


cdef dict _LANG_INDEX = {}


def language_index(str tag):
    """The index of the HarfBuzz language of a BCP 47 tag in LANGS (0 for ""), added on
    first use (under the GIL: render threads only read entries added before).  At most
    MAX_LANGS - 1 distinct tags a process (a locale is order data): HarfBuzz keeps every
    language it is asked for, so later ones shape without a language."""
    global NLANGS
    cdef bytes b
    idx = _LANG_INDEX.get(tag)
    if idx is not None:
        return idx
    if not tag or NLANGS >= MAX_LANGS:
        return 0
    b = tag.encode("ascii", "replace")
    LANGS[NLANGS] = hb_language_from_string(b, len(b))
    _LANG_INDEX[tag] = NLANGS
    NLANGS += 1
    return NLANGS - 1


# -- what the installed fonts cover (fonts.py derives the script -> faces table from it) --

def harfbuzz_version():
    """The version of the HarfBuzz library loaded (its Unicode data gives script_runs():
    installed.py keys its cache of the fonts' coverage by it)."""
    return hb_version_string().decode()


def font_faces(path):
    """How many faces the font file has (a .ttc several), 0 when it cannot be read."""
    cdef bytes p = os.fsencode(path)
    cdef hb_blob_t* blob = hb_blob_create_from_file_or_fail(p)
    cdef unsigned int n
    if blob == NULL:
        return 0
    n = hb_face_count(blob)
    hb_blob_destroy(blob)
    return n


def face_unicodes(path, int index):
    """The code points face `index` of the file maps (its cmap), as [(first, last)]
    ranges; the file is mapped and closed again here, no handle is kept."""
    cdef bytes p = os.fsencode(path)
    cdef hb_blob_t* blob = hb_blob_create_from_file_or_fail(p)
    cdef hb_face_t* face
    cdef hb_set_t* st
    cdef hb_codepoint_t first = <hb_codepoint_t>-1, last = <hb_codepoint_t>-1
    out = []
    if blob == NULL:
        return out
    face = hb_face_create(blob, index)
    st = hb_set_create()
    hb_face_collect_unicodes(face, st)
    while hb_set_next_range(st, &first, &last):
        out.append((first, last))
    hb_set_destroy(st)
    hb_face_destroy(face)
    hb_blob_destroy(blob)
    return out


def script_runs():
    """[(first, last, "Tibt")]: the runs of code points of one script, as HarfBuzz (the
    renderer's itemiser) assigns them; unassigned code points (Zzzz) left out."""
    cdef unsigned int cp, start = 0
    cdef hb_script_t s, cur = HB_SCRIPT_UNKNOWN
    out = []
    for cp in range(0x110001):
        s = hb_unicode_script(UFUNCS, cp) if cp <= 0x10FFFF else HB_SCRIPT_UNKNOWN
        if s != cur:
            if cur != HB_SCRIPT_UNKNOWN:
                out.append((start, cp - 1, int(cur).to_bytes(4, "big").decode()))
            cur = s
            start = cp
    return out
