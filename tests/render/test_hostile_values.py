"""Hostile and long values stay readable, and values sit under their own labels (issue 39,
items 8 and 6), on both renderers (the same bytes).

- a tower of 40 combining marks is capped at layout.MARKS_PER_BASE marks per base: the
  field keeps the size the capped text has, and the text layer keeps every mark;
- a value too long for its lines ends with an ellipsis after a whole word;
- the admission code is never cut: read back from its box with pdftotext, it is the
  order's code, broken after a hyphen when it has one;
- a right-to-left value in a column starts at its label's side, not at the far end of
  the column beside the next column's value: measured from the glyph boxes.
"""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import unicodedata
from pathlib import Path

import pytest
from bench import ticket_corpus

from stagedoor import _render
from stagedoor.render import reference as render
from stagedoor.render import tables
from stagedoor.render.order import Order
from stagedoor.render.shaped import layout
from tests.support.pdfglyphs import page_glyphs
from tests.support.pdftools import content_streams, strip_actual_text

SECTION, ROW, SEAT, BUYER, PRICE, ORDER, CODE = 3, 4, 5, 6, 7, 8, 9


def _order(**fields: str) -> Order:
    t = dataclasses.replace(ticket_corpus.BASE, **fields)
    return Order(order_id=t.order_id, tickets=(t,))


def _render_both(order: Order) -> bytes:
    data = _render.render_order(order)
    assert data == render.render_order(order)
    return data


def _field_sizes(data: bytes, f: int) -> list[float]:
    """The font sizes field f's text object sets (the page's f-th BT .. ET of its own
    content stream: the fields in tables.FIELDS order)."""
    page = content_streams(data)[1]
    objects = re.findall(rb"BT .*?ET\n", page, re.S)
    return [float(v) for v in re.findall(rb"/\w+ ([\d.]+) Tf", objects[f])]


def _text(data: bytes, tmp_path: Path, box: tuple[float, float, float, float] | None = None,
          raw: bool = False) -> str:
    """pdftotext of the page, or of box (x0, bottom, x1, top in points); raw: in the
    content stream's order, and a line that ends in a hyphen kept as it is."""
    path = tmp_path / "t.pdf"
    path.write_bytes(data)
    crop: list[str] = []
    if box is not None:
        x0, bottom, x1, top = box
        # from 1 pt under the top: the label above sits on the box's top edge
        y = math.ceil(298 - top) + 1
        crop = ["-x", str(math.floor(x0)), "-y", str(y), "-W", str(math.ceil(x1 - x0)),
                "-H", str(math.ceil(298 - bottom) - y)]
    if raw:
        crop.append("-raw")
    return subprocess.run(["pdftotext", "-enc", "UTF-8", *crop, str(path), "-"], check=True,
                          capture_output=True, text=True).stdout


# -- marks capped per base --------------------------------------------------------------

@pytest.mark.parametrize(("field", "base", "mark"), [
    ("section", "B", "\u0308"), ("buyer", "Anna", "\u0301"), ("venue", "A", "\u0308\u0323")])
def test_a_tower_of_marks_keeps_the_field_size(field: str, base: str, mark: str,
                                               tmp_path: Path) -> None:
    f = [name for name, _ in tables.FIELDS].index(field)
    tower = base + mark * 40 + " Smith"
    # what is drawn: NFC (a mark may compose with the base), then the cap
    capped = "".join(map(chr, layout.cap_marks(
        [ord(c) for c in unicodedata.normalize("NFC", tower)])))
    assert len(capped) < len(tower) - 30
    data = _render_both(_order(**{field: tower}))
    sizes = _field_sizes(data, f)
    # the size of the capped text, not the 3-4 pt a 40-mark tower shrank the field to
    assert sizes == _field_sizes(_render_both(_order(**{field: capped})), f)
    # (8.5 pt for 3 marks above and 3 below since the value keeps 1 pt from the labels)
    assert min(sizes) >= 8.0, sizes
    # nothing is lost from the text layer: the /ActualText carries every mark
    assert unicodedata.normalize("NFC", tower) in _text(data, tmp_path)


def test_real_text_keeps_all_its_marks() -> None:
    """The cap is above what real text stacks: the corpus's hardest scripts (Myanmar,
    Lao, Thai, Tibetan, Vietnamese, pointed Hebrew and Arabic) lose no mark."""
    real = ["လျှော့", "ရှုံး", "ညွှန့်", "ฟ้้้้", "ຊັ້ນເທິງ", "ཧཱུྃ", "བསྒྲུབས", "Ễ", "שִּׁ֖",
            "مُحَمَّدٌ عَبْدُ ٱللَّٰهِ"]
    for family, fields in ticket_corpus.FAMILIES.items():
        if family != "hostile":
            real += fields.values()
    for text in real:
        u = [ord(c) for c in unicodedata.normalize("NFC", text)]
        assert layout.cap_marks(u) == u, text


