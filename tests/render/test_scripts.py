"""Tickets in every script, checked with real tools on the sample orders of
src/stagedoor/demo/scripts/ (one per script) and on generated long fields.

- both renderers give the same bytes (the pure-Python one shapes through the same
  HarfBuzz, but its bidi, itemisation, layout and PDF code are its own);
- qpdf --check is clean; pdffonts lists every font of the order, the labels' pair
  included, as a Type 3 embedded subset (a TAG+Name subset name, tags distinct within
  the file) with a ToUnicode map;
- pdftotext, field by field (its -x/-y/-W/-H crop of the field's box), gives the NFC
  text back exactly, with /ActualText and again with every /ActualText removed, for
  Latin, Greek, Cyrillic, Hebrew, CJK and Hangul; for Arabic, Devanagari, Thai and the
  mixed-direction sample within the character error rate in NEAR (spaces not counted:
  poppler drops the space between Arabic-Indic digits and letters);
- pdftoppm renders every page and zxing-cpp reads every QR code;
- tesseract reads each field from the rendered page, without the PDF's text layer: the
  character error rate must stay under OCR_MAX; a control renders Cyrillic with no
  font that has it and checks that the same measure then fails.

The CERs are printed (pytest -s shows them); docs/benchmarks.md has a table.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageOps

from stagedoor import _render
from stagedoor.render import fastfont, fonts, tables
from stagedoor.render import reference as render
from stagedoor.render.order import Order
from tests.support.pdftools import content_streams, pdffonts, qpdf_check, scan, strip_actual_text

SAMPLES = Path(__file__).resolve().parents[2] / "src" / "stagedoor" / "demo" / "scripts"
NAMES = sorted(p.stem for p in SAMPLES.glob("*.json"))
FIELDS = [name for name, _ in tables.FIELDS] + ["small_print"]
# tesseract's language per sample (the Latin sample's first buyer is Vietnamese)
OCR_LANG = {"latin": "vie", "greek": "ell", "cyrillic": "rus", "arabic": "ara",
            "hebrew": "heb", "devanagari": "hin", "thai": "tha",
            "chinese-simplified": "chi_sim", "chinese-traditional": "chi_tra",
            "japanese": "jpn", "korean": "kor"}
OCR_FIELDS = ("event", "venue", "buyer", "small_print")
OCR_MAX = 0.2
# pdftotext without /ActualText: vowel signs drawn before their consonant (Devanagari)
# come out in drawing order, and poppler drops Thai marks stacked over one consonant
# ("ชั้นล่าง" -> "ชนล่าง"); Arabic and the mixed-direction sample come out exact but
# for a space poppler drops where the direction changes (the CER does not count spaces)
NEAR = {"arabic": 0.0, "mixed": 0.0, "devanagari": 0.1, "thai": 0.25,
        # through ToUnicode alone a Tibetan vowel sign comes before its consonant (drawing
        # order, as Devanagari).  Thaana is exact both ways; Urdu (Nastaliq) exact with
        # its lines' /ActualText (render/_native/linetext.pxi) and, without, its letters
        # in order but poppler's word spaces between the invisible glyphs of the bold
        # event's characters
        "tibetan": 0.15, "urdu": 0.0}
BIDI_MARKS = re.compile("[\u200e\u200f\u202a-\u202e]")


def load(name: str) -> Order:
    return Order.from_json((SAMPLES / f"{name}.json").read_bytes())


@pytest.fixture(scope="module")
def rendered() -> dict[str, bytes]:
    return {name: _render.render_order(load(name)) for name in NAMES}


def norm(text: str) -> str:
    """NFC, without the bidi marks poppler adds around right-to-left runs, spaces
    collapsed."""
    return " ".join(BIDI_MARKS.sub("", unicodedata.normalize("NFC", text)).split())


def cer(got: str, want: str) -> float:
    """Character error rate: Levenshtein distance / length of the expected text, both
    without spaces (OCR and text extraction space CJK and Thai as they see fit)."""
    a, b = "".join(got.split()), "".join(want.split())
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] / max(1, len(b))


def field_box(f: int) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of field f in points from the top-left corner."""
    x0, x1, y, size, _, lines = tables.FIELD_BOXES[f]
    s = size / 1000
    top = y + (1.15 if f == 0 else 0.95) * s
    bottom = y - 0.4 * s if f != len(FIELDS) - 1 else y - (lines - 1) * 6 - 0.5 * s
    return x0 - 3, render.PAGE_H - top, x1 + 3, render.PAGE_H - bottom


