"""The doctor's emoji check: whether a colour emoji font is there for emoji sequences
(flags, skin tones, ZWJ families) to print as the one colour glyph the font draws;
without one they print as their base emoji in black and white (render/emoji.py)."""

from __future__ import annotations

import os

from ...config import ConfigError, Settings
from ...exitcodes import CHECK_OK, CHECK_UNKNOWN, CHECK_WARNING
from . import Finding

EMOJI_PACKAGE = "apt-get install fonts-noto-color-emoji"


def emoji_check(settings: Settings) -> Finding:
    # here, not at the top: the renderer's font modules load only when this check runs
    from ...render import fonts, native_available

    try:
        plan = fonts.plan_for(settings)
    except ConfigError as e:
        return Finding("colour emoji", CHECK_UNKNOWN, str(e))
    names = ", ".join(settings.render_emoji_fonts)
    if not names:
        return Finding("colour emoji", CHECK_OK, "off (render_emoji_fonts is empty): "
                       "emoji print in black, a sequence as its base emoji")
    if not plan.emoji:
        return Finding("colour emoji", CHECK_WARNING,
                       f"no colour emoji font ({names}) in render_font_dirs: flags, skin "
                       "tones and joined emoji print as their base emoji, in black",
                       EMOJI_PACKAGE)
    path = plan.faces[plan.emoji[0]][0]
    if native_available():
        from ... import _render  # optional: the native extension (it loads, said above)

        fonts.use(plan)
        used = _render.emoji_face_path()
        if used is None:
            return Finding("colour emoji", CHECK_WARNING,
                           f"{path} has no colour (PNG) glyphs the renderer reads: emoji "
                           "sequences print as their base emoji, in black", EMOJI_PACKAGE)
        path = used
    return Finding("colour emoji", CHECK_OK,
                   f"{os.path.basename(path)}: flags, skin tones and joined emoji print "
                   "in colour")
