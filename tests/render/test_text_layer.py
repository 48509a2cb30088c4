"""The text layer of right-to-left and mixed fields, read back as indexers read it.

Each field of the corpus is rendered on a ticket of its own whose other fields take the
fast path (fonts F1 and F2, render/fastfont.py), so that every glyph of the shaped
path's fonts on the page is that field's; both renderers give the same bytes.  Then:

- pdfminer.six (the content stream's order; it ignores /ActualText) returns the field's
  text NFC-equal to the input (line breaks of a wrapped field read as spaces), in its
  text lines and in the whole page's extract_text; a field cut with an ellipsis
  returns the start of the input, in logical order, and the "…";
- poppler's pdftotext (it reorders by position), cropped to the box of those glyphs,
  returns the same characters, without the embedding marks it adds around
  right-to-left runs (U+202A..U+202C, poppler's markup): no other control character,
  every combining mark right after a letter or another mark (never detached at the
  start of a word), no fallback run reversed letter by letter;
- every code of every Type 3 font has a ToUnicode entry, checked by parsing the CMaps
  with pdfminer.six against the codes each content stream shows.

docs/text-layer.md says why the glyphs are written as they are.
"""

from __future__ import annotations

import dataclasses
import io
import re
import statistics
import subprocess
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from pdfminer.converter import PDFPageAggregator
from pdfminer.layout import LAParams, LTChar, LTTextContainer, LTTextLine
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
from pdfminer.pdfpage import PDFPage

from stagedoor import _render
from stagedoor.demo.orders import demo_order
from stagedoor.render import fastfont, reference
from stagedoor.render.order import Order

CORPUS = [
    ("arabic-harakat", "event", "مُحَمَّدٌ عَبْدُ ٱللَّٰهِ"),
    ("arabic-harakat-buyer", "buyer", "فَاطِمَةُ ٱلزَّهْرَاءُ"),
    ("hebrew-niqqud", "venue", "שָׁלוֹם עֲלֵיכֶם בְּרֵאשִׁית"),
    ("persian", "buyer", "تالار وحدت تهران ۱۲۰٬۰۰۰ تومان"),  # noqa: RUF001
    ("persian-zwnj", "venue", "می‌خواهم کتاب‌ها را ببینم"),  # noqa: RUF001
    ("urdu", "venue", "لاہور کا قذافی اسٹیڈیم"),
    ("mixed-brackets", "event", "مسرح (Opera House) رقم 12 [A-3]"),
    ("mixed-quotes", "buyer", 'حفلة "Queen" في دبي 2026'),
    ("hebrew-latin", "venue", "היכל התרבות (Tel Aviv) אולם 3"),
    ("comma-arabic", "venue", "القاهرة، مصر، الطابق ٢"),
    ("comma-ascii", "buyer", "دبي, الإمارات, القاعة 3"),
    ("ltr-with-arabic", "event", "Concert for محمد عبد الله tonight"),
    ("wrapped", "section", "القاعة الكبرى للمسرح الوطني في القاهرة الجديدة"),
    ("ellipsis-arabic", "section", "القاعة الكبرى للمسرح الوطني في القاهرة الجديدة مصر "
                                   "العربية ومدينة الإسكندرية ومحافظة الجيزة وأسوان"),
    ("ellipsis-hebrew", "row", "היכל התרבות של תל אביב יפו אולם גדול"),
    ("replacement", "buyer", "علي \U0001F8FF ꙮ 𐎀𐎁 محمد"),
]
IDS = [name for name, _, _ in CORPUS]
POPPLER_MARKS = re.compile("[\u202a-\u202c]")
FAST_TAGS = tuple(tag.decode() + "+" for tag in fastfont.TAGS)
ELLIPSIS = "\u2026"


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = demo_order(1).tickets[0]
    changes: list[dict[str, Any]] = [{field: value} for _, field, value in CORPUS]
    tickets = tuple(dataclasses.replace(base, **change) for change in changes)
    order = Order(order_id=base.order_id, tickets=tickets)
    data = _render.render_order(order)
    assert data == reference.render_order(order)
    path = tmp_path_factory.mktemp("text-layer") / "corpus.pdf"
    path.write_bytes(data)
    return path


def norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


class _NamedFonts(PDFResourceManager):
    """pdfminer.six names a Type 3 font without a descriptor "unknown": here its
    /BaseFont, so that a character tells which font it is from."""

    def get_font(self, objid: object, spec: Any) -> Any:
        font = super().get_font(objid, spec)
        base = spec.get("BaseFont") if isinstance(spec, dict) else None
        if base is not None:
            font.fontname = getattr(base, "name", str(base))
        return font


def type3_lines(path: Path, page: int) -> list[LTTextLine]:
    """pdfminer.six's text lines (default LAParams, as extract_text) of the page's
    glyphs from the shaped path's Type 3 fonts (not the fast path's F1 and F2, whose
    subset tags are fastfont.TAGS), in its order."""
    with path.open("rb") as fh:
        rm = _NamedFonts()
        dev = PDFPageAggregator(rm, laparams=LAParams())
        interp = PDFPageInterpreter(rm, dev)
        for k, p in enumerate(PDFPage.get_pages(fh)):
            if k == page:
                interp.process_page(p)
                layout = dev.get_result()
                break
    out = []
    for box in layout:
        lines = [box] if isinstance(box, LTTextLine) else (
            [ln for ln in box if isinstance(ln, LTTextLine)]
            if isinstance(box, LTTextContainer) else [])
        for line in lines:
            chars = [c for c in line if isinstance(c, LTChar)]
            if chars and not any(c.fontname.startswith(FAST_TAGS) for c in chars):
                out.append(line)
    return out


