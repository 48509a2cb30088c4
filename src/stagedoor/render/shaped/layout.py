"""The order's glyph registry (type3.pxi) and a field's layout: shrink to the floor
size, then wrap (at UAX #14's breaks, libthai's in Thai, ICU's in Lao, Myanmar and
Khmer) or ellipsise at cluster boundaries, all measured by the ink of the
glyphs, then placed and if need be shrunk so that the ink stays in the field's box
(layout.pxi says how)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from .. import tables
from .faces import Fonts, OrderFonts
from .libs import dict_breaks, thai_breaks
from .para import Glyph, Para, para, shape_line

ELLIPSIS = 0x2026
NTEXT = 11
# pdfminer.six puts two glyphs on one line when their boxes (one em tall) overlap by
# half an em: a glyph raised or lowered this much from the one before gets a bridge
BRIDGE_RISE = 500
# pdfminer.six reads a space where a glyph starts more than a tenth of an em right of
# the one before: a gap after a mark of no width wider than this gets bridges
MARK_GAP = 50
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
    """logical_order in place.pxi: a line's glyph indices by the first character each
    stands for (glyphs of one character in visual order)."""
    return sorted(range(len(glyphs)), key=lambda k: (glyphs[k].ci, k))


def bridges(at0: int, at1: int, rise0: int, x: int, w: int, rise: int,
            sw: int) -> list[tuple[int, int]]:
    """bridges in place.pxi: where to put invisible glyphs (the face's space, width sw,
    no text) between the box at0..at1 written last (at rise0) and the next one x..x+w
    (at rise), so that pdfminer.six keeps them on one line: it does while two
    consecutive glyphs are less than twice the wider one's width apart (never two of no
    width) and their boxes, an em tall, overlap by half an em.  (x, rise) of each, in
    writing order; bridged by half that distance already, to stay clear of rounding."""
    out = []
    if sw > 0:
        gap = x - at1 if x > at1 else at0 - x - w if x + w < at0 else 0
        if at1 == at0 and x > at1 and gap > MARK_GAP:
            # after a mark of no width drawn left of its pen (a Tibetan vowel sign),
            # pdfminer.six would read the gap to the next letter as a word space:
            # bridged all the way
            out += [(at1 + i * sw, rise0) for i in range(-(-gap // sw))]
        elif gap >= max(at1 - at0, w):
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
    with no text) when field_ops will need one.  A line written flat (flat, as
    register_flat in linetext.pxi): each glyph with no text, all its characters moved."""
    if glyphs and flat(fs, glyphs):
        for g in glyphs:
            g.code = reg.code(g.face, g.gid, ())
            fs.proc(g.face, g.gid)
            g.extra = ()
            if g.cn:
                space = fs.has(g.face, 32)
                assert space is not None
                g.extra = tuple(reg.code(g.face, space, (u[g.ci + j],))
                                for j in range(g.cn))
                fs.proc(g.face, space)
        writing_order(fs, reg, glyphs)
        return
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


def code_width(fs: Fonts, reg: Registry, code: int) -> int:
    """code_width in place.pxi: the advance of the glyph a code shows, as the font's
    /Widths gives it (pdf.font_objects): the pen of every glyph written after it moves
    by exactly this much.  (An invisible glyph carrying a character moved off a group
    is its own glyph's face's space, not the face of the group's first glyph.)"""
    face, gid, _, _ = reg.entries[code]
    return fs.proc(face, gid)[1]


