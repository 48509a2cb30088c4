"""The ticket PDF: valid, readable, decodable, and the same bytes from both renderers.

Checked with real tools: qpdf --check for the structure, pypdf and poppler's pdftotext
for the text, pdftoppm + zxing-cpp for the QR code as a scanner at the door sees it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stagedoor
from stagedoor import _render
from stagedoor.demo.orders import demo_order
from stagedoor.render import fastfont, fonts, native_available, native_import_error, renderer
from stagedoor.render import reference as render
from stagedoor.render.order import Order, Ticket
from stagedoor.render.shaped import faces
from tests.support.pdftools import (
    content_streams,
    page_texts,
    pdftotext,
    qpdf_check,
    scan,
    strip_actual_text,
)

BASE = Ticket(event="Die Zauberflöte", venue="Staatsoper Unter den Linden",
              starts_at="2026-12-19 19:30", section="Parkett", row="7", seat="12",
              buyer="Jürgen Weiß", price="EUR 49.00", order_id=1234,
              admission_code="SD-00001234-01-3F9A1C",
              small_print="Valid for one admission. Doors open 45 minutes before the "
                          "performance. No re-entry. Resale only via stagedoor.")


def ticket(**changes: object) -> Ticket:
    return dataclasses.replace(BASE, **changes)  # type: ignore[arg-type]


def order(*tickets: Ticket) -> Order:
    return Order(order_id=tickets[0].order_id, tickets=tickets)


def pdf_of(*tickets: Ticket) -> bytes:
    data = _render.render_order(order(*tickets))
    assert data == render.render_order(order(*tickets))
    return data


def test_native_is_built_and_chosen() -> None:
    assert native_available(), native_import_error()
    assert native_import_error() is None
    assert renderer() is _render.render_order


def test_valid_pdf(tmp_path: Path) -> None:
    qpdf_check(pdf_of(BASE), tmp_path)
    qpdf_check(render.render_order(demo_order(7)), tmp_path)


def test_xref_offsets_point_at_objects() -> None:
    data = pdf_of(BASE, ticket(seat="13"))
    startxref = int(data.rsplit(b"startxref\n", 1)[1].split(b"\n")[0])
    # 10 fixed and per-page objects, then the glyphs of the fast path's fonts (as many
    # as the order shows distinct codes per font) and their ToUnicode
    size = int(data.rsplit(b"/Size ", 1)[1].split(b" ", 1)[0])
    assert size > 11
    assert data[startxref:].startswith(b"xref\n0 %d\n" % size)
    entries = data[startxref:].split(b"\n")[3:2 + size]
    assert len(entries) == size - 1
    for num, entry in enumerate(entries, start=1):
        offset = int(entry[:10])
        assert data[offset:].startswith(b"%d 0 obj\n" % num)


def test_text_extraction_finds_buyer_and_code() -> None:
    text = page_texts(pdf_of(BASE))[0]
    for value in (BASE.buyer, BASE.admission_code, BASE.event, BASE.venue, BASE.starts_at,
                  BASE.price, "1234", BASE.small_print):
        assert value in text


def test_qr_scans_to_the_admission_code(tmp_path: Path) -> None:
    assert scan(pdf_of(BASE), tmp_path) == [[BASE.admission_code]]


@pytest.mark.parametrize("n", [1, 20, 40, 80, 130, 200])
def test_qr_scans_at_every_size(tmp_path: Path, n: int) -> None:
    code = ("SD-" + "0123456789ABCDEF" * 13)[:n]
    assert scan(pdf_of(ticket(admission_code=code)), tmp_path) == [[code]]


def test_multi_page_order(tmp_path: Path) -> None:
    tickets = [ticket(seat=str(10 + i), admission_code=f"SD-00001234-{i:02d}-ABCDEF")
               for i in range(5)]
    data = pdf_of(*tickets)
    texts = page_texts(data)
    assert len(texts) == 5
    for t, text in zip(tickets, texts, strict=True):
        assert t.admission_code in text
        assert f"{t.seat}\n" in text or text.endswith(t.seat) or f" {t.seat}" in text
    assert scan(data, tmp_path) == [[t.admission_code] for t in tickets]
    qpdf_check(data, tmp_path)


@pytest.mark.parametrize("buyer", ["Chloé (Cleo) Dubois", "Back\\Slash Smith", "a)b(c\\",
                                   "Ann O'Neil \"Annie\"", "((()))\\\\)", "\\(x\\)"])
def test_escaping(tmp_path: Path, buyer: str) -> None:
    data = pdf_of(ticket(buyer=buyer, small_print=f"Small {buyer} print"))
    qpdf_check(data, tmp_path)
    assert buyer in page_texts(data)[0]
    assert f"Small {buyer} print" in page_texts(data)[0]
    page = content_streams(data)[1]
    escaped = buyer.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    assert b"(" + escaped.encode("cp1252") + b") Tj" in page


@pytest.mark.parametrize("name", ["Zoë Ødegaard-Šimon", "José Ángel Núñez", "Jürgen Weiß",
                                  "François Œuvray", "Žofie Šťovíčková"[:5] + "Ÿves",
                                  "Æsa Þórsdóttir", "Ann O'Neil"])
def test_latin_names_round_trip(tmp_path: Path, name: str) -> None:
    data = pdf_of(ticket(buyer=name, price="€ 49,00"))
    text = page_texts(data)[0]
    assert name in text
    assert "€ 49,00" in text
    assert name in pdftotext(data, tmp_path)
    assert b"ActualText" not in content_streams(data)[1]


CENTRAL_EUROPEAN = ["Łukasz Żółć", "Zoë Ødegaard-Šimić", "Ďurčo Ňeřťů", "Őrs Űrhajós",
                    "Novak Đoković", "Ąą Ćć Ęę Łł Ńń Śś Źź Żż Čč Ďď Ěě Ňň Řř Ťť Ůů Őő Űű Đđ"]


@pytest.mark.parametrize("name", CENTRAL_EUROPEAN)
def test_central_european_letters_are_shown_exactly(tmp_path: Path, name: str) -> None:
    # not in WinAnsi, but in the standard Helvetica: /Differences on unused codes
    data = pdf_of(ticket(buyer=name, small_print=f"For {name}."))
    qpdf_check(data, tmp_path)
    text = page_texts(data)[0]
    assert name in text
    assert f"For {name}." in text
    assert name in pdftotext(data, tmp_path)
    assert b"ActualText" not in content_streams(data)[1]


def test_codes_10_and_13_are_escaped() -> None:
    ch10, ch13 = (ch for ch, code in render.EXTRA_BYTE.items() if code in (10, 13))
    data = pdf_of(ticket(buyer=ch10 + ch13))
    assert b"(\\n\\r) Tj" in content_streams(data)[1]
    assert ch10 + ch13 in page_texts(data)[0]


@pytest.mark.parametrize("name", ["Łukasz 李", "Gökhan Şahin ığ", "李小龍", "Дмитрий 🎫 Ivan",
                                  "Zoe\u0308 Nguyễn"])
def test_other_scripts_are_drawn_as_glyphs_and_extract_exactly(
        tmp_path: Path, name: str) -> None:
    data = pdf_of(ticket(buyer=name))
    qpdf_check(data, tmp_path)
    nfc = unicodedata.normalize("NFC", name)
    page = content_streams(data)[1]
    # drawn with the order's Type 3 font, never the old "?" approximation
    assert b"/T0 " in page
    assert b"(" + b"?" not in page.split(b"/T0")[0].split(b"BUYER")[-1]
    # every glyph stands for one character here: the ToUnicode map gives the text, so
    # pypdf (which ignores /ActualText) and pdftotext with or without it find it
    assert nfc in page_texts(data)[0]
    assert nfc in pdftotext(data, tmp_path)
    assert nfc in pdftotext(strip_actual_text(data, tmp_path), tmp_path)


def test_fast_path_rules() -> None:
    assert render.encode_winansi("Jürgen") == "Jürgen".encode("cp1252")
    assert render.encode_winansi("Łx") == bytes([render.EXTRA_BYTE["Ł"]]) + b"x"
    assert render.encode_winansi("a\tb\x7f") == b"a b "
    for text in ("Łódź \u0131", "ŋ", "⅓", "李", "Zoe\u0308"):
        assert render.encode_winansi(text) is None
    # fits: the buyer box is 254 pt wide, Noto Sans Bold 11 pt (its advances, read
    # from the face: fastfont.py)
    assert render.fits(b"Jurgen Weiss", 6)
    assert not render.fits(b"W" * 40, 6)
    ff = render.fast_fonts(faces.fonts_for(fonts.current()))
    most = 254_000 * 1000 // (ff.widths[1][ord("i")] * 11_000)
    assert render.fits(b"i" * most, 6)
    assert not render.fits(b"i" * (most + 1), 6)


def test_controls_print_as_spaces() -> None:
    text = page_texts(pdf_of(ticket(buyer="Ann\tO'Neil\x00", small_print="a\nb")))[0]
    assert "Ann O'Neil" in text
    assert "a b" in text


def test_small_print_wraps() -> None:
    words = " ".join(f"word{i}" for i in range(150))
    data = pdf_of(ticket(small_print=words))
    lines = render.wrap(words.encode())
    assert len(lines) > 5
    assert all(len(line) <= render.WRAP for line in lines)
    assert b" ".join(lines) == words.encode()
    text = page_texts(data)[0]
    assert all(line.decode() in text for line in lines)
    assert render.wrap(b"x" * 250) == [b"x" * 110, b"x" * 110, b"x" * 30]
    assert render.wrap(b"   ") == []


def test_deterministic() -> None:
    a = pdf_of(BASE)
    assert a == _render.render_order(order(BASE))
    assert b"/ID" not in a
    assert b"CreationDate" not in a
    assert b"ModDate" not in a


def test_empty_order_is_refused() -> None:
    for fn in (_render.render_order, render.render_order):
        with pytest.raises(ValueError, match="no tickets"):
            fn(Order(order_id=1, tickets=()))


def test_too_long_admission_code_is_refused() -> None:
    t = ticket(admission_code="x" * 2400)
    for fn in (_render.render_order, render.render_order):
        with pytest.raises(ValueError, match="QR data too long"):
            fn(order(t))


def test_demo_orders_identical() -> None:
    for i in range(1, 60):
        o = demo_order(i)
        assert _render.render_order(o) == render.render_order(o)


# Printable ASCII, the cp1252 extras (0x80-0x9f), Latin-1, characters outside cp1252
# (Polish, Czech, Turkish, Cyrillic, CJK, an emoji, a combining mark), the characters
# that need escaping and a few controls.
ALPHABET = ("".join(chr(c) for c in range(0x20, 0x7F))
            + bytes(range(0x80, 0xA0)).decode("cp1252", "ignore")
            + "¡£§©«®°±µ¶·»¿ÀÆÇÉÑÖØÜßàæçéñöøüÿ"
            + "ŁłŻżćńśźĐđŞşĞğŠťůőű\u0131" + "ЯжЖ" + "李龍" + "🎫" + "\u0301"
            + "()\\\\\"'" + "\t\n\r\x00\x7f")
text = st.text(alphabet=ALPHABET, max_size=40)


@st.composite
def tickets(draw: st.DrawFn, order_id: int) -> Ticket:
    return Ticket(event=draw(text), venue=draw(text), starts_at=draw(text),
                  section=draw(text), row=draw(text), seat=draw(text), buyer=draw(text),
                  price=draw(text), order_id=order_id,
                  admission_code=draw(st.text(alphabet=ALPHABET, min_size=1, max_size=120)),
                  small_print=draw(st.text(alphabet=ALPHABET, max_size=400)))


@st.composite
def orders(draw: st.DrawFn) -> Order:
    order_id = draw(st.integers(min_value=1, max_value=10**12))
    ts = draw(st.lists(tickets(order_id), min_size=1, max_size=3))
    return Order(order_id=order_id, tickets=tuple(ts))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(orders())
def test_native_and_reference_are_byte_identical(o: Order) -> None:
    assert _render.render_order(o) == render.render_order(o)


def test_threads_render_the_same_bytes_as_serial() -> None:
    work = [demo_order(i) for i in range(1, 41)] + [order(ticket(buyer="Łukasz Żółć"))]
    serial = [_render.render_order(o) for o in work]
    start = threading.Barrier(8)

    def job(k: int) -> list[bytes]:
        start.wait()
        out: list[bytes] = []
        for _ in range(5):
            out.extend(_render.render_order(o) for o in work[k::8])
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(job, range(8)))
    for k, got in enumerate(results):
        assert got == serial[k::8] * 5


def test_without_the_extension_the_reference_is_used_and_the_reason_given() -> None:
    code = ("import sys; sys.modules['stagedoor._render'] = None\n"
            "from stagedoor import render\n"
            "assert not render.native_available()\n"
            "assert render.renderer() is render.render_order\n"
            "print(render.native_import_error())\n")
    src = str(Path(stagedoor.__file__).parent.parent)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": src}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "native renderer stagedoor._render not importable" in proc.stdout
    assert "pip install ." in proc.stdout
    assert "stagedoor doctor" in proc.stdout   # the one place that says what the host lacks


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(orders())
def test_random_orders_are_valid_pdfs(tmp_path: Path, o: Order) -> None:
    data = _render.render_order(o)
    qpdf_check(data, tmp_path)
    texts = page_texts(data)
    assert len(texts) == len(o.tickets)
    for t, text in zip(o.tickets, texts, strict=True):
        assert str(t.order_id) in text


@pytest.mark.parametrize("value", ["\ud800x", "\x81\x8d\x9d", "a\u0301", "\uffff",
                                   "\U0010ffff", "", " " * 300, "x" * 200])
def test_edge_strings_are_identical_and_valid(tmp_path: Path, value: str) -> None:
    t = ticket(buyer=value, venue=value, admission_code=value or "x", small_print=value * 3)
    data = pdf_of(t)
    qpdf_check(data, tmp_path)


# -- one typeface, embedded (issue 39 item 7) ---------------------------------------------

def _pdffonts(data: bytes, tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "fonts.pdf"
    path.write_bytes(data)
    out = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()[2:]
    return [line.split() for line in out]


def test_every_font_is_embedded_and_the_labels_are_noto_sans(tmp_path: Path) -> None:
    """A Latin ticket (labels, fast-path fields) and a mixed one: every font pdffonts
    lists is embedded, and the fast path's two are Noto Sans and Noto Sans Bold (was:
    the standard Helvetica pair, not embedded)."""
    for order in (demo_order(7), Order(order_id=1, tickets=(
            ticket(buyer="Zoë Ødegaard-Šimić", venue="Τεχνόπολη"),))):
        data = _render.render_order(order)
        assert data == render.render_order(order)
        rows = _pdffonts(data, tmp_path)
        assert rows and all(r[-5] == "yes" for r in rows), rows     # the emb column
        names = {r[0].split("+", 1)[1] for r in rows}
        assert {"NotoSans-Regular", "NotoSans-Bold"} <= names, names
        assert not any("Helvetica" in n for n in names)


def test_fast_path_glyphs_are_harfbuzz_glyphs() -> None:
    """Each code of the fast encoding draws the glyph HarfBuzz shapes its character
    to, alone, in the same face (libharfbuzz through ctypes, a font of its own), with
    HarfBuzz's advance."""
    from stagedoor.render.shaped import libs

    fs = faces.fonts_for(fonts.current())
    ff = render.fast_fonts(fs)
    for k in (0, 1):
        f = fs.faces[ff.faces[k]]
        font = libs.hb_font(f.path, f.index)
        for code, ch in enumerate(fastfont.CODE_CHARS):
            if ch is None or ff.widths[k][code] < 0:
                continue
            shaped = libs.hb_shape(font, [ord(ch)], 0, 1, 0, "Latn")
            assert [(g[0], g[2]) for g in shaped] == [
                (ff.gids[k][code], ff.widths[k][code])], (k, ch)