def field_text(pdf: Path, page: int, f: int) -> str:
    """pdftotext of field f's band: poppler takes every character whose box meets the
    area, so the band is narrower than the field's ink box, tables.FIELD_INK (the
    labels above and below come close); the lines are placed by their ink inside it."""
    x0, _, x1, _ = field_box(f)
    bottom, top = tables.FIELD_INK[f]
    y0 = render.PAGE_H - (top / 1000 - 2)
    y1 = render.PAGE_H - (bottom / 1000 + 2)
    return subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-f", str(page), "-l", str(page), "-x", str(int(x0)),
         "-y", str(int(y0)), "-W", str(int(x1 - x0)), "-H", str(int(y1 - y0)), str(pdf), "-"],
        check=True, capture_output=True, text=True).stdout


def fields_of(order: Order) -> Iterator[tuple[int, int, str]]:
    for k, t in enumerate(order.tickets):
        for f, name in enumerate(FIELDS):
            yield k, f, str(getattr(t, name))


@pytest.mark.parametrize("name", NAMES)
def test_native_and_reference_give_the_same_bytes(rendered: dict[str, bytes], name: str) -> None:
    assert rendered[name] == render.render_order(load(name))


@pytest.mark.parametrize("name", NAMES)
def test_valid_with_embedded_fonts(rendered: dict[str, bytes], name: str,
                                   tmp_path: Path) -> None:
    data = rendered[name]
    qpdf_check(data, tmp_path)
    rows = pdffonts(data, tmp_path)
    assert_embedded_subsets(rows)


SUBSET_NAME = re.compile(r"[A-Z]{6}\+[A-Za-z0-9._-]+(_[A-Za-z0-9._-]+)*")


def assert_embedded_subsets(rows: list[list[str]]) -> list[list[str]]:
    """Every font, the fast path's F1 and F2 (the labels') included: Type 3, embedded,
    a subset (poppler reads that from a six-letter tag in its name), with a ToUnicode
    map; the tags of one file differ.  Returns the Type 3 rows."""
    type3 = [r for r in rows if "Type" in r and r[r.index("Type") + 1] == "3"]
    assert type3, rows
    for r in rows:
        assert r in type3, r
        emb, sub, uni = r[-5:-2]
        assert (emb, sub, uni) == ("yes", "yes", "yes"), r
        assert SUBSET_NAME.fullmatch(r[0]), r
    tags = [r[0][:6] for r in type3]
    assert len(set(tags)) == len(tags), tags
    return type3


def test_fonts_of_many_glyphs_are_subsets_with_their_own_tags(tmp_path: Path) -> None:
    """An order with 700 different Han characters needs three fonts of 256 codes: each
    is named as a subset, by a tag of its own glyphs; the same glyphs give the same name
    in another order, other glyphs another tag."""
    han = [chr(c) for c in range(0x4E00, 0x9FA5) if unicodedata.category(chr(c)) == "Lo"]
    base = load("chinese-simplified").tickets[0]

    def order(chars: list[str]) -> Order:
        tickets = tuple(dataclasses.replace(base, event="".join(chars[i:i + 100]),
                                            buyer="", venue="", section="", row="",
                                            seat=str(i))
                        for i in range(0, len(chars), 100))
        return Order(order_id=base.order_id, tickets=tickets)

    many = order(han[:700])
    data = _render.render_order(many)
    assert data == render.render_order(many)
    qpdf_check(data, tmp_path)
    # the shaped path's fonts (not the fast path's F1 and F2, fastfont.TAGS)
    fast = tuple(tag.decode() + "+" for tag in fastfont.TAGS)
    names = [r[0] for r in assert_embedded_subsets(pdffonts(data, tmp_path))
             if not r[0].startswith(fast)]
    assert len(names) == 3, names
    again = _render.render_order(order(han[:700]))
    assert [r[0] for r in pdffonts(again, tmp_path)] == [r[0] for r in pdffonts(data, tmp_path)]
    other = [r[0] for r in assert_embedded_subsets(
        pdffonts(_render.render_order(order(han[700:1400])), tmp_path))
        if not r[0].startswith(fast)]
    assert not set(n[:6] for n in other) & set(n[:6] for n in names), (names, other)


