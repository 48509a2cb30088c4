"""Every glyph's box on a ticket page, read back from the PDF itself.

pypdf parses the page's content stream and the fonts; this module interprets the text
operators the renderers write (BT ET Tm Td Tf Ts TL T* Tj TJ) and places each glyph:
a Type 3 glyph's box is the one its procedure declares (`wx 0 llx lly urx ury d1`,
the outline's bounding box, in the font's 1/1000 em; a colour emoji's, `d0`, the box
its image is painted in); every font of a ticket is Type 3 (the labels' and the fast
path's too: render/fastfont.py).  pdfminer.six would give a Type 3 glyph the font's
/FontBBox, which the renderers leave empty, so it cannot see marks above or below;
the procedures can.

A page's contents are the static part (object 6: one text object, the STAGEDOOR mark
and the labels; its glyphs come out as field -1), then one text object (BT .. ET) per
field, in tables.FIELDS order, then the small print: that is how both renderers write
a page.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

import pypdf
from pypdf.generic import ContentStream

D1 = re.compile(rb"^\s*(-?\d+) 0 (-?\d+) (-?\d+) (-?\d+) (-?\d+) d1")
# a colour emoji glyph (render/_native/emoji.pxi) paints its image: `wx 0 d0 q w 0 0 h x y
# cm /E.. Do Q`, the image's box is the glyph's (not padded)
D0_IMAGE = re.compile(rb"^\s*(-?\d+) 0 d0\s+q (-?\d+) 0 0 (-?\d+) (-?\d+) (-?\d+) cm /E")


@dataclass(frozen=True)
class GlyphBox:
    field: int          # index of the text object on the page (the field)
    line: int           # its line (a new Tm or T*)
    x0: float
    y0: float
    x1: float
    y1: float


class _Type3:
    def __init__(self, font: Any) -> None:
        self.first = int(font["/FirstChar"])
        self.widths = [float(w) for w in font["/Widths"]]
        names: dict[int, str] = {}
        code = 0
        for item in font["/Encoding"]["/Differences"]:
            if isinstance(item, int):
                code = int(item)
            else:
                names[code] = str(item)
                code += 1
        procs = font["/CharProcs"]
        self.boxes: dict[int, tuple[int, int, int, int] | None] = {}
        for c, name in names.items():
            data = procs[name].get_object().get_data()
            image = D0_IMAGE.match(data)
            if image:
                w, h, ix, iy = (int(v) for v in image.groups()[1:])
                self.boxes[c] = (ix, iy, ix + w, iy + h)
                continue
            m = D1.match(data)
            assert m, name
            x0, y0, x1, y1 = (int(v) for v in m.groups()[1:])
            # the renderers pad the outline's box by one unit each way
            self.boxes[c] = None if (x0, y0, x1, y1) == (0, 0, 0, 0) else (
                x0 + 1, y0 + 1, x1 - 1, y1 - 1)

    def glyph(self, code: int) -> tuple[float, tuple[int, int, int, int] | None]:
        return self.widths[code - self.first], self.boxes.get(code)


def _raw(s: Any) -> bytes:
    if isinstance(s, bytes):
        return bytes(s)
    return bytes(s.original_bytes)


def page_glyphs(data: bytes) -> list[list[GlyphBox]]:
    """Per page, every glyph that draws ink, with its box in points."""
    reader = pypdf.PdfReader(io.BytesIO(data))
    out: list[list[GlyphBox]] = []
    for page in reader.pages:
        fonts: dict[bytes, Any] = {}
        for name, ref in page["/Resources"]["/Font"].items():
            font = ref.get_object()
            assert font["/Subtype"] == "/Type3", (name, font["/Subtype"])
            fonts[name.encode()] = _Type3(font)
        glyphs: list[GlyphBox] = []
        field = -2
        line = 0
        x = y = lx = ly = size = rise = lead = 0.0
        font = b""
        ops = ContentStream(page.get_contents(), reader).operations
        for operands, op in ops:
            if op == b"BT":
                field += 1
                line = -1
                x = y = lx = ly = rise = 0.0
            elif op == b"Tm":
                lx, ly = float(operands[4]), float(operands[5])
                x, y = lx, ly
                line += 1
            elif op == b"Td":
                lx, ly = lx + float(operands[0]), ly + float(operands[1])
                x, y = lx, ly
                line += 1
            elif op == b"T*":
                ly -= lead
                x, y = lx, ly
                line += 1
            elif op == b"TL":
                lead = float(operands[0])
            elif op == b"Tf":
                font, size = str(operands[0]).encode(), float(operands[1])
            elif op == b"Ts":
                rise = float(operands[0])
            elif op in (b"Tj", b"TJ"):
                items = operands[0] if op == b"TJ" else [operands[0]]
                for item in items:
                    if isinstance(item, (int, float)) or type(item).__name__ in (
                            "NumberObject", "FloatObject"):
                        x -= float(item) / 1000 * size
                        continue
                    for code in _raw(item):
                        t3 = fonts[font]
                        w, box = t3.glyph(code)
                        if box is not None:
                            s = size / 1000
                            glyphs.append(GlyphBox(field, line, x + box[0] * s,
                                                   y + rise + box[1] * s, x + box[2] * s,
                                                   y + rise + box[3] * s))
                        x += w / 1000 * size
        out.append(glyphs)
    return out