# -- cut between words --------------------------------------------------------------------

LONG_BUYER = ("Maria de los Angeles Gonzalez Trinidad Montserrat " * 5)[:200]


@pytest.mark.parametrize(("field", "value"), [
    ("buyer", LONG_BUYER), ("venue", ("Teatro Municipal de Santiago de Chile " * 6)[:200])])
def test_a_long_value_is_cut_after_a_whole_word(field: str, value: str,
                                                tmp_path: Path) -> None:
    data = strip_actual_text(_render_both(_order(**{field: value})), tmp_path)
    f = [name for name, _ in tables.FIELDS].index(field)
    lines = _text(data, tmp_path, _box(f)).strip("\f\n").split("\n")
    shown = " ".join(line.strip() for line in lines)
    assert shown.endswith("\u2026"), shown
    kept = shown[:-1]
    assert value.startswith(kept), (kept, value)
    assert value[len(kept)] == " ", f"cut inside a word: ...{kept[-20:]}|{value[len(kept):][:20]}"


def _box(f: int) -> tuple[float, float, float, float]:
    x0, x1 = tables.FIELD_BOXES[f][:2]
    bottom, top = tables.FIELD_INK[f]
    return x0, bottom / 1000, x1, top / 1000


# -- the admission code, never cut ----------------------------------------------------------

CODES = {
    "no hyphen after SD-": "SD-" + "X" * 120,
    "hyphenated": "SD-" + "-".join(["0123456789ABCDEF"] * 8),
    "widest letters, 200": "SD-" + "W" * 197,
    "digits, 200": "SD-" + "0123456789" * 19 + "0123456",
}


@pytest.mark.parametrize("name", sorted(CODES))
def test_the_admission_code_reads_back_from_its_box(name: str, tmp_path: Path) -> None:
    code = CODES[name]
    drawn = _render_both(_order(admission_code=code))
    data = strip_actual_text(drawn, tmp_path)
    lines = _text(data, tmp_path, _box(CODE), raw=True).strip("\f\n").split("\n")
    assert "".join(lines) == code, lines
    assert 1 <= len(lines) <= tables.FIELD_BOXES[CODE][5]
    if name == "hyphenated":
        assert all(line.endswith("-") for line in lines[:-1]), lines
    assert min(_field_sizes(drawn, CODE)) >= layout.CODE_FLOOR / 1000


# -- values under their own labels --------------------------------------------------------

# each labelled column: its field, its label's left edge, the next column's field
COLUMNS = [(SECTION, 24, ROW), (ROW, 130, SEAT), (SEAT, 180, None), (BUYER, 24, None),
           (PRICE, 24, ORDER), (ORDER, 130, None), (1, 24, None)]
RTL = [ticket_corpus.FAMILIES["arabic-hebrew"],
       {"section": "3 الطابق", "row": "١٢", "seat": "ז׳", "price": "۱٬۲۵۰ ریال",  # noqa: RUF001
        "order_id": "2501"},
       {"section": "אולם", "row": "ב", "seat": "12", "price": "₪ 120", "buyer": "דנה לוי"}]


SAMPLES = Path(__file__).resolve().parents[2] / "src" / "stagedoor" / "demo" / "scripts"
PAGES: dict[str, Order] = {
    **{f"rtl-{k}": _order(**{f: v for f, v in case.items() if f != "order_id"})
       for k, case in enumerate(RTL)},
    **ticket_corpus.orders(),
    **{f"sample-{p.stem}": Order.from_json(p.read_bytes()) for p in sorted(SAMPLES.glob("*.json"))},
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_value_starts_at_its_label(name: str) -> None:
    """Right-to-left values (rtl-*) and every script family's hardest text: each
    column's value starts under its label, and the next column's value is at least
    MIN_GAP away (before: a right-to-left value ended 6-10 pt before it)."""
    for glyphs in page_glyphs(_render_both(PAGES[name])):
        ink: dict[int, tuple[float, float]] = {}
        for g in glyphs:
            if g.field >= 0 and g.x1 > g.x0:
                lo, hi = ink.get(g.field, (g.x0, g.x1))
                ink[g.field] = (min(lo, g.x0), max(hi, g.x1))
        for f, label_x, nxt in COLUMNS:
            x0, x1 = ink[f]
            # its own label: the value's ink starts where the label does (a glyph's
            # side bearing in: a Han or Tifinagh letter's is 1 pt)
            assert abs(x0 - label_x) <= 2.0, (tables.FIELDS[f][0], x0, label_x)
            if nxt is not None:
                # the next column's value: at least MIN_GAP away, farther than the label
                gap = ink[nxt][0] - x1
                assert gap >= tables.MIN_GAP / 1000 - 0.01, (tables.FIELDS[f][0], gap)
                assert gap > abs(x0 - label_x)