def writing_order(fs: Fonts, reg: Registry, glyphs: list[Glyph]
                  ) -> list[tuple[int, int, int, int]]:
    """walk_line in place.pxi: (code, x, width, rise) in the order put_field_ops writes
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
    if flat(fs, glyphs):
        return _flat_order(fs, reg, glyphs, order, pos, pen)
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
            items.append((h, h.code, pos[k], code_width(fs, reg, h.code), h.yoff))
        extras = [c for k in group for c in glyphs[k].extra]
        for j, code in enumerate(extras, 1):
            items.append((g, code, pos[group[0]] - j * MOVE_STEP, code_width(fs, reg, code),
                          g.yoff))
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


# -- lines whose text layer poppler needs spelled out (linetext.pxi) ---------------------

def flat(fs: Fonts, glyphs: list[Glyph]) -> bool:
    """flat_line in linetext.pxi: the line's letters cascade (a right-to-left glyph with
    an advance raised or lowered: Nastaliq) and every face standing for a character has
    a space to carry it."""
    if not any(g.rtl and g.adv and g.yoff for g in glyphs):
        return False
    return all(fs.has(g.face, 32) is not None for g in glyphs if g.cn > 0)


def _flat_order(fs: Fonts, reg: Registry, glyphs: list[Glyph], order: list[int],
                pos: list[int], width: int) -> list[tuple[int, int, int, int]]:
    """walk_flat in linetext.pxi: the characters' invisible glyphs in logical order on
    the baseline, in slots leftwards from the line's right end (width / characters
    apart, at most the first one's width), a left-to-right run's in its slots reversed
    with bridges over the jumps; the visible glyphs at their places, the face's space
    with no text at the left end."""
    n = sum(len(g.extra) for g in glyphs)
    last = max((k for k, g in enumerate(glyphs) if g.extra), default=-1)
    if last < 0:
        return []
    face = glyphs[last].face
    space = fs.has(face, 32)
    assert space is not None
    end = reg.code(face, space, ())
    out: list[tuple[int, int, int, int]] = []
    step = width // n
    first = next(glyphs[k].extra[0] for k in order if glyphs[k].extra)
    step = max(1, min(step, code_width(fs, reg, first)))
    bw = code_width(fs, reg, end)
    px = width

    def put(code: int, x: int) -> None:
        """put_carrier: bridges a slot apart over a jump left, then the character."""
        nonlocal px
        while px - step > x:
            px -= step
            out.append((end, px, bw, 0))
        out.append((code, x, code_width(fs, reg, code), 0))
        px = x

    slot = k = 0
    while k < len(order):
        g = glyphs[order[k]]
        if g.rtl:
            for code in g.extra:
                slot += 1
                put(code, width - slot * step)
            k += 1
            continue
        # a left-to-right run: its characters take their slots in reverse
        e = k
        while e < len(order) and not glyphs[order[e]].rtl:
            e += 1
        run = [code for t in range(k, e) for code in glyphs[order[t]].extra]
        for i, code in enumerate(run):
            put(code, width - (slot + len(run) - i) * step)
        slot += len(run)
        k = e
    for k, g in enumerate(glyphs):
        out.append((g.code, pos[k], code_width(fs, reg, g.code), g.yoff))
    out.append((end, 0, code_width(fs, reg, end), 0))
    return out


def _poppler_r(cp: int) -> bool:
    """poppler_r in linetext.pxi: poppler's unicodeTypeR."""
    return (cp in (0x05BE, 0x05C0, 0x05C3, 0x060D, 0x06DD, 0x0710, 0x07B1, 0x200F, 0x202B,
                   0x202E)
            or 0x05C5 <= cp <= 0x0603 or 0x0616 <= cp <= 0x064A or 0x066D <= cp <= 0x066F
            or 0x0671 <= cp <= 0x06D5 or 0x06E5 <= cp <= 0x06E6 or 0x06EE <= cp <= 0x06EF
            or 0x06FA <= cp <= 0x070D or 0x0712 <= cp <= 0x072F or 0x074B <= cp <= 0x07A5
            or 0xFB18 <= cp <= 0xFB1D or 0xFB1F <= cp <= 0xFB28 or 0xFB2A <= cp <= 0xFD3D
            or 0xFD40 <= cp <= 0xFDFC or 0xFE6C <= cp <= 0xFEFC)


def line_span(fs: Fonts, reg: Registry, glyphs: list[Glyph]) -> str | None:
    """line_span in linetext.pxi: the /ActualText of a line that needs one (the text as
    it is when poppler sees no right-to-left letter in it, in visual order for a flat
    line), else None."""
    if not any(g.rtl for g in glyphs):
        return None
    chars: list[int] = []
    for k in logical_order(glyphs):
        g = glyphs[k]
        chars += reg.entries[g.code][2]
        for code in g.extra:
            chars += reg.entries[code][2]
    if not chars:
        return None
    if any(_poppler_r(c) for c in chars):
        if not flat(fs, glyphs):
            return None
        # visual order: the glyphs left to right, a right-to-left glyph's reversed
        chars = []
        for g in glyphs:
            own = list(reg.entries[g.code][2])
            for code in g.extra:
                own += reg.entries[code][2]
            chars += own[::-1] if g.rtl else own
    return "".join(map(chr, chars))


# -- layout (layout.pxi) -----------------------------------------------------------------

