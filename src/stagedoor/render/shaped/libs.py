"""The system libraries through ctypes: libharfbuzz (shaping, outlines), libunibreak
(UAX #14), libthai (Thai word breaks), libicuuc (Lao, Myanmar and Khmer word breaks)
and libdeflate (the PDF's deflate streams), the same libraries the extension links."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

EM = 1000


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
def harfbuzz() -> Any:
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
        "hb_buffer_set_language": (None, [_P, _P]),
        "hb_language_from_string": (_P, [ctypes.c_char_p, ctypes.c_int]),
        # colour glyphs (shaped/emoji.py)
        "hb_ot_color_has_png": (ctypes.c_int, [_P]),
        "hb_ot_color_glyph_reference_png": (_P, [_P, ctypes.c_uint32]),
        "hb_blob_get_data": (ctypes.c_void_p, [_P, _P]),
        "hb_blob_destroy": (None, [_P]),
        "hb_font_get_glyph_extents": (ctypes.c_int, [_P, ctypes.c_uint32, _P]),
        # a face's PostScript name (shaped/faces.py Face.psname, fonts.pxi face_psname)
        "hb_ot_name_get_utf8": (ctypes.c_uint, [_P, ctypes.c_uint, _P, _P, _P]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def hb_font(path: str, index: int) -> Any:
    hb = harfbuzz()
    blob = hb.hb_blob_create_from_file_or_fail(path.encode())
    if not blob or index >= hb.hb_face_count(blob):
        return None
    font = hb.hb_font_create(hb.hb_face_create(blob, index))
    hb.hb_font_set_scale(font, EM, EM)
    return font


class Pen(Protocol):
    """What HarfBuzz's outline callbacks draw on (faces.py's Pen writes PDF path
    operators with them)."""

    def move_to(self, x: float, y: float) -> None: ...

    def line_to(self, x: float, y: float) -> None: ...

    def quad_to(self, x0: float, y0: float, cx: float, cy: float, x: float,
                y: float) -> None: ...

    def cubic_to(self, *ps: float) -> None: ...

    def close(self) -> None: ...


def _on_move(d: Any, pen: Pen, st: Any, x: float, y: float, u: Any) -> None:
    pen.move_to(x, y)


def _on_line(d: Any, pen: Pen, st: Any, x: float, y: float, u: Any) -> None:
    pen.line_to(x, y)


def _on_quad(d: Any, pen: Pen, st: Any, cx: float, cy: float, x: float, y: float,
             u: Any) -> None:
    pen.quad_to(st.contents.current_x, st.contents.current_y, cx, cy, x, y)


def _on_cubic(d: Any, pen: Pen, st: Any, *args: Any) -> None:
    pen.cubic_to(*args[:6])


def _on_close(d: Any, pen: Pen, st: Any, u: Any) -> None:
    pen.close()


_CALLBACKS = (_MOVE(_on_move), _MOVE(_on_line), _QUAD(_on_quad), _CUBIC(_on_cubic),
              _CLOSE(_on_close))


@functools.cache
def _draw_funcs() -> Any:
    hb = harfbuzz()
    funcs = hb.hb_draw_funcs_create()
    move, line, quad, cubic, close = _CALLBACKS
    hb.hb_draw_funcs_set_move_to_func(funcs, move, None, None)
    hb.hb_draw_funcs_set_line_to_func(funcs, line, None, None)
    hb.hb_draw_funcs_set_quadratic_to_func(funcs, quad, None, None)
    hb.hb_draw_funcs_set_cubic_to_func(funcs, cubic, None, None)
    hb.hb_draw_funcs_set_close_path_func(funcs, close, None, None)
    return funcs


def draw_glyph(font: Any, gid: int, pen: Pen) -> None:
    harfbuzz().hb_font_get_glyph_shape(font, gid, _draw_funcs(), pen)


def hb_shape(font: Any, u: list[int], lo: int, n: int, rtl: int,
             script: str, lang: str = "") -> list[tuple[int, int, int, int, int, int]]:
    """(glyph, cluster, x_advance, y_advance, x_offset, y_offset) of u[lo:lo+n], with the
    whole of u as context, as shape_run in shape.pxi asks for them."""
    hb = harfbuzz()
    buf = hb.hb_buffer_create()
    try:
        arr = (ctypes.c_uint32 * max(len(u), 1))(*u)
        hb.hb_buffer_add_utf32(buf, arr, len(u), lo, n)
        hb.hb_buffer_set_direction(buf, 5 if rtl else 4)      # HB_DIRECTION_RTL / LTR
        hb.hb_buffer_set_script(buf, hb.hb_script_from_string(script.encode(), 4))
        if lang:    # the order's language: locl forms (as shape_run in shape.pxi)
            hb.hb_buffer_set_language(buf, hb.hb_language_from_string(lang.encode(), -1))
        hb.hb_buffer_set_cluster_level(buf, 1)                # MONOTONE_CHARACTERS
        hb.hb_shape(font, buf, None, 0)
        count = ctypes.c_uint()
        infos = hb.hb_buffer_get_glyph_infos(buf, ctypes.byref(count))
        pos = hb.hb_buffer_get_glyph_positions(buf, ctypes.byref(count))
        return [(infos[k].codepoint, infos[k].cluster, pos[k].x_advance, pos[k].y_advance,
                 pos[k].x_offset, pos[k].y_offset) for k in range(count.value)]
    finally:
        hb.hb_buffer_destroy(buf)


# -- libunibreak, the one library both renderers share --------------------------------

@functools.cache
def _unibreak() -> Any:
    name = ctypes.util.find_library("unibreak")
    lib = ctypes.CDLL(name or "libunibreak.so.5")
    lib.init_linebreak()
    return lib


# What libunibreak 1.1 aborts on (breaks.pxi says how and why): U+FFFF, its end-of-string
# marker, and the regional indicators, a class its pair table does not have.  They go to
# it as a character of the class they act like, and LB30a is applied after.
_UB_EOS, _UB_AS_EOS = 0xFFFF, 0xFFFE
_RI_FIRST, _RI_LAST, _UB_AS_RI = 0x1F1E6, 0x1F1FF, 0x4E00
LINEBREAK_MUSTBREAK, LINEBREAK_ALLOWBREAK, LINEBREAK_NOBREAK = 0, 1, 2


def _is_ri(cp: int) -> bool:
    return _RI_FIRST <= cp <= _RI_LAST


def _unibreak_safe(cp: int) -> int:
    return _UB_AS_RI if _is_ri(cp) else (_UB_AS_EOS if cp == _UB_EOS else cp)


def line_breaks(u: list[int]) -> bytes:
    """libunibreak's break classes of u, never handing it what aborts it (line_breaks in
    breaks.pxi)."""
    lib = _unibreak()
    n = len(u)
    hazard = any(c == _UB_EOS or _is_ri(c) for c in u)
    arr = (ctypes.c_uint32 * max(n, 1))(*(map(_unibreak_safe, u) if hazard else u))
    brks = ctypes.create_string_buffer(max(n, 1))
    lib.set_linebreaks_utf32(arr, ctypes.c_size_t(n), None, brks)
    if not hazard:
        return brks.raw[:n]
    out = bytearray(brks.raw[:n])
    pairs = 0
    for i in range(n - 1):          # LB30a: regional indicators pair up from a run's start
        if _is_ri(u[i]) and _is_ri(u[i + 1]):
            pairs += 1
            out[i] = LINEBREAK_NOBREAK if pairs & 1 else LINEBREAK_ALLOWBREAK
        else:
            pairs = 0
    return bytes(out)


# -- libthai's word breaks (thai.pxi) -------------------------------------------------------


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


def _runs(u: list[int], inside: Callable[[int], bool]) -> Iterator[tuple[int, int]]:
    """The [start, end) of each run of characters `inside` says belong to a dictionary's
    script (thai_breaks, dict_breaks)."""
    i, n = 0, len(u)
    while i < n:
        if not inside(u[i]):
            i += 1
            continue
        s = i
        while i < n and inside(u[i]):
            i += 1
        yield s, i


def thai_breaks(u: list[int], brk: bytes) -> bytes:
    """thai_breaks in thai.pxi: a break allowed after each word libthai finds in a run of
    Thai letters, where libunibreak had none."""
    if not any(_is_thai(c) for c in u):
        return brk
    lib, breaker = _libthai()
    if not breaker:
        return brk
    out = bytearray(brk)
    for s, i in _runs(u, _is_thai):
        tis = "".join(map(chr, u[s:i])).encode("tis_620")
        pos = (ctypes.c_int * (i - s + 1))()
        for k in range(lib.th_brk_find_breaks(breaker, tis, pos, i - s)):
            at = s + pos[k] - 1
            if s <= at < i - 1 and out[at] == LINEBREAK_NOBREAK:
                out[at] = LINEBREAK_ALLOWBREAK
    return bytes(out)


# -- ICU's dictionary word breaks for Lao, Myanmar, Khmer (dictbreaks.pxi) ----------------

def _is_dict_script(cp: int) -> bool:
    return (0x0E80 <= cp <= 0x0EFF or 0x1000 <= cp <= 0x109F or 0xA9E0 <= cp <= 0xA9FF
            or 0xAA60 <= cp <= 0xAA7F or 0x1780 <= cp <= 0x17FF or 0x19E0 <= cp <= 0x19FF)


@functools.cache
def _libicu() -> tuple[Any, Any, Any, Any]:
    """ubrk_open, ubrk_next, ubrk_close of the system's libicuuc: its symbols carry the
    library's major version (ubrk_open_72), read from the file's name."""
    name = ctypes.util.find_library("icuuc") or "libicuuc.so"
    lib = ctypes.CDLL(name)
    major = name.rsplit(".so.", 1)[-1].split(".")[0] if ".so." in name else ""
    suffix = f"_{major}" if major.isdigit() else ""
    op = getattr(lib, "ubrk_open" + suffix)
    op.restype = ctypes.c_void_p
    op.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int32,
                   ctypes.POINTER(ctypes.c_int)]
    nxt = getattr(lib, "ubrk_next" + suffix)
    nxt.restype = ctypes.c_int32
    nxt.argtypes = [ctypes.c_void_p]
    close = getattr(lib, "ubrk_close" + suffix)
    close.restype = None
    close.argtypes = [ctypes.c_void_p]
    return lib, op, nxt, close


UBRK_LINE = 2


def dict_breaks(u: list[int], brk: bytes) -> bytes:
    """dict_breaks in dictbreaks.pxi: a break allowed at each boundary ICU's line break
    iterator (its Lao, Burmese and Khmer dictionaries) finds inside a run of those
    scripts, where libunibreak had none."""
    if not any(_is_dict_script(c) for c in u):
        return brk
    _, op, nxt, close = _libicu()
    out = bytearray(brk)
    for s, i in _runs(u, _is_dict_script):
        text = "".join(map(chr, u[s:i])).encode("utf-16-le")
        buf = ctypes.create_string_buffer(text)
        status = ctypes.c_int(0)
        bi = op(UBRK_LINE, b"", buf, i - s, ctypes.byref(status))
        if not bi or status.value > 0:
            if bi:
                close(bi)
            continue
        b = nxt(bi)
        while 0 < b < i - s:
            if out[s + b - 1] == LINEBREAK_NOBREAK:
                out[s + b - 1] = LINEBREAK_ALLOWBREAK
            b = nxt(bi)
        close(bi)
    return bytes(out)


# -- the system libdeflate through ctypes ---------------------------------------------------

@functools.cache
def _libdeflate() -> Any | None:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("deflate") or "libdeflate.so.0")
    except OSError:
        return None
    lib.libdeflate_alloc_compressor.restype = _P
    lib.libdeflate_alloc_compressor.argtypes = [ctypes.c_int]
    lib.libdeflate_zlib_compress_bound.restype = ctypes.c_size_t
    lib.libdeflate_zlib_compress_bound.argtypes = [_P, ctypes.c_size_t]
    lib.libdeflate_zlib_compress.restype = ctypes.c_size_t
    lib.libdeflate_zlib_compress.argtypes = [_P, ctypes.c_char_p, ctypes.c_size_t,
                                             ctypes.c_char_p, ctypes.c_size_t]
    lib.libdeflate_free_compressor.restype = None
    lib.libdeflate_free_compressor.argtypes = [_P]
    return lib


def zlib_deflate(data: bytes, level: int) -> bytes:
    """data compressed whole, in the zlib format, by libdeflate at `level` (pdf.pxi's
    put_stream: the same bytes).  Where libdeflate is not installed (then the extension
    cannot load either), zlib's module at the same level: a valid stream, other bytes."""
    lib = _libdeflate()
    if lib is None:
        return zlib.compress(data, level)
    c = lib.libdeflate_alloc_compressor(level)
    if not c:
        raise MemoryError("libdeflate_alloc_compressor")
    try:
        bound = lib.libdeflate_zlib_compress_bound(c, len(data))
        out = ctypes.create_string_buffer(bound)
        n = lib.libdeflate_zlib_compress(c, data, len(data), out, bound)
        if n == 0:
            raise RuntimeError("libdeflate: the output did not fit its bound")
        return out.raw[:n]
    finally:
        lib.libdeflate_free_compressor(c)
