"""Faces opened on first use, the choice of a face per character, and each glyph as
a Type 3 procedure (what fonts.pxi and glyphs.pxi do in C)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from .. import fonts
from . import emoji
from .libs import draw_glyph, harfbuzz, hb_font

HAN_SCRIPTS = ("Hani", "Hira", "Kana", "Bopo")
PS_NAME_MAX = 63
PS_NAME_ID = 6  # the name table's PostScript name (fonts.pxi PS_NAME)
_PS_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _f32(v: float) -> float:
    return float(struct.unpack("f", struct.pack("f", v))[0])


def _round(v: float) -> int:
    v = _f32(v)
    return int(v + 0.5) if v >= 0 else -int(-v + 0.5)


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), as
# is_default_ignorable in fonts.pxi: a character no face has that is one of these stays
# with its neighbour's face (HarfBuzz hides it) instead of printing a replacement mark
DEFAULT_IGNORABLE = ((0xAD, 0xAD), (0x34F, 0x34F), (0x61C, 0x61C), (0x115F, 0x1160),
                     (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
                     (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
                     (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
                     (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))


def default_ignorable(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in DEFAULT_IGNORABLE)


# -- faces ------------------------------------------------------------------------------

@dataclass
class Face:
    path: str
    index: int
    bold: int
    font: Any = None
    state: int = 0
    nglyphs: int = 0
    colour: bool = False        # its glyphs are PNGs: only emoji sequences use it
    images: dict[int, emoji.Image] = field(default_factory=dict)
    procs: dict[int, tuple[bytes, int]] = field(default_factory=dict)
    inks: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)

    def open(self) -> bool:
        if self.state == 0:
            self.font = hb_font(self.path, self.index)
            self.state = 1 if self.font is not None else -1
            if self.font is not None:
                hb = harfbuzz()
                self.nglyphs = hb.hb_face_get_glyph_count(hb.hb_font_get_face(self.font))
                self.colour = emoji.has_png(self.font)
        return self.state > 0

    @functools.cached_property
    def psname(self) -> bytes:
        """face_psname in fonts.pxi: the PostScript name (name ID 6, read through
        HarfBuzz as the extension reads it, so that an install without the test extra
        writes the same bytes), only [A-Za-z0-9._-] kept, at most 63 bytes."""
        if not self.open():
            return b""
        hb = harfbuzz()
        size = ctypes.c_uint(PS_NAME_MAX + 1)
        raw = ctypes.create_string_buffer(PS_NAME_MAX + 1)
        hb.hb_ot_name_get_utf8(hb.hb_font_get_face(self.font), PS_NAME_ID, None,
                               ctypes.byref(size), raw)
        return bytes(ch for ch in raw.raw[:size.value] if chr(ch) in _PS_CHARS)

    def glyph(self, cp: int) -> int | None:
        if not self.open():
            return None
        gid = ctypes.c_uint32()
        return gid.value if harfbuzz().hb_font_get_nominal_glyph(self.font, cp,
                                                            ctypes.byref(gid)) else None


@dataclass(frozen=True)
class OrderFonts:
    """An order's choice of faces and shaping language (han_array in _render.pyx):
    the Han faces by its locale, its language's faces per script, its BCP 47 tag."""
    han: list[int]
    pref: list[tuple[str, int]] = field(default_factory=list)
    lang: str = ""

    @classmethod
    def of(cls, plan: fonts.FontPlan, locale: str, kana: bool) -> OrderFonts:
        pref = fonts.language_faces(plan, locale)
        return cls(fonts.han_faces(plan, locale, kana),
                   [(pref[i].to_bytes(4, "big").decode(), pref[i + 1])
                    for i in range(0, len(pref), 2)],
                   fonts.shaping_language(locale))