@pytest.mark.parametrize("name", NAMES)
def test_every_field_extracts_exactly(rendered: dict[str, bytes], name: str,
                                      tmp_path: Path) -> None:
    pdf = tmp_path / "t.pdf"
    pdf.write_bytes(rendered[name])
    worst = 0.0
    for k, f, text in fields_of(load(name)):
        got = norm(field_text(pdf, k + 1, f))
        if name not in NEAR:
            assert got == norm(text), (k, FIELDS[f])
        worst = max(worst, cer(got, norm(text)))
    print(f"\n{name}: worst field CER by pdftotext {worst:.3f}")
    assert worst <= NEAR.get(name, 0.0)


@pytest.mark.parametrize("name", NAMES)
def test_fields_extract_through_tounicode_alone(rendered: dict[str, bytes], name: str,
                                               tmp_path: Path) -> None:
    pdf = tmp_path / "t.pdf"
    pdf.write_bytes(strip_actual_text(rendered[name], tmp_path))
    worst = 0.0
    for k, f, text in fields_of(load(name)):
        got = norm(field_text(pdf, k + 1, f))
        if name not in NEAR:
            assert got == norm(text), (k, FIELDS[f])
        worst = max(worst, cer(got, norm(text)))
    print(f"\n{name}: worst field CER through ToUnicode alone {worst:.3f}")
    assert worst <= NEAR.get(name, 0.0)


@pytest.mark.parametrize("name", NAMES)
def test_every_page_renders_and_every_qr_decodes(rendered: dict[str, bytes], name: str,
                                                 tmp_path: Path) -> None:
    assert scan(rendered[name], tmp_path) == [[t.admission_code] for t in load(name).tickets]


def ocr_fields(data: bytes, lang: str, tmp_path: Path, names: tuple[str, ...] = OCR_FIELDS,
               ) -> dict[str, str]:
    """tesseract's reading of fields of the first page, rendered at 300 dpi."""
    pdf = tmp_path / "ocr.pdf"
    pdf.write_bytes(data)
    subprocess.run(["pdftoppm", "-r", "300", "-png", "-f", "1", "-l", "1", "-singlefile",
                    "-gray", str(pdf), str(tmp_path / "page")], check=True)
    out = {}
    with Image.open(tmp_path / "page.png") as page:
        k = 300 / 72
        for name in names:
            f = FIELDS.index(name)
            x0, y0, x1, y1 = field_box(f)
            crop = page.convert("L").crop((int(x0 * k), int(y0 * k), int(x1 * k), int(y1 * k)))
            if sum(crop.tobytes()) < 128 * crop.size[0] * crop.size[1]:
                crop = ImageOps.invert(crop)           # the event: white on the header bar
            crop = ImageOps.expand(crop, 20, 255)
            if name == "small_print":                  # 5 pt: tesseract wants it larger
                crop = crop.resize((crop.size[0] * 3, crop.size[1] * 3), Image.Resampling.LANCZOS)
            png = tmp_path / f"{name}.png"
            crop.save(png)
            out[name] = subprocess.run(
                ["tesseract", str(png), "-", "-l", lang, "--psm", "7"], check=True,
                capture_output=True, text=True).stdout
    return out


