"""A colour glyph as a Type 3 procedure painting its PNG (make_colour_proc in
render/_native/emoji.pxi), and the order's images (put_emoji_images): the reference's
copy, decoding the PNG with Pillow where the extension inflates and unfilters it itself."""

from __future__ import annotations

import ctypes
import io
import zlib
from dataclasses import dataclass
from typing import Any

from .libs import harfbuzz

ZLIB_LEVEL = 6          # EMOJI_ZLIB_LEVEL in emoji.pxi
PNG_MAX_SIDE = 1024


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    rgb: bytes          # deflated
    alpha: bytes        # deflated


class _Extents(ctypes.Structure):
    _fields_ = [("x_bearing", ctypes.c_int32), ("y_bearing", ctypes.c_int32),
                ("width", ctypes.c_int32), ("height", ctypes.c_int32)]


def has_png(font: Any) -> bool:
    hb = harfbuzz()
    return bool(hb.hb_ot_color_has_png(hb.hb_font_get_face(font)))


def _png(font: Any, gid: int) -> bytes:
    hb = harfbuzz()
    blob = hb.hb_ot_color_glyph_reference_png(font, gid)
    try:
        n = ctypes.c_uint()
        data = hb.hb_blob_get_data(blob, ctypes.byref(n))
        return ctypes.string_at(data, n.value) if n.value else b""
    finally:
        hb.hb_blob_destroy(blob)


def _deflate(data: bytes) -> bytes:
    z = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, 15, 8)
    return z.compress(data) + z.flush()


def readable(png: bytes) -> bool:
    """png_decode in emoji.pxi reads it: 8-bit RGB or RGBA, or palette of 1-8 bits, not
    interlaced (from the IHDR, which a PNG has first)."""
    if len(png) < 29 or png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        return False
    depth, ctype, interlace = png[24], png[25], png[28]
    return interlace == 0 and ((ctype == 3 and depth in (1, 2, 4, 8))
                               or (ctype in (2, 6) and depth == 8))


def planes(png: bytes) -> tuple[int, int, bytes, bytes] | None:
    """(width, height, RGB, alpha) of a PNG the extension reads, by Pillow; else None."""
    from PIL import Image as PILImage  # optional: Pillow is the test extra

    if not readable(png):
        return None
    try:
        im = PILImage.open(io.BytesIO(png))
        if not (0 < im.width <= PNG_MAX_SIDE and 0 < im.height <= PNG_MAX_SIDE):
            return None
        rgba = im.convert("RGBA").tobytes()
    except (OSError, ValueError):
        return None
    rgb = bytearray(len(rgba) // 4 * 3)
    rgb[0::3], rgb[1::3], rgb[2::3] = rgba[0::4], rgba[1::4], rgba[2::4]
    return im.width, im.height, bytes(rgb), rgba[3::4]


def colour_proc(font: Any, face: int, gid: int
                ) -> tuple[bytes, int, tuple[int, int, int, int], Image] | None:
    """(stream object body, advance, ink box, image) of a colour glyph; None when it
    has no PNG the extension reads (8-bit RGB/RGBA or palette, not interlaced)."""
    png = _png(font, gid)
    got = planes(png) if png else None
    ext = _Extents()
    hb = harfbuzz()
    if got is None or not hb.hb_font_get_glyph_extents(font, gid, ctypes.byref(ext)):
        return None
    w, h, rgb, alpha = got
    width = hb.hb_font_get_glyph_h_advance(font, gid)
    x0, y1 = ext.x_bearing, ext.y_bearing
    x1, y0 = ext.x_bearing + ext.width, ext.y_bearing + ext.height
    image = Image(w, h, _deflate(rgb), _deflate(alpha))
    head = (b"%d 0 d0\nq %d 0 0 %d %d %d cm /E%d_%d Do Q\n"
            % (width, x1 - x0, y1 - y0, x0, y0, face, gid))
    obj = b"<< /Length %d >>\nstream\n" % len(head) + head + b"\nendstream\nendobj\n"
    # the ink box the layout measures: one unit of slack each way, as an outline's
    return obj, width, (x0 - 1, y0 - 1, x1 + 1, y1 + 1), image


def image_objects(num: int, im: Image) -> list[bytes]:
    """put_image in emoji.pxi: the image (object num) and its /SMask (num + 1)."""
    head = b"%d 0 obj\n<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace "
    return [head % (num, im.width, im.height) + b"/DeviceRGB /BitsPerComponent 8 /SMask "
            b"%d 0 R /Length %d /Filter /FlateDecode >>\nstream\n" % (num + 1, len(im.rgb))
            + im.rgb + b"\nendstream\nendobj\n",
            head % (num + 1, im.width, im.height) + b"/DeviceGray /BitsPerComponent 8 "
            b"/Length %d /Filter /FlateDecode >>\nstream\n" % len(im.alpha)
            + im.alpha + b"\nendstream\nendobj\n"]
