"""Emoji sequences on a ticket (issue 39 item 3), read back with the real tools.

With the colour font (fonts-noto-color-emoji) each sequence -- a flag of two regional
indicators, England and Scotland (tag sequences), a skin tone, a ZWJ family, a keycap --
is one glyph of the font, drawn in colour (the family in the font's greys): poppler's
pdftoppm shows coloured pixels where it stands and its ink is one emoji wide;
pdftotext gives the whole sequence back; qpdf --check is clean; both renderers give
the same bytes.  Without the colour font the sequence prints as its base emoji (a flag
as U+1F3F3), as wide as the base alone: no hatched square beside a face, no letters in
boxes, no row of four faces; the doctor says which of the two it is.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from stagedoor import _render
from stagedoor.render import emoji, fonts, reference, tables
from stagedoor.render.order import Order, Ticket
from tests.support.pdftools import qpdf_check

ENGLAND = "\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F"
SCOTLAND = "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"
# name -> (the sequence, what prints without the colour font: its base)
SEQUENCES = {
    "flag-jp": ("\U0001F1EF\U0001F1F5", chr(emoji.FLAG)),
    "england": (ENGLAND, "\U0001F3F4"),
    "scotland": (SCOTLAND, "\U0001F3F4"),
    "skin-tone": ("\U0001F469\U0001F3FD", "\U0001F469"),
    "family": ("\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466", "\U0001F468"),
    "keycap": ("1\uFE0F\u20E3", "1"),
    "heart-vs16": ("\u2764\uFE0F", "\u2764"),
}
BUYER = [name for name, _ in tables.FIELDS].index("buyer")
DPI = 150
COLOUR_FONT = "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"


def ticket(buyer: str) -> Ticket:
    return Ticket(event="Gala", venue="Hall", starts_at="2026-12-19 19:30", section="A",
                  row="3", seat="12", buyer=buyer, price="EUR 49.00", order_id=7,
                  admission_code="SD-ABC-123")


def render_both(values: list[str]) -> bytes:
    """One ticket per value (in the buyer field); both renderers' bytes must agree."""
    order = Order(7, tuple(ticket(v) for v in values))
    data = bytes(_render.render_order(order))
    assert reference.render_order(order) == data
    return data


@pytest.fixture
def colour_plan() -> Iterator[fonts.FontPlan]:
    if not Path(COLOUR_FONT).exists():
        pytest.fail("fonts-noto-color-emoji is not installed (scripts/setup.sh installs it)")
    plan = fonts.plan()
    assert plan.emoji, "the font plan did not find NotoColorEmoji.ttf"
    fonts.use(plan)
    yield plan
    fonts.use(fonts.plan())


@pytest.fixture
def mono_plan() -> Iterator[fonts.FontPlan]:
    plan = fonts.plan(emoji_fonts=())      # render_emoji_fonts empty
    assert not plan.emoji
    fonts.use(plan)
    yield plan
    fonts.use(fonts.plan())


def buyer_band(pdf: Path, page: int, tmp_path: Path) -> Image.Image:
    """The buyer field's band of a page at DPI, from pdftoppm."""
    x0, x1, _y, _size, _, _lines = tables.FIELD_BOXES[BUYER]
    bottom, top = tables.FIELD_INK[BUYER]
    scale = DPI / 72
    y_top = (reference.PAGE_H - top / 1000) * scale
    y_bottom = (reference.PAGE_H - bottom / 1000) * scale
    out = tmp_path / f"band-{page}"
    subprocess.run(["pdftoppm", "-r", str(DPI), "-f", str(page), "-l", str(page), "-png",
                    "-singlefile", "-x", str(int(x0 * scale)), "-y", str(int(y_top)),
                    "-W", str(int((x1 - x0) * scale)), "-H", str(int(y_bottom - y_top)),
                    str(pdf), str(out)], check=True)
    return Image.open(f"{out}.png").convert("RGB")


def ink_width(im: Image.Image) -> int:
    """Columns from the first to the last one with a pixel that is not near white."""
    w, h = im.size
    px = im.load()
    cols = [x for x in range(w) if any(min(px[x, y]) < 200 for y in range(h))]
    return cols[-1] - cols[0] + 1 if cols else 0


def pixels(im: Image.Image) -> list[tuple[int, int, int]]:
    data = im.tobytes()
    return [(data[i], data[i + 1], data[i + 2]) for i in range(0, len(data), 3)]


def coloured(im: Image.Image) -> int:
    """Pixels that are clearly a colour, not white, grey or black."""
    return sum(1 for r, g, b in pixels(im) if max(r, g, b) - min(r, g, b) > 40)


def pixels_like(im: Image.Image, test: str) -> int:
    if test == "red":
        return sum(1 for r, g, b in pixels(im) if r > 150 and g < 90 and b < 90)
    return sum(1 for r, g, b in pixels(im) if b > 120 and b > r + 60)


