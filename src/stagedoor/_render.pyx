# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Native ticket renderer: the same bytes as stagedoor.render.reference.render_order, with
the GIL released.

Why the split: the Python part only reads the order's fields and points C at their
text (the str data itself for ASCII; cp1252 bytes for other WinAnsi text; the NFC str
for a shaped field) and copies the finished PDF into a bytes object; everything else
runs in C inside `with nogil:` -- whether an ASCII field fits its box, the shaped
fields' UTF-32 and /ActualText, the text shaping and layout (HarfBuzz, fribidi,
libunibreak, libthai through their C APIs), the QR code, the content stream, the
order's fonts, deflate through libdeflate, the xref table -- so threads render in
parallel.  What stays under the GIL is what two render threads cannot overlap, and a
thread that finds it taken sleeps a futex round trip (text.pxi, shape_src), so it is
kept small.  The static part of the page (border,
header bar, labels) is compressed once at import and shared by every page.

What a ticket's time goes to, and so where the code is shaped for speed: the QR mask
choice (penalty scoring on 64-bit row/column bitsets for versions 1-10, qr_mask.pxi),
deflate (libdeflate's level 1, whole buffers: less than half of zlib's level-1 time on
these ~2-3 KB streams, and less input by drawing the QR as greedy rectangles; its
compressor lives in a pooled scratch area, made once), and for a shaped field its shaping and a memcpy per glyph of its cached
Type 3 procedure (type3.pxi says why Type 3 and not an hb-subset per order).  The
profiles behind this are in docs/benchmarks.md, "Moved from comments".

The layout and the QR algorithm mirror stagedoor/render/reference.py,
stagedoor/render/shaped/ and stagedoor/render/qr.py step by step; change them
together (tests/render/test_render.py and tests/render/test_scripts.py compare the bytes).  The tables
both read (ECC, static page content, fixed objects, field boxes) are
stagedoor/render/tables.py, read once at import.

The source is split the way asyncpg splits its protocol (one extension, one C module):
declarations in .pxd files, the code in include files (.pxi) by concern, beside the
Python they mirror.

    _render.pxd                  the structs more than one unit passes around, and the
                                 C libraries' declarations it cimports:
    render/_native/harfbuzz.pxd  HarfBuzz: fonts, shaping, outlines, colour PNGs, Unicode
    render/_native/fribidi.pxd   fribidi: the Unicode bidi algorithm
    render/_native/unibreak.pxd  libunibreak: UAX #14 line breaks
    render/_native/libthai.pxd   libthai: Thai word breaks
    render/_native/icu.pxd       ICU: the line break iterator (Lao, Myanmar, Khmer)
    render/_native/libdeflate.pxd  libdeflate: the page streams' deflate, whole buffers
    render/_native/zlib.pxd      zlib: deflate once (glyph procedures, images), inflate
    render/_native/cpythonx.pxd  CPython: the str internals Cython does not declare
    render/_native/atomics.pxd   atomic loads and stores (inline C) for lock-free reads

    render/_native/buf.pxi       growable byte buffer, number formats
    render/_native/qr.pxi        QR encoder: version, codewords, Reed-Solomon, placement
    render/_native/qr_mask.pxi   QR mask choice: penalty rules, 64-bit bitset fast path
    render/_native/page.pxi      one page's content stream: fields, small print, QR boxes
    render/_native/breaks.pxi    line breaks through libunibreak, minus what aborts it
    render/_native/fonts.pxi     faces (opened lazily, memory-mapped), the face of a character
    render/_native/glyphs.pxi    a glyph's outline as a Type 3 procedure, cached per process
    render/_native/shape.pxi     itemise, bidi, shape one line of a field
    render/_native/type3.pxi     the order's glyphs as Type 3 fonts + ToUnicode
    render/_native/emoji.pxi     emoji sequences to the colour face; its PNGs as images
    render/_native/cachetable.pxi  the table both caches below keep their entries in
    render/_native/breakcache.pxi  a text's line-break classes, cached per process
    render/_native/shapecache.pxi  HarfBuzz's glyphs of a run, cached per process
    render/_native/thai.pxi      Thai word breaks from libthai's dictionary
    render/_native/dictbreaks.pxi  Lao, Myanmar and Khmer word breaks from ICU's dictionaries
    render/_native/clusters.pxi  where a line may cut a field: cluster boundaries, marks
    render/_native/layout.pxi    fit a field in its box: shrink, wrap, ellipsis, place lines
    render/_native/place.pxi     a laid-out field as PDF text operators: each glyph placed
                                 (put_glyph) and written in logical order (walk_line)
    render/_native/linetext.pxi  the text layer of Nastaliq lines and of Adlam and N'Ko
    render/_native/fastfont.pxi  the fast path's fonts: Noto Sans (and Bold) as Type 3
    render/_native/pdf.pxi       the file: objects, deflate, scratch pool, xref, render_c
    render/_native/text.pxi      str -> fast-path bytes when they fit, else shaped text
    render/_native/pool.pxi      a pool of C threads rendering orders into sinks (the
                                 durable write of tickets/_durable.pyx), no GIL

