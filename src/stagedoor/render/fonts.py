"""The renderer's fonts: which file draws which script, from the settings.

Settings (config.py, docs/settings.md): `render_font_dirs` (where font files are looked
up by name), `render_fonts` (per script, ISO 15924 code = font files in order of
preference, separated by |), `render_font_fallback` (tried for any character its
script's fonts lack: symbols, emoji), `render_han_fonts` (the face for Han characters
per locale) and `render_han_order` (the faces tried for Han when the order has no
locale; kana in an order moves the Japanese face first).  The defaults are Noto
(fonts-noto-core, fonts-noto-cjk) and Symbola (fonts-symbola), which scripts/setup.sh
installs; nothing is ever downloaded.  A file name may end in `#N` for face N of a
collection (.ttc).  Bold fields use the file with `-Bold` for `-Regular` when it exists.

Nothing is opened here: the native renderer memory-maps a face the first time a
character needs it (see render/_native/fonts.pxi).  `check()` says which configured files are
missing and which scripts that leaves without a font (one warning at boot), and
`coverage()` answers `stagedoor render --check-fonts`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import config

HAN_SCRIPTS = ("Hani", "Hira", "Kana", "Bopo")

# a few letters per script, for --check-fonts and the boot warning
SAMPLES = {"Latn": "AaŞğ\u0131ẞệ", "Grek": "ΑαΩω", "Cyrl": "ЖжЯя", "Arab": "عربي",
           "Hebr": "עברית", "Deva": "हिन्दी", "Thai": "ไทย", "Hang": "한국어",
           "Hani": "中文漢字", "Hira": "ひらがな", "Kana": "カタカナ",
           "Armn": "Հայ", "Geor": "ქართ", "Beng": "বাংলা", "Taml": "தமிழ்",
           "Telu": "తెలుగు", "Knda": "ಕನ್ನಡ", "Mlym": "മലയാളം", "Gujr": "ગુજરાતી",
           "Guru": "ਪੰਜਾਬੀ", "Orya": "ଓଡ଼ିଆ", "Sinh": "සිංහල", "Khmr": "ខ្មែរ",
           "Laoo": "ລາວ", "Mymr": "မြန်မာ", "Ethi": "አማርኛ", "Zsye": "🎫😀★"}


@dataclass(frozen=True, slots=True, eq=False)   # compared (and cached) by identity
class FontPlan:
    faces: tuple[tuple[str, int, int], ...]      # (path, index, bold face number)
    scripts: dict[str, list[int]]
    fallback: list[int]
    han: dict[str, int]                          # locale key -> face number
    han_order: list[int]
    missing: dict[str, list[str]]                # file name -> scripts left without it


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
                settings.render_han_order)


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
         han_order: Sequence[str] = config.HAN_ORDER) -> FontPlan:
    """Face numbers for the native renderer; missing files are left out (and reported).
    fonts: script -> "file[#face][|file...]"; han: locale key -> "file[#face]"."""
    if fonts is None:
        fonts = _pairs(config.SCRIPT_FONTS)
    if han is None:
        han = _pairs(config.HAN_FONTS)
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
    return FontPlan(tuple(faces), scripts, fb, han_faces, order, missing)


def han_faces(p: FontPlan, locale: str, kana: bool) -> list[int]:
    """Han faces in order of preference for an order's locale (BCP 47, may be empty)."""
    loc = locale.replace("_", "-").lower()
    key = ""
    if loc.startswith("ja"):
        key = "ja"
    elif loc.startswith("ko"):
        key = "ko"
    elif loc.startswith("zh"):
        if "hk" in loc or "mo" in loc:
            key = "zh-HK"
        elif "hant" in loc or "tw" in loc:
            key = "zh-Hant"
        else:
            key = "zh-Hans"
    elif kana:
        key = "ja"
    first = [p.han[key]] if key in p.han else []
    return first + [n for n in p.han_order if n not in first]


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


def coverage(p: FontPlan) -> list[tuple[str, str, str]]:
    """(script, font file, what is missing of its sample) for --check-fonts."""
    from .._render import face_covers

    rows = []
    for tag, sample in SAMPLES.items():
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


_current: FontPlan | None = None


def current() -> FontPlan:
    """The plan both renderers use: set by use(), else the defaults."""
    global _current
    if _current is None:
        _current = plan()
    return _current


def use(p: FontPlan) -> None:
    """Render with this plan from now on (the native renderer too, when it is built)."""
    global _current
    _current = p
    try:
        from .._render import configure
    except ImportError:
        return
    configure(p)
