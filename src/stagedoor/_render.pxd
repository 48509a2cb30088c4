# C declarations for _render.pyx: the C it calls, from render/_native/*.pxd (one per C
# library, all callable without the GIL; CPython's str internals; the atomics), and the
# structs the renderer passes around inside `with nogil:`.

from stagedoor.render._native.atomics cimport *     # fonts, glyphs, thai, layout
from stagedoor.render._native.cpythonx cimport *    # text.pxi: a str's data
from stagedoor.render._native.fribidi cimport *     # shape.pxi: bidi
from stagedoor.render._native.harfbuzz cimport *    # fonts, glyphs, shape, emoji, clusters
from stagedoor.render._native.icu cimport *         # dictbreaks.pxi
from stagedoor.render._native.libthai cimport *     # thai.pxi
from stagedoor.render._native.unibreak cimport *    # breaks, breakcache, layout
from stagedoor.render._native.libdeflate cimport *  # pdf.pxi: the PDF's deflate streams
from stagedoor.render._native.zlib cimport *        # glyphs.pxi, emoji.pxi (deflate once; inflate)

from cpython.pythread cimport PyThread_type_lock
from cpython.ref cimport PyObject

# The structs more than one unit uses are all here; a struct only one .pxi uses stays
# in it (breakcache's BrkEntry, shapecache's CGlyph and CEntry, glyphs' Pen, qr's
# BitWriter, pool's SinkHead, PoolTask and RenderPoolC).

ctypedef unsigned long long u64


# -- the page and the file: bytes, fields, the QR symbol, scratch (buf, text, qr, pdf.pxi) -

# A growable byte buffer; `failed` is set once an allocation fails (then nothing more is
# written and the caller raises MemoryError).
cdef struct Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap
    int failed


# One text field, already encoded (cp1252 bytes), and the ActualText hex ("" if none).
# A shaped field comes from the GIL side as `src` (the NFC str's data, `kind` bytes a
# character, `srcn` characters); shaped_fill() turns it into `u` and `act` without the GIL.
cdef struct Text:
    const char* s
    Py_ssize_t n
    const char* act
    Py_ssize_t an
    const unsigned int* u       # the shaped path: the NFC text as UTF-32 (NULL: Helvetica)
    int un
    const void* src             # the shaped path, before shaped_fill (NULL: Helvetica)
    int kind
    Py_ssize_t srcn
    int undecided               # ASCII in s[:n]: fast path or shaped, decide_ascii says


cdef enum:
    NFIELDS = 10        # drawn fields, in render.FIELDS order
    SMALL_PRINT = 10    # index of the small print in TicketC.text
    QR_MAX_VERSION = 40
    QR_MAX_SIZE = 177   # 4 * 40 + 17
    QR_MAX_CODEWORDS = 3706


cdef struct TicketC:
    Text text[NFIELDS + 1]
    const unsigned char* qr
    Py_ssize_t nqr


# QR working state: modules (1 = dark) and function-pattern flags, row major.
cdef struct QR:
    int ver
    int size
    unsigned char dark[QR_MAX_SIZE * QR_MAX_SIZE]
    unsigned char func[QR_MAX_SIZE * QR_MAX_SIZE]


# Per-call working memory, pooled: a render takes one, returns it when done, so the
# deflate state (and its pages) is reused instead of set up for every stream.
cdef struct Scratch:
    libdeflate_compressor* zc   # pdf.pxi's compressor, made on first use
    Buf content
    Buf z
    Buf out
    Buf prep                    # the shaped fields' UTF-32 and ActualText (shaped_fill)
    QR q
    unsigned char used[QR_MAX_SIZE * QR_MAX_SIZE]   # modules already in a rectangle
    void* text                  # TextCtx of the shaped-text path, made on first use
    Scratch* next


# -- the order read into C (_render.pyx, text.pxi) ---------------------------------------

# The objects whose data the C side reads (the fields' str, their NFC form, their cp1252
# bytes, the QR payload), held for the length of one render_order call.  A C array of
# references, not a list and a tuple of the values: fewer allocations, appends and
# deallocations under the GIL, which two render threads cannot overlap (see shape_src;
# the measured share: docs/benchmarks.md, "Moved from comments").
cdef struct Keep:
    PyObject** p
    Py_ssize_t n
    Py_ssize_t cap


# One order read into C: what render_order (and the render pool, pool.pxi) hands to the
# nogil part.  Its Text fields point into the Python objects held by `keep`.
cdef struct Prepared:
    TicketC* tc
    Py_ssize_t n
    Keep keep
    int shaped
    const int* of           # the order's fonts (han_array), NULL when nothing is shaped


# -- faces and glyph procedures (fonts.pxi, glyphs.pxi) ----------------------------------

cdef enum:
    PS_NAME_MAX = 63            # a face's PostScript name, bytes

cdef struct GlyphProc:
    char* obj                   # "<< /Length .. >>\nstream\n..\nendstream\nendobj\n"
    int objlen
    int width                   # advance, 1/1000 em
    int x0, y0, x1, y1          # its outline's box as its d1 gives it (all 0: no ink)
    # a colour glyph (emoji.pxi): its image, RGB and alpha, each deflated; NULL for others
    char* img
    int imglen
    char* mask
    int masklen
    int iw, ih