def extract(data: bytes, tmp_path: Path) -> list[str]:
    pdf = tmp_path / "x.pdf"
    pdf.write_bytes(data)
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], check=True,
                          capture_output=True, text=True).stdout
    return text.split("\f")


def test_spans_find_each_sequence_whole() -> None:
    for seq, _ in SEQUENCES.values():
        u = [ord(c) for c in "Anna " + seq + " 12"]
        assert emoji.spans(u) == [(5, 5 + len(seq))], seq
    # text-default symbols, digits and letters alone are no emoji; two flags are two
    assert emoji.spans([ord(c) for c in "\u2764 #1 A"]) == []
    flags = "\U0001F1EF\U0001F1F5\U0001F1E9\U0001F1EA"
    assert emoji.spans([ord(c) for c in flags]) == [(0, 2), (2, 4)]


def test_sequences_print_as_one_colour_glyph(colour_plan: fonts.FontPlan,
                                             tmp_path: Path) -> None:
    names = list(SEQUENCES)
    # each sequence alone, then one plain emoji as the width of one glyph
    data = render_both([SEQUENCES[n][0] for n in names] + ["\U0001F600"])
    qpdf_check(data, tmp_path)
    pdf = tmp_path / "colour.pdf"
    pdf.write_bytes(data)
    pages = extract(data, tmp_path)
    one = ink_width(buyer_band(pdf, len(names) + 1, tmp_path))
    assert one > 10
    for k, name in enumerate(names):
        seq = SEQUENCES[name][0]
        assert seq in pages[k], (name, pages[k])
        band = buyer_band(pdf, k + 1, tmp_path)
        if name == "family":
            # the font draws families as grey figures: the image's grey, not black ink
            assert sum(1 for px in pixels(band) if 90 < min(px) < 220) > 40, name
        else:
            assert coloured(band) > 40, f"{name}: no colour where the emoji is"
        assert ink_width(band) <= one + 3, f"{name}: wider than one emoji"
    assert pixels_like(buyer_band(pdf, names.index("england") + 1, tmp_path), "red") > 20
    assert pixels_like(buyer_band(pdf, names.index("scotland") + 1, tmp_path), "blue") > 40
    # one image (and its alpha) per distinct glyph: 8 sequences, 8 glyphs
    assert data.count(b"/Subtype /Image") == 2 * (len(names) + 1)


def test_a_sequence_in_text_keeps_the_text_around_it(colour_plan: fonts.FontPlan,
                                                      tmp_path: Path) -> None:
    value = "Anna " + SEQUENCES["skin-tone"][0] + " 12 " + SEQUENCES["flag-jp"][0] + " Ito"
    before = _render.missing_glyphs()
    data = render_both([value])
    assert _render.missing_glyphs() == before, "a replacement mark was drawn"
    assert value in extract(data, tmp_path)[0]


def test_without_the_colour_font_a_sequence_prints_as_its_base(mono_plan: fonts.FontPlan,
                                                                tmp_path: Path) -> None:
    names = list(SEQUENCES)
    before = _render.missing_glyphs()
    data = render_both([SEQUENCES[n][0] for n in names] + [SEQUENCES[n][1] for n in names])
    assert _render.missing_glyphs() == before, "a replacement mark was drawn"
    assert b"/Subtype /Image" not in data
    qpdf_check(data, tmp_path)
    pdf = tmp_path / "mono.pdf"
    pdf.write_bytes(data)
    pages = extract(data, tmp_path)
    for k, name in enumerate(names):
        assert SEQUENCES[name][0] in pages[k], (name, pages[k])   # the text layer is whole
        seq_band = buyer_band(pdf, k + 1, tmp_path)
        base_band = buyer_band(pdf, len(names) + k + 1, tmp_path)
        assert ink_width(seq_band) > 0
        assert abs(ink_width(seq_band) - ink_width(base_band)) <= 2, \
            f"{name}: not printed as its base alone"