@pytest.mark.parametrize("name", sorted(OCR_LANG))
def test_tesseract_reads_the_printed_glyphs(rendered: dict[str, bytes], name: str,
                                            tmp_path: Path) -> None:
    ticket = load(name).tickets[0]
    read = ocr_fields(rendered[name], OCR_LANG[name], tmp_path)
    rates = {field: cer(norm(read[field]), norm(getattr(ticket, field))) for field in read}
    print(f"\n{name} ({OCR_LANG[name]}): " + " ".join(f"{k}={v:.2f}" for k, v in rates.items()))
    for field, rate in rates.items():
        assert rate <= OCR_MAX, (field, read[field], getattr(ticket, field))


def test_the_ocr_check_fails_when_the_glyphs_are_wrong(tmp_path: Path) -> None:
    """Control: Cyrillic with no font that has it is drawn as replacement marks (and
    counted); the OCR measure of the test above then fails by far."""
    order = load("cyrillic")
    before = _render.font_stats()["missing_glyphs"]
    try:
        # only the Arabic font: not derived from what is installed (discover=False)
        fonts.use(fonts.plan(fonts={"Arab": "NotoSansArabic-Regular.ttf"}, fallback=(),
                             han={}, lang={}, discover=False))
        data = _render.render_order(order)
        assert data == render.render_order(order)
        missing = _render.font_stats()["missing_glyphs"] - before
        assert _render.missing_glyphs() == before + missing  # the per-job counter agrees
    finally:
        fonts.use(fonts.plan())
    ticket = order.tickets[0]
    letters = sum(ch.isalpha() for t in order.tickets for f in FIELDS
                  for ch in str(getattr(t, f)) if "\u0400" <= ch <= "\u04ff")
    assert missing >= letters        # and the rouble sign, which the Arabic font lacks too
    read = ocr_fields(data, "rus", tmp_path, ("venue", "buyer"))
    for field in ("venue", "buyer"):
        assert cer(norm(read[field]), norm(getattr(ticket, field))) > 3 * OCR_MAX, read


LONG = {"latin": "Nguyễn Thị Hương ", "greek": "Μέγαρο Μουσικής ", "cyrillic": "Большой театр ",
        "arabic": "دار الأوبرا المصرية ", "hebrew": "היכל התרבות ", "devanagari": "कमानी सभागार ",
        "thai": "ศูนย์วัฒนธรรมไทย", "chinese": "国家大剧院歌剧院", "japanese": "東京文化会館で",
        "korean": "예술의전당 오페라극장 "}


def _long(text: str) -> str:
    return (text * 200)[:200]


