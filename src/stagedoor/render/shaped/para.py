"""One paragraph: a face and script per character, bidi levels (python-bidi where the
extension calls fribidi), runs shaped into glyphs (para_init and shape_run in
shape.pxi)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from ..emoji import apply as emoji_apply
from .faces import Fonts, OrderFonts
from .libs import hb_shape, line_breaks

# -- one paragraph (para_init in shape.pxi) ---------------------------------------------

def _script(cp: int) -> str:
    from fontTools import unicodedata as fu  # optional: the reference extra

    return str(fu.script(chr(cp)))


def _levels(u: list[int]) -> tuple[list[int], int, list[str]]:
    """(levels, base level, bidi classes) by python-bidi's UBA."""
    from bidi import algorithm as uba  # optional: python-bidi is the reference extra

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
    from bidi import algorithm as uba  # optional: python-bidi is the reference extra

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
    lang: str = ""
    su: list[int] | None = None     # the text HarfBuzz shapes, when not u (emoji_faces)

    @property
    def rtl(self) -> bool:
        return self.base == 1


def para(fs: Fonts, u: list[int], bold: int, han: OrderFonts | list[int]) -> Para:
    if isinstance(han, list):       # Han faces alone: no language
        han = OrderFonts(han)
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
    of = han
    su = emoji_apply(u, face, gid, fs.colour_face,
                     lambda f, c: fs.faces[f].glyph(c),
                     lambda c, before: fs.pick(c, "Zyyy", before, of, bold))
    levels, base, kinds = _levels(u) if u else ([], 0, [])
    return Para(u, bold, face, gid, script, levels, kinds, base,
                line_breaks(u) if u else b"", [0] * len(u), missing,
                any(lv & 1 for lv in levels), han.lang, su)


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
    extra: tuple[int, ...] = ()     # codes of the invisible glyphs of its further characters


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
    shaped = hb_shape(fs.faces[face].font, p.su or p.u, lo, hi - lo, rtl, p.script[lo],
                      p.lang)
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
        # an emoji's glyph keeps its whole sequence (shape_run in shape.pxi)
        g = Glyph(face, gid, adv, xoff, yoff, c, cn, 0 if fs.faces[face].colour else rtl)
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