MARKS_PER_BASE = 6      # at most this many combining marks drawn on one base (clusters.pxi)
CODE_FLOOR = 3000       # the admission code is shrunk down to this before it is cut
CODE_FIELD = 9          # the admission code's field: wrapped, never cut (layout.pxi)
LEAD = 1200             # the least distance between two baselines, 1/1000 em
LINE_GAP = 100          # the least air between the ink of two lines, 1/1000 em
ZWNJ, ZWJ = 0x200C, 0x200D
# Viramas (canonical combining class 9) that end a syllable visibly rather than join
# the next consonant into a conjunct (Indic_Syllabic_Category Pure_Killer, and Sinhala's
# al-lakuna, which joins only through a ZWJ): a cut may follow them
KILLERS = (0x0E3A, 0x0BCD, 0x0DCA, 0x0F84, 0x103A)


@dataclass
class Line:
    glyphs: list[Glyph]
    width: int
    lo: int = 0         # the ink: left (<= 0), bottom (<= 0), right (>= width), top
    bot: int = 0        # (>= 0), 1/1000 em from the line's origin on its baseline
    hi: int = 0
    top: int = 0
    x: int = 0
    y: int = 0

    @property
    def span(self) -> int:
        return self.hi - self.lo


@dataclass
class FieldOut:
    size: int
    lines: list[Line]
    actual: bool


def _is_mark(cp: int) -> bool:
    return unicodedata.category(chr(cp)) in MARK_CATEGORIES


def tdiv(a: int, b: int) -> int:
    """a / b truncated toward zero, as C divides (the extension builds with cdivision)."""
    q = abs(a) // b
    return -q if a < 0 else q


def cap_marks(u: list[int]) -> list[int]:
    """u without the marks past the MARKS_PER_BASE-th of a run (cap_marks in clusters.pxi;
    joiners inside the run neither count nor end it): a tower of marks would otherwise
    make the whole field shrink to fit its height."""
    out: list[int] = []
    run = 0
    for c in u:
        if _is_mark(c):
            run += 1
            if run > MARKS_PER_BASE:
                continue
        elif c not in (ZWNJ, ZWJ):
            run = 0
        out.append(c)
    return out


def _jamo(cp: int) -> int:
    """Hangul syllable type for UAX #29: 1 L, 2 V, 3 T, 4 LV, 5 LVT, 0 none."""
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return 1
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return 2
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return 3
    if 0xAC00 <= cp <= 0xD7A3:
        return 4 if (cp - 0xAC00) % 28 == 0 else 5
    return 0


def _extends(cp: int) -> bool:
    """Grapheme_Cluster_Break Extend, SpacingMark or ZWJ (UAX #29 GB9, GB9a), as far as
    a cut needs them: marks, ZWNJ/ZWJ, emoji modifiers, tag characters, Thai and Lao
    SARA AM."""
    return (_is_mark(cp) or cp in (ZWNJ, ZWJ, 0x0E33, 0x0EB3) or 0x1F3FB <= cp <= 0x1F3FF
            or 0xE0020 <= cp <= 0xE007F)


def boundary(u: list[int], n: int) -> bool:
    """Whether a line or an ellipsis may cut u before u[n]: at an extended grapheme
    cluster boundary (UAX #29: not before a mark or a joiner, not inside a Hangul
    syllable's jamo, not after a ZWJ, not between the two regional indicators of a
    flag) that is not inside an Indic conjunct (not after a virama, canonical combining
    class 9, when a letter follows, but for the KILLERS), nor inside a Myanmar syllable
    (not before a consonant its asat kills).  boundary() in clusters.pxi."""
    if n <= 0 or n >= len(u):
        return True
    c, b = u[n], u[n - 1]
    if _extends(c) or b == ZWJ:
        return False
    if (unicodedata.combining(chr(b)) == 9 and b not in KILLERS
            and unicodedata.category(chr(c))[0] == "L"):
        return False
    if 0x1000 <= c <= 0x1021:
        # a Myanmar consonant killed by asat closes the syllable before it (ကုန်)
        k = n + 1
        while k < len(u) and u[k] == 0x1037:
            k += 1
        if k < len(u) and u[k] == 0x103A:
            return False
    jb, jc = _jamo(b), _jamo(c)
    if jb and jc and ((jb == 1 and jc != 3) or (jb in (2, 4) and jc in (2, 3))
                      or (jb in (3, 5) and jc == 3)):
        return False
    if 0x1F1E6 <= b <= 0x1F1FF and 0x1F1E6 <= c <= 0x1F1FF:
        k = n - 1
        while k > 0 and 0x1F1E6 <= u[k - 1] <= 0x1F1FF:
            k -= 1
        return (n - k) % 2 == 0
    return True