This file keeps the imports, the includes (order matters only for the import-time
initialisation they run) and the Python entry points.
"""

import array
import os
import threading
import unicodedata

from cpython cimport array
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdio cimport snprintf
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset, strlen
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport (
    PyUnicode_AsUTF8AndSize,
    PyUnicode_DATA,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_READ,
)
from cpython.pythread cimport (
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)

from stagedoor.render import fontplan as _fontplan
from stagedoor.render import tables as _tables

# The ticket's fields in TicketC.text order (render.FIELDS, then the small print); the
# QR code encodes the admission code's field.
cdef tuple FIELD_ATTRS = tuple(name for name, _ in _tables.FIELDS) + ("small_print",)
cdef enum:
    ADMISSION_CODE = 9
if FIELD_ATTRS[ADMISSION_CODE] != "admission_code" or len(FIELD_ATTRS) != NFIELDS + 1:
    raise ImportError("stagedoor._render: render.tables.FIELDS is not the layout built in")

include "render/_native/buf.pxi"
include "render/_native/qr.pxi"
include "render/_native/qr_mask.pxi"
include "render/_native/page.pxi"
include "render/_native/breaks.pxi"
include "render/_native/fonts.pxi"
include "render/_native/glyphs.pxi"
include "render/_native/shape.pxi"
include "render/_native/type3.pxi"
include "render/_native/emoji.pxi"
include "render/_native/cachetable.pxi"
include "render/_native/breakcache.pxi"
include "render/_native/shapecache.pxi"
include "render/_native/thai.pxi"
include "render/_native/dictbreaks.pxi"
include "render/_native/clusters.pxi"
include "render/_native/layout.pxi"
include "render/_native/place.pxi"
include "render/_native/linetext.pxi"
include "render/_native/fastfont.pxi"
include "render/_native/pdf.pxi"
include "render/_native/text.pxi"

# -- Python entry points ----------------------------------------------------------------


# -- fonts: configured once per process (the settings, or the defaults) --------------------

cdef object _PLAN = None
cdef int PLAN_READY = 0     # _PLAN is set: what render_order's C part can read
# the Han faces by locale (int arrays), without kana and with it: two dicts, so that
# the lookup makes no key tuple (see Keep in text.pxi on allocations per order)
cdef dict _HAN = {}
cdef dict _HAN_KANA = {}
# The first shaped order configures the default fonts: once, under this lock.  Without
# it, threads starting cold each called configure(), and a later one freed the faces
# (drop_faces) that an earlier one was already rendering with, outside the GIL: a
# segfault or a lock never released, in 4 of 10 runs of 8 cold threads.
cdef object _PLAN_LOCK = threading.Lock()


def configure(plan):
    """Use this font plan (stagedoor.render.fonts.plan(...)) from now on.  Not while
    other threads render: the faces they use are closed (the worker configures at
    boot, before its render threads start)."""
    global _PLAN, PLAN_READY
    configure_fonts(plan.faces, plan.scripts, plan.fallback, plan.han_order)
    configure_emoji(plan.emoji)
    fast_configure(plan)
    shape_cache_clear()     # its runs name faces by number
    _PLAN = plan
    PLAN_READY = 1
    _HAN.clear()
    _HAN_KANA.clear()


def _plan_lock_after_fork_in_child():
    global _PLAN_LOCK
    _PLAN_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_plan_lock_after_fork_in_child)


cdef array.array han_array(object order, bint kana_seen):
    """The Han faces of this order as an int array (kept alive by the caller)."""
    global _PLAN
    if _PLAN is None:
        with _PLAN_LOCK:
            if _PLAN is None:
                configure(_fontplan.default())
    locale = getattr(order, "locale", "") or ""
    kana = not locale and kana_seen
    cache = _HAN_KANA if kana else _HAN
    arr = cache.get(locale)
    if arr is None:
        # the layout pick_face reads (fonts.pxi): [language, nhan, han..., npref, pairs]
        han = _fontplan.han_faces(_PLAN, locale, kana)
        pref = _fontplan.language_faces(_PLAN, locale)
        arr = array.array("i", [language_index(_fontplan.shaping_language(locale)), len(han),
                                *han, len(pref) // 2, *pref])
        cache[locale] = arr
    return arr


cdef int prepare(object order, Prepared* pr) except -1:
    """Under the GIL: the order's fields as C text (kept alive by pr.keep).  On an
    exception the caller still calls prepared_free."""
    cdef object tickets = order.tickets
    cdef Py_ssize_t n = len(tickets), k
    cdef int f, v
    cdef array.array arr
    if n == 0:
        raise ValueError("order has no tickets")
    if not PLAN_READY:
        # the fit test of the fast path reads the Latin face's advances (fastfont.pxi)
        han_array(order, False)
    pr.n = n
    pr.shaped = NOT_SHAPED
    pr.keep.n = 0
    pr.of = NULL
    pr.keep.cap = 36 * n    # 11 fields, each at most as read, as str and encoded; the QR
    pr.keep.p = <PyObject**>malloc(pr.keep.cap * sizeof(PyObject*))
    pr.tc = <TicketC*>malloc(n * sizeof(TicketC))
    if pr.tc == NULL or pr.keep.p == NULL:
        raise MemoryError()
    for k in range(n):
        t = tickets[k]
        for f in range(NFIELDS + 1):
            value = getattr(t, FIELD_ATTRS[f])
            keep_push(&pr.keep, value)
            v = encode_text(value, &pr.keep, &pr.tc[k].text[f], f)
            if v > pr.shaped:
                pr.shaped = v
            if f == ADMISSION_CODE:
                qr_bytes(value, &pr.keep, &pr.tc[k].qr, &pr.tc[k].nqr)
    if pr.shaped != NOT_SHAPED:
        arr = han_array(order, pr.shaped == SHAPED_KANA)
        keep_push(&pr.keep, arr)
        pr.of = arr.data.as_ints
    return 0


cdef void prepared_free(Prepared* pr) noexcept:
    """Under the GIL (it drops the kept references)."""
    free(pr.tc)
    pr.tc = NULL
    keep_release(&pr.keep)


cdef int execute(Prepared* pr, Scratch** out) noexcept nogil:
    """The render itself, without the GIL: 0 with the PDF in (*out).out, else an error
    code for raise_for (-4: the fonts are not configured yet).  *out, once set, goes
    back with scratch_put whatever the result."""
    cdef Scratch* s
    cdef int rc
    if decide_ascii(pr.tc, pr.n) != NOT_SHAPED and pr.shaped == NOT_SHAPED:
        # only ASCII fields are shaped (too wide, or controls): no Han face is needed,
        # but the fonts must be configured
        pr.shaped = SHAPED
        if not PLAN_READY:
            return -4
    s = scratch_get()
    if s == NULL:
        return -1
    out[0] = s
    rc = shaped_fill(pr.tc, pr.n, &s.prep) if pr.shaped != NOT_SHAPED else 0
    if rc == 0:
        rc = render_c(pr.tc, pr.n, s, pr.of)
    return rc


cdef int raise_for(Prepared* pr, int rc) except -1:
    cdef Py_ssize_t k
    if rc == -1:
        raise MemoryError()
    if rc == -2:
        raise RuntimeError("zlib deflate failed")
    if rc == -3:
        for k in range(pr.n):
            if choose_version(pr.tc[k].qr, pr.tc[k].nqr) < 0:
                raise ValueError(f"QR data too long: {pr.tc[k].nqr} bytes "
                                 "(at most 2331 at level M)")
        raise ValueError("QR data too long")
    if rc != 0:
        raise RuntimeError(f"render failed ({rc})")
    return 0


def render_order(order):
    """PDF bytes, one page per ticket (see stagedoor.render.reference for the rules)."""
    cdef Prepared pr
    cdef Scratch* s = NULL
    cdef int rc
    memset(&pr, 0, sizeof(Prepared))
    try:
        prepare(order, &pr)
        with nogil:
            rc = execute(&pr, &s)
        if rc == -4:
            han_array(order, False)     # configures the fonts: once a process
            return render_order(order)
        raise_for(&pr, rc)
        return PyBytes_FromStringAndSize(s.out.data, s.out.len)
    finally:
        if s != NULL:
            scratch_put(s)
        prepared_free(&pr)


def qr_matrix(data):
    """The QR symbol for bytes `data` as rows of booleans (True = dark), like qr.encode."""
    cdef const unsigned char[:] view = data
    cdef QR* q = <QR*>malloc(sizeof(QR))
    cdef int rc, x, y
    cdef const unsigned char* p = <const unsigned char*>b""
    cdef Py_ssize_t n = view.shape[0]
    if q == NULL:
        raise MemoryError()
    if n:
        p = &view[0]
    try:
        with nogil:
            rc = qr_encode(q, p, n)
        if rc != 0:
            raise ValueError(f"QR data too long: {view.shape[0]} bytes "
                             "(at most 2331 at level M)")
        return [[q.dark[y * q.size + x] != 0 for x in range(q.size)] for y in range(q.size)]
    finally:
        free(q)


# The render pool (C threads, no GIL) uses prepare/execute above: included last.
include "render/_native/pool.pxi"
