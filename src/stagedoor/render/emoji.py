"""Emoji sequences: which characters of a field form one emoji, shared by both renderers.

An emoji sequence is what a colour emoji font draws as one glyph: a regional-indicator
pair (a flag), a keycap (digit, # or *, maybe U+FE0F, then U+20E3), or an emoji (one
with emoji presentation, or any character followed by U+FE0F) with its variation
selector, skin-tone modifier, tag characters (England, Scotland) and further emoji
joined by U+200D (a family).  With a colour face configured (the setting
render_emoji_fonts: NotoColorEmoji.ttf, found in render_font_dirs) every character of
the sequence goes to that face, and HarfBuzz shapes the sequence into the font's one
glyph, which prints as its PNG (render/_native/emoji.pxi, shaped/emoji.py).  Without
one, the sequence prints as its base emoji from the monochrome fonts: the characters
after the base are shaped as invisible (U+200B; the text layer still has them), and a
flag, which has no base, prints as U+1F3F3 (a white flag): never as a hatched square,
two letters in dotted boxes or four faces.

render/_native/emoji.pxi reads PRESENTATION (and checks the constants below) into C at
import; spans() and apply() are the reference's copies of its emoji_next and emoji_faces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

ZWJ = 0x200D
VS16 = 0xFE0F
KEYCAP = 0x20E3
HIDDEN = 0x200B          # what a component is shaped as when no colour face draws it
FLAG = 0x1F3F3           # what a flag prints as when no colour face draws it
RI_FIRST, RI_LAST = 0x1F1E6, 0x1F1FF
MOD_FIRST, MOD_LAST = 0x1F3FB, 0x1F3FF
TAG_FIRST, TAG_LAST = 0xE0020, 0xE007F
# after U+200D a character from here on continues the sequence (the emoji joined there
# are all symbols above the letters of the scripts that use U+200D themselves)
JOIN_MIN = 0x2000

# Emoji_Presentation=Yes (Unicode 15 emoji-data.txt), less the regional indicators and
# the modifiers, which are handled on their own: these start a sequence without U+FE0F
PRESENTATION = (
    (0x231A, 0x231B), (0x23E9, 0x23EC), (0x23F0, 0x23F0), (0x23F3, 0x23F3),
    (0x25FD, 0x25FE), (0x2614, 0x2615), (0x2648, 0x2653), (0x267F, 0x267F),
    (0x2693, 0x2693), (0x26A1, 0x26A1), (0x26AA, 0x26AB), (0x26BD, 0x26BE),
    (0x26C4, 0x26C5), (0x26CE, 0x26CE), (0x26D4, 0x26D4), (0x26EA, 0x26EA),
    (0x26F2, 0x26F3), (0x26F5, 0x26F5), (0x26FA, 0x26FA), (0x26FD, 0x26FD),
    (0x2705, 0x2705), (0x270A, 0x270B), (0x2728, 0x2728), (0x274C, 0x274C),
    (0x274E, 0x274E), (0x2753, 0x2755), (0x2757, 0x2757), (0x2795, 0x2797),
    (0x27B0, 0x27B0), (0x27BF, 0x27BF), (0x2B1B, 0x2B1C), (0x2B50, 0x2B50),
    (0x2B55, 0x2B55), (0x1F004, 0x1F004), (0x1F0CF, 0x1F0CF), (0x1F18E, 0x1F18E),
    (0x1F191, 0x1F19A), (0x1F201, 0x1F201), (0x1F21A, 0x1F21A), (0x1F22F, 0x1F22F),
    (0x1F232, 0x1F236), (0x1F238, 0x1F23A), (0x1F250, 0x1F251), (0x1F300, 0x1F320),
    (0x1F32D, 0x1F335), (0x1F337, 0x1F37C), (0x1F37E, 0x1F393), (0x1F3A0, 0x1F3CA),
    (0x1F3CF, 0x1F3D3), (0x1F3E0, 0x1F3F0), (0x1F3F4, 0x1F3F4), (0x1F3F8, 0x1F3FA),
    (0x1F400, 0x1F43E), (0x1F440, 0x1F440), (0x1F442, 0x1F4FC), (0x1F4FF, 0x1F53D),
    (0x1F54B, 0x1F54E), (0x1F550, 0x1F567), (0x1F57A, 0x1F57A), (0x1F595, 0x1F596),
    (0x1F5A4, 0x1F5A4), (0x1F5FB, 0x1F64F), (0x1F680, 0x1F6C5), (0x1F6CC, 0x1F6CC),
    (0x1F6D0, 0x1F6D2), (0x1F6D5, 0x1F6D7), (0x1F6DC, 0x1F6DF), (0x1F6EB, 0x1F6EC),
    (0x1F6F4, 0x1F6FC), (0x1F7E0, 0x1F7EB), (0x1F7F0, 0x1F7F0), (0x1F90C, 0x1F93A),
    (0x1F93C, 0x1F945), (0x1F947, 0x1F9FF), (0x1FA70, 0x1FA7C), (0x1FA80, 0x1FA88),
    (0x1FA90, 0x1FABD), (0x1FABF, 0x1FAC5), (0x1FACE, 0x1FADB), (0x1FAE0, 0x1FAE8),
    (0x1FAF0, 0x1FAF8),
)


def presentation(cp: int) -> bool:
    """Emoji_Presentation (a skin-tone modifier alone included)."""
    if MOD_FIRST <= cp <= MOD_LAST:
        return True
    return any(lo <= cp <= hi for lo, hi in PRESENTATION)


def _keycap_base(cp: int) -> bool:
    return 0x30 <= cp <= 0x39 or cp in (0x23, 0x2A)


def _extend(u: Sequence[int], j: int) -> int:
    """The end of the emoji sequence whose base ends at j."""
    n = len(u)
    while True:
        if j < n and u[j] == VS16:
            j += 1
        if j < n and MOD_FIRST <= u[j] <= MOD_LAST:
            j += 1
        while j < n and TAG_FIRST <= u[j] <= TAG_LAST:
            j += 1
        if j + 1 < n and u[j] == ZWJ and u[j + 1] >= JOIN_MIN:
            j += 2
            continue
        return j


def spans(u: Sequence[int]) -> list[tuple[int, int]]:
    """emoji_spans in emoji.pxi: the [start, end) of each emoji sequence of u."""
    out = []
    n = len(u)
    i = 0
    while i < n:
        c = u[i]
        nxt = u[i + 1] if i + 1 < n else 0
        if RI_FIRST <= c <= RI_LAST:
            if RI_FIRST <= nxt <= RI_LAST:
                out.append((i, i + 2))
                i += 2
            else:
                i += 1
            continue
        if _keycap_base(c):
            if nxt == KEYCAP:
                out.append((i, i + 2))
                i += 2
            elif nxt == VS16 and i + 2 < n and u[i + 2] == KEYCAP:
                out.append((i, i + 3))
                i += 3
            else:
                i += 1
            continue
        if presentation(c) or (nxt == VS16 and c >= 0xA9):
            end = _extend(u, i + 1)
            out.append((i, end))
            i = end
            continue
        i += 1
    return out


def apply(u: Sequence[int], face: list[int], gid: list[int], colour_face: Callable[[], int],
          glyph: Callable[[int, int], int | None],
          pick: Callable[[int, int], tuple[int, int]]) -> list[int] | None:
    """emoji_faces in emoji.pxi: give each sequence the colour face (colour_face(), asked
    at the first sequence, when >= 0 and it has the base), else its base's face with the
    rest hidden (a flag as FLAG).  glyph(face, cp) is a face's glyph of cp (None: none);
    pick(cp, prev) picks a monochrome face.  Returns the text to shape (u with the
    hidden characters replaced), or None when nothing is replaced."""
    su: list[int] | None = None
    colour = -2
    for lo, hi in spans(u):
        if colour == -2:
            colour = colour_face()
        if colour >= 0 and glyph(colour, u[lo]) is not None:
            for j in range(lo, hi):
                face[j] = colour
                gid[j] = glyph(colour, u[j]) or 0
            continue
        if hi - lo < 2:
            continue
        if su is None:
            su = list(u)
        base = lo
        if RI_FIRST <= u[lo] <= RI_LAST:
            f, g = pick(FLAG, face[lo - 1] if lo > 0 else -1)
            if f >= 0:
                su[lo] = FLAG
                face[lo], gid[lo] = f, g
        if face[base] < 0:
            continue        # no face has the base either: replacement marks, as before
        for j in range(base + 1, hi):
            su[j] = HIDDEN
            face[j] = face[base]
            gid[j] = 0
    return su
