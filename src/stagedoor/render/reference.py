"""Ticket PDFs: the pure-Python reference renderer, and the choice of renderer.

`render_order(order)` returns a PDF with one page per ticket.  The native extension
`stagedoor._render.render_order` produces the same bytes (the tests check it on random
tickets) at a fraction of the cost and with the GIL released; this module is its test
oracle and the fallback when the extension is not built.  `renderer()` picks the native
one when it imports; the caller logs `NATIVE_IMPORT_ERROR` loudly when it does not.

The file is deterministic: no dates, no /ID, fixed object numbers, so the same order
always gives the same bytes.  Both renderers deflate with level 1, window 15, memLevel 4;
byte identity assumes Python's zlib module and the extension use the same libz (they
do when both link the system zlib; tests/test_render.py would catch a difference).

Layout of the file: 1 catalog, 2 pages, 3 shared resources, 4 Helvetica, 5
Helvetica-Bold (standard Type1 fonts, /WinAnsiEncoding, not embedded), 6 the static
part of every page (border, header bar, labels), compressed once; then per ticket k
object 7+2k, the page, and 8+2k, its own content stream (the fields and the QR code as
filled rectangles, see qr_rectangles).

Text, and characters outside WinAnsi
------------------------------------
The fonts use /WinAnsiEncoding (cp1252) with /Differences that put 36 Central European
letters the standard Helvetica fonts also have (Ą Ć Ę Ł Ń Ś Ź Ż Č Ď Ě Ň Ř Ť Ů Ő Ű Đ and
their small letters, EXTRA_GLYPHS) on codes WinAnsi leaves unused.  So "Zoë
Ødegaard-Šimić", "Łukasz Żółć" or "Ďurčo Ňeřťů" print and extract (pypdf, pdftotext)
exactly, and €, Œ, ž are plain WinAnsi.  C0 controls and DEL print as a space.  A
field with any other character (Turkish ş ğ, Cyrillic, CJK, emoji ...) is never
dropped:

* the page shows an approximation, character by character: the character itself when
  the encoding has it, else its NFKD decomposition without combining marks if that is
  in cp1252 (ş -> s, ğ -> g), else a small table for letters without a decomposition
  (dotless i -> i, ŋ -> n, ...), else '?';
* the exact text goes into the page as a marked-content span with /ActualText (a
  UTF-16BE text string) around the field, so text extraction that honours ActualText
  (poppler's pdftotext, Acrobat, screen readers) returns the original.  pypdf ignores
  ActualText and extracts the approximation ("Łukasz 李" -> "Łukasz ?").

Embedding a Unicode font subset would show every script exactly; not done (yet).

The QR code carries the admission code exactly, as UTF-8 (with an ECI header when it
is not ASCII).

Small print is wrapped greedily at spaces to lines of at most 110 bytes (longer words
are cut), leading spaces of a wrapped line are dropped.
"""

from __future__ import annotations

import unicodedata
import zlib

from . import qr
from .order import Order, Ticket
from .tables import (
    EXTRA_CODES,
    EXTRA_GLYPHS,
    FIELDS,
    HEADER,
    SMALL_PRINT_OPS,
    STATIC_CONTENT,
    STATIC_OBJECTS,
)

PAGE_W, PAGE_H = 420, 298
# deflate parameters, as in _render.pyx: level 1 (Z_BEST_SPEED) is 2.5x faster than 6
# for ~16% larger streams; memLevel 4 makes the hash table that deflateReset clears for
# every stream 4 KB instead of 64 KB, at the same size for content this small.
ZLIB_LEVEL, ZLIB_WBITS, ZLIB_MEMLEVEL = 1, 15, 4
WRAP = 110

# The QR box: left edge, top edge and side in points; quiet zone of 4 modules inside.
QR_X, QR_TOP, QR_SIDE = 288, 246, 116

FIRST_PAGE_OBJ = 7
EXTRA_BYTE = {ch: code for (ch, _), code in zip(EXTRA_GLYPHS, EXTRA_CODES, strict=True)}

# Letters with no NFKD decomposition, and what the page shows for them.
_NO_DECOMPOSITION = {
    "Ł": "L", "ł": "l", "Đ": "D", "đ": "d", "Ħ": "H", "ħ": "h", "\u0131": "i", "ĸ": "k",
    "Ŋ": "N", "ŋ": "n", "Ŧ": "T", "ŧ": "t", "Ɓ": "B", "ƀ": "b", "Ə": "E", "ə": "e",
    "\u02bb": "'", "\u02bc": "'", "\u2010": "-", "\u2012": "-", "\u2212": "-",
}


def encode_text(text: str) -> tuple[bytes, bytes]:
    """(the bytes the page shows, in the fonts' encoding; ActualText hex or b"").

    Character by character: C0 controls and DEL -> space; cp1252 -> its byte; one of
    EXTRA_GLYPHS -> its code; else an approximation (see the module docstring), and
    then the exact text also goes in as ActualText (hex of FEFF + UTF-16BE).
    """
    out = bytearray()
    approximated = False
    for ch in text:
        if ch < " " or ch == "\x7f":
            out.append(32)
            continue
        code = EXTRA_BYTE.get(ch)
        if code is not None:
            out.append(code)
            continue
        try:
            out += ch.encode("cp1252")
            continue
        except UnicodeEncodeError:
            pass
        approximated = True
        out += _approximate(ch)
    if not approximated:
        return bytes(out), b""
    shown = "".join(" " if c < " " or c == "\x7f" else c for c in text)
    actual = ("\ufeff" + shown).encode("utf-16-be", "surrogatepass").hex().upper()
    return bytes(out), actual.encode("ascii")


