"""The fast path's two fonts, embedded: the labels and the Latin text that has a byte in
the fast encoding (WinAnsi + tables.EXTRA_GLYPHS) drawn with the plan's Latin face
(Noto Sans) and its bold, as Type 3 fonts of the glyphs an order uses.

Why: the standard Helvetica pair was not embedded (what printed depended on the viewer)
and put a second sans design beside the Noto Sans of every shaped field (issue 39 item
7).  Why Type 3 and the same byte encoding: the content stream of the fast path, its
fit test (a sum of advances) and the static page content stay as they were, only the
widths come from the face; the glyphs are the cached Type 3 procedures the shaped path
already makes (glyphs.pxi, shaped.faces), so an order embeds a memcpy per glyph it
shows.  The glyph of a code is the face's cmap glyph of its character: what HarfBuzz
gives for that character alone (no kerning, no ligatures, as the Helvetica fast path
had none).

Both renderers build the objects from these pieces (reference.py in Python,
render/_native/fastfont.pxi in C), one copy of the bytes:

- object 4 (F1, regular) and 5 (F2, bold): `head(...)`, then per code the order shows
  ` /cXX N 0 R`, then ` >>\\n/Encoding << /Type /Encoding /Differences [`, per code
  ` C /cXX`, then ` ] >>\\n/ToUnicode T 0 R >>\\nendobj\\n`;
- after the shaped path's objects: the glyph procedures, F1's codes then F2's, in code
  order, then one ToUnicode CMap (TOUNICODE_BODY, deflated once) both fonts share.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from collections.abc import Sequence

from .fontplan import FontPlan
from .tables import EXTRA_CODES, EXTRA_GLYPHS, FIELD_BOXES, FIELD_INK, STATIC_CONTENT

# Subset tags (ISO 32000-1 9.6.4): fixed, one per font (their glyph sets vary by order,
# but no other font of a file has these names).
TAGS = (b"SDFAST", b"SDFASB")


def _code_chars() -> tuple[str | None, ...]:
    chars: list[str | None] = [None] * 256
    for b in range(0x20, 0x100):
        with contextlib.suppress(UnicodeDecodeError):     # 5 bytes cp1252 leaves unused
            chars[b] = bytes([b]).decode("cp1252")
    for (ch, _), code in zip(EXTRA_GLYPHS, EXTRA_CODES, strict=True):
        chars[code] = ch
    return tuple(chars)


# The character of each byte of the fast encoding (None: no character; never shown).
CODE_CHARS = _code_chars()
# Characters the fast path leaves to HarfBuzz although they have a byte: the soft
# hyphen is default-ignorable, which HarfBuzz draws as nothing (Helvetica drew a hyphen).
SHAPED_ONLY = frozenset({"\u00ad"})


def _static_codes() -> tuple[frozenset[int], frozenset[int]]:
    """The codes the static page content (STAGEDOOR, the labels) shows in F1 and F2."""
    used: tuple[set[int], set[int]] = (set(), set())
    font = 0
    for m in re.finditer(rb"/F([12]) [\d.]+ Tf|\(((?:[^()\\]|\\.)*)\) Tj", STATIC_CONTENT):
        if m.group(1):
            font = int(m.group(1)) - 1
        else:
            used[font].update(m.group(2))
    return frozenset(used[0]), frozenset(used[1])


STATIC_CODES = _static_codes()


def latin_face(plan: FontPlan) -> int:
    """The face of F1 (its bold is F2): the plan's first Latin face, else its first
    fallback face, else its first face.  A label character that face lacks is drawn as
    its .notdef box (a plan without a Latin face is a test's or a broken set-up; the
    doctor reports it), and a field character it lacks goes to the shaped path.  -1
    when the plan has no face at all (the doctor's CRITICAL): then F1 and F2 have no
    glyph and every field is shaped."""
    latn = plan.scripts.get("Latn") or plan.fallback or ([0] if plan.faces else [-1])
    return latn[0]


def drawn_widths(k: int, widths: Sequence[int], notdef: int) -> list[int]:
    """The /Widths of font k by code: the glyph's advance; a label's code without a
    glyph the .notdef's (`notdef`); 0 for a code the font never shows."""
    return [w if w >= 0 else notdef if c in STATIC_CODES[k] else 0
            for c, w in enumerate(widths)]


def inside(f: int, ink: tuple[int, int, int, int]) -> bool:
    """Whether a glyph with this ink box (1/1000 em, its procedure's d1; all 0: none)
    stays inside field f's ink limits (tables.FIELD_INK) at the field's size: the fast
    path does not measure ink as the shaped path does, so a code whose glyph would
    reach a label (Noto Sans' ring of Ů, 996/1000 em up) takes the shaped path."""
    _, _, base, size, _, _ = FIELD_BOXES[f]
    bottom, top = FIELD_INK[f]
    if ink == (0, 0, 0, 0):
        return True
    return (ink[3] * size <= (top - base * 1000) * 1000
            and ink[1] * size >= (bottom - base * 1000) * 1000)


def head(font: int, psname: bytes, widths: Sequence[int]) -> bytes:
    """The font dictionary up to its /CharProcs entries; widths (drawn_widths) by code."""
    return (b"<< /Type /Font /Subtype /Type3 /BaseFont /" + TAGS[font] + b"+" + psname
            + b" /FontBBox [0 0 0 0] /FontMatrix [0.001 0 0 0.001 0 0] /Resources << >>\n"
            b"/FirstChar 1 /LastChar 255 /Widths ["
            + b" ".join(b"%d" % w for w in widths[1:]) + b"]\n/CharProcs <<")


def font_object(num: int, head_: bytes, codes: Sequence[int], first_proc: int,
                tounicode: int) -> bytes:
    """Object num: the font of `codes` (ascending), their procedures from first_proc."""
    return (b"%d 0 obj\n" % num + head_
            + b"".join(b" /c%02X %d 0 R" % (c, first_proc + i) for i, c in enumerate(codes))
            + b" >>\n/Encoding << /Type /Encoding /Differences ["
            + b"".join(b" %d /c%02X" % (c, c) for c in codes)
            + b" ] >>\n/ToUnicode %d 0 R >>\nendobj\n" % tounicode)


def _tounicode_body() -> bytes:
    # every code of /FirstChar..LastChar, one without a character to nothing (<>), so
    # that no reader falls back to the raw code
    pairs = [(c, ch) for c, ch in enumerate(CODE_CHARS) if c > 0]
    out = [b"/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
           b"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
           b"/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
           b"1 begincodespacerange\n<00> <FF>\nendcodespacerange\n"]
    for k in range(0, len(pairs), 100):
        chunk = pairs[k:k + 100]
        out.append(b"%d beginbfchar\n" % len(chunk))
        out += [b"<%02X> <%s>\n" % (c, b"%04X" % ord(ch) if ch else b"") for c, ch in chunk]
        out.append(b"endbfchar\n")
    out.append(b"endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n")
    data = zlib.compress(b"".join(out), 9)
    return (b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data
            + b"\nendstream\nendobj\n")


# The shared ToUnicode object after its "N 0 obj\n": every code to its character.
TOUNICODE_BODY = _tounicode_body()
