"""The order's glyph registry (type3.pxi) and a field's layout: shrink to the floor
size, then wrap or ellipsise (layout.pxi)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from .. import tables
from .faces import Fonts
from .libs import thai_breaks
from .para import Glyph, Para, para, shape_line

ELLIPSIS = 0x2026
NTEXT = 11
# pdfminer.six puts two glyphs on one line when their boxes (one em tall) overlap by
# half an em: a glyph raised or lowered this much from the one before gets a bridge
BRIDGE_RISE = 500
# the invisible glyphs of moved characters: 1/50 em apart, leftwards from their glyph
MOVE_STEP = 20
MARK_CATEGORIES = ("Mn", "Mc", "Me")


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


def moved(fs: Fonts, g: Glyph) -> tuple[int, int] | None:
    """moved in type3.pxi: (the face's space, the first of the glyph's characters that
    go on invisible glyphs) for a right-to-left glyph whose text poppler would misplace,
    or None.  A mark (no advance) gives all its characters, so that the mark glyph,
    maybe raised onto a baseline of its own, stands for nothing; a glyph of several
    characters (lam-alef) keeps its first."""
    if not g.rtl or g.cn == 0 or (g.adv and g.cn < 2):
        return None
    space = fs.has(g.face, 32)
    return None if space is None else (space, 0 if g.adv == 0 else 1)


def logical_order(glyphs: list[Glyph]) -> list[int]:
    """logical_order in layout.pxi: a line's glyph indices by the first character each
    stands for (glyphs of one character in visual order)."""
    return sorted(range(len(glyphs)), key=lambda k: (glyphs[k].ci, k))


def bridges(at0: int, at1: int, rise0: int, x: int, w: int, rise: int,
            sw: int) -> list[tuple[int, int]]:
    """bridges in layout.pxi: where to put invisible glyphs (the face's space, width sw,
    no text) between the box at0..at1 written last (at rise0) and the next one x..x+w
    (at rise), so that pdfminer.six keeps them on one line: it does while two
    consecutive glyphs are less than twice the wider one's width apart (never two of no
    width) and their boxes, an em tall, overlap by half an em.  (x, rise) of each, in
    writing order; bridged by half that distance already, to stay clear of rounding."""
    out = []
    if sw > 0:
        gap = x - at1 if x > at1 else at0 - x - w if x + w < at0 else 0
        if gap >= max(at1 - at0, w):
            n = max(1, gap // sw)
            if x > at1:
                out += [(at1 + i * sw, rise0) for i in range(n)]
            elif x + w < at0:
                out += [(at0 - (i + 1) * sw, rise0) for i in range(n)]
            else:
                out.append((min(at0, x), rise0))
    if abs(rise - rise0) >= BRIDGE_RISE:
        out.append((x, (rise0 + rise) // 2))
    return out


def register(fs: Fonts, reg: Registry, glyphs: list[Glyph], u: list[int]) -> None:
    """register_glyphs in type3.pxi: each glyph's code; the codes of the invisible glyphs
    carrying the characters moved off it (moved); the code of a face's bridge (its space
    with no text) when field_ops will need one."""
    for g in glyphs:
        m = moved(fs, g)
        if m is None:
            g.code = reg.code(g.face, g.gid, tuple(u[g.ci:g.ci + g.cn]))
        else:
            space, keep = m
            g.code = reg.code(g.face, g.gid, tuple(u[g.ci:g.ci + keep]))
            g.extra = tuple(reg.code(g.face, space, (u[g.ci + j],))
                            for j in range(keep, g.cn))
            fs.proc(g.face, space)
        fs.proc(g.face, g.gid)
    writing_order(fs, reg, glyphs)


def writing_order(fs: Fonts, reg: Registry, glyphs: list[Glyph]
                  ) -> list[tuple[int, int, int, int]]:
    """walk_line in layout.pxi: (code, x, width, rise) in the order put_field_ops writes
    a line (x in 1/1000 em from the line's start).  The glyphs go in logical order at
    their visual places.  A right-to-left glyph with an advance is written with the
    marks after it that stand for nothing (moved, or the second glyph of a cluster):
    first those, right to left, then it, then the invisible glyphs of the characters
    moved off the group, in logical order, MOVE_STEP apart leftwards from its left edge
    on its baseline (poppler, which reads right to left by position, puts them after
    it; pdfminer.six, which reads in writing order, too).  Before each, the bridges
    pdfminer.six needs (a bridge's code is registered on first use)."""
    pos = []
    pen = 0
    for g in glyphs:
        pos.append(pen + g.xoff)
        pen += g.adv
    order = logical_order(glyphs)
    items: list[tuple[Glyph, int, int, int, int]] = []   # glyph, code, x, width, rise
    i, n = 0, len(order)
    while i < n:
        g = glyphs[order[i]]
        group = [order[i]]
        i += 1
        if g.rtl and g.adv:
            while i < n:
                h = glyphs[order[i]]
                if not h.rtl or h.adv or h.cn != len(h.extra):
                    break
                group.append(order[i])
                i += 1
        for k in [*sorted(group[1:], key=lambda k: (-pos[k], k)), group[0]]:
            h = glyphs[k]
            items.append((h, h.code, pos[k], fs.proc(h.face, h.gid)[1], h.yoff))
        extras = [c for k in group for c in glyphs[k].extra]
        if extras:
            sw = fs.proc(g.face, fs.has(g.face, 32) or 0)[1]
            for j, code in enumerate(extras, 1):
                items.append((g, code, pos[group[0]] - j * MOVE_STEP, sw, g.yoff))
    out = []
    at0 = at1 = rise0 = 0
    for j, (g, code, x, w, rise) in enumerate(items):
        sid = fs.has(g.face, 32)
        if j and sid is not None:
            sw = fs.proc(g.face, sid)[1]
            todo = bridges(at0, at1, rise0, x, w, rise, sw)
            if todo:
                bridge = reg.code(g.face, sid, ())
                out += [(bridge, bx, sw, brise) for bx, brise in todo]
        out.append((code, x, w, rise))
        at0, at1, rise0 = x, x + w, rise
    return out


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
    return FieldOut(size, lines, not p.any_rtl and (lossy or multi))