def miner_text(lines: list[LTTextLine]) -> str:
    return " ".join(line.get_text() for line in lines)


def poppler_text(path: Path, page: int, lines: list[LTTextLine]) -> str:
    """pdftotext of a band around each line's baseline (pdftotext -x/-y/-W/-H keeps the
    characters whose origin lies in the area; the labels' baselines are far from it),
    the lines joined by spaces."""
    out = []
    for ln in lines:
        base = statistics.median(c.y0 for c in ln if isinstance(c, LTChar))
        top = reference.PAGE_H - base - 2
        out.append(subprocess.run(
            ["pdftotext", "-enc", "UTF-8", "-f", str(page + 1), "-l", str(page + 1),
             "-x", str(int(ln.x0) - 1), "-y", str(int(top)), "-W", str(int(ln.x1 - ln.x0) + 3),
             "-H", "4", str(path), "-"],
            check=True, capture_output=True, text=True).stdout)
    return " ".join(out)


def assert_clean(text: str) -> None:
    """No control or format character, no mark detached from its letter."""
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        assert cat not in ("Cc", "Co", "Cs") or ch in "\n\x0c", (i, hex(ord(ch)), text)
        assert cat != "Cf" or ch in "\u200c\u200d", (i, hex(ord(ch)), text)
        if cat in ("Mn", "Mc", "Me"):
            assert i > 0 and not text[i - 1].isspace(), ("detached mark", i, text)


@pytest.mark.parametrize(("name", "field", "value"), CORPUS, ids=IDS)
def test_pdfminer_reads_the_field_in_logical_order(pdf: Path, name: str, field: str,
                                                  value: str) -> None:
    page = IDS.index(name)
    got = norm(miner_text(type3_lines(pdf, page)))
    want = norm(value)
    assert_clean(got)
    if name.startswith("ellipsis"):
        assert got.endswith(ELLIPSIS), got
        start = got[:-1].rstrip()
        assert len(start) >= 8 and want.startswith(start), (got, want)
    else:
        assert got == want
        # and in the whole page's text, as an indexer extracts it
        from pdfminer.high_level import extract_text
        page_text = " ".join(unicodedata.normalize("NFC", extract_text(
            str(pdf), page_numbers=[page])).split())
        assert want in page_text, page_text


@pytest.mark.parametrize(("name", "field", "value"), CORPUS, ids=IDS)
def test_pdftotext_reads_the_same_characters(pdf: Path, name: str, field: str,
                                            value: str) -> None:
    page = IDS.index(name)
    lines = type3_lines(pdf, page)
    miner = norm(miner_text(lines))
    got = norm(POPPLER_MARKS.sub("", poppler_text(pdf, page, lines)))
    assert_clean(got)
    assert sorted(got.replace(" ", "")) == sorted(miner.replace(" ", "")), (got, miner)
    if name.startswith("ellipsis") or name == "replacement":
        # the run before the ellipsis (the replacement marks' run) not reversed
        words = miner.rstrip(ELLIPSIS).split()
        assert words[0] in got, (got, miner)


# found by comparing the renderers on random strings: marks stacked in a narrow field
# (lowered, at a shrunk size) once gave a text rise the native renderer rounded toward
# zero and the reference down
STACKED = ["בגבאּׁשוָָׂבְְִׁׂלבְֹֹאלּׂאאְששָׂגְָבׂלשאֹוְְֹּ",
           "ỄỆ̣̣̉́́ỂỆ̣̉́̂Ệ̉Ệ̉̂Ệ̣̣̉́̂́́́ỄỄỄỄỂỄỂ́Ể́Ễ̂Ệ̃ỄỂỆ̣̣̉̂́̂̂̂́"]


@pytest.mark.parametrize("value", STACKED)
def test_stacked_marks_give_the_same_bytes_from_both_renderers(value: str) -> None:
    base = demo_order(1).tickets[0]
    order = Order(order_id=1, tickets=(dataclasses.replace(base, section=value),))
    assert _render.render_order(order) == reference.render_order(order)


def test_every_code_of_every_type3_font_has_a_tounicode_entry(pdf: Path) -> None:
    from pdfminer.cmapdb import CMapParser, FileUnicodeMap
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfparser import PDFParser
    from pdfminer.pdftypes import resolve1

    with pdf.open("rb") as fh:
        doc = PDFDocument(PDFParser(fh))
        fonts = 0
        for page in PDFPage.create_pages(doc):
            for font in resolve1(resolve1(page.resources)["Font"]).values():
                font = resolve1(font)
                if font["Subtype"].name != "Type3":
                    continue
                fonts += 1
                cmap = FileUnicodeMap()
                data = resolve1(font["ToUnicode"]).get_data()
                CMapParser(cmap, io.BytesIO(data)).run()
                codes = set(range(font["FirstChar"], font["LastChar"] + 1))
                assert codes == set(cmap.cid2unichr), sorted(codes ^ set(cmap.cid2unichr))
            break     # the fonts are the order's, shared by every page
    assert fonts >= 1
