"""The shaped-text path of the pure-Python reference renderer (mirrors render/_native/).

Text the standard Helvetica fonts cannot show, or that does not fit its box, is shaped
and drawn with glyphs of real fonts (see the module docstring of reference.py).  This
module does what fonts.pxi, shape.pxi, layout.pxi and type3.pxi do in C, step by step,
but through *other* implementations where there is one, so that the comparison in
tests/test_render.py checks the native glue and not a library against itself:

- shaping and outlines: the same system libharfbuzz, through ctypes (the issue asks
  for *the same* shaping: HarfBuzz builds differ, e.g. uharfbuzz's newer one
  substitutes the space between two Hangul syllables where Debian's 6.0 does not;
  shaping is HarfBuzz's job, what this module re-implements is everything around it);
- bidi: python-bidi's pure-Python UBA (bidi.algorithm) where the extension calls fribidi;
- scripts: fontTools.unicodedata where the extension asks HarfBuzz's Unicode functions;
- line breaks: libunibreak through ctypes, the same library (there is no other UAX #14
  implementation among the dependencies; the greedy wrap around it is re-implemented),
  and Thai word breaks from libthai through ctypes (the same dictionary segmenter; the
  Thai runs and their TIS-620 bytes are made here by Python's tis_620 codec);
- outlines to PDF path operators, rounded as the C code rounds (float32, then half
  away from zero); codes, ToUnicode, fonts and layout: written again in Python.

Same face choice, glyph ids, positions, codes, layout decisions and PDF bytes: the tests
compare whole files.  Slow (milliseconds per field), which is fine for an oracle.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import struct
import unicodedata
import zlib
from dataclasses import dataclass, field
from typing import Any

from . import fonts, tables

EM = 1000
ELLIPSIS = 0x2026
NTEXT = 11
MARK_CATEGORIES = ("Mn", "Mc", "Me")
HAN_SCRIPTS = ("Hani", "Hira", "Kana", "Bopo")
COLOURS = (b"1 1 1 rg",) + (b"0 0 0 rg",) * 9 + (b"0.3 0.3 0.3 rg",)
PS_NAME_MAX = 63
_PS_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
TAG_SPACE = 26 ** 6
FONT_NAME_MAX = 127
M32 = 0xFFFFFFFF


def _f32(v: float) -> float:
    return float(struct.unpack("f", struct.pack("f", v))[0])


def _round(v: float) -> int:
    v = _f32(v)
    return int(v + 0.5) if v >= 0 else -int(-v + 0.5)


# -- faces ------------------------------------------------------------------------------

@dataclass
class Face:
    path: str
    index: int
    bold: int
    font: Any = None
    state: int = 0
    nglyphs: int = 0
    procs: dict[int, tuple[bytes, int]] = field(default_factory=dict)

    def open(self) -> bool:
        if self.state == 0:
            self.font = _hb_font(self.path, self.index)
            self.state = 1 if self.font is not None else -1
            if self.font is not None:
                self.nglyphs = _hb().hb_face_get_glyph_count(_hb().hb_font_get_face(self.font))
        return self.state > 0

    @functools.cached_property
    def psname(self) -> bytes:
        """face_psname in fonts.pxi: the PostScript name (read here by fontTools), only
        [A-Za-z0-9._-] kept, at most 63 bytes of the name as HarfBuzz copies it."""
        from fontTools.ttLib import TTFont

        with TTFont(self.path, fontNumber=self.index, lazy=True) as tt:
            raw = (tt["name"].getDebugName(6) or "").encode()[:PS_NAME_MAX]
        return bytes(ch for ch in raw if chr(ch) in _PS_CHARS)

    def glyph(self, cp: int) -> int | None:
        if not self.open():
            return None
        gid = ctypes.c_uint32()
        return gid.value if _hb().hb_font_get_nominal_glyph(self.font, cp,
                                                            ctypes.byref(gid)) else None


class Fonts:
    """The configured faces (a fonts.FontPlan), opened on first use."""

    def __init__(self, plan: fonts.FontPlan) -> None:
        self.plan = plan
        self.faces = [Face(path, index, bold) for path, index, bold in plan.faces]
        self.repl: tuple[int, int] | None = None

    def has(self, i: int, cp: int) -> int | None:
        return self.faces[i].glyph(cp)

    def pick(self, cp: int, script: str, prev: int, han: list[int],
             bold: int) -> tuple[int, int]:
        """pick_face in fonts.pxi."""
        if prev >= 0 and script in ("Zyyy", "Zinh"):
            gid = self.faces[prev].glyph(cp)
            if gid is not None:
                return prev, gid
        if script in HAN_SCRIPTS:
            for n in han:
                f = self.faces[n].bold if bold else n
                gid = self.has(f, cp)
                if gid is not None:
                    return f, gid
        for n in self.plan.scripts.get(script, [])[:8]:
            f = self.faces[n].bold if bold else n
            gid = self.has(f, cp)
            if gid is not None:
                return f, gid
        for n in self.plan.fallback[:8]:
            f = self.faces[n].bold if bold else n
            gid = self.has(f, cp)
            if gid is not None:
                return f, gid
        if prev >= 0:
            gid = self.faces[prev].glyph(cp)
            if gid is not None:
                return prev, gid
        for f in range(len(self.faces)):
            gid = self.has(f, cp)
            if gid is not None:
                return f, gid
        return -1, 0

    def psname(self, face: int) -> bytes:
        return self.faces[face].psname or b"F%d" % face

    def replacement(self) -> tuple[int, int]:
        if self.repl is None:
            found = None
            for n in [*self.plan.fallback[:8], *range(len(self.faces))]:
                gid = self.has(n, 0xFFFD)
                if gid is not None:
                    found = (n, gid)
                    break
            if found is None:
                found = next(((n, 0) for n in range(len(self.faces))
                              if self.faces[n].open()), (-1, 0))
            self.repl = found
        return self.repl

    def proc(self, face: int, gid: int) -> tuple[bytes, int]:
        """(the glyph's stream object body, its advance): make_proc in fonts.pxi."""
        f = self.faces[face]
        if gid >= f.nglyphs:
            gid = 0
        cached = f.procs.get(gid)
        if cached is None:
            cached = f.procs[gid] = _make_proc(f.font, gid)
        return cached


class _Pen:
    """Outline callbacks writing PDF path operators as _move_to etc. in fonts.pxi do."""

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


def _make_proc(font: Any, gid: int) -> tuple[bytes, int]:
    hb = _hb()
    width = hb.hb_font_get_glyph_h_advance(font, gid)
    pen = _Pen()
    _draw(font, gid, pen)
    if pen.pts:
        xs = [p[0] for p in pen.pts]
        ys = [p[1] for p in pen.pts]
        head = (b"%d 0 %d %d %d %d d1\n" % (width, int(min(xs)) - 1, int(min(ys)) - 1,
                                           int(max(xs)) + 1, int(max(ys)) + 1)
                + b"".join(pen.out) + b"f\n")
    else:
        head = b"%d 0 0 0 0 0 d1\n" % width
    z = zlib.compressobj(9, zlib.DEFLATED, 15, 8)
    data = z.compress(head) + z.flush()
    if len(data) + 22 < len(head):
        obj = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data
    else:
        obj = b"<< /Length %d >>\nstream\n" % len(head) + head
    return obj + b"\nendstream\nendobj\n", width


# -- the system libharfbuzz through ctypes -------------------------------------------------

class _Info(ctypes.Structure):
    _fields_ = [("codepoint", ctypes.c_uint32), ("mask", ctypes.c_uint32),
                ("cluster", ctypes.c_uint32), ("var1", ctypes.c_uint32),
                ("var2", ctypes.c_uint32)]


class _Pos(ctypes.Structure):
    _fields_ = [("x_advance", ctypes.c_int32), ("y_advance", ctypes.c_int32),
                ("x_offset", ctypes.c_int32), ("y_offset", ctypes.c_int32),
                ("var", ctypes.c_uint32)]


class _DrawState(ctypes.Structure):
    _fields_ = [("path_open", ctypes.c_int), ("path_start_x", ctypes.c_float),
                ("path_start_y", ctypes.c_float), ("current_x", ctypes.c_float),
                ("current_y", ctypes.c_float)]


_P = ctypes.c_void_p
_F = ctypes.c_float
_STATE = ctypes.POINTER(_DrawState)
_MOVE = ctypes.CFUNCTYPE(None, _P, ctypes.py_object, _STATE, _F, _F, _P)
_QUAD = ctypes.CFUNCTYPE(None, _P, ctypes.py_object, _STATE, _F, _F, _F, _F, _P)
_CUBIC = ctypes.CFUNCTYPE(None, _P, ctypes.py_object, _STATE, _F, _F, _F, _F, _F, _F, _P)
_CLOSE = ctypes.CFUNCTYPE(None, _P, ctypes.py_object, _STATE, _P)


@functools.cache
def _hb() -> Any:
    lib = ctypes.CDLL(ctypes.util.find_library("harfbuzz") or "libharfbuzz.so.0")
    sigs: dict[str, tuple[Any, list[Any]]] = {
        "hb_blob_create_from_file_or_fail": (_P, [ctypes.c_char_p]),
        "hb_face_count": (ctypes.c_uint, [_P]),
        "hb_face_create": (_P, [_P, ctypes.c_uint]),
        "hb_face_get_glyph_count": (ctypes.c_uint, [_P]),
        "hb_font_create": (_P, [_P]),
        "hb_font_get_face": (_P, [_P]),
        "hb_font_set_scale": (None, [_P, ctypes.c_int, ctypes.c_int]),
        "hb_font_get_nominal_glyph": (ctypes.c_int, [_P, ctypes.c_uint32, _P]),
        "hb_font_get_glyph_h_advance": (ctypes.c_int32, [_P, ctypes.c_uint32]),
        "hb_font_get_glyph_shape": (None, [_P, ctypes.c_uint32, _P, ctypes.py_object]),
        "hb_draw_funcs_create": (_P, []),
        "hb_draw_funcs_set_move_to_func": (None, [_P, _MOVE, _P, _P]),
        "hb_draw_funcs_set_line_to_func": (None, [_P, _MOVE, _P, _P]),
        "hb_draw_funcs_set_quadratic_to_func": (None, [_P, _QUAD, _P, _P]),
        "hb_draw_funcs_set_cubic_to_func": (None, [_P, _CUBIC, _P, _P]),
        "hb_draw_funcs_set_close_path_func": (None, [_P, _CLOSE, _P, _P]),
        "hb_buffer_create": (_P, []),
        "hb_buffer_destroy": (None, [_P]),
        "hb_buffer_add_utf32": (None, [_P, _P, ctypes.c_int, ctypes.c_uint, ctypes.c_int]),
        "hb_buffer_set_direction": (None, [_P, ctypes.c_int]),
        "hb_buffer_set_script": (None, [_P, ctypes.c_uint32]),
        "hb_buffer_set_cluster_level": (None, [_P, ctypes.c_int]),
        "hb_buffer_get_glyph_infos": (ctypes.POINTER(_Info), [_P, _P]),
        "hb_buffer_get_glyph_positions": (ctypes.POINTER(_Pos), [_P, _P]),
        "hb_shape": (None, [_P, _P, _P, ctypes.c_uint]),
        "hb_script_from_string": (ctypes.c_uint32, [ctypes.c_char_p, ctypes.c_int]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def _hb_font(path: str, index: int) -> Any:
    hb = _hb()
    blob = hb.hb_blob_create_from_file_or_fail(path.encode())
    if not blob or index >= hb.hb_face_count(blob):
        return None
    font = hb.hb_font_create(hb.hb_face_create(blob, index))
    hb.hb_font_set_scale(font, EM, EM)
    return font


def _on_move(d: Any, pen: _Pen, st: Any, x: float, y: float, u: Any) -> None:
    pen.move_to(x, y)


def _on_line(d: Any, pen: _Pen, st: Any, x: float, y: float, u: Any) -> None:
    pen.line_to(x, y)


def _on_quad(d: Any, pen: _Pen, st: Any, cx: float, cy: float, x: float, y: float,
             u: Any) -> None:
    pen.quad_to(st.contents.current_x, st.contents.current_y, cx, cy, x, y)


def _on_cubic(d: Any, pen: _Pen, st: Any, *args: Any) -> None:
    pen.cubic_to(*args[:6])


def _on_close(d: Any, pen: _Pen, st: Any, u: Any) -> None:
    pen.close()


_CALLBACKS = (_MOVE(_on_move), _MOVE(_on_line), _QUAD(_on_quad), _CUBIC(_on_cubic),
              _CLOSE(_on_close))


@functools.cache
def _draw_funcs() -> Any:
    hb = _hb()
    funcs = hb.hb_draw_funcs_create()
    move, line, quad, cubic, close = _CALLBACKS
    hb.hb_draw_funcs_set_move_to_func(funcs, move, None, None)
    hb.hb_draw_funcs_set_line_to_func(funcs, line, None, None)
    hb.hb_draw_funcs_set_quadratic_to_func(funcs, quad, None, None)
    hb.hb_draw_funcs_set_cubic_to_func(funcs, cubic, None, None)
    hb.hb_draw_funcs_set_close_path_func(funcs, close, None, None)
    return funcs


def _draw(font: Any, gid: int, pen: _Pen) -> None:
    _hb().hb_font_get_glyph_shape(font, gid, _draw_funcs(), pen)


def hb_shape(font: Any, u: list[int], lo: int, n: int, rtl: int,
             script: str) -> list[tuple[int, int, int, int, int, int]]:
    """(glyph, cluster, x_advance, y_advance, x_offset, y_offset) of u[lo:lo+n], with the
    whole of u as context, as shape_run in shape.pxi asks for them."""
    hb = _hb()
    buf = hb.hb_buffer_create()
    try:
        arr = (ctypes.c_uint32 * max(len(u), 1))(*u)
        hb.hb_buffer_add_utf32(buf, arr, len(u), lo, n)
        hb.hb_buffer_set_direction(buf, 5 if rtl else 4)      # HB_DIRECTION_RTL / LTR
        hb.hb_buffer_set_script(buf, hb.hb_script_from_string(script.encode(), 4))
        hb.hb_buffer_set_cluster_level(buf, 1)                # MONOTONE_CHARACTERS
        hb.hb_shape(font, buf, None, 0)
        count = ctypes.c_uint()
        infos = hb.hb_buffer_get_glyph_infos(buf, ctypes.byref(count))
        pos = hb.hb_buffer_get_glyph_positions(buf, ctypes.byref(count))
        return [(infos[k].codepoint, infos[k].cluster, pos[k].x_advance, pos[k].y_advance,
                 pos[k].x_offset, pos[k].y_offset) for k in range(count.value)]
    finally:
        hb.hb_buffer_destroy(buf)


@functools.cache
def fonts_for(plan: fonts.FontPlan) -> Fonts:
    return Fonts(plan)


# -- libunibreak, the one library both renderers share --------------------------------

@functools.cache
def _unibreak() -> Any:
    name = ctypes.util.find_library("unibreak")
    lib = ctypes.CDLL(name or "libunibreak.so.5")
    lib.init_linebreak()
    return lib


def line_breaks(u: list[int]) -> bytes:
    lib = _unibreak()
    n = len(u)
    arr = (ctypes.c_uint32 * max(n, 1))(*u)
    brks = ctypes.create_string_buffer(max(n, 1))
    lib.set_linebreaks_utf32(arr, ctypes.c_size_t(n), None, brks)
    return brks.raw[:n]


# -- libthai's word breaks (thai.pxi) -------------------------------------------------------

LINEBREAK_ALLOWBREAK, LINEBREAK_NOBREAK = 1, 2


def _is_thai(cp: int) -> bool:
    return 0x0E01 <= cp <= 0x0E5B and not 0x0E3B <= cp <= 0x0E3E


@functools.cache
def _libthai() -> tuple[Any, Any]:
    lib = ctypes.CDLL(ctypes.util.find_library("thai") or "libthai.so.0")
    lib.th_brk_new.restype = ctypes.c_void_p
    lib.th_brk_new.argtypes = [ctypes.c_char_p]
    lib.th_brk_find_breaks.restype = ctypes.c_int
    lib.th_brk_find_breaks.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                       ctypes.POINTER(ctypes.c_int), ctypes.c_size_t]
    return lib, lib.th_brk_new(None)


def thai_breaks(u: list[int], brk: bytes) -> bytes:
    """thai_breaks in thai.pxi: a break allowed after each word libthai finds in a run of
    Thai letters, where libunibreak had none."""
    if not any(_is_thai(c) for c in u):
        return brk
    lib, breaker = _libthai()
    if not breaker:
        return brk
    out = bytearray(brk)
    i, n = 0, len(u)
    while i < n:
        if not _is_thai(u[i]):
            i += 1
            continue
        s = i
        while i < n and _is_thai(u[i]):
            i += 1
        tis = "".join(map(chr, u[s:i])).encode("tis_620")
        pos = (ctypes.c_int * (i - s + 1))()
        for k in range(lib.th_brk_find_breaks(breaker, tis, pos, i - s)):
            at = s + pos[k] - 1
            if s <= at < i - 1 and out[at] == LINEBREAK_NOBREAK:
                out[at] = LINEBREAK_ALLOWBREAK
    return bytes(out)


# -- one paragraph (para_init in shape.pxi) ---------------------------------------------

def _script(cp: int) -> str:
    from fontTools import unicodedata as fu

    return str(fu.script(chr(cp)))


def _levels(u: list[int]) -> tuple[list[int], int, list[str]]:
    """(levels, base level, bidi classes) by python-bidi's UBA."""
    from bidi import algorithm as uba

    # python-bidi knows no class for unassigned code points: noncharacters and default
    # ignorables are BN (as ZWSP), the rest L (as "a"), as DerivedBidiClass.txt has them
    text = "".join(chr(c) if unicodedata.bidirectional(chr(c)) else
                   ("\u200b" if (c & 0xFFFE) == 0xFFFE or 0xFDD0 <= c <= 0xFDEF
                    or 0xE0000 <= c <= 0xE0FFF else "a") for c in u)
    storage = uba.get_empty_storage()
    base = uba.get_base_level(text, False)
    storage["base_level"] = base
    storage["base_dir"] = ("L", "R")[base]
    uba.get_embedding_levels(text, storage, False, False)
    kinds = [c["orig"] for c in storage["chars"]]
    for i, c in enumerate(storage["chars"]):
        c["idx"] = i
    uba.explicit_embed_and_overrides(storage, False)
    uba.resolve_weak_types(storage, False)
    uba.resolve_neutral_types(storage, False)
    uba.resolve_implicit_levels(storage, False)
    # X9 took out the formatting characters (BN, embeddings): they get the level of the
    # character before them (the paragraph's at the start)
    levels: list[int | None] = [None] * len(u)
    for c in storage["chars"]:
        levels[c["idx"]] = c["level"]
    prev = base
    for i, lv in enumerate(levels):
        if lv is None:
            levels[i] = prev
        else:
            prev = lv
    return [int(lv or 0) for lv in levels], base, kinds


def _visual(levels: list[int], kinds: list[str], base: int) -> list[int]:
    """Logical indices in visual order of one line (L1 end-of-line, L2)."""
    from bidi import algorithm as uba

    storage = uba.get_empty_storage()
    storage["base_level"] = base
    storage["chars"] = [{"ch": "", "level": lv, "type": k, "orig": k, "idx": i}
                        for i, (lv, k) in enumerate(zip(levels, kinds, strict=True))]
    uba.reorder_resolved_levels(storage, False)
    return [c["idx"] for c in storage["chars"]]


@dataclass
class Para:
    u: list[int]
    bold: int
    face: list[int]
    gid: list[int]
    script: list[str]
    levels: list[int]
    kinds: list[str]
    base: int
    brk: bytes
    adv: list[int]
    missing: bool
    any_rtl: bool

    @property
    def rtl(self) -> bool:
        return self.base == 1


def para(fs: Fonts, u: list[int], bold: int, han: list[int]) -> Para:
    own = [_script(c) for c in u]
    last = next((s for s in own if s not in ("Zyyy", "Zinh")), "Zyyy")
    face, gid, script = [], [], []
    prev = -1
    missing = False
    for c, s in zip(u, own, strict=True):
        f, g = fs.pick(c, s, prev, han, bold)
        if s in ("Zyyy", "Zinh", "Zzzz"):
            script.append(last)
        else:
            last = s
            script.append(s)
        face.append(f)
        gid.append(g)
        if f >= 0:
            prev = f
        else:
            missing = True
    levels, base, kinds = _levels(u) if u else ([], 0, [])
    return Para(u, bold, face, gid, script, levels, kinds, base,
                line_breaks(u) if u else b"", [0] * len(u), missing,
                any(lv & 1 for lv in levels))


@dataclass
class Glyph:
    face: int
    gid: int
    adv: int
    xoff: int
    yoff: int
    ci: int
    cn: int
    rtl: int
    code: int = -1


def shape_run(fs: Fonts, p: Para, lo: int, hi: int, level: int) -> list[Glyph]:
    rtl = level & 1
    face = p.face[lo]
    if face < 0:
        rf, rg = fs.replacement()
        if rf < 0:
            return []
        width = fs.proc(rf, rg)[1]
        out = []
        for i in range(hi - lo):
            ci = (hi - 1 - i) if rtl else (lo + i)
            out.append(Glyph(rf, rg, width, 0, 0, ci, 1, rtl))
            p.adv[ci] += width
        return out
    shaped = hb_shape(fs.faces[face].font, p.u, lo, hi - lo, rtl, p.script[lo])
    n = len(shaped)
    out = []
    for k in range(n):
        gid, c, adv, _, xoff, yoff = shaped[k]
        end = hi
        if rtl:
            i = k - 1
            while i >= 0 and shaped[i][1] == c:
                i -= 1
            if i >= 0:
                end = shaped[i][1]
        else:
            i = k + 1
            while i < n and shaped[i][1] == c:
                i += 1
            if i < n:
                end = shaped[i][1]
        cn = 0 if k > 0 and shaped[k - 1][1] == c else end - c
        g = Glyph(face, gid, adv, xoff, yoff, c, cn, rtl)
        p.adv[c] += g.adv
        out.append(g)
    return out


def shape_line(fs: Fonts, p: Para, s: int, e: int) -> tuple[list[Glyph], int]:
    """shape_line in shape.pxi: runs of one face, script and level, in visual order."""
    if e <= s:
        return [], 0
    vis = _visual(p.levels[s:e], p.kinds[s:e], p.base)
    levels = list(p.levels[s:e])
    # the end-of-line reset (L1) as reorder_resolved_levels applied it
    for j in range(e - s - 1, -1, -1):
        if p.kinds[s + j] in ("WS", "BN"):
            levels[j] = p.base
        else:
            break
    out: list[Glyph] = []
    width = 0
    v0 = 0
    n = e - s
    while v0 < n:
        li = vis[v0]
        lvl = levels[li]
        lo = hi = prev = li
        v = v0 + 1
        while v < n:
            li = vis[v]
            if (levels[li] != lvl or p.face[s + li] != p.face[s + prev]
                    or p.script[s + li] != p.script[s + prev]
                    or li != prev + (-1 if lvl & 1 else 1)):
                break
            prev = li
            lo, hi = min(lo, li), max(hi, li)
            v += 1
        run = shape_run(fs, p, s + lo, s + hi + 1, lvl)
        out += run
        width += sum(g.adv for g in run)
        v0 = v
    return out, width


# -- the order's glyph registry (type3.pxi) -----------------------------------------------

class Registry:
    def __init__(self) -> None:
        self.codes: dict[tuple[int, int, tuple[int, ...]], int] = {}
        self.entries: list[tuple[int, int, tuple[int, ...], int]] = []
        self.procs: dict[tuple[int, int], int] = {}
        self.proc_list: list[tuple[int, int]] = []

    def code(self, face: int, gid: int, text: tuple[int, ...]) -> int:
        key = (face, gid, text)
        code = self.codes.get(key)
        if code is None:
            proc = self.procs.get((face, gid))
            if proc is None:
                proc = self.procs[(face, gid)] = len(self.proc_list)
                self.proc_list.append((face, gid))
            code = self.codes[key] = len(self.entries)
            self.entries.append((face, gid, text, proc))
        return code


def register(fs: Fonts, reg: Registry, glyphs: list[Glyph], u: list[int]) -> None:
    for g in glyphs:
        text = tuple(u[g.ci:g.ci + g.cn])
        if g.rtl and 1 < g.cn <= 16:
            text = text[::-1]
        g.code = reg.code(g.face, g.gid, text)
        fs.proc(g.face, g.gid)


# -- layout (layout.pxi) -----------------------------------------------------------------

@dataclass
class Line:
    glyphs: list[Glyph]
    width: int
    x: int = 0
    y: int = 0


@dataclass
class FieldOut:
    size: int
    lines: list[Line]
    actual: bool


def _is_mark(cp: int) -> bool:
    return unicodedata.category(chr(cp)) in MARK_CATEGORIES


def _shaped(fs: Fonts, reg: Registry, p: Para, s: int, e: int) -> Line:
    glyphs, w = shape_line(fs, p, s, e)
    register(fs, reg, glyphs, p.u)
    return Line(glyphs, w)


def _ellipsised(fs: Fonts, reg: Registry, p: Para, s: int, e: int, limit: int,
                han: list[int]) -> Line:
    lo, hi, best = s, e, s
    while lo <= hi:
        mid = (lo + hi) // 2
        n = mid
        while s < n < e and _is_mark(p.u[n]):
            n -= 1
        while n > s and p.u[n - 1] == 32:
            n -= 1
        t = [*p.u[s:n], ELLIPSIS]
        _, w = shape_line(fs, para(fs, t, p.bold, han), 0, len(t))
        if w <= limit:
            best = n
            lo = mid + 1
        else:
            hi = mid - 1
    t = [*p.u[s:best], ELLIPSIS]
    return _shaped(fs, reg, para(fs, t, p.bold, han), 0, len(t))


def layout_field(fs: Fonts, reg: Registry, f: int, u: list[int], han: list[int]) -> FieldOut:
    x0, x1, base_y, size, bold, maxl = tables.FIELD_BOXES[f]
    x0, x1 = x0 * 1000, x1 * 1000
    box = x1 - x0
    p = para(fs, u, bold, han)
    lossy = p.missing
    glyphs, w = shape_line(fs, p, 0, len(u))
    if w * size // 1000 > box:
        if size > tables.MIN_SIZE and w * tables.MIN_SIZE // 1000 <= box:
            size = box * 1000 // w // 10 * 10
        elif size > tables.MIN_SIZE:
            size = tables.MIN_SIZE
    lines: list[Line] = []
    if w * size // 1000 <= box:
        register(fs, reg, glyphs, u)
        lines.append(Line(glyphs, w))
    else:
        limit = box * 1000 // size
        brk = thai_breaks(u, p.brk)
        adv = list(p.adv)
        n = len(u)
        start = 0
        while start < n and len(lines) < maxl:
            while start < n and u[start] == 32:
                start += 1
            if start >= n:
                break
            acc, last, i = 0, -1, start
            while i < n:
                if acc + adv[i] > limit and i > start:
                    break
                acc += adv[i]
                if brk[i] in (0, 1):          # LINEBREAK_MUSTBREAK, LINEBREAK_ALLOWBREAK
                    last = i + 1
                i += 1
            if i >= n:
                end = n
            elif last > start:
                end = last
            else:
                end = i
                while end > start + 1 and _is_mark(u[end]):
                    end -= 1
            k = end
            while k > start and u[k - 1] == 32:
                k -= 1
            if len(lines) == maxl - 1 and end < n:
                lines.append(_ellipsised(fs, reg, p, start, n, limit, han))
                lossy = True
                break
            line = _shaped(fs, reg, p, start, k)
            if line.width > limit:
                line = _ellipsised(fs, reg, p, start, k, limit, han)
                lossy = True
            lines.append(line)
            start = end
    lead = size * 6 // 5
    centre = base_y * 1000 + tables.FIELD_BOXES[f][3] * 35 // 100
    nl = len(lines)
    for i, line in enumerate(lines):
        line.x = (x1 - line.width * size // 1000) if p.rtl else x0
        if f == NTEXT - 1:
            line.y = base_y * 1000 - i * lead
        else:
            line.y = centre - size * 35 // 100 + ((nl - 1) * lead) // 2 - i * lead
    multi = any(g.cn != 1 or g.adv == 0 or g.xoff or g.yoff
                for line in lines for g in line.glyphs)
    return FieldOut(size, lines, lossy or (not p.any_rtl and multi))


# -- PDF: the field's operators and the order's fonts ------------------------------------

def _milli(v: int) -> bytes:
    sign = "-" if v < 0 else ""
    v = abs(v)
    return f"{sign}{v // 1000}.{v % 1000:03d}".encode()


def field_ops(fs: Fonts, fo: FieldOut, f: int) -> bytes:
    """put_field_ops in layout.pxi."""
    out = [b"BT ", COLOURS[f]]
    for line in fo.lines:
        if not line.glyphs:
            continue
        cur, rise, pend, inhex = -1, 0, 0, False
        out.append(b" 1 0 0 1 " + _milli(line.x) + b" " + _milli(line.y) + b" Tm")
        for g in line.glyphs:
            font = g.code >> 8
            width = fs.proc(g.face, g.gid)[1]
            if font != cur or g.yoff != rise:
                if cur >= 0:
                    out.append(b">] TJ" if inhex else b"] TJ")
                if font != cur:
                    out.append(b" /T%d " % font + _milli(fo.size) + b" Tf")
                    cur = font
                if g.yoff != rise:
                    rise = g.yoff
                    out.append(b" " + _milli(rise * fo.size // 1000) + b" Ts")
                out.append(b" [")
                inhex = False
            adjust = pend + g.xoff
            if adjust:
                if inhex:
                    out.append(b">")
                    inhex = False
                out.append(b"%d" % -adjust)
            if not inhex:
                out.append(b"<")
                inhex = True
            out.append(b"%02X" % (g.code & 255))
            pend = g.adv - g.xoff - width
        if cur >= 0:
            out.append(b">] TJ" if inhex else b"] TJ")
        if rise:
            out.append(b" 0 Ts")
    out.append(b" ET\n")
    return b"".join(out)


def _cmap(entries: list[tuple[int, int, tuple[int, ...], int]]) -> bytes:
    out = [b"/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
           b"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
           b"/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
           b"1 begincodespacerange\n<00> <FF>\nendcodespacerange\n"]
    mapped = [(code, text) for code, (_, _, text, _) in enumerate(entries) if text]
    for k in range(0, len(mapped), 100):
        chunk = mapped[k:k + 100]
        out.append(b"%d beginbfchar\n" % len(chunk))
        for code, text in chunk:
            hexed = "".join(chr(c) for c in text).encode("utf-16-be", "surrogatepass").hex()
            out.append(b"<%02X> <%s>\n" % (code, hexed.upper().encode()))
        out.append(b"endbfchar\n")
    out.append(b"endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n")
    return b"".join(out)


def _mix(h: int, v: int) -> int:
    return ((h ^ v) * 16777619) & M32


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def font_tag(entries: list[tuple[int, int, tuple[int, ...], int]], earlier: list[int]) -> int:
    """font_tag in type3.pxi: a hash of the codes' faces, glyphs and texts."""
    h = 2166136261
    for face, gid, text, _ in entries:
        h = _mix(_mix(h, face & M32), gid)
        for cp in text:
            h = _mix(h, cp)
        h = _mix(h, len(text))
    h = _fmix(h)
    while h % TAG_SPACE in earlier:
        h = _fmix((h + 1) & M32)
    return h % TAG_SPACE


def font_name(fs: Fonts, entries: list[tuple[int, int, tuple[int, ...], int]],
              tag: int) -> bytes:
    """put_font_name in type3.pxi: TAG+Face1_Face2 (whole names, at most 127 bytes)."""
    letters = bytes(ord("A") + tag // 26 ** j % 26 for j in range(6))
    faces = list(dict.fromkeys(face for face, _, _, _ in entries))
    name = letters + b"+"
    for k, face in enumerate(faces):
        part = (b"_" if k else b"") + fs.psname(face)
        if len(name) + len(part) > FONT_NAME_MAX:
            break
        name += part
    return name


def font_objects(fs: Fonts, reg: Registry, first: int) -> list[bytes]:
    """put_text_objects in type3.pxi: the procedures, then per 256 codes a font + CMap."""
    objs = []
    tags: list[int] = []
    num = first
    for face, gid in reg.proc_list:
        objs.append(b"%d 0 obj\n" % num + fs.proc(face, gid)[0])
        num += 1
    for k in range(0, len(reg.entries), 256):
        entries = reg.entries[k:k + 256]
        seen: list[int] = []
        procs = []
        for _, _, _, proc in entries:
            if proc not in seen:
                seen.append(proc)
                procs.append(b" /g%d %d 0 R" % (proc, first + proc))
        widths = b" ".join(b"%d" % fs.proc(face, gid)[1] for face, gid, _, _ in entries)
        tags.append(font_tag(entries, tags))
        objs.append(
            b"%d 0 obj\n<< /Type /Font /Subtype /Type3 /BaseFont /" % num
            + font_name(fs, entries, tags[-1]) + b" /FontBBox [0 0 0 0] "
            b"/FontMatrix [0.001 0 0 0.001 0 0] /Resources << >>\n/CharProcs <<"
            + b"".join(procs) + b" >>\n/Encoding << /Type /Encoding /Differences [0"
            + b"".join(b" /g%d" % e[3] for e in entries)
            + b"] >>\n/FirstChar 0 /LastChar %d /Widths [" % (len(entries) - 1) + widths
            + b"]\n/ToUnicode %d 0 R >>\nendobj\n" % (num + 1))
        cmap = _cmap(entries)
        objs.append(b"%d 0 obj\n<< /Length %d >>\nstream\n" % (num + 1, len(cmap)) + cmap
                    + b"\nendstream\nendobj\n")
        num += 2
    return objs
