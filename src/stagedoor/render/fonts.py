"""The renderer's fonts: which file draws which script, from the settings.

Settings (config.py, docs/settings.md): `render_font_dirs` (where font files are looked
up by name), `render_fonts` (per script, ISO 15924 code = font files in order of
preference), `render_font_fallback` (tried for any character its script's fonts lack:
symbols, emoji), `render_han_fonts` (the face for Han characters per locale) and
`render_han_order` (the faces tried for Han when the order has no locale; kana in a
field moves the Japanese face first).  A file name may end in `#N` for face N of a
collection (.ttc).  Bold fields use the file with `-Bold` for `-Regular` when it exists.

Nothing is opened here: the native renderer memory-maps a face the first time a
character needs it (see _text_fonts.pxi).  `check()` says which configured files are
missing and which scripts that leaves without a font (one warning at boot), and
`coverage()` answers `stagedoor render --check-fonts`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_DIRS = ("/usr/share/fonts/truetype/noto", "/usr/share/fonts/opentype/noto",
                "/usr/share/fonts/truetype/ancient-scripts")
_CJK = "NotoSansCJK-Regular.ttc"
DEFAULT_FONTS = {
    "Latn": "NotoSans-Regular.ttf", "Grek": "NotoSans-Regular.ttf",
    "Cyrl": "NotoSans-Regular.ttf", "Arab": "NotoSansArabic-Regular.ttf",
    "Hebr": "NotoSansHebrew-Regular.ttf", "Deva": "NotoSansDevanagari-Regular.ttf",
    "Thai": "NotoSansThai-Regular.ttf", "Hang": f"{_CJK}#1",
    "Armn": "NotoSansArmenian-Regular.ttf", "Geor": "NotoSansGeorgian-Regular.ttf",
    "Beng": "NotoSansBengali-Regular.ttf", "Taml": "NotoSansTamil-Regular.ttf",
    "Telu": "NotoSansTelugu-Regular.ttf", "Knda": "NotoSansKannada-Regular.ttf",
    "Mlym": "NotoSansMalayalam-Regular.ttf", "Gujr": "NotoSansGujarati-Regular.ttf",
    "Guru": "NotoSansGurmukhi-Regular.ttf", "Orya": "NotoSansOriya-Regular.ttf",
    "Sinh": "NotoSansSinhala-Regular.ttf", "Khmr": "NotoSansKhmer-Regular.ttf",
    "Laoo": "NotoSansLao-Regular.ttf", "Mymr": "NotoSansMyanmar-Regular.ttf",
    "Ethi": "NotoSansEthiopic-Regular.ttf",
}
DEFAULT_FALLBACK = ("NotoSans-Regular.ttf", "NotoSansSymbols-Regular.ttf",
                    "NotoSansSymbols2-Regular.ttf", "NotoSansMath-Regular.ttf",
                    "Symbola_hint.ttf")
DEFAULT_HAN = {"zh-Hans": f"{_CJK}#2", "zh-Hant": f"{_CJK}#3", "zh-HK": f"{_CJK}#4",
               "ja": f"{_CJK}#0", "ko": f"{_CJK}#1"}
DEFAULT_HAN_ORDER = ("zh-Hans", "zh-Hant", "ja", "ko")
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


def _split(name: str) -> tuple[str, int]:
    base, _, index = name.partition("#")
    return base, int(index) if index else 0


def _find(name: str, dirs: Sequence[str]) -> str | None:
    if os.path.isabs(name):
        return name if os.path.exists(name) else None
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.exists(path):
            return path
    return None


def plan(dirs: Sequence[str] = DEFAULT_DIRS, fonts: Mapping[str, str] = DEFAULT_FONTS,
         fallback: Sequence[str] = DEFAULT_FALLBACK, han: Mapping[str, str] = DEFAULT_HAN,
         han_order: Sequence[str] = DEFAULT_HAN_ORDER) -> FontPlan:
    """Face numbers for the native renderer; missing files are left out (and reported)."""
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
        nums = [n for name in names.split(",") if (n := face(name.strip(), tag)) is not None]
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