@pytest.mark.parametrize("script", sorted(LONG))
def test_a_200_character_field_stays_in_its_box(script: str, tmp_path: Path) -> None:
    base = load("latin").tickets[0]
    long = _long(LONG[script])
    t = dataclasses.replace(base, event=long, venue=long, buyer=long, row=long, section=long,
                            small_print=long * 5)
    order = Order(order_id=t.order_id, tickets=(t,))
    data = _render.render_order(order)
    assert data == render.render_order(order)
    qpdf_check(data, tmp_path)
    assert scan(data, tmp_path) == [[t.admission_code]]
    # every word pdftotext finds lies inside its field's box: none over the header's
    # STAGEDOOR, the QR code or another field
    pdf = tmp_path / "long.pdf"
    pdf.write_bytes(data)
    html = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], check=True,
                          capture_output=True, text=True).stdout
    words = [tuple(float(v) for v in m.groups()) for m in re.finditer(
        r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)"', html)]
    boxes = [field_box(f) for f in range(len(FIELDS))]
    labels_and_static = 14       # STAGEDOOR and the field labels
    inside = 0
    for x0, y0, x1, y1 in words:
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if any(bx0 <= cx <= bx1 and by0 <= cy <= by1 for bx0, by0, bx1, by1 in boxes):
            inside += 1
            qr_top, qr_bottom = render.PAGE_H - render.QR_TOP, render.PAGE_H - 130
            if qr_top <= cy <= qr_bottom:
                assert x1 <= render.QR_X, (x0, y0, x1, y1)   # left of the QR code
    assert inside >= len(words) - labels_and_static
    page = content_streams(data)[1]
    if script in ("arabic", "hebrew"):
        # no /ActualText for right-to-left text: poppler would spread it left to right
        # and reverse it letter by letter (docs/text-layer.md); the
        # glyphs, written in logical order, read as the start of the value and the
        # ellipsis (pdfminer.six)
        assert b"/ActualText" not in page
        from pdfminer.high_level import extract_text
        got = " ".join(extract_text(str(pdf)).split())
        assert " ".join(long.split())[:40] in got, got
    else:
        # the full text of each cut field is still in the page, as its /ActualText
        assert b"/Span << /ActualText <" + render.actual_text(long) + b"> >> BDC" in page


def libthai_word_breaks(text: str) -> set[int]:
    """Where libthai's dictionary segmenter puts word boundaries in text (indices of the
    characters that start a word), asked here through its wide-character entry point
    on the whole string (the renderers give it runs of TIS-620 bytes)."""
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("thai") or "libthai.so.0")
    lib.th_brk_new.restype = ctypes.c_void_p
    lib.th_brk_wc_find_breaks.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p,
                                          ctypes.POINTER(ctypes.c_int), ctypes.c_size_t]
    brk = lib.th_brk_new(None)
    assert brk, "libthai's dictionary did not load"
    try:
        pos = (ctypes.c_int * (len(text) + 1))()
        n = lib.th_brk_wc_find_breaks(brk, text, pos, len(text))
        return set(pos[:n])
    finally:
        lib.th_brk_delete(ctypes.c_void_p(brk))


# 109 characters, no space; where these fields fill a line, a cut by width alone falls
# inside a word (checked when this test was written: 88 of venue and buyer, 105 of event)
THAI_RUN_ON = ("ขอบคุณที่ใช้บริการการแสดงคอนเสิร์ตดนตรีคลาสสิกของวงออร์เคสตราแห่งชาติ"
               "ณศูนย์วัฒนธรรมแห่งประเทศไทยกรุงเทพมหานคร")


@pytest.mark.parametrize(("field", "repeat"), [("event", 1), ("venue", 1), ("buyer", 1),
                                               ("small_print", 3)])
def test_unspaced_thai_wraps_at_libthai_word_breaks(field: str, repeat: int,
                                                    tmp_path: Path) -> None:
    """A Thai field too long for one line, with no space in it, wraps where libthai's
    dictionary sees a word boundary, never inside a word (UAX #14 has no break in Thai
    without a dictionary: it used to be cut at a character cluster)."""
    from stagedoor.render.shaped import faces, layout

    text = THAI_RUN_ON * repeat
    assert " " not in text
    base = load("thai").tickets[0]
    order = Order(order_id=base.order_id,
                  tickets=(dataclasses.replace(base, **{field: text}),))  # type: ignore[arg-type]
    data = _render.render_order(order)
    assert data == render.render_order(order)
    qpdf_check(data, tmp_path)
    assert scan(data, tmp_path) == [[base.admission_code]]
    # where the lines end, in the layout both renderers share (their bytes are equal);
    # the last line may be cut with an ellipsis, the others end where the wrap broke
    f = FIELDS.index(field)
    u = [ord(c) for c in text]
    out = layout.layout_field(faces.fonts_for(fonts.current()), layout.Registry(), f, u, [])
    assert len(out.lines) >= 2, out.lines
    ends = [max(g.ci + g.cn for g in line.glyphs) for line in out.lines[:-1]]
    words = libthai_word_breaks(text)
    assert len(words) >= 15 * repeat, words
    for e in ends:
        assert e in words, (e, text[max(0, e - 5):e] + "|" + text[e:e + 5], sorted(words))
    # nothing lost when it fits in its lines: pdftotext gives the field back whole
    pdf = tmp_path / "thai.pdf"
    pdf.write_bytes(data)
    if repeat == 1:
        assert norm(field_text(pdf, 1, f)) == text