cdef struct Face:
    char* path
    int index
    int state                   # 0 not opened yet, 1 open, -1 cannot be opened
    int bold                    # the face used for bold fields (itself when none)
    int colour                  # its glyphs are PNGs (CBDT): only emoji.pxi picks it
    hb_blob_t* blob
    hb_face_t* face
    hb_font_t* font
    unsigned int nglyphs
    GlyphProc** glyphs          # nglyphs pointers, filled on first use
    PyThread_type_lock lock
    char psname[PS_NAME_MAX + 1]  # its PostScript name, PDF-name safe (the fonts' names)


# -- shaped text: glyphs, paragraphs (shape.pxi), codes (type3.pxi) ----------------------

cdef struct SGlyph:
    int face
    unsigned int gid
    int adv
    int xoff
    int yoff
    int ci                      # the field index of the first character it stands for
    int cn                      # how many characters it stands for in ToUnicode (0: none)
    int code                    # font * 256 + code, set by the registry
    int rtl                     # from a right-to-left run
    int xi                      # register_glyphs: codes of its moved characters in c.xc
    int xn                      # how many (0: none moved)


cdef struct GlyphVec:
    SGlyph* g
    int n
    int cap
    int failed


cdef struct Para:
    const unsigned int* u
    int n
    int bold
    int rtl                     # the resolved paragraph direction is right to left
    FriBidiParType base
    FriBidiCharType* bt
    FriBidiBracketType* brt
    FriBidiLevel* lev
    FriBidiLevel* lev2          # a line's levels, changed by fribidi_reorder_line
    FriBidiStrIndex* map
    hb_script_t* script
    int* face
    unsigned int* gid
    int* adv                    # per character, the advance of its cluster (line breaks)
    char* brk                   # libunibreak's break classes
    unsigned int* ub            # line_breaks' copy of the text (breaks.pxi)
    int cap
    int any_rtl                 # some character has an odd (right-to-left) level
    int flat                    # every level 0 without asking fribidi (bidi_flat)
    int missing                 # some character is drawn as the replacement mark
    hb_language_t lang          # the order's language (locl forms), NULL for none
    const unsigned int* su      # the text HarfBuzz shapes: u, or sbuf (emoji_faces)
    unsigned int* sbuf


cdef struct RegEntry:
    int face
    unsigned int gid
    int toff                    # its text in the pool
    int tlen
    int proc                    # index of its glyph procedure in the order
    unsigned int h


cdef struct Registry:
    RegEntry* e
    int n
    int cap
    int* tab                    # open addressing: entry index + 1, 0 empty
    int tmask
    unsigned int* pool
    int plen
    int pcap
    int* ptab                   # (face, gid) -> procedure index + 1
    int pmask
    int* pface
    unsigned int* pgid
    int nproc
    int proccap
    int failed


cdef struct WItem:
    # one glyph as walk_line writes it: its face (for the bridges), code, x, width, rise
    int face
    int code
    int x
    int w
    int rise


cdef struct TextCtx:
    Para p
    Para p2
    hb_buffer_t* hb
    GlyphVec gv
    Registry reg
    const int* of               # the order's fonts (pick_face in fonts.pxi)
    unsigned int* tmp
    int tmpcap
    int* ord                    # put_field_ops: a line's logical order, positions
    int* lpos
    int ordcap
    int* xc                     # codes of the invisible glyphs of moved characters
    int nxc
    int xccap
    WItem* items                # walk_line: a line's writing order
    int itemcap


# -- a field laid out (layout.pxi) and written (place.pxi) -------------------------------

cdef enum:
    MAX_LINES = 12              # lines of one field at most

cdef struct FLine:
    int g0
    int ng
    int width                   # 1/1000 em
    int lo, bot, hi, top        # its ink, 1/1000 em from its origin (line_ink)
    long x                      # milli-points
    long y


cdef struct FieldOut:
    int shaped
    int actual                  # the field needs its /ActualText (see layout_field)
    int size                    # milli-points
    int nlines
    FLine line[MAX_LINES]


cdef struct TJ:
    # the TJ state of one line: current font, rise, pen (1/1000 em), inside <hex>
    int cur
    int rise
    int at
    int inhex
    int size


# -- the per-process caches' table (cachetable.pxi; breakcache.pxi, shapecache.pxi) --------

# whether the entry matches the key (its hash h already compared or not: the cache's
# own function decides)
ctypedef bint (*cache_same_fn)(const void* entry, const void* key,
                               unsigned int h) noexcept nogil

cdef struct CacheTable:
    void** tab                  # open addressing: the entries, NULL empty
    int slots                   # a power of two; at most half of them used
    int n
    Py_ssize_t bytes            # the entries' sizes as cache_put was told them
    Py_ssize_t max_bytes
    long hits
    long misses
    PyThread_type_lock lock


cdef int qr_encode(QR* q, const unsigned char* data, Py_ssize_t n) noexcept nogil