class Fonts:
    """The configured faces (a fonts.FontPlan), opened on first use."""

    def __init__(self, plan: fonts.FontPlan) -> None:
        self.plan = plan
        self.faces = [Face(path, index, bold) for path, index, bold in plan.faces]
        self.repl: tuple[int, int] | None = None

    def has(self, i: int, cp: int) -> int | None:
        return self.faces[i].glyph(cp)

    def text(self, i: int, cp: int) -> int | None:
        """face_text in fonts.pxi: has, but never a colour emoji face."""
        gid = self.faces[i].glyph(cp)
        return None if self.faces[i].colour else gid

    def colour_face(self) -> int:
        """colour_face in emoji.pxi: the first colour emoji face of the plan that opens."""
        for n in self.plan.emoji[:8]:
            if self.faces[n].open() and self.faces[n].colour:
                return n
        return -1

    def pick(self, cp: int, script: str, prev: int, of: OrderFonts,
             bold: int) -> tuple[int, int]:
        """pick_face in fonts.pxi."""
        if prev >= 0 and script in ("Zyyy", "Zinh"):
            gid = self.faces[prev].glyph(cp)
            if gid is not None:
                return prev, gid
        for tag, n in of.pref:
            if tag == script:
                f = self.faces[n].bold if bold else n
                gid = self.text(f, cp)
                if gid is not None:
                    return f, gid
        if script in HAN_SCRIPTS:
            for n in of.han:
                f = self.faces[n].bold if bold else n
                gid = self.text(f, cp)
                if gid is not None:
                    return f, gid
        for n in self.plan.scripts.get(script, [])[:8]:
            f = self.faces[n].bold if bold else n
            gid = self.text(f, cp)
            if gid is not None:
                return f, gid
        for n in self.plan.fallback[:8]:
            f = self.faces[n].bold if bold else n
            gid = self.text(f, cp)
            if gid is not None:
                return f, gid
        if prev >= 0:
            gid = self.faces[prev].glyph(cp)
            if gid is not None:
                return prev, gid
            if default_ignorable(cp):
                return prev, 0
        for f in range(len(self.faces)):
            gid = self.text(f, cp)
            if gid is not None:
                return f, gid
        return -1, 0

    def psname(self, face: int) -> bytes:
        return self.faces[face].psname or b"F%d" % face

    def replacement(self) -> tuple[int, int]:
        if self.repl is None:
            found = None
            for n in [*self.plan.fallback[:8], *range(len(self.faces))]:
                gid = self.text(n, 0xFFFD)
                if gid is not None:
                    found = (n, gid)
                    break
            if found is None:
                found = next(((n, 0) for n in range(len(self.faces))
                              if self.faces[n].open()), (-1, 0))
            self.repl = found
        return self.repl

    def proc(self, face: int, gid: int) -> tuple[bytes, int]:
        """(the glyph's stream object body, its advance): make_proc in glyphs.pxi."""
        f = self.faces[face]
        if gid >= f.nglyphs:
            gid = 0
        cached = f.procs.get(gid)
        if cached is None:
            made = emoji.colour_proc(f.font, face, gid) if f.colour else None
            if made is not None:
                obj, width, f.inks[gid], f.images[gid] = made
            else:
                obj, width, f.inks[gid] = _make_proc(f.font, gid)
            cached = f.procs[gid] = obj, width
        return cached

    def ink(self, face: int, gid: int) -> tuple[int, int, int, int]:
        """The glyph's outline box as its procedure's d1 gives it (1/1000 em, one unit
        of slack each way; all 0 for a glyph without ink): what the layout measures."""
        f = self.faces[face]
        if gid >= f.nglyphs:
            gid = 0
        if gid not in f.inks:
            self.proc(face, gid)
        return f.inks[gid]

    def image(self, face: int, gid: int) -> emoji.Image | None:
        """The image a colour glyph's procedure paints (None: an outline glyph)."""
        f = self.faces[face]
        if gid >= f.nglyphs:
            gid = 0
        self.proc(face, gid)
        return f.images.get(gid)


class Pen:
    """Outline callbacks writing PDF path operators as _move_to etc. in glyphs.pxi do."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.pts: list[tuple[float, float]] = []

    def pt(self, x: float, y: float) -> None:
        self.pts.append((_f32(x), _f32(y)))
        self.out.append(b"%d %d " % (_round(x), _round(y)))

    def move_to(self, x: float, y: float) -> None:
        self.pt(x, y)
        self.out.append(b"m\n")

    def line_to(self, x: float, y: float) -> None:
        self.pt(x, y)
        self.out.append(b"l\n")

    def quad_to(self, x0: float, y0: float, cx: float, cy: float, x: float,
                y: float) -> None:
        # the cubic with controls 2/3 of the way to the quadratic's control point
        self.pt(x0 + 2.0 / 3.0 * (cx - x0), y0 + 2.0 / 3.0 * (cy - y0))
        self.pt(x + 2.0 / 3.0 * (cx - x), y + 2.0 / 3.0 * (cy - y))
        self.pt(x, y)
        self.out.append(b"c\n")

    def cubic_to(self, *ps: float) -> None:
        for i in range(0, 6, 2):
            self.pt(ps[i], ps[i + 1])
        self.out.append(b"c\n")

    def close(self) -> None:
        self.out.append(b"h\n")


def _make_proc(font: Any, gid: int) -> tuple[bytes, int, tuple[int, int, int, int]]:
    hb = harfbuzz()
    width = hb.hb_font_get_glyph_h_advance(font, gid)
    pen = Pen()
    draw_glyph(font, gid, pen)
    box = (0, 0, 0, 0)
    if pen.pts:
        xs = [p[0] for p in pen.pts]
        ys = [p[1] for p in pen.pts]
        box = (int(min(xs)) - 1, int(min(ys)) - 1, int(max(xs)) + 1, int(max(ys)) + 1)
        head = b"%d 0 %d %d %d %d d1\n" % (width, *box) + b"".join(pen.out) + b"f\n"
    else:
        head = b"%d 0 0 0 0 0 d1\n" % width
    z = zlib.compressobj(9, zlib.DEFLATED, 15, 8)
    data = z.compress(head) + z.flush()
    if len(data) + 22 < len(head):
        obj = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data
    else:
        obj = b"<< /Length %d >>\nstream\n" % len(head) + head
    return obj + b"\nendstream\nendobj\n", width, box


@functools.cache
def fonts_for(plan: fonts.FontPlan) -> Fonts:
    return Fonts(plan)