def test_han_takes_the_face_of_the_order_locale() -> None:
    """骨 and 直 are drawn differently in China, Taiwan and Japan: the order's locale picks
    the face; without one, the documented default order (zh-Hans first), unless the
    order has kana (then Japanese)."""
    base = load("chinese-simplified").tickets[0]

    def pdf(buyer: str, locale: str) -> bytes:
        order = Order(order_id=base.order_id, tickets=(dataclasses.replace(base, buyer=buyer),),
                      locale=locale)
        data = _render.render_order(order)
        assert data == render.render_order(order)
        return data

    faces = {loc: pdf("骨直", loc) for loc in ("zh-CN", "zh-TW", "ja-JP", "ko-KR")}
    assert len(set(faces.values())) == 4
    assert pdf("骨直", "") == faces["zh-CN"]
    assert pdf("骨直", "zh-Hant-HK") != faces["zh-TW"]          # Hong Kong has its own face
    # kana and no locale: the Japanese face (same kanji glyphs as ja-JP)
    kana = pdf("骨直ひ", "")
    assert kana == pdf("骨直ひ", "ja-JP") != pdf("骨直ひ", "zh-CN")


def test_orders_of_many_glyphs_and_tickets_match_the_reference() -> None:
    """A one-ticket PDF of ~600 distinct glyphs (~120 KB), five tickets, and a mix: the
    shaped fields' UTF-32 and /ActualText (made in the render's scratch) and the output
    buffer grow past what a demo order needs, and each gives the reference's bytes."""
    base = load("chinese-simplified")
    t = base.tickets[0]
    distinct = dataclasses.replace(
        t, event="".join(chr(0x4E00 + i) for i in range(200)),
        venue="".join(chr(0x5000 + i) for i in range(200)),
        buyer="".join(chr(0x6000 + i) for i in range(200)))
    cases = [Order(order_id=t.order_id, tickets=(distinct,), locale=base.locale),
             Order(order_id=t.order_id, tickets=(t,) * 5, locale=base.locale),
             Order(order_id=t.order_id, tickets=(t, t, distinct, t), locale=base.locale)]
    got = [_render.render_order(o) for o in cases]
    assert got == [render.render_order(o) for o in cases]
    assert len(got[0]) > 100_000


def test_fields_of_no_strong_letter_match_the_reference() -> None:
    """The native layout gives level 0 to a paragraph of left-to-right, weak and neutral
    characters without asking fribidi (shape.pxi, bidi_flat), and keeps the paragraph
    direction fribidi leaves when no strong letter is there: fields of numbers, signs,
    brackets and marks alone, and beside them ones fribidi must resolve (Arabic-Indic
    digits, an RLM), give the reference's bytes (it asks fribidi for every field)."""
    t = load("chinese-simplified").tickets[0]
    fields = [("₹ 1,250 (№ 5) — ¶ ‼", "\u0301\u0302 ۱۲ ₹", "[₹]", "١٢٣ ₹", "\u200f₹ 5"),
              ("(₹)", "۱۲۳", "₹ १,२५०", "\u200e₹", "— ₹ ₹ —")]
    cases = [Order(order_id=t.order_id, tickets=(dataclasses.replace(
        t, event=a, venue=b, section=c, buyer=d, price=e),)) for a, b, c, d, e in fields]
    assert [_render.render_order(o) for o in cases] == [render.render_order(o) for o in cases]


FIRST_TOO_WIDE = '''
import dataclasses
from stagedoor import _render
from stagedoor.demo.orders import demo_order
from stagedoor.render import reference
o = demo_order(3)
wide = dataclasses.replace(o.tickets[0], event="A title far too wide for its box " * 4)
o = dataclasses.replace(o, tickets=(wide,))
assert _render.font_stats()["faces_open"] == 0
print(_render.render_order(o) == reference.render_order(o), _render.font_stats()["faces_open"])
'''