def _approximate(ch: str) -> bytes:
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    for candidate in (base, _NO_DECOMPOSITION.get(ch, "")):
        if candidate:
            try:
                return candidate.encode("cp1252")
            except UnicodeEncodeError:
                pass
    return b"?"


def escape(raw: bytes) -> bytes:
    """A PDF literal string body: ( ) \\ escaped, and codes 10 and 13 (EXTRA_GLYPHS
    letters) as \\n and \\r, since a raw end of line in a string reads as 10."""
    out = bytearray()
    for b in raw:
        if b in b"()\\":
            out.append(0x5C)
        elif b == 10:
            out += b"\\n"
            continue
        elif b == 13:
            out += b"\\r"
            continue
        out.append(b)
    return bytes(out)


def wrap(raw: bytes, width: int = WRAP) -> list[bytes]:
    lines: list[bytes] = []
    pos, n = 0, len(raw)
    while pos < n:
        while pos < n and raw[pos] == 32:
            pos += 1
        if pos >= n:
            break
        if n - pos <= width:
            lines.append(raw[pos:])
            break
        cut = raw.rfind(b" ", pos, pos + width + 1)
        if cut <= pos:
            lines.append(raw[pos:pos + width])
            pos += width
        else:
            lines.append(raw[pos:cut])
            pos = cut
    return lines


def _milli(v: int) -> bytes:
    sign = "-" if v < 0 else ""
    v = abs(v)
    return f"{sign}{v // 1000}.{v % 1000:03d}".encode()


def _span(actual: bytes, body: bytes) -> bytes:
    if not actual:
        return body
    return b"/Span << /ActualText <" + actual + b"> >> BDC\n" + body + b"EMC\n"


def qr_rectangles(matrix: list[list[bool]]) -> list[tuple[int, int, int, int]]:
    """Dark modules as (x, y, w, h) rectangles: greedy in reading order, each as wide and
    then as tall as it can grow over modules not yet covered."""
    size = len(matrix)
    used = [[False] * size for _ in range(size)]
    rects = []
    for y in range(size):
        x = 0
        while x < size:
            if not matrix[y][x] or used[y][x]:
                x += 1
                continue
            start = x
            while x < size and matrix[y][x] and not used[y][x]:
                x += 1
            h = 1
            while y + h < size and all(matrix[y + h][i] and not used[y + h][i]
                                       for i in range(start, x)):
                h += 1
            for yy in range(y, y + h):
                for i in range(start, x):
                    used[yy][i] = True
            rects.append((start, y, x - start, h))
    return rects


def qr_ops(data: bytes) -> bytes:
    matrix = qr.encode(data)
    size = len(matrix)
    scale = QR_SIDE * 1000 // (size + 8)
    x0 = QR_X * 1000 + 4 * scale
    y0 = QR_TOP * 1000 - 4 * scale
    out = [b"q 0 0 0 rg " + _milli(scale) + b" 0 0 " + _milli(-scale) + b" "
           + _milli(x0) + b" " + _milli(y0) + b" cm\n"]
    out += [b"%d %d %d %d re\n" % r for r in qr_rectangles(matrix)]
    out.append(b"f Q\n")
    return b"".join(out)


def page_content(ticket: Ticket) -> bytes:
    out = []
    for name, ops in FIELDS:
        shown, actual = encode_text(str(getattr(ticket, name)))
        body = b"BT " + ops + b" (" + escape(shown) + b") Tj ET\n"
        out.append(_span(actual, body))
    shown, actual = encode_text(ticket.small_print)
    lines = wrap(shown)
    if lines:
        parts = [b"BT " + SMALL_PRINT_OPS + b" (" + escape(lines[0]) + b") Tj"]
        parts += [b" T* (" + escape(line) + b") Tj" for line in lines[1:]]
        parts.append(b" ET\n")
        out.append(_span(actual, b"".join(parts)))
    out.append(qr_ops(ticket.admission_code.encode("utf-8", "surrogatepass")))
    return b"".join(out)


def _stream(num: int, content: bytes) -> bytes:
    z = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, ZLIB_WBITS, ZLIB_MEMLEVEL)
    data = z.compress(content) + z.flush()
    return (b"%d 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n" % (num, len(data))
            + data + b"\nendstream\nendobj\n")


def render_order(order: Order) -> bytes:
    """One page per ticket; see the module docstring for the layout and text rules."""
    n = len(order.tickets)
    if n == 0:
        raise ValueError("order has no tickets")
    parts: list[bytes] = [HEADER]
    offsets: list[int] = []
    pos = len(HEADER)

    def add(obj: bytes) -> None:
        nonlocal pos
        offsets.append(pos)
        parts.append(obj)
        pos += len(obj)

    add(STATIC_OBJECTS[0])
    kids = b" ".join(b"%d 0 R" % (FIRST_PAGE_OBJ + 2 * k) for k in range(n))
    add(b"2 0 obj\n<< /Type /Pages /Kids [" + kids + b"] /Count %d >>\nendobj\n" % n)
    for obj in STATIC_OBJECTS[1:]:
        add(obj)
    add(_stream(6, STATIC_CONTENT))
    for k, ticket in enumerate(order.tickets):
        page = FIRST_PAGE_OBJ + 2 * k
        add(b"%d 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources 3 0 R "
            b"/Contents [6 0 R %d 0 R] >>\nendobj\n" % (page, PAGE_W, PAGE_H, page + 1))
        add(_stream(page + 1, page_content(ticket)))
    size = len(offsets) + 1
    xref = [b"xref\n0 %d\n0000000000 65535 f \n" % size]
    xref += [b"%010d 00000 n \n" % off for off in offsets]
    xref.append(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, pos))
    return b"".join(parts) + b"".join(xref)
