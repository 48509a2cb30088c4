"""What the installed font files cover, script by script: the source of fonts.plan()'s
script -> faces table (the configured `render_fonts` only override it).

Each face of every font file in `render_font_dirs` (regular faces: `*-Regular.*`, or a
name without a style suffix; the `-Bold` siblings are found by fonts.plan) is read for
its cmap, and its code points are counted per script as Unicode assigns them.  A
script's faces are those that cover most of it, best first.  Nothing is kept open: each
file is mapped, read and closed, so no handle crosses a fork.

The native extension reads cmaps and scripts through HarfBuzz, the renderer's own
itemiser (most of its time is the counting in Python); without it fontTools (the
reference extra) does, slower.  scan() is cached per process
(fonts.plan() calls it once per settings) and on disk, so that a worker does not pay
it at every start (issue 27: a large share of a worker's spawn to its first job;
docs/benchmarks.md, "Moved from comments"):

    where     $CACHE_DIRECTORY (systemd's CacheDirectory=), else $XDG_CACHE_HOME/stagedoor,
              else ~/.cache/stagedoor; one JSON file per set of font directories,
              written whole and renamed into place; unwritable: no cache, a scan
    valid     while every font file scan() would read has the same inode, size, mtime
              and ctime, no file is added or removed, the library that reads the
              cmaps and the scripts is the same (HarfBuzz's version, or fontTools'),
              and this module is unchanged; anything else (or a file that does not
              parse, or names a font the directories do not hold) is a scan
script_samples() is kept the same way (it depends only on the library and Python's
Unicode data).  Reading the cache costs a directory listing, a stat per font file and
a JSON load.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import hashlib
import json
import os
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

FONT_EXTS = (".ttf", ".otf", ".ttc", ".otc")
# scripts no face is chosen for by coverage: Common and Inherited characters take the
# face of their neighbours (or the fallback faces), Han goes by the order's locale
UNMAPPED = ("Zyyy", "Zinh", "Zzzz", "Hani", "Hira", "Kana", "Bopo", "Hrkt")
FACES_PER_SCRIPT = 3
T = TypeVar("T")
CACHE_FORMAT = 1             # bump when what a cache file holds changes shape
CACHE_PRUNE_AGE = 30 * 86400  # other cache files unused this long are removed on a write


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
    try:  # optional: fontTools reads the fonts without the extension
        from .. import _render
    except ImportError:
        return None
    return _render


def _runs() -> list[tuple[int, int, str]]:
    r = _native()
    if r is not None:
        return list(r.script_runs())
    from fontTools.unicodedata import Scripts  # optional: the reference extra

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
    from fontTools.ttLib import TTCollection, TTFont  # optional: the reference extra

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


def _font_files(dirs: Sequence[str]) -> list[str]:
    """The paths of the regular faces in dirs, as scan() reads them (the first directory
    wins for a file name found in several)."""
    seen: set[str] = set()
    out = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if name in seen or not _regular(name):
                continue
            seen.add(name)
            out.append(os.path.join(d, name))
    return out


@functools.cache
def scan(dirs: tuple[str, ...]) -> Coverage:
    """The coverage of the regular faces in dirs, from the disk cache when it is valid."""
    paths = _font_files(dirs)
    stamps: list[list[Any]] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            stamps.append([path])  # unreadable now: a scan finds no faces in it
            continue
        stamps.append([path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
    return _cached("fonts-" + _digest(list(dirs)), ["coverage", list(dirs), stamps],
                   lambda: _scan(paths), _coverage_json,
                   lambda data: _coverage_of(data, set(paths)))


def _scan(paths: Sequence[str]) -> Coverage:
    runs = _runs()
    starts = [r[0] for r in runs]
    sizes: dict[str, int] = {}
    for first, last, tag in runs:
        sizes[tag] = sizes.get(tag, 0) + last - first + 1
    found: dict[str, list[tuple[int, float, int, str, int]]] = {}
    for path in paths:
        name = os.path.basename(path)
        for index, ranges in enumerate(_faces_of(path)):
            total = sum(hi - lo + 1 for lo, hi in ranges)
            for tag, n in _count(ranges, runs, starts).items():
                if tag not in UNMAPPED:
                    found.setdefault(tag, []).append((n, n / total, len(name), path, index))
    return Coverage(sizes, {tag: _rank(cands) for tag, cands in sorted(found.items())})


def _coverage_json(cov: Coverage) -> Any:
    return {"sizes": cov.sizes, "faces": cov.faces}


def _coverage_of(data: Any, paths: set[str]) -> Coverage:
    """A Coverage from a cache file's data; ValueError for anything out of shape (the
    file is then ignored: a scan)."""
    sizes, faces = data["sizes"], data["faces"]
    if not (isinstance(sizes, dict) and isinstance(faces, dict)):
        raise ValueError("not a coverage")
    if not all(isinstance(t, str) and type(n) is int for t, n in sizes.items()):
        raise ValueError("bad sizes")
    out: dict[str, list[tuple[str, int, int]]] = {}
    for tag, rows in faces.items():
        if not isinstance(tag, str) or not isinstance(rows, list):
            raise ValueError("bad faces")
        out[tag] = []
        for row in rows:
            path, index, n = row
            if path not in paths or type(index) is not int or type(n) is not int:
                raise ValueError(f"a face the font directories do not hold: {row!r}")
            out[tag].append((path, index, n))
    return Coverage(sizes, out)


# -- the disk cache ---------------------------------------------------------------------

def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:16]


def _cache_dir() -> str:
    systemd = os.environ.get("CACHE_DIRECTORY", "")
    if systemd:
        return systemd.split(":")[0]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".cache")
    return os.path.join(base, "stagedoor")


def _reader() -> str:
    """Which library reads cmaps and scripts, with its version (part of every key).
    Asked at each lookup, not once per process: a process that loses the extension (a
    test that forces the fontTools path) must not be handed what HarfBuzz found."""
    r = _native()
    if r is not None:
        version = getattr(r, "harfbuzz_version", None)
        return f"harfbuzz {version() if version else '?'}"
    import fontTools  # optional: the reference extra

    return f"fontTools {fontTools.version}"


def _code_stamp() -> list[int]:
    try:
        st = os.stat(__file__)
    except OSError:
        return []
    return [st.st_size, st.st_mtime_ns]


def _cached(name: str, key: list[Any], compute: Callable[[], T],
            to_json: Callable[[T], Any], from_json: Callable[[Any], T]) -> T:
    """compute()'s value, from <cache dir>/<name>.json when its key matches."""
    key = [CACHE_FORMAT, _reader(), _code_stamp(), *key]
    path = os.path.join(_cache_dir(), name + ".json")
    try:
        with open(path, "rb") as f:
            data = json.load(f)
        if data["key"] == key:
            return from_json(data["value"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no cache yet, another key, or a damaged file: compute
    value = compute()
    _store(path, {"key": key, "value": to_json(value)})
    return value


def _store(path: str, data: Any) -> None:
    """Write the cache file whole (a temporary renamed over it); never an error."""
    d = os.path.dirname(path)
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    except OSError:
        return  # read-only home, no home: scan at every start, as before
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    _prune(d, keep=os.path.basename(path))


def _prune(d: str, keep: str) -> None:
    """Remove the cache files not read or written for CACHE_PRUNE_AGE (a test's
    temporary font directories leave one each), and temporaries a crash left."""
    old = time.time() - CACHE_PRUNE_AGE
    with contextlib.suppress(OSError):
        for entry in os.scandir(d):
            ours = entry.name.endswith(".json") or entry.name.startswith(".tmp-")
            if entry.name == keep or not ours:
                continue
            with contextlib.suppress(OSError):
                st = entry.stat()
                if max(st.st_atime, st.st_mtime) < old:
                    os.unlink(entry.path)


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
    the order of the scripts' first code points (kept in the disk cache)."""
    def valid(data: Any) -> dict[str, str]:
        if not (isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in data.items())):
            raise ValueError("not samples")
        return data

    return _cached("scripts", ["samples", unicodedata.unidata_version], _samples,
                   lambda d: d, valid)


def _samples() -> dict[str, str]:
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
