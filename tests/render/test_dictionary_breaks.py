"""Lao, Myanmar and Khmer fields that must wrap break between words or syllables, where
ICU's dictionaries see a boundary (render/_native/dictbreaks.pxi), never inside one.

These scripts put no space between words; UAX #14 leaves their breaks to a dictionary,
and without one (libunibreak has none) a wrapped field was cut at a grapheme cluster:
`…ဇာတ်` / `ရုံ…`, `…ຈັນສ` / `ະຖານ…` (issue 39, item 4).  Each case is a field too long
for one line, rendered by both renderers (same bytes), in an order carrying the script's
locale; where its lines end (the layout both share) must be a boundary of ICU's line
break iterator on the whole text, asked here through ctypes.  Thai keeps libthai's
dictionary (tests/render/test_scripts.py checks it).
"""

from __future__ import annotations

import ctypes
import dataclasses
from pathlib import Path

import pytest

from stagedoor import _render
from stagedoor.demo.orders import demo_order
from stagedoor.render import fonts, reference, tables
from stagedoor.render.order import Order
from stagedoor.render.shaped import faces, layout, libs
from tests.support.pdftools import qpdf_check

FIELDS = [name for name, _ in tables.FIELDS] + ["small_print"]

# (locale, text): each repeated three times makes a field that takes two lines; where
# the greedy wrap fills a line, a cut by width alone falls inside a word or syllable
# (checked on the code before dictbreaks.pxi: the fields marked below were cut so)
CASES = {
    "myanmar": ("my", "မန္တလေးမြို့ရှိအမျိုးသားပြဇာတ်ရုံတွင်ရန်ကုန်ဂီတအဖွဲ့၏ဖျော်ဖြေပွဲ"),
    "myanmar-2": ("my", "ဒေါ်အောင်ဆန်းစုကြည်ရန်ကုန်တက္ကသိုလ်ဟောင်းကျောင်းသားများအသင်း"),
    "lao": ("lo", "ຫໍວັດທະນະທຳແຫ່ງຊາດນະຄອນຫຼວງວຽງຈັນສະຖານທີ່ຈັດງານສະແດງດົນຕີ"),
    "khmer": ("km", "សាលមហោស្រពជាតិនៅរាជធានីភ្នំពេញសម្រាប់ការប្រគុំតន្ត្រីបុរាណ"),
}
# the old code cut mid-word or mid-syllable: myanmar event, venue, buyer, section;
# myanmar-2 event, section; lao venue, buyer; khmer venue, buyer
WRAPPED = ("event", "venue", "buyer", "section")