def doctor_line(tmp_path: Path, *args: str) -> str:
    (tmp_path / "tickets").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    proc = subprocess.run([sys.executable, "-m", "stagedoor", "doctor", "--no-redis",
                           "--tickets-dir", str(tmp_path / "tickets"), "--unit-dir",
                           str(tmp_path), *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)
    found = [ln for ln in proc.stdout.splitlines() if " colour emoji: " in ln]
    assert len(found) == 1, proc.stdout + proc.stderr
    k = proc.stdout.splitlines().index(found[0])
    return "\n".join(proc.stdout.splitlines()[k:k + 2])


def test_the_doctor_says_whether_emoji_print_in_colour(tmp_path: Path) -> None:
    assert doctor_line(tmp_path).startswith(
        "OK       colour emoji: NotoColorEmoji.ttf: flags, skin tones and joined emoji "
        "print in colour")
    # the same fonts but the colour one
    fonts_dir = tmp_path / "fonts"
    fonts_dir.mkdir()
    for path in ("/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
                 "/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf"):
        (fonts_dir / os.path.basename(path)).symlink_to(path)
    line = doctor_line(tmp_path, "--render-font-dirs", str(fonts_dir))
    assert line.startswith("WARNING  colour emoji: no colour emoji font (NotoColorEmoji.ttf) "
                           "in render_font_dirs: flags, skin tones and joined emoji print "
                           "as their base emoji, in black"), line
    assert line.endswith("-> apt-get install fonts-noto-color-emoji"), line
    # turned off on purpose: said, not warned of
    line = doctor_line(tmp_path, "--render-emoji-fonts", "")
    assert line.startswith("OK       colour emoji: off (render_emoji_fonts is empty)"), line


def test_in_a_right_to_left_line_the_sequence_stays_whole(colour_plan: fonts.FontPlan,
                                                          tmp_path: Path) -> None:
    """pdfminer.six reads the field exactly: each emoji glyph carries its whole sequence
    (no character moved onto an invisible glyph as a right-to-left ligature's are, which
    split a skin tone over two lines of pdftotext).  poppler keeps the sequence on its
    glyph but, reordering the right-to-left line character by character, writes its
    characters backwards (docs/text-layer.md)."""
    from pdfminer.high_level import extract_text

    value = "محمد " + SEQUENCES["flag-jp"][0] + " " + SEQUENCES["skin-tone"][0] + " علي"
    data = render_both([value])
    pdf = tmp_path / "rtl.pdf"
    pdf.write_bytes(data)
    assert value in extract_text(str(pdf)).splitlines()
    lines = [ln for ln in extract(data, tmp_path)[0].splitlines() if "علي" in ln]
    assert len(lines) == 1 and sorted(lines[0].strip("\u202b\u202c")) == sorted(value), lines


def synthetic_pngs() -> Iterator[tuple[str, bytes]]:
    """PNGs of every kind png_decode reads (and a few it refuses), with Pillow's
    adaptive filters (each row its own: None, Sub, Up, Average, Paeth)."""
    import io
    import random

    rnd = random.Random(39)
    w, h = 37, 23     # odd sizes: rows of 1-4 bit palettes end mid-byte
    rgba = bytes(rnd.randrange(256) if i % 7 else (i * 13) % 256 for i in range(w * h * 4))
    base = Image.frombytes("RGBA", (w, h), rgba)

    def png(im: Image.Image, **kw: object) -> bytes:
        out = io.BytesIO()
        im.save(out, "PNG", **kw)
        return out.getvalue()

    yield "rgba", png(base)
    yield "rgb", png(base.convert("RGB"))
    yield "rgb-trns", png(base.convert("RGB"), transparency=(rgba[0], rgba[1], rgba[2]))
    for colours, bits in ((2, 1), (4, 2), (16, 4), (256, 8)):
        pal = base.convert("RGB").quantize(colours)
        yield f"palette-{bits}bit", png(pal, bits=bits)
        alphas = bytes((i * 97) % 256 for i in range(colours))
        yield f"palette-{bits}bit-trns", png(pal, bits=bits, transparency=alphas)
    yield "grey (refused)", png(base.convert("L"))
    # Pillow writes no interlaced PNG: the IHDR's flag set by hand (and its CRC)
    rgb = bytearray(png(base.convert("RGB")))
    rgb[28] = 1
    rgb[29:33] = zlib.crc32(bytes(rgb[12:29])).to_bytes(4, "big")
    yield "interlaced (refused)", bytes(rgb)
    yield "not a png", b"GIF89a" + bytes(40)


def test_the_png_decoder_reads_what_pillow_reads() -> None:
    from stagedoor.render.shaped import emoji as shaped_emoji

    for name, data in synthetic_pngs():
        ours = _render.png_planes(data)
        theirs = shaped_emoji.planes(data)
        assert ours == theirs, name
        if "refused" not in name and "not a png" not in name:
            assert ours is not None, name


def test_a_wrapped_field_never_cuts_a_sequence(colour_plan: fonts.FontPlan,
                                               tmp_path: Path) -> None:
    """libunibreak allows a break between a face and its skin tone or after a U+200D;
    the layout cuts lines at grapheme boundaries only, so each line holds whole
    sequences: every one comes back whole, nothing of one is left over."""
    skin, family, flag = (SEQUENCES[n][0] for n in ("skin-tone", "family", "flag-jp"))
    value = (skin + family + flag) * 5
    order = Order(7, (dataclasses.replace(ticket(value), section=value),))
    data = bytes(_render.render_order(order))
    assert reference.render_order(order) == data
    text = extract(data, tmp_path)[0]
    assert text.count(skin) == text.count(family) == text.count(flag) == 10, text
    for seq in (family, skin, flag):
        text = text.replace(seq, "")
    assert not [c for c in text if ord(c) > 0x2000], text