def _ink(fs: Fonts, glyphs: list[Glyph]) -> tuple[int, int, int, int]:
    """(left, bottom, right, top) of the ink of a line of glyphs, 1/1000 em from its
    origin: each glyph's outline box (its Type 3 d1 box) at its pen position and
    offsets; the origin and the advance are always inside.  line_ink in layout.pxi."""
    x = lo = bot = top = hi = 0
    for g in glyphs:
        x0, y0, x1, y1 = fs.ink(g.face, g.gid)
        if x0 or y0 or x1 or y1:
            gx = x + g.xoff
            lo = min(lo, gx + x0)
            hi = max(hi, gx + x1)
            bot = min(bot, g.yoff + y0)
            top = max(top, g.yoff + y1)
        x += g.adv
    return lo, bot, max(hi, x), top


def _line(fs: Fonts, glyphs: list[Glyph], w: int) -> Line:
    lo, bot, hi, top = _ink(fs, glyphs)
    return Line(glyphs, w, lo, bot, hi, top)


def _shaped(fs: Fonts, reg: Registry, p: Para, s: int, e: int) -> Line:
    glyphs, w = shape_line(fs, p, s, e)
    register(fs, reg, glyphs, p.u)
    return _line(fs, glyphs, w)


def _word_cut(u: list[int], brk: bytes, s: int, e: int, best: int) -> int:
    """word_cut in layout.pxi: where the ellipsis goes, given that u[s:best] fits before
    it: at the last break opportunity in there (a word boundary; in Thai, libthai's),
    trailing spaces dropped, when that keeps at least half of it; else at best, a
    cluster boundary (scripts written without spaces, one long word)."""
    if best >= e or best <= s:
        return best
    for n in range(best, s, -1):
        if brk[n - 1] in (0, 1):          # LINEBREAK_MUSTBREAK, LINEBREAK_ALLOWBREAK
            while n > s and u[n - 1] == 32:
                n -= 1
            return n if 2 * (n - s) >= best - s else best
    return best


def _ellipsised(fs: Fonts, reg: Registry, p: Para, brk: bytes, s: int, e: int, limit: int,
                han: OrderFonts | list[int]) -> Line:
    lo, hi, best = s, e, s
    while lo <= hi:
        mid = (lo + hi) // 2
        n = mid
        while s < n < e and not boundary(p.u, n):
            n -= 1
        while n > s and p.u[n - 1] == 32:
            n -= 1
        t = [*p.u[s:n], ELLIPSIS]
        glyphs, w = shape_line(fs, para(fs, t, p.bold, han), 0, len(t))
        if _line(fs, glyphs, w).span <= limit:
            best = n
            lo = mid + 1
        else:
            hi = mid - 1
    best = _word_cut(p.u, brk, s, e, best)
    t = [*p.u[s:best], ELLIPSIS]
    return _shaped(fs, reg, para(fs, t, p.bold, han), 0, len(t))