def icu_boundaries(text: str) -> set[int]:
    """The boundaries ICU's line break iterator (UBRK_LINE, root locale) finds in text,
    as indices of the characters that start a piece (all BMP: UTF-16 units are
    characters)."""
    _, op, nxt, close = libs._libicu()  # the reference's binding of ubrk_*
    data = text.encode("utf-16-le")
    buf = ctypes.create_string_buffer(data)
    status = ctypes.c_int(0)
    bi = op(libs.UBRK_LINE, b"", buf, len(data) // 2, ctypes.byref(status))
    assert bi and status.value <= 0, status.value
    out = set()
    try:
        while (b := nxt(bi)) >= 0:
            out.add(b)
    finally:
        close(bi)
    return out


@pytest.mark.parametrize("field", WRAPPED)
@pytest.mark.parametrize("script", sorted(CASES))
def test_a_wrapped_field_breaks_at_dictionary_boundaries(script: str, field: str,
                                                         tmp_path: Path) -> None:
    locale, word = CASES[script]
    text = word * 3
    assert " " not in text
    base = demo_order(1).tickets[0]
    order = Order(order_id=base.order_id, locale=locale,
                  tickets=(dataclasses.replace(base, **{field: text}),))  # type: ignore[arg-type]
    data = _render.render_order(order)
    assert data == reference.render_order(order)
    qpdf_check(data, tmp_path)
    f = FIELDS.index(field)
    u = [ord(c) for c in text]
    out = layout.layout_field(faces.fonts_for(fonts.current()), layout.Registry(), f, u, [])
    assert len(out.lines) >= 2, "the field must wrap for this test to say anything"
    ends = [max(g.ci + g.cn for g in line.glyphs) for line in out.lines[:-1]]
    words = icu_boundaries(text)
    assert len(words) >= 8, words
    for e in ends:
        assert e in words, (e, text[max(0, e - 5):e] + "|" + text[e:e + 5], sorted(words))


def test_the_doctor_sees_the_dictionaries() -> None:
    """stagedoor doctor reports ICU's Lao, Myanmar and Khmer dictionaries as there (a
    trimmed ICU data build would make it warn), and the renderer as linking ICU."""
    from stagedoor.console.doctor import host
    from stagedoor.exitcodes import CHECK_OK

    finding = host.icu_dictionaries()
    assert finding is not None and finding.state == CHECK_OK, finding
    for _, text, want in host.DICTIONARY_SAMPLES:
        assert set(want) <= set(_render.dictionary_breaks(text)), text
        assert set(want) <= {b for b in icu_boundaries(text) if 0 < b < len(text)}, text
    assert {"icuuc", "icudata"} <= set(host.loaded_libraries())


def killed_consonant(text: str, n: int) -> bool:
    """text[n] is a Myanmar consonant its asat kills (maybe under a dot below): it ends
    the syllable before it (ကုန်), so no cut may come before it."""
    k = n + 1
    while k < len(text) and text[k] == "\u1037":
        k += 1
    return "\u1000" <= text[n] <= "\u1021" and k < len(text) and text[k] == "\u103a"


MYANMAR_WORDS = ["ရန်ကုန်", "မန္တလေး", "မြို့တော်", "ခန်းမ", "ကျင်းပ", "ဖျော်ဖြေပွဲ", "လက်မှတ်",
                 "အမျိုးသား", "ပြဇာတ်ရုံ", "တွင်"]


@pytest.mark.parametrize("field", ["row", "seat", "section", "price", "event", "buyer"])
def test_no_cut_or_ellipsis_inside_a_myanmar_syllable(field: str) -> None:
    """Line ends and ellipsis cuts in narrow and wide fields never fall inside a
    syllable, before a consonant its asat kills (`ကု` / `န်`): every one of these
    fields had such cuts before (no dictionary breaks).  Where no dictionary break fits
    at all, the cluster-boundary fallback (boundary()) keeps such a consonant with its
    syllable too: test_boundary_keeps_a_killed_consonant_with_its_syllable."""
    import random

    rnd = random.Random(3)
    base = demo_order(1).tickets[0]
    fs = faces.fonts_for(fonts.current())
    f = FIELDS.index(field)
    for _ in range(12):
        text = "".join(rnd.choice(MYANMAR_WORDS) for _ in range(40))
        order = Order(order_id=base.order_id, locale="my",
                      tickets=(dataclasses.replace(base, **{field: text}),))  # type: ignore[arg-type]
        assert _render.render_order(order) == reference.render_order(order)
        reg = layout.Registry()
        out = layout.layout_field(fs, reg, f, [ord(c) for c in text], [])
        start = 0
        for line in out.lines:
            texts = [reg.entries[g.code][2] for g in line.glyphs]
            if (0x2026,) in texts:
                # an ellipsis line is shaped from its own text, text[start:cut] + "…"
                last = max(g.ci for g, t in zip(line.glyphs, texts, strict=True)
                           if t == (0x2026,))
                end = start + max(g.ci + g.cn for g in line.glyphs if g.cn and g.ci < last)
            else:
                end = max(g.ci + g.cn for g in line.glyphs if g.cn)
            assert end >= len(text) or not killed_consonant(text, end), (
                field, text[max(0, end - 5):end] + "|" + text[end:end + 5])
            start = end


def test_boundary_keeps_a_killed_consonant_with_its_syllable() -> None:
    """boundary() (clusters.pxi, and shaped.layout.boundary, which the byte comparisons
    hold the native one to): no cut before န in ကုန် (with asat, and with a dot below
    and asat), one before the next syllable's consonant."""
    for word in ("ရန်ကုန်", "ကုန့်ကြမ်း"):
        u = [ord(c) for c in word]
        cuts = [n for n in range(1, len(u)) if layout.boundary(u, n)]
        for n in cuts:
            assert not killed_consonant(word, n), (word[:n] + "|" + word[n:])
    u = [ord(c) for c in "ရန်ကုန်"]
    assert layout.boundary(u, 3)          # ရန် | ကုန်
    assert not layout.boundary(u, 1)      # ရ | န်
    assert not layout.boundary(u, 5)      # ရန်ကု | န်


def test_pooled_iterators_and_the_wrap_cache_give_a_fresh_iterators_breaks() -> None:
    """ICU's iterators are pooled and reset per run (ubrk_setText) and a wrapped field's
    breaks are cached per text (dictbreaks.pxi): from 4 threads at once, over texts of
    every script and length, each answer is what a new iterator gives, and rendering
    the same wrapped fields again (a cache hit) writes the same bytes."""
    import concurrent.futures

    texts = [text[k:] * r for _, text in CASES.values()
             for k in (0, 3, 11) for r in (1, 2)]
    want = {t: sorted(b for b in icu_boundaries(t) if 0 < b < len(t)) for t in texts}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(_render.dictionary_breaks, texts * 8))
    assert got == [want[t] for t in texts * 8]
    base = demo_order(1).tickets[0]
    orders = [Order(order_id=base.order_id, locale=locale, tickets=(
        dataclasses.replace(base, **{field: text * 3}),))  # type: ignore[arg-type]
        for locale, text in CASES.values() for field in ("venue", "buyer")]
    first = [_render.render_order(o) for o in orders]
    assert [_render.render_order(o) for o in orders] == first