def test_a_process_whose_first_order_is_ascii_too_wide_for_its_box_configures_fonts() -> None:
    """Whether an ASCII field fits is decided without the GIL, after the fonts would
    have been configured; the first such order of a process configures them and is
    shaped like the reference's."""
    out = subprocess.run([sys.executable, "-c", FIRST_TOO_WIDE], check=True,
                         capture_output=True, text=True).stdout.split()
    # the order's text is all Latin: the faces open are Noto Sans and Noto Sans Bold,
    # the fast path's (the labels' too, fastfont.py), where the shaped event needs one
    assert out == ["True", "2"]


THREADED = '''
import sys
from concurrent.futures import ThreadPoolExecutor
from stagedoor import _render
from stagedoor.demo.orders import world_order
orders = [world_order(i) for i in range(1, 241)]
assert _render.font_stats()["faces_open"] == 0
if sys.argv[1] == "threads":
    with ThreadPoolExecutor(8) as pool:
        out = list(pool.map(_render.render_order, orders))
else:
    out = [_render.render_order(o) for o in orders]
import hashlib
print(hashlib.sha256(b"".join(out)).hexdigest(), _render.font_stats()["glyphs_cached"])
'''


def test_cold_caches_filled_by_eight_threads_give_the_serial_bytes() -> None:
    """Faces open and glyph procedures are made on first use by whichever thread needs
    them, under locks: eight threads starting cold give the bytes one thread gives."""
    results = [subprocess.run([sys.executable, "-c", THREADED, mode], check=True,
                              capture_output=True, text=True).stdout.split()
               for mode in ("threads", "serial")]
    assert results[0] == results[1]
    assert int(results[0][1]) > 300


FORKED = '''
import os, sys
from stagedoor import _render
from stagedoor.render.order import Order
order = Order.from_json(open(sys.argv[1], "rb").read())
before = _render.render_order(order)
assert _render.font_stats()["faces_open"] > 0
pid = os.fork()
if pid == 0:
    # the child starts with no face and no glyph of the parent's, and renders the same
    ok = _render.font_stats()["faces_open"] == 0 and _render.font_stats()["glyphs_cached"] == 0
    ok = ok and _render.render_order(order) == before
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
'''


def test_no_font_handle_crosses_fork() -> None:
    out = subprocess.run([sys.executable, "-c", FORKED, str(SAMPLES / "japanese.json")],
                         check=True, capture_output=True, text=True).stdout
    assert out.strip() == "0"


# -- every script with an installed face prints (issue 25) ------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_no_character_of_a_sample_prints_as_a_replacement_mark(rendered: dict[str, bytes],
                                                               name: str) -> None:
    """Before the faces came from the fonts' own coverage, Tibetan, Syriac, Thaana,
    Mongolian, Cherokee, Canadian syllabics and Tifinagh printed as rows of U+FFFD."""
    before = _render.missing_glyphs()
    data = _render.render_order(load(name))
    assert _render.missing_glyphs() == before, name
    assert data == rendered[name]


def every_script_order() -> tuple[Order, list[str]]:
    """One ticket per script Unicode defines that an installed face covers, its buyer a
    few of the script's letters (Unicode's data, installed.script_samples)."""
    from stagedoor import config
    from stagedoor.render import installed

    cov = installed.scan(tuple(config.FONT_DIRS))
    samples = installed.script_samples()
    tags = sorted(t for t in samples if t in cov.faces or t in fonts.HAN_SCRIPTS)
    base = load("latin").tickets[0]
    tickets = tuple(dataclasses.replace(base, buyer=samples[t], seat=t) for t in tags)
    return Order(order_id=base.order_id, tickets=tickets), tags


def test_every_script_with_an_installed_face_prints(tmp_path: Path) -> None:
    """Every script an installed font covers (~150 with fonts-noto-core) prints without
    a replacement mark, the text reads back, and both renderers agree."""
    order, tags = every_script_order()
    assert len(tags) > 120, tags
    before = _render.missing_glyphs()
    data = _render.render_order(order)
    assert _render.missing_glyphs() == before
    assert data == render.render_order(order)
    pdf = tmp_path / "all.pdf"
    pdf.write_bytes(data)
    buyer = FIELDS.index("buyer")
    for k, t in enumerate(order.tickets):
        # the same characters: the order of a right-to-left run of letters that do not
        # join is poppler's to choose (issue 25's text-layer item)
        got = norm(field_text(pdf, k + 1, buyer)).replace(" ", "")
        assert sorted(got) == sorted(norm(t.buyer)), (t.seat, got, t.buyer)