def _fit(fs: Fonts, reg: Registry, f: int, u: list[int], han: OrderFonts | list[int],
         size: int) -> tuple[int, list[Line], bool, Para]:
    """Across: one line at size, else shrunk, else wrapped, else cut (layout_lines in
    layout.pxi).  Widths are the lines' ink, not only their advances."""
    x0, x1, _, _, bold, maxl = tables.FIELD_BOXES[f]
    box = (x1 - x0) * 1000
    p = para(fs, u, bold, han)
    lossy = p.missing
    glyphs, w = shape_line(fs, p, 0, len(u))
    whole = _line(fs, glyphs, w)
    span = whole.span
    if span * size // 1000 > box:
        if size > tables.MIN_SIZE and span * tables.MIN_SIZE // 1000 <= box:
            size = box * 1000 // span // 10 * 10
        elif size > tables.MIN_SIZE:
            size = tables.MIN_SIZE
    lines: list[Line] = []
    if span * size // 1000 <= box:
        register(fs, reg, glyphs, u)
        lines.append(whole)
        return size, lines, lossy, p
    brk = dict_breaks(u, thai_breaks(u, p.brk))
    code = f == CODE_FIELD
    if code:
        # the code breaks after each hyphen too (UAX #14 has none before a digit)
        brk = bytes(1 if c == 0x2D and i < len(u) - 1 else b
                    for i, (c, b) in enumerate(zip(u, brk, strict=True)))
    adv = list(p.adv)
    n = len(u)
    while True:
        limit = box * 1000 // size
        # the admission code is never cut: where a cut would be, smaller and again
        retry = code and size > CODE_FLOOR
        lines, cut = [], False
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
            elif last > start and (not code or 2 * (last - start) >= i - start):
                end = last
            else:
                # no opportunity (or, in the code, one that leaves the line half empty)
                end = i
                while end > start + 1 and not boundary(u, end):
                    end -= 1
                if not boundary(u, end):
                    # one cluster wider than the line: the whole of it (then cut below)
                    end = i
                    while end < n and not boundary(u, end):
                        end += 1
            k = end
            while k > start and u[k - 1] == 32:
                k -= 1
            if len(lines) == maxl - 1 and end < n:
                if retry:
                    cut = True
                    break
                lines.append(_ellipsised(fs, reg, p, brk, start, n, limit, han))
                lossy = True
                break
            line = _shaped(fs, reg, p, start, k)
            if line.span > limit:
                if retry:
                    cut = True
                    break
                line = _ellipsised(fs, reg, p, brk, start, k, limit, han)
                lossy = True
            lines.append(line)
            start = end
        if not cut:
            break
        size = max(CODE_FLOOR, size * 9 // 10 // 10 * 10)
    return size, lines, lossy, p


def _offsets(lines: list[Line]) -> list[int]:
    """Each line's baseline below the first's, 1/1000 em: at least LEAD apart, and more
    where the ink of one line would come within LINE_GAP of the next's."""
    offs = [0]
    for i in range(1, len(lines)):
        offs.append(offs[-1] + max(LEAD, lines[i].top - lines[i - 1].bot + LINE_GAP))
    return offs


def _fitting_size(f: int, lines: list[Line], size: int) -> int:
    """size, or the largest smaller one (in 1/100 pt steps) at which the lines' ink fits
    the field's box from bottom to top (tables.FIELD_INK)."""
    bottom, top = tables.FIELD_INK[f]
    if not lines:
        return size
    offs = _offsets(lines)
    height = (max(ln.top - o for o, ln in zip(offs, lines, strict=True))
              - min(ln.bot - o for o, ln in zip(offs, lines, strict=True)))
    if height * size // 1000 <= top - bottom - 10:
        return size
    # never 0: a size is divided by (_fit's limit)
    return min(size, max(10, (top - bottom - 10) * 1000 // height // 10 * 10))


def layout_field(fs: Fonts, reg: Registry, f: int, u: list[int],
                 han: OrderFonts | list[int]) -> FieldOut:
    safe = cap_marks(u)
    size, lines, lossy, p = _fit(fs, reg, f, safe, han, tables.FIELD_BOXES[f][3])
    need = _fitting_size(f, lines, size)
    if need < size:
        # too tall: again at the size whose ink fits (it may now take fewer lines), and
        # if that is still too tall, the same lines smaller
        size, lines, lossy, p = _fit(fs, reg, f, safe, han, need)
        size = _fitting_size(f, lines, size)
    lossy = lossy or len(safe) != len(u)
    _place(f, lines, size, p.rtl)
    multi = any(g.cn != 1 or g.adv == 0 or g.xoff or g.yoff
                for line in lines for g in line.glyphs)
    return FieldOut(size, lines, not p.any_rtl and (lossy or multi))


def _place(f: int, lines: list[Line], size: int, rtl: bool) -> None:
    """place_lines in layout.pxi: the ink from the left edge, under the field's label;
    a right-to-left paragraph's lines right-aligned to each other, the block's ink from
    the left edge too (the small print, which has no label, at the right edge); the
    block centred on the x-height middle of the field's one-line position (the small
    print hangs from its first baseline), then moved into its box."""
    x0, x1, base_y, size0, _, _ = tables.FIELD_BOXES[f]
    x0, x1 = x0 * 1000, x1 * 1000
    bottom, top = tables.FIELD_INK[f]
    if not lines:
        return
    offs = _offsets(lines)
    if f == NTEXT - 1:
        y0 = base_y * 1000
    else:
        y0 = base_y * 1000 + size0 * 35 // 100 - size * 35 // 100 + offs[-1] * size // 1000 // 2
    ink_top = max(y0 - offs[i] * size // 1000 + ln.top * size // 1000
                  for i, ln in enumerate(lines))
    ink_bot = min(y0 - offs[i] * size // 1000 + tdiv(ln.bot * size, 1000)
                  for i, ln in enumerate(lines))
    if ink_top > top:
        y0 -= ink_top - top
    elif ink_bot < bottom:
        y0 += bottom - ink_bot
    if f != NTEXT - 1:
        # a right-to-left value starts at its label's side, as a left-to-right one
        x1 = x0 + max(ln.span for ln in lines) * size // 1000
    for i, line in enumerate(lines):
        line.x = (x1 - line.hi * size // 1000) if rtl else (x0 - tdiv(line.lo * size, 1000))
        line.y = y0 - offs[i] * size // 1000
