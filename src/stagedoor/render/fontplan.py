"""A font plan (which face draws which script, per locale and language) and the
questions the renderers ask of it for one order: the Han faces for its locale, its
language's faces, the language HarfBuzz shapes with.

Below both renderers: the native extension (_render.pyx) asks these of the plan it
was configured with, and takes the default plan from provide_default's function when
an order arrives before anything configured it; fonts.py, which builds plans from the
installed fonts (reading them with the extension), registers `fonts.current` there
when it is imported, and the render package's __init__ imports it (through
reference.py) before the extension's first line runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, eq=False)   # compared (and cached) by identity
class FontPlan:
    faces: tuple[tuple[str, int, int], ...]      # (path, index, bold face number)
    scripts: dict[str, list[int]]
    fallback: list[int]
    han: dict[str, int]                          # locale key -> face number
    han_order: list[int]
    missing: dict[str, list[str]]                # file name -> scripts left without it
    # language (primary subtag) -> [(script, face number)]: tried first for the script
    lang: dict[str, list[tuple[str, int]]] = dataclasses.field(default_factory=dict)
    configured: frozenset[str] = frozenset()     # the scripts render_fonts names
    # the colour emoji faces (render_emoji_fonts found in the directories),
    # tried in order for emoji sequences only; empty: emoji print monochrome
    emoji: list[int] = dataclasses.field(default_factory=list)


_default: Callable[[], FontPlan] | None = None


def provide_default(source: Callable[[], FontPlan]) -> None:
    """Where the default plan comes from (fonts.current)."""
    global _default
    _default = source


def default() -> FontPlan:
    """The default plan, for a native renderer nothing configured."""
    if _default is None:  # pragma: no cover - stagedoor.render provides one at import
        raise RuntimeError("no default font plan: stagedoor.render is not imported")
    return _default()


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


def language_faces(p: FontPlan, locale: str) -> list[int]:
    """[script tag as int, face, ...] of the order's language (its primary subtag):
    what pick_face in fonts.pxi tries first for those scripts."""
    key = locale.replace("_", "-").split("-", 1)[0].lower()
    return [v for script, n in p.lang.get(key, [])
            for v in (int.from_bytes(script.encode("ascii"), "big"), n)]


def shaping_language(locale: str) -> str:
    """The BCP 47 tag HarfBuzz shapes with (language-specific forms: Serbian and
    Macedonian Cyrillic, the Han variants): the order's locale, or "" for none."""
    tag = locale.replace("_", "-").strip()
    return tag if tag.isascii() and tag.replace("-", "").isalnum() else ""