def test_a_fast_glyph_that_would_reach_the_label_takes_the_shaped_path() -> None:
    """Noto Sans' Ů reaches 996/1000 em up, past the room under the label at 11 pt: a
    buyer with it is shaped (its ink measured and the line placed), not drawn by the
    fast path, in both renderers."""
    raw = render.encode_winansi("Ůrsula")
    assert raw is not None and not render.fits(raw, 6) and render.fits(raw[1:], 6)
    data = pdf_of(ticket(buyer="Ůrsula Nováková"))
    assert b"/T0 " in data


def test_a_plan_without_any_face_still_renders_the_same_bytes(tmp_path: Path) -> None:
    """No face configured (the doctor's CRITICAL): F1 and F2 have no glyph, every field
    is shaped (as replacement marks), and both renderers agree; nothing raises."""
    try:
        fonts.use(fonts.plan(fonts={}, fallback=(), han={}, lang={}, discover=False))
        order = demo_order(1)
        data = _render.render_order(order)
        assert data == render.render_order(order)
        qpdf_check(data, tmp_path)
    finally:
        fonts.use(fonts.plan())


def test_shaped_runs_from_the_cache_give_the_bytes_of_a_fresh_shaping() -> None:
    """The second order with the same long values takes their runs from the shaped-run
    cache (shapecache.pxi) and their line breaks from the break cache (breakcache.pxi):
    the same bytes as the reference, which shapes and breaks every time, and the same
    as with the shape cache emptied (configure empties it); a run in another context
    (other characters around it) is not taken for it."""
    base = demo_order(1).tickets[0]
    venue = "नई दिल्ली " * 24
    first = Order(order_id=1, tickets=(dataclasses.replace(base, venue=venue),))
    again = Order(order_id=2, tickets=(dataclasses.replace(base, venue=venue, order_id=2),))
    context = Order(order_id=3, tickets=(dataclasses.replace(base, venue="क" + venue),))
    _render.configure(fonts.current())
    cold = _render.render_order(first)
    hits = _render.shape_cache_stats()["hits"]
    breaks = _render.break_cache_stats()["hits"]
    for order in (first, again, context):
        assert _render.render_order(order) == render.render_order(order)
    assert _render.shape_cache_stats()["hits"] > hits
    assert _render.break_cache_stats()["hits"] > breaks
    assert _render.render_order(first) == cold
    _render.configure(fonts.current())
    assert _render.shape_cache_stats()["entries"] == 0
    assert _render.render_order(first) == cold
