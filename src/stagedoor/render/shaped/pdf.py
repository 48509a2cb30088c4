"""A field's text operators and the order's Type 3 fonts with their ToUnicode maps
(put_field_ops in place.pxi, type3.pxi)."""

from __future__ import annotations

from . import emoji
from .faces import Fonts
from .layout import FieldOut, Registry, line_span, writing_order

COLOURS = (b"1 1 1 rg",) + (b"0 0 0 rg",) * 9 + (b"0.3 0.3 0.3 rg",)
TAG_SPACE = 26 ** 6
FONT_NAME_MAX = 127
M32 = 0xFFFFFFFF


# -- PDF: the field's operators and the order's fonts ------------------------------------

def _milli(v: int) -> bytes:
    sign = "-" if v < 0 else ""
    v = abs(v)
    return f"{sign}{v // 1000}.{v % 1000:03d}".encode()


class _Ops:
    """The TJ state of one line: current font, rise, pen (1/1000 em), inside <hex>."""

    def __init__(self, out: list[bytes], size: int) -> None:
        self.out, self.size = out, size
        self.cur, self.rise, self.at, self.inhex = -1, 0, 0, False

    def glyph(self, code: int, x: int, width: int, yoff: int) -> None:
        """put_glyph in place.pxi: show code with its origin at x."""
        out = self.out
        font = code >> 8
        if font != self.cur or yoff != self.rise:
            if self.cur >= 0:
                out.append(b">] TJ" if self.inhex else b"] TJ")
            if font != self.cur:
                out.append(b" /T%d " % font + _milli(self.size) + b" Tf")
                self.cur = font
            if yoff != self.rise:
                self.rise = yoff
                out.append(b" " + _milli(yoff * self.size // 1000) + b" Ts")
            out.append(b" [")
            self.inhex = False
        adjust = x - self.at
        if adjust:
            if self.inhex:
                out.append(b">")
                self.inhex = False
            out.append(b"%d" % -adjust)
        if not self.inhex:
            out.append(b"<")
            self.inhex = True
        out.append(b"%02X" % (code & 255))
        self.at = x + width


def field_ops(fs: Fonts, reg: Registry, fo: FieldOut, f: int) -> bytes:
    """put_field_ops in place.pxi: the glyphs in logical order (by the character they
    stand for), each moved to its visual place by a TJ adjustment; a right-to-left glyph
    of several characters (lam-alef) stands for the first, and each further one is an
    invisible glyph (the face's space) just left of it (layout.register)."""
    out = [b"BT ", COLOURS[f]]
    for line in fo.lines:
        if not line.glyphs:
            continue
        # the line's own /ActualText, where poppler needs one (line_span)
        span = line_span(fs, reg, line.glyphs)
        if span is not None:
            out.append(b" /Span << /ActualText <FEFF" + span.encode(
                "utf-16-be", "surrogatepass").hex().upper().encode() + b"> >> BDC")
        out.append(b" 1 0 0 1 " + _milli(line.x) + b" " + _milli(line.y) + b" Tm")
        ops = _Ops(out, fo.size)
        for code, x, w, rise in writing_order(fs, reg, line.glyphs):
            ops.glyph(code, x, w, rise)
        if ops.cur >= 0:
            out.append(b">] TJ" if ops.inhex else b"] TJ")
        if ops.rise:
            out.append(b" 0 Ts")
        if span is not None:
            out.append(b" EMC")
    out.append(b" ET\n")
    return b"".join(out)


def _cmap(entries: list[tuple[int, int, tuple[int, ...], int]]) -> bytes:
    out = [b"/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
           b"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
           b"/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
           b"1 begincodespacerange\n<00> <FF>\nendcodespacerange\n"]
    # every code, a glyph standing for no character of its own included (<>: nothing)
    mapped = [(code, text) for code, (_, _, text, _) in enumerate(entries)]
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
    # the images follow the fonts, two objects each (put_emoji_images in emoji.pxi)
    nimg = first + len(reg.proc_list) + 2 * ((len(reg.entries) + 255) // 256)
    img_num: list[int] = []
    images = []
    for face, gid in reg.proc_list:
        objs.append(b"%d 0 obj\n" % num + fs.proc(face, gid)[0])
        num += 1
        im = fs.image(face, gid)
        img_num.append(nimg if im is not None else 0)
        if im is not None:
            images += emoji.image_objects(nimg, im)
            nimg += 2
    for k in range(0, len(reg.entries), 256):
        entries = reg.entries[k:k + 256]
        seen: list[int] = []
        procs = []
        xobjects = []
        for face, gid, _, proc in entries:
            if proc not in seen:
                seen.append(proc)
                procs.append(b" /g%d %d 0 R" % (proc, first + proc))
                if img_num[proc]:
                    xobjects.append(b"/E%d_%d %d 0 R " % (face, gid, img_num[proc]))
        res = b"/XObject << " + b"".join(xobjects) + b">> " if xobjects else b""
        widths = b" ".join(b"%d" % fs.proc(face, gid)[1] for face, gid, _, _ in entries)
        tags.append(font_tag(entries, tags))
        objs.append(
            b"%d 0 obj\n<< /Type /Font /Subtype /Type3 /BaseFont /" % num
            + font_name(fs, entries, tags[-1]) + b" /FontBBox [0 0 0 0] "
            b"/FontMatrix [0.001 0 0 0.001 0 0] /Resources << " + res + b">>\n/CharProcs <<"
            + b"".join(procs) + b" >>\n/Encoding << /Type /Encoding /Differences [0"
            + b"".join(b" /g%d" % e[3] for e in entries)
            + b"] >>\n/FirstChar 0 /LastChar %d /Widths [" % (len(entries) - 1) + widths
            + b"]\n/ToUnicode %d 0 R >>\nendobj\n" % (num + 1))
        cmap = _cmap(entries)
        objs.append(b"%d 0 obj\n<< /Length %d >>\nstream\n" % (num + 1, len(cmap)) + cmap
                    + b"\nendstream\nendobj\n")
        num += 2
    return objs + images
