"""The renderer's fonts: which file draws which script, from the installed fonts'
coverage and the settings.

The script -> faces table is derived from what the installed fonts cover (installed.py:
every regular face in `render_font_dirs`, its cmap counted per Unicode script, best
coverage first), so a script is drawn as soon as a font for it is installed; no list
of scripts is kept here.  The settings override it (config/settings.py, docs/settings.md):
`render_fonts` (per script, ISO 15924 code = font files in order of preference,
separated by |: tried before the derived faces), `render_font_discover` (off: only the
configured fonts), `render_lang_fonts` (per order language, the face of a script:
Urdu in Nastaliq), `render_font_fallback` (tried for any character its
script's fonts lack: symbols, emoji), `render_han_fonts` (the face for Han characters
per locale) and `render_han_order` (the faces tried for Han when the order has no
locale; kana in an order moves the Japanese face first).  The defaults are Noto
(fonts-noto-core, fonts-noto-cjk) and Symbola (fonts-symbola), which scripts/setup.sh
installs; nothing is ever downloaded.  A file name may end in `#N` for face N of a
collection (.ttc).  Bold fields use the file with `-Bold` for `-Regular` when it exists.
The colour emoji fonts (`render_emoji_fonts`: NotoColorEmoji.ttf, fonts-noto-color-emoji)
are FontPlan.emoji when a directory has them: only emoji sequences go to them (emoji.py).

Nothing is opened here: the native renderer memory-maps a face the first time a
character needs it (see render/_native/fonts.pxi).  `check()` says which configured files are
missing and which scripts that leaves without a font (one warning at boot), and
`coverage()` answers `stagedoor render --check-fonts`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from .. import config
from . import fontplan, installed
from .fontplan import FontPlan as FontPlan
from .fontplan import han_faces as han_faces
from .fontplan import language_faces as language_faces
from .fontplan import shaping_language as shaping_language

HAN_SCRIPTS = ("Hani", "Hira", "Kana", "Bopo")
MAX_SCRIPT_FACES = 8        # as many as pick_face tries per script (fonts.pxi)

# Extra letters for --check-fonts beyond the few of each script that installed.py takes
# from Unicode's own data: the letters a first sample misses (dotless i, capital sharp
# s) and the symbols and emoji the fallback fonts are for.
EXTRA_SAMPLES = {"Latn": "AaŞğ\u0131ẞệ", "Hang": "한국어", "Hani": "中文漢字",
                 "Zsye": "🎫😀★"}


def _pairs(entries: Sequence[str]) -> dict[str, str]:
    """["Latn=a.ttf", ...] -> {"Latn": "a.ttf"}; a later entry for a key wins."""
    out = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise config.ConfigError(f"font setting {entry!r}: expected KEY=FILE")
        out[key.strip()] = value.strip()
    return out


def plan_for(settings: config.Settings) -> FontPlan:
    """The plan the settings describe (render_font_dirs, render_fonts, ...)."""
    return plan(settings.render_font_dirs, _pairs(settings.render_fonts),
                settings.render_font_fallback, _pairs(settings.render_han_fonts),
                settings.render_han_order, _lang_pairs(settings.render_lang_fonts),
                bool(settings.render_font_discover), settings.render_emoji_fonts)


def _lang_pairs(entries: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """["ur=Arab:file", ...] -> {"ur": [("Arab", "file")]}."""
    out: dict[str, list[tuple[str, str]]] = {}
    for key, value in _pairs(entries).items():
        script, sep, name = value.partition(":")
        if not sep or len(script.strip()) != 4 or not name.strip():
            raise config.ConfigError(f"language font {key}={value!r}: expected "
                                     "LANG=Script:FILE (Script: ISO 15924, like Arab)")
        out.setdefault(key.strip().lower(), []).append((script.strip().title(), name.strip()))
    return out


def _split(name: str) -> tuple[str, int]:
    base, _, index = name.partition("#")
    if index and not index.isdigit():
        raise config.ConfigError(f"font {name!r}: the face after # must be a number")
    return base, int(index) if index else 0


def _find(name: str, dirs: Sequence[str]) -> str | None:
    if os.path.isabs(name):
        return name if os.path.exists(name) else None
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.exists(path):
            return path
    return None


def plan(dirs: Sequence[str] = config.FONT_DIRS,
         fonts: Mapping[str, str] | None = None,
         fallback: Sequence[str] = config.FALLBACK_FONTS,
         han: Mapping[str, str] | None = None,
         han_order: Sequence[str] = config.HAN_ORDER,
         lang: Mapping[str, Sequence[tuple[str, str]]] | None = None,
         discover: bool = True,
         emoji_fonts: Sequence[str] = config.EMOJI_FONTS) -> FontPlan:
    """Face numbers for the native renderer; missing files are left out (and reported).
    fonts: script -> "file[#face][|file...]"; han: locale key -> "file[#face]"; lang:
    language -> [(script, "file[#face]")]; discover: add, for every script, the installed
    faces that cover it (installed.py), after the configured ones; emoji_fonts: the
    colour emoji fonts (FontPlan.emoji: those found, in order)."""
    if fonts is None:
        fonts = _pairs(config.SCRIPT_FONTS)
    if han is None:
        han = _pairs(config.HAN_FONTS)
    if lang is None:
        lang = _lang_pairs(config.LANG_FONTS)
    faces: list[tuple[str, int, int]] = []
    index: dict[tuple[str, int], int] = {}
    missing: dict[str, list[str]] = {}

    def face(name: str, why: str) -> int | None:
        base, num = _split(name)
        path = _find(base, dirs)
        if path is None:
            missing.setdefault(base, []).append(why)
            return None
        key = (path, num)
        if key not in index:
            bold_path = path.replace("-Regular.", "-Bold.")
            bold = -1
            if bold_path != path and os.path.exists(bold_path):
                index[(bold_path, num)] = bold = len(faces)
                faces.append((bold_path, num, bold))
            index[key] = len(faces)
            faces.append((path, num, bold if bold >= 0 else len(faces)))
        return index[key]

    scripts: dict[str, list[int]] = {}
    for tag, names in fonts.items():
        nums = [n for name in names.split("|") if (n := face(name.strip(), tag)) is not None]
        scripts[tag] = nums
    fb = [n for name in fallback if (n := face(name, "fallback")) is not None]
    han_faces = {loc: n for loc, name in han.items()
                 if (n := face(name, f"Han ({loc})")) is not None}
    order = [han_faces[loc] for loc in han_order if loc in han_faces]
    order += [n for n in han_faces.values() if n not in order]
    lang_faces = {key: [(script, n) for script, name in pairs
                        if (n := face(name, f"{script} ({key})")) is not None]
                  for key, pairs in lang.items()}
    if discover:
        cov = installed.scan(tuple(dirs))
        for tag in cov.faces:
            nums = scripts.setdefault(tag, [])
            for name in installed.best_faces(cov, tag):
                n = face(name, tag)
                if n is not None and n not in nums and len(nums) < MAX_SCRIPT_FACES:
                    nums.append(n)
    # the colour emoji font: not a missing font when absent (the doctor says so)
    colour = [n for name in emoji_fonts if name.strip()
              and _find(_split(name.strip())[0], dirs) is not None
              and (n := face(name.strip(), "emoji")) is not None]
    return FontPlan(tuple(faces), scripts, fb, han_faces, order, missing, lang_faces,
                    frozenset(fonts), colour)


def missing_warning(p: FontPlan) -> str | None:
    """One line naming the missing font files and the scripts they leave uncovered."""
    if not p.missing:
        return None
    covered = {tag for tag, nums in p.scripts.items() if nums}
    lost = sorted({why for whys in p.missing.values() for why in whys
                   if why not in covered})
    files = ", ".join(sorted(p.missing))
    scripts = ", ".join(lost) if lost else "none (other files cover them)"
    return (f"fonts missing: {files}; scripts without a font: {scripts}; their characters "
            "print as replacement marks (install them: scripts/setup.sh, or set "
            "render_font_dirs / render_fonts)")


def samples() -> dict[str, str]:
    """Every script Unicode defines -> a few of its letters (installed.script_samples),
    with EXTRA_SAMPLES added."""
    out = dict(installed.script_samples())
    for tag, extra in EXTRA_SAMPLES.items():
        out[tag] = "".join(dict.fromkeys(out.get(tag, "") + extra))
    return out


def required(p: FontPlan) -> frozenset[str]:
    """The scripts --check-fonts fails for (exit 69) when a face lacks them: those the
    settings name, Han and emoji.  Other scripts without a font are listed, not failed:
    Unicode defines scripts no installed font has (new ones, historic ones)."""
    return p.configured | frozenset(EXTRA_SAMPLES) | frozenset(HAN_SCRIPTS)


def coverage(p: FontPlan) -> list[tuple[str, str, str]]:
    """(script, font file, what is missing of its sample) for --check-fonts, for every
    script Unicode defines."""
    from .._render import face_covers  # optional, and _render imports render/: a cycle

    rows = []
    for tag, sample in samples().items():
        nums = (p.han_order if tag in HAN_SCRIPTS else p.scripts.get(tag, [])) + p.fallback
        lacking = sample
        used = ""
        for n in nums:
            left = face_covers(n, lacking)
            if len(left) < len(lacking):
                used = used or os.path.basename(p.faces[n][0]) + (
                    f"#{p.faces[n][1]}" if p.faces[n][1] else "")
            lacking = left
            if not lacking:
                break
        rows.append((tag, used or "-", lacking))
    return rows


def uncovered_scripts(p: FontPlan) -> list[str]:
    """The scripts Unicode defines that no face of the plan is for (no font opened)."""
    have = {tag for tag, nums in p.scripts.items() if nums}
    if p.han_order:
        have.update(HAN_SCRIPTS)
    return sorted(tag for tag in installed.script_samples() if tag not in have)


def uncovered_warning(p: FontPlan) -> str | None:
    """The boot warning naming the scripts that would print as replacement marks."""
    lost = uncovered_scripts(p)
    if not lost:
        return None
    return (f"{len(lost)} scripts have no font (their characters print as replacement "
            f"marks): {' '.join(lost)}; install a font for them in render_font_dirs "
            "(README: adding a font)")


def uncovered(p: FontPlan, text: str) -> dict[str, int]:
    """Script -> how many characters of text no face of the plan has (they print as
    replacement marks).  Opens every face: for an order known to have such characters,
    not per order (tickets/render_pool.LocalRender asks when the renderer's counter
    moved, in the process that rendered)."""
    from .._render import face_covers  # optional, and _render imports render/: a cycle

    lacking = "".join(dict.fromkeys(ch for ch in text if not ch.isspace()))
    for n in range(len(p.faces)):
        if not lacking:
            break
        lacking = face_covers(n, lacking)
    out: dict[str, int] = {}
    if lacking:
        missing = set(lacking)
        for ch in text:
            if ch in missing:
                tag = installed.script_of(ord(ch))
                out[tag] = out.get(tag, 0) + 1
    return out


_current: FontPlan | None = None
_current_for: tuple[object, ...] | None = None  # the font settings _current was made from


def current() -> FontPlan:
    """The plan both renderers use: set by use(), else the defaults."""
    global _current
    if _current is None:
        _current = plan()
    return _current


def _font_settings(settings: config.Settings) -> tuple[object, ...]:
    """What plan_for reads of the settings, comparable."""
    return (tuple(settings.render_font_dirs), tuple(settings.render_fonts),
            tuple(settings.render_font_fallback), tuple(settings.render_han_fonts),
            tuple(settings.render_han_order), tuple(settings.render_lang_fonts),
            settings.render_font_discover, tuple(settings.render_emoji_fonts))


def use_settings(settings: config.Settings) -> FontPlan:
    """Render with the plan the settings describe, made once: a second call with the
    same font settings (a worker's early render-process start, then its start-up
    warnings) reuses the plan in use instead of reading the font directories again."""
    global _current_for
    key = _font_settings(settings)
    if _current is not None and _current_for == key:
        return _current
    p = plan_for(settings)
    use(p)
    _current_for = key
    return p


def use(p: FontPlan) -> None:
    """Render with this plan from now on (the native renderer too, when it is built)."""
    global _current, _current_for
    _current = p
    _current_for = None
    try:  # optional: the reference renders without the extension
        from .._render import configure
    except ImportError:
        return
    configure(p)


# the plan the native renderer configures itself with when nothing configured it
fontplan.provide_default(current)