def test_urdu_is_drawn_in_nastaliq_and_arabic_in_naskh(tmp_path: Path) -> None:
    """The order's language picks the face of its script (render_lang_fonts: ur ->
    Noto Nastaliq Urdu); without it Arabic letters take the Arabic faces."""
    urdu = load("urdu")
    names = [r[0].split("+")[-1] for r in pdffonts(_render.render_order(urdu), tmp_path)]
    assert any("NotoNastaliqUrdu" in n for n in names), names
    plain = dataclasses.replace(urdu, locale="")
    names = [r[0].split("+")[-1] for r in pdffonts(_render.render_order(plain), tmp_path)]
    assert not any("Nastaliq" in n for n in names), names
    assert any("NotoSansArabic" in n for n in names), names
    assert render.render_order(plain) == _render.render_order(plain)


def test_the_order_language_selects_localized_forms() -> None:
    """HarfBuzz shapes with the order's language: Serbian and Macedonian Cyrillic take
    their own form of be (Noto's locl), Russian the default; both renderers agree."""
    base = load("cyrillic")
    out = {}
    for loc in ("ru", "sr", "mk"):
        order = dataclasses.replace(base, locale=loc, tickets=tuple(
            dataclasses.replace(t, buyer="бгдпт Ђорђе") for t in base.tickets))
        out[loc] = _render.render_order(order)
        assert out[loc] == render.render_order(order), loc
    assert out["sr"] != out["ru"]
    assert out["mk"] != out["ru"]


ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
SCOTLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"


def test_tag_sequence_flags_print_the_flag_and_no_replacement_marks(tmp_path: Path) -> None:
    """The England and Scotland flags are a black flag and tag characters no font has:
    the tags are default ignorable, so they are hidden with the flag's face (they
    printed as six U+FFFD each); the text layer keeps them."""
    base = load("latin").tickets[0]
    text = f"England {ENGLAND} v Scotland {SCOTLAND}"
    order = Order(order_id=base.order_id, tickets=(dataclasses.replace(base, event=text),))
    before = _render.missing_glyphs()
    data = _render.render_order(order)
    assert _render.missing_glyphs() == before
    assert data == render.render_order(order)
    pdf = tmp_path / "flags.pdf"
    pdf.write_bytes(data)
    assert norm(field_text(pdf, 1, 0)) == norm(text)


def test_coverage_reads_the_same_without_the_extension(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """installed.scan through fontTools (a worker without the extension) finds the same
    faces for the same scripts as through HarfBuzz; -Bold files are not scanned."""
    from stagedoor.render import installed

    noto = Path("/usr/share/fonts/truetype/noto")
    for name in ("NotoSerifTibetan-Regular.ttf", "NotoSansCherokee-Regular.ttf",
                 "NotoSansThaana-Regular.ttf", "NotoSansThaana-Bold.ttf"):
        (tmp_path / name).symlink_to(noto / name)
    native = installed.scan((str(tmp_path),))
    monkeypatch.setattr(installed, "_native", lambda: None)
    installed.scan.cache_clear()
    try:
        pure = installed.scan((str(tmp_path),))
    finally:
        installed.scan.cache_clear()
    assert native.faces == pure.faces
    assert {t: [Path(p).name for p, _, _ in f] for t, f in native.faces.items()
            if t in ("Tibt", "Cher", "Thaa")} == {
        "Tibt": ["NotoSerifTibetan-Regular.ttf"], "Cher": ["NotoSansCherokee-Regular.ttf"],
        "Thaa": ["NotoSansThaana-Regular.ttf"]}
