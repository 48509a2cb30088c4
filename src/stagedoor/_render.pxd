# C declarations for _render.pyx: the C libraries it calls (one .pxd each in
# render/_native/, all callable without the GIL), and the structs the renderer passes
# around inside `with nogil:`.

from stagedoor.render._native.fribidi cimport *     # shape.pxi: bidi
from stagedoor.render._native.harfbuzz cimport *    # fonts, glyphs, shape, emoji, clusters
from stagedoor.render._native.icu cimport *         # dictbreaks.pxi
from stagedoor.render._native.libthai cimport *     # thai.pxi
from stagedoor.render._native.unibreak cimport *    # breaks, breakcache, layout
from stagedoor.render._native.zlib cimport *        # pdf.pxi (deflate), emoji.pxi (inflate)


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
    z_stream zs
    int zinit
    Buf content
    Buf z
    Buf out
    Buf prep                    # the shaped fields' UTF-32 and ActualText (shaped_fill)
    QR q
    unsigned char used[QR_MAX_SIZE * QR_MAX_SIZE]   # modules already in a rectangle
    void* text                  # TextCtx of the shaped-text path, made on first use
    Scratch* next


cdef int qr_encode(QR* q, const unsigned char* data, Py_ssize_t n) noexcept nogil
