"""Ticket PDFs: the pure-Python reference renderer, and the choice of renderer.

`render_order(order)` returns a PDF with one page per ticket.  The native extension
`stagedoor._render.render_order` produces the same bytes (the tests check it on random
tickets) at a fraction of the cost and with the GIL released; this module is its test
oracle and the fallback when the extension is not built.  `renderer()` picks the native
one when it imports; the caller logs `NATIVE_IMPORT_ERROR` loudly when it does not.

The file is deterministic: no dates, no /ID, fixed object numbers, so the same order
always gives the same bytes.  Both renderers deflate the page streams with libdeflate's
level 1 (the glyph procedures, compressed once, with zlib's level 9); byte identity
assumes they load the same libdeflate and libz (they do when both use the system's;
tests/render/test_render.py would catch a difference).

Layout of the file: 1 catalog, 2 pages, 3 shared resources, 4 and 5 the fast path's
fonts F1 and F2 (Noto Sans and Noto Sans Bold as Type 3 fonts of the glyphs the order
shows: fastfont.py), 6 the static part of every page (border, header bar, labels),
compressed once; then per ticket k object 7+2k, the page, and 8+2k, its own content
stream (the fields and the QR code as filled rectangles, see qr_rectangles); then the
shaped path's fonts (below), then F1's and F2's glyph procedures and their ToUnicode.

Text: the fast path, and shaped glyphs for the rest -- one typeface, all embedded
-------------------------------------------------------------------------------
The fast path's fonts F1 and F2 use the bytes of cp1252 (WinAnsi) plus 36 Central
European letters (Ą Ć Ę Ł Ń Ś Ź Ż Č Ď Ě Ň Ř Ť Ů Ő Ű Đ and their small letters,
EXTRA_GLYPHS) on codes WinAnsi leaves unused; each code draws the Latin face's glyph of
its character (fastfont.py).  A field whose every character has a byte there (C0
controls and DEL print as a space), whose glyphs stay inside its ink limits and that
fits its box (tables.FIELD_BOXES, by the face's advances) is drawn as is: "Zoë
Ødegaard-Šimić", "Łukasz Żółć", €, Œ, ž.  Everything else -- Turkish ş ğ and the
dotless i, Vietnamese, Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai, CJK,
Hangul, emoji, combining marks, and text too long for its box -- takes the shaped path
(render/shaped/, and render/_native/ in C): normalised to NFC, every character given a face
of the configured fonts (render/fonts.py), ordered by the Unicode bidi algorithm, shaped
with HarfBuzz, fitted into the box by the ink of its glyphs (shrunk to 6 pt, wrapped at
UAX #14 break opportunities, or ended with an ellipsis after the last whole word, else
between grapheme clusters; the admission code never cut, but set smaller on two lines;
marks past the sixth on one base not drawn;
lines spaced and placed so that marks above and below stay inside tables.FIELD_INK,
and set smaller when they would not), and drawn with the glyphs of an order's Type
3 fonts (objects after the pages: the glyph procedures, then per 256 codes a font and
its ToUnicode CMap), so that pdftotext and copy-paste give the text back. A character no
configured font has is drawn as the replacement mark U+FFFD and counted
(font_stats()["missing_glyphs"] of the extension).  The glyphs are written in logical
order, each moved to its place, with invisible glyphs where right-to-left marks and
ligatures need them and where pdfminer.six would break a line (docs/text-layer.md):
pdfminer.six reads every field exactly, pdftotext the same characters.  The exact text
is also an /ActualText span around a left-to-right field that is cut or whose glyphs
are not one per character; never for right-to-left text (poppler would reverse it).

The QR code carries the admission code exactly, as UTF-8 (with an ECI header when it
is not ASCII).

Small print (fast path) is wrapped greedily at spaces to lines of at most 110 bytes
(longer words are cut), leading spaces of a wrapped line are dropped; when a line would
not fit the box, or there would be more than 11, it takes the shaped path.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from . import fastfont, fonts, qr
from .order import Order, Ticket
from .shaped import faces, layout, pdf
from .shaped.libs import zlib_deflate
from .tables import (
    EXTRA_CODES,
    EXTRA_GLYPHS,
    FIELD_BOXES,
    FIELDS,
    HEADER,
    SMALL_PRINT_OPS,
    STATIC_CONTENT,
    STATIC_OBJECTS,
)

PAGE_W, PAGE_H = 420, 298
# deflate, as in pdf.pxi: libdeflate's level 1, whole buffers (a page's operators are
# ~2-3 KB): less than half zlib's level-1 time here, and smaller (docs/benchmarks.md,
# "libdeflate")
ZLIB_LEVEL = 1
WRAP = 110

# The QR box: left edge, top edge and side in points; quiet zone of 4 modules inside.
QR_X, QR_TOP, QR_SIDE = 288, 246, 116

FIRST_PAGE_OBJ = 7
EXTRA_BYTE = {ch: code for (ch, _), code in zip(EXTRA_GLYPHS, EXTRA_CODES, strict=True)}

SMALL_PRINT = 10
_CONTROLS = re.compile("[\x00-\x1f\x7f]")
_SURROGATES = re.compile("[\ud800-\udfff]")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff]")


def encode_winansi(text: str) -> bytes | None:
    """The bytes the standard fonts show for text, or None when a character has none.

    Character by character: C0 controls and DEL -> space; one of EXTRA_GLYPHS -> its
    code; cp1252 -> its byte.
    """
    out = bytearray()
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
        except UnicodeEncodeError:
            return None
    return bytes(out)


class FastFonts:
    """The fast path's fonts for a plan (fastfont.py): per font (0 regular, 1 bold) its
    face, each code's glyph and advance (-1: the face has none), its dictionary's head."""

    def __init__(self, fs: faces.Fonts) -> None:
        regular = fastfont.latin_face(fs.plan)
        self.faces = (regular, fs.faces[regular].bold) if regular >= 0 else (-1, -1)
        self.gids: list[list[int]] = []
        self.widths: list[list[int]] = []
        self.heads: list[bytes] = []
        # the codes the static page shows (none without a face: nothing to draw them)
        self.static = fastfont.STATIC_CODES if regular >= 0 else (frozenset(), frozenset())
        for k, face in enumerate(self.faces):
            if face < 0:
                self.gids.append([0] * 256)
                self.widths.append([-1] * 256)
                self.heads.append(fastfont.head(k, b"F", [0] * 256))
                continue
            if not fs.faces[face].open():
                raise RuntimeError(f"the Latin face {fs.faces[face].path} cannot be opened")
            gids, widths = [0] * 256, [-1] * 256
            for c, ch in enumerate(fastfont.CODE_CHARS):
                usable = ch is not None and ch not in fastfont.SHAPED_ONLY
                gid = fs.has(face, ord(ch)) if ch is not None and usable else None
                if gid:
                    gids[c], widths[c] = gid, fs.proc(face, gid)[1]
            self.gids.append(gids)
            self.widths.append(widths)
            drawn = fastfont.drawn_widths(k, widths, fs.proc(face, 0)[1])
            self.heads.append(fastfont.head(k, fs.psname(face), drawn))
        # per field, each code's advance in its font, -1 when it has no glyph or its
        # glyph's ink leaves the field's limits (fastfont.inside)
        self.field_widths = [
            [w if w >= 0 and fastfont.inside(f, fs.ink(self.faces[box[4]],
                                                       self.gids[box[4]][c]))
             else -1 for c, w in enumerate(self.widths[box[4]])]
            for f, box in enumerate(FIELD_BOXES)]


@functools.cache
def fast_fonts(fs: faces.Fonts) -> FastFonts:
    return FastFonts(fs)


def fits(raw: bytes, f: int) -> bool:
    """Whether fast-path bytes fit field f's box (the small print: its wrapped lines) in
    the fast path's font (fastfont.py); False when the face lacks one of their glyphs
    or one would leave the field's ink limits."""
    left, right, _, size, _, lines = FIELD_BOXES[f]
    widths = fast_fonts(faces.fonts_for(fonts.current())).field_widths[f]
    if any(widths[b] < 0 for b in raw):
        return False
    box = (right - left) * 1000
    if f != SMALL_PRINT:
        return sum(widths[b] for b in raw) * size // 1000 <= box
    wrapped = wrap(raw)
    return len(wrapped) <= lines and all(
        sum(widths[b] for b in line) * size // 1000 <= box for line in wrapped)


def actual_text(text: str) -> bytes:
    """ActualText hex: FEFF + UTF-16BE."""
    return ("\ufeff" + text).encode("utf-16-be", "surrogatepass").hex().upper().encode()


def shaped_text(value: str) -> str:
    """The text of the shaped path: NFC, controls as spaces."""
    if not value.isascii():
        value = unicodedata.normalize("NFC", value)
    return _CONTROLS.sub(" ", value)


def code_points(text: str) -> list[int]:
    """What the shaped path lays out: lone surrogates become U+FFFD."""
    return [ord(c) for c in _SURROGATES.sub("\ufffd", text)]


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


def _field_values(ticket: Ticket) -> list[str]:
    return [str(getattr(ticket, name)) for name, _ in FIELDS] + [ticket.small_print]


class _Shaped:
    """The order's shaped fields, laid out before any object is written."""

    def __init__(self, order: Order) -> None:
        self.plan = fonts.current()
        self.fonts = faces.fonts_for(self.plan)
        self.reg = layout.Registry()
        self.fields: dict[tuple[int, int], tuple[layout.FieldOut, bytes]] = {}
        self.fast: dict[tuple[int, int], bytes] = {}
        todo: list[tuple[int, int, str]] = []
        for k, ticket in enumerate(order.tickets):
            for f, value in enumerate(_field_values(ticket)):
                raw = encode_winansi(value)
                if raw is not None and fits(raw, f):
                    self.fast[(k, f)] = raw
                else:
                    todo.append((k, f, shaped_text(value)))
        locale = getattr(order, "locale", "") or ""
        kana = not locale and any(_KANA.search(v) for _, _, v in todo)
        han = faces.OrderFonts.of(self.plan, locale, kana)
        for k, f, text in todo:
            fo = layout.layout_field(self.fonts, self.reg, f, code_points(text), han)
            self.fields[(k, f)] = (fo, actual_text(text))

    @property
    def nfonts(self) -> int:
        return (len(self.reg.entries) + 255) // 256


def page_content(k: int, ticket: Ticket, sh: _Shaped) -> bytes:
    out = []
    for f, (_, ops) in enumerate(FIELDS):
        if (k, f) in sh.fields:
            fo, actual = sh.fields[(k, f)]
            body = pdf.field_ops(sh.fonts, sh.reg, fo, f)
            out.append(_span(actual, body) if fo.actual else body)
            continue
        body = b"BT " + ops + b" (" + escape(sh.fast[(k, f)]) + b") Tj ET\n"
        out.append(body)
    if (k, SMALL_PRINT) in sh.fields:
        fo, actual = sh.fields[(k, SMALL_PRINT)]
        body = pdf.field_ops(sh.fonts, sh.reg, fo, SMALL_PRINT)
        out.append(_span(actual, body) if fo.actual else body)
    else:
        lines = wrap(sh.fast[(k, SMALL_PRINT)])
        if lines:
            parts = [b"BT " + SMALL_PRINT_OPS + b" (" + escape(lines[0]) + b") Tj"]
            parts += [b" T* (" + escape(line) + b") Tj" for line in lines[1:]]
            parts.append(b" ET\n")
            out.append(b"".join(parts))
    out.append(qr_ops(ticket.admission_code.encode("utf-8", "surrogatepass")))
    return b"".join(out)


def _stream(num: int, content: bytes) -> bytes:
    data = zlib_deflate(content, ZLIB_LEVEL)
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

    sh = _Shaped(order)
    ff = fast_fonts(sh.fonts)
    # the codes the order shows in F1 and F2: the labels', and its fast fields' bytes
    used = [set(ff.static[0]), set(ff.static[1])]
    for (_, f), raw in sh.fast.items():
        used[FIELD_BOXES[f][4]].update(raw)
    codes = [sorted(used[0]), sorted(used[1])]
    first_text = FIRST_PAGE_OBJ + 2 * n
    # the shaped path's objects (procedures, a font and CMap per 256 codes, an image and
    # its /SMask per colour emoji procedure), then the fast path's
    first_fast = first_text + (len(sh.reg.proc_list) + 2 * sh.nfonts
                               + 2 * sum(sh.fonts.image(face, gid) is not None
                                         for face, gid in sh.reg.proc_list)
                               if sh.nfonts else 0)
    tounicode = first_fast + len(codes[0]) + len(codes[1])
    add(STATIC_OBJECTS[0])
    kids = b" ".join(b"%d 0 R" % (FIRST_PAGE_OBJ + 2 * k) for k in range(n))
    add(b"2 0 obj\n<< /Type /Pages /Kids [" + kids + b"] /Count %d >>\nendobj\n" % n)
    if sh.nfonts:
        nproc = len(sh.reg.proc_list)
        add(b"3 0 obj\n<< /Font << /F1 4 0 R /F2 5 0 R"
            + b"".join(b" /T%d %d 0 R" % (f, first_text + nproc + 2 * f)
                       for f in range(sh.nfonts))
            + b" >> >>\nendobj\n")
    else:
        add(STATIC_OBJECTS[1])
    add(fastfont.font_object(4, ff.heads[0], codes[0], first_fast, tounicode))
    add(fastfont.font_object(5, ff.heads[1], codes[1], first_fast + len(codes[0]), tounicode))
    add(_stream(6, STATIC_CONTENT))
    for k, ticket in enumerate(order.tickets):
        page = FIRST_PAGE_OBJ + 2 * k
        add(b"%d 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources 3 0 R "
            b"/Contents [6 0 R %d 0 R] >>\nendobj\n" % (page, PAGE_W, PAGE_H, page + 1))
        add(_stream(page + 1, page_content(k, ticket, sh)))
    for obj in pdf.font_objects(sh.fonts, sh.reg, first_text):
        add(obj)
    num = first_fast
    for k in (0, 1):
        for c in codes[k]:
            add(b"%d 0 obj\n" % num + sh.fonts.proc(ff.faces[k], ff.gids[k][c])[0])
            num += 1
    add(b"%d 0 obj\n" % tounicode + fastfont.TOUNICODE_BODY)
    size = len(offsets) + 1
    xref = [b"xref\n0 %d\n0000000000 65535 f \n" % size]
    xref += [b"%010d 00000 n \n" % off for off in offsets]
    xref.append(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, pos))
    return b"".join(parts) + b"".join(xref)
