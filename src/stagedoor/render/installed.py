"""What the installed font files cover, script by script: the source of fonts.plan()'s
script -> faces table (the configured `render_fonts` only override it).

Each face of every font file in `render_font_dirs` (regular faces: `*-Regular.*`, or a
name without a style suffix; the `-Bold` siblings are found by fonts.plan) is read for
its cmap, and its code points are counted per script as Unicode assigns them.  A
script's faces are those that cover most of it, best first.  Nothing is kept open: each
file is mapped, read and closed, so no handle crosses a fork.

The native extension reads cmaps and scripts through HarfBuzz, the renderer's own
itemiser (about 0.1 s for the ~270 Noto files); without it fontTools (the reference
extra) does, slower.  scan() is cached per process (fonts.plan() calls it once per
settings; the supervisor's plan is inherited by the workers it forks).
"""

from __future__ import annotations

import bisect
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FONT_EXTS = (".ttf", ".otf", ".ttc", ".otc")
# scripts no face is chosen for by coverage: Common and Inherited characters take the
# face of their neighbours (or the fallback faces), Han goes by the order's locale
UNMAPPED = ("Zyyy", "Zinh", "Zzzz", "Hani", "Hira", "Kana", "Bopo", "Hrkt")
FACES_PER_SCRIPT = 3


@dataclass(frozen=True, slots=True)
class Coverage:
    # script -> how many code points Unicode gives it
    sizes: dict[str, int]
    # script -> [(path, face index, code points of the script it maps)], best first
    faces: dict[str, list[tuple[str, int, int]]]


def _regular(name: str) -> bool:
    stem, ext = os.path.splitext(name)
    if ext.lower() not in FONT_EXTS:
        return False
    return "-" not in stem or stem.rsplit("-", 1)[1] == "Regular"


def _native() -> Any:
    try:
        from .. import _render
    except ImportError:
        return None
    return _render


def _runs() -> list[tuple[int, int, str]]:
    r = _native()
    if r is not None:
        return list(r.script_runs())
    from fontTools.unicodedata import Scripts

    out = []
    starts = Scripts.RANGES
    for i, start in enumerate(starts):
        end = (starts[i + 1] if i + 1 < len(starts) else 0x110000) - 1
        if Scripts.VALUES[i] != "Zzzz":
            out.append((start, end, str(Scripts.VALUES[i])))
    return out


def _faces_of(path: str) -> list[list[tuple[int, int]]]:
    """The cmap ranges of each face of the file ([] when it cannot be read)."""
    r = _native()
    if r is not None:
        return [r.face_unicodes(path, i) for i in range(r.font_faces(path))]
    from fontTools.ttLib import TTCollection, TTFont

    try:
        if path.lower().endswith((".ttc", ".otc")):
            fonts = list(TTCollection(path, lazy=True).fonts)
        else:
            fonts = [TTFont(path, lazy=True)]
    except Exception:       # fontTools raises many kinds for a damaged file
        return []
    out = []
    try:
        for font in fonts:
            cps = sorted(font.getBestCmap() or {})
            ranges: list[tuple[int, int]] = []
            for cp in cps:
                if ranges and ranges[-1][1] == cp - 1:
                    ranges[-1] = (ranges[-1][0], cp)
                else:
                    ranges.append((cp, cp))
            out.append(ranges)
    finally:
        for font in fonts:  # lazy fonts keep their file open until closed
            font.close()
    return out


def _count(ranges: list[tuple[int, int]], runs: list[tuple[int, int, str]],
           starts: list[int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for lo, hi in ranges:
        i = max(0, bisect.bisect_right(starts, lo) - 1)
        while i < len(runs) and runs[i][0] <= hi:
            first, last, tag = runs[i]
            n = min(hi, last) - max(lo, first) + 1
            if n > 0:
                counts[tag] = counts.get(tag, 0) + n
            i += 1
    return counts


@functools.cache
def scan(dirs: tuple[str, ...]) -> Coverage:
    """The coverage of the regular faces in dirs (the first directory wins for a file
    name found in several)."""
    runs = _runs()
    starts = [r[0] for r in runs]
    sizes: dict[str, int] = {}
    for first, last, tag in runs:
        sizes[tag] = sizes.get(tag, 0) + last - first + 1
    seen: set[str] = set()
    found: dict[str, list[tuple[int, float, int, str, int]]] = {}
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if name in seen or not _regular(name):
                continue
            seen.add(name)
            path = os.path.join(d, name)
            for index, ranges in enumerate(_faces_of(path)):
                total = sum(hi - lo + 1 for lo, hi in ranges)
                for tag, n in _count(ranges, runs, starts).items():
                    if tag not in UNMAPPED:
                        found.setdefault(tag, []).append((n, n / total, len(name), path,
                                                          index))
    return Coverage(sizes, {tag: _rank(cands) for tag, cands in sorted(found.items())})


def _rank(cands: list[tuple[int, float, int, str, int]]) -> list[tuple[str, int, int]]:
    """Best first: the faces with at least 90 % of the best coverage, the font made for
    the script first (the larger share of its own cmap: NotoSansCoptic before Symbola,
    NotoSans before Symbola for Latin), then the plainer (shorter) name (NotoSansTifinagh
    before NotoSansTifinaghAPT); then the others, by coverage."""
    best = max(c[0] for c in cands)

    def key(c: tuple[int, float, int, str, int]) -> tuple[int, float, int, str, int]:
        n, share, length, path, index = c
        if n >= 0.9 * best:
            return (0, -share, length, path, index)
        return (1, -n, length, path, index)

    return [(path, index, n) for n, _, _, path, index in sorted(cands, key=key)]


def best_faces(cov: Coverage, tag: str, limit: int = FACES_PER_SCRIPT) -> list[str]:
    """The best faces for a script as fonts.plan's names: "path" or "path#index"."""
    return [path + (f"#{index}" if index else "")
            for path, index, _ in cov.faces.get(tag, [])[:limit]]


def sample(runs_of: Sequence[tuple[int, int]], n: int = 6) -> str:
    """A few of a script's letters (the first n assigned letters of its runs)."""
    import unicodedata

    out = []
    for first, last in runs_of:
        for cp in range(first, last + 1):
            if unicodedata.category(chr(cp))[0] in "LN":
                out.append(chr(cp))
                if len(out) == n:
                    return "".join(out)
    return "".join(out)


@functools.cache
def script_samples() -> dict[str, str]:
    """Every script Unicode defines (but Common, Inherited) -> a few of its letters, in
    the order of the scripts' first code points."""
    by: dict[str, list[tuple[int, int]]] = {}
    for first, last, tag in _runs():
        if tag not in ("Zyyy", "Zinh", "Zzzz"):
            by.setdefault(tag, []).append((first, last))
    out = {}
    for tag, runs_of in by.items():
        s = sample(runs_of)
        if s:
            out[tag] = s
    return out


@functools.cache
def _run_index() -> tuple[list[int], list[tuple[int, int, str]]]:
    runs = _runs()
    return [r[0] for r in runs], runs


def script_of(cp: int) -> str:
    """The script of a code point ("Zzzz": unassigned), from the same data as scan()."""
    starts, runs = _run_index()
    i = bisect.bisect_right(starts, cp) - 1
    if i >= 0 and runs[i][0] <= cp <= runs[i][1]:
        return runs[i][2]
    return "Zzzz"
