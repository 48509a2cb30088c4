# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Native ticket renderer: the same bytes as stagedoor.render.reference.render_order, with
the GIL released.

Why the split: the Python part only turns the order's strings into C buffers (cp1252
bytes straight from the str data; the rare field that needs an approximation goes
through stagedoor.render.reference.encode_text for it and its ActualText hex); everything
else runs in C inside `with nogil:` -- the QR code, the content stream, deflate through
zlib's C API, the xref table -- so threads render in parallel.  The static part of the
page (border, header bar, labels) is compressed once at import and shared by every page.

Where the time went (perf + callgrind, one ticket): first the QR mask choice (branchy
penalty scoring, now 64-bit row/column bitsets for versions 1-10), then deflate (level 1,
memLevel 4, and a third less input by drawing the QR as greedy rectangles), then setting
up deflate per stream (its state now lives in a pooled scratch area, reset not rebuilt).

The layout and the QR algorithm mirror stagedoor/render/reference.py and
stagedoor/render/qr.py step by step; change both together (tests/test_render.py compares
them byte for byte).  The tables both read (ECC, static page content, fixed objects)
are stagedoor/render/tables.py, read once at import.

The source is split by concern into include files beside the Python they mirror, the
way asyncpg splits its protocol (one extension, one C module, several .pxi):

    render/_native/buf.pxi      growable byte buffer, number formats
    render/_native/qr.pxi       QR encoder: version, codewords, Reed-Solomon, placement
    render/_native/qr_mask.pxi  QR mask choice: penalty rules, 64-bit bitset fast path
    render/_native/page.pxi     one page's content stream: fields, small print, QR boxes
    render/_native/pdf.pxi      the file: objects, deflate, scratch pool, xref, render_c
    render/_native/text.pxi     str -> WinAnsi bytes (+ /ActualText through the reference)

This file keeps the imports, the includes (order matters only for the import-time
initialisation they run) and the Python entry points.
"""

from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset, strlen
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

ctypedef unsigned long long u64

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)

from stagedoor.render import tables as _tables

include "render/_native/buf.pxi"
include "render/_native/qr.pxi"
include "render/_native/qr_mask.pxi"
include "render/_native/page.pxi"
include "render/_native/pdf.pxi"
include "render/_native/text.pxi"

# -- Python entry points ----------------------------------------------------------------


def render_order(order):
    """PDF bytes, one page per ticket; byte-identical to stagedoor.render.reference.render_order."""
    cdef object tickets = order.tickets
    cdef Py_ssize_t n = len(tickets), k
    cdef TicketC* tc
    cdef Scratch* s = NULL
    cdef Py_ssize_t* offsets
    cdef int rc
    cdef list keep = []
    if n == 0:
        raise ValueError("order has no tickets")
    tc = <TicketC*>malloc(n * sizeof(TicketC))
    offsets = <Py_ssize_t*>malloc((6 + 2 * n) * sizeof(Py_ssize_t))
    try:
        if tc == NULL or offsets == NULL:
            raise MemoryError()
        for k in range(n):
            t = tickets[k]
            encode_text(t.event, keep, &tc[k].text[0])
            encode_text(t.venue, keep, &tc[k].text[1])
            encode_text(t.starts_at, keep, &tc[k].text[2])
            encode_text(t.section, keep, &tc[k].text[3])
            encode_text(t.row, keep, &tc[k].text[4])
            encode_text(t.seat, keep, &tc[k].text[5])
            encode_text(t.buyer, keep, &tc[k].text[6])
            encode_text(t.price, keep, &tc[k].text[7])
            encode_text(t.order_id, keep, &tc[k].text[8])
            encode_text(t.admission_code, keep, &tc[k].text[9])
            encode_text(t.small_print, keep, &tc[k].text[SMALL_PRINT])
            qr_bytes(t.admission_code, keep, &tc[k].qr, &tc[k].nqr)
        with nogil:
            s = scratch_get()
            rc = render_c(tc, n, s, offsets) if s != NULL else -1
        if rc == -1:
            raise MemoryError()
        if rc == -2:
            raise RuntimeError("zlib deflate failed")
        if rc == -3:
            for k in range(n):
                if choose_version(tc[k].qr, tc[k].nqr) < 0:
                    raise ValueError(f"QR data too long: {tc[k].nqr} bytes "
                                     "(at most 2331 at level M)")
            raise ValueError("QR data too long")
        return PyBytes_FromStringAndSize(s.out.data, s.out.len)
    finally:
        if s != NULL:
            scratch_put(s)
        free(tc)
        free(offsets)


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
