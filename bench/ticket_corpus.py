"""Tickets with the hardest text of each script family: tall marks above and below,
stacked diacritics, wrapped tall lines, right-to-left values in narrow columns, cuts
inside conjuncts, and hostile names of nothing but combining marks.

One order of one ticket per family.  Read by tests/render/test_geometry.py (no glyph outside
its field's box, on both renderers) and by bench/ticket_gallery.py (docs/tickets/*.png).
Only scripts the configured faces cover (`stagedoor render --check-fonts`).
"""

from __future__ import annotations

import dataclasses

from stagedoor.render.order import Order, Ticket

BASE = Ticket(event="Stagedoor", venue="Hall", starts_at="2026-12-19 19:30", section="A",
              row="1", seat="1", buyer="Guest", price="EUR 10.00", order_id=2501,
              admission_code="SD-00002501-01-000000", small_print="Valid for one admission.")

# The stream-safe limit is 30 marks in a row; these go well past it.
TOWER = "\u0301\u0316" * 40                                   # 80 marks, no base letter
ZALGO = "Z" + "\u0336\u0337\u0338\u0334\u0335\u035c\u0361\u0489" * 6 + "algo"

FAMILIES: dict[str, dict[str, str]] = {
    # Vietnamese capitals with stacked diacritics, Greek with breathings, Cyrillic
    "latin-greek-cyrillic": {
        "event": "LỄ HỘI ÂM NHẠC ỄỂỖ — ᾪ Ἥ Ὦ",
        "venue": "NHÀ HÁT LỚN HÀ NỘI ỄỂỖ ẪẨẬ ỄỂỖ ẪẨẬ ỄỂỖ ẪẨẬ ỄỂỖ ẪẨẬ ỄỂỖ",
        "section": "ẪẨẬ Ỗ",
        "buyer": "NGUYỄN THỊ ỄỂỖ ỀỂỄ",
        "price": "Ἀθῆναι ᾯ",
        "small_print": "Йо́ркширский пу́динг. Ἐν ἀρχῇ ἦν ὁ λόγος. ỄỂỖ ẪẨẬ ỖỔỘ.",
    },
    # right-to-left values in narrow columns, beside the next column and the brand
    "arabic-hebrew": {
        "event": "حفل الأوركسترا السيمفونية الوطنية الكبرى في دار الأوبرا",
        "venue": "دار الأوبرا المصرية، القاهرة",
        "section": "الطابق العلوي الأيمن",
        "row": "١٢",
        "seat": "שׁוּרָה ז׳",  # noqa: RUF001
        "buyer": "مُحَمَّدٌ عَبْدُ ٱللَّٰهِ",
        "price": "۱٬۲۵۰٬۰۰۰ ریال",  # noqa: RUF001
        "small_print": "בְּרֵאשִׁית בָּרָא אֱלֹהִים — كُتِبَ بِالتَّشْكِيلِ الكَامِلِ",
    },
    # conjuncts, reph and below-base forms, and an ellipsis cut in नई दिल्ली
    "indic-north": {
        "event": "राष्ट्रीय नाट्य विद्यालय — স্ক্র্যাপ — ਕ੍ਰਿਸ਼ਨ",
        "venue": "नई दिल्ली " * 24,     # the old cut: "नई दिल्…"
        "section": "ક્ષ્ત્ર્ય",
        "buyer": "ଓଡ଼ିଆ ସ୍ତ୍ରୀ শ্রীমতী",
        "price": "₹ १,२५०",
        "small_print": "द्वारा क्ष्म्य्र " * 6,
    },
    "indic-south": {
        "event": "கர்நாடக சங்கீதம் — శ్రీ త్యాగరాజ",
        "venue": "ನೆಳುಮ್ ಕ್ಷ್ಮ್ಯ ರಂಗಮಂದಿರ — ശ്രീ ക്ഷേത്രം",
        "section": "ඉහළ මහල ශ්‍රී",
        "buyer": "ශ්‍රී ලංකා ද්‍රව්‍ය ක්‍ෂේ",
        "price": "ரூ 1,250",
        "small_print": "ශ්‍රී ලංකා " * 20,
    },
    # stacked vowels and tone marks, and wrapped tall lines
    "southeast-asian": {
        "event": "ກອງປະຊຸມ ຄອນເສີດ ຊາດລາວ ສູ່ເທິງ",
        "venue": "ရန်ကုန်မြို့ အမျိုးသားကဇာတ်ရုံ ကြည့်ရှုသူများ နွေဦးပွဲတော် ဂီတဖျော်ဖြေပွဲ " * 2,
        "section": "ຊັ້ນເທິງ ຂ້າງຂວາ",
        "seat": "ឆ្វេង ស្ត្រី",
        "buyer": "ကြည်ကြည်ဝင်း ညွှန့်ညွှန့် ပြုံး",
        "price": "ฟ้้้้ ปั๊ม ญู่ ฐู",
        "small_print": "ខ្ញុំស្រឡាញ់ព្រះរាជាណាចក្រកម្ពុជា " * 4,
    },
    "cjk": {
        "event": "國家大劇院 歌劇院 — 東京文化会館",
        "venue": "예술의전당 오페라극장 " * 4,
        "section": "二階 左側",
        "buyer": "김민준 · 山田 花子 · 王小明",
        "price": "¥ 12,000 円",
        "small_print": "チケットの転売は禁止されています。" * 4,
    },
    "armenian-georgian-ethiopic": {
        "event": "Երևանի օպերային թատրոն — ოპერის თეატრი",
        "venue": "አዲስ አበባ ብሔራዊ ቴአትር",
        "section": "ქვედა",
        "buyer": "Արամ Խաչատրյան ᲛᲮᲔᲓᲠᲣᲚᲘ",
        "price": "֏ 5000",
        "small_print": "Անվավեր առանց անձնագրի. ბილეთი ძალაშია. ትኬቱ የሚሰራው።",
    },
    # names of nothing but combining marks (zero advance, so they "fit"), Zalgo text
    "hostile": {
        "event": "A" + "\u0308\u0323" * 40,
        "venue": ZALGO,
        "section": "\u0e1f" + "\u0e49" * 40,
        "row": "1" + "\u0336" * 40,
        "seat": "\u0bcd" * 40,
        "buyer": TOWER,
        "price": "\u0653" * 60,
        "small_print": "x" + "\u0345" * 60 + " " + ZALGO,
    },
}


def family_order(family: str) -> Order:
    ticket = dataclasses.replace(BASE, **FAMILIES[family])
    return Order(order_id=ticket.order_id, tickets=(ticket,))


def orders() -> dict[str, Order]:
    return {family: family_order(family) for family in FAMILIES}
