"""Tables both renderers read: the QR error-correction table and the static PDF content.

One copy, read by the pure-Python reference (reference.py, qr.py) and, once at import,
by the native extension (_render.pyx copies them into C arrays and keeps the bytes
alive).  The byte-identity tests compare the two renderers' *algorithms*; these
tables are data, so a second hand-typed copy in the .pyx would only add a way to
disagree.  Geometry that the C code needs as compile-time constants (page size, QR
box, zlib parameters) stays in both, commented as mirrored.
"""

from __future__ import annotations

# Error correction codewords per block and number of blocks at level M, by version.
ECC_M_PER_BLOCK = (
    -1, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26,
    26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28)
ECC_M_BLOCKS = (
    -1, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
    17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49)

# Static content: drawn once, shared by every page (object 6).
STATIC_CONTENT = (
    b"q\n0.8 w 0 0 0 RG\n12 12 396 274 re S\n0.11 0.16 0.29 rg\n12 250 396 36 re f\nQ\n"
    b"BT\n/F2 8 Tf 1 1 1 rg\n1 0 0 1 340 264 Tm (STAGEDOOR) Tj\n"
    b"/F1 6.5 Tf 0.4 0.4 0.4 rg\n"
    b"1 0 0 1 24 238 Tm (VENUE) Tj\n"
    b"1 0 0 1 24 212 Tm (DATE / TIME) Tj\n"
    b"1 0 0 1 24 186 Tm (SECTION) Tj\n"
    b"1 0 0 1 130 186 Tm (ROW) Tj\n"
    b"1 0 0 1 180 186 Tm (SEAT) Tj\n"
    b"1 0 0 1 24 160 Tm (BUYER) Tj\n"
    b"1 0 0 1 24 134 Tm (PRICE) Tj\n"
    b"1 0 0 1 130 134 Tm (ORDER) Tj\n"
    b"1 0 0 1 24 108 Tm (ADMISSION CODE) Tj\n"
    b"ET\n"
)

# (font, size, colour, x, y) of each field, in Ticket order as drawn.
FIELDS: tuple[tuple[str, bytes], ...] = (
    ("event", b"/F2 14 Tf 1 1 1 rg 24 262 Td"),
    ("venue", b"/F2 11 Tf 0 0 0 rg 24 226 Td"),
    ("starts_at", b"/F1 11 Tf 0 0 0 rg 24 200 Td"),
    ("section", b"/F2 11 Tf 0 0 0 rg 24 174 Td"),
    ("row", b"/F2 11 Tf 0 0 0 rg 130 174 Td"),
    ("seat", b"/F2 11 Tf 0 0 0 rg 180 174 Td"),
    ("buyer", b"/F2 11 Tf 0 0 0 rg 24 148 Td"),
    ("price", b"/F1 11 Tf 0 0 0 rg 24 122 Td"),
    ("order_id", b"/F1 11 Tf 0 0 0 rg 130 122 Td"),
    ("admission_code", b"/F2 10 Tf 0 0 0 rg 24 97 Td"),
)
SMALL_PRINT_OPS = b"/F1 5 Tf 0.3 0.3 0.3 rg 6 TL 24 80 Td"

HEADER = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
# Central European letters that WinAnsi lacks (the standard Helvetica fonts had them,
# and the fast path kept them when it moved to Noto Sans, fastfont.py): they take the
# codes WinAnsi leaves unused (C0 controls print as spaces, so 1-31 are free).  Order =
# code order.
EXTRA_GLYPHS = (
    ("Ą", "Aogonek"), ("ą", "aogonek"), ("Ć", "Cacute"), ("ć", "cacute"),
    ("Ę", "Eogonek"), ("ę", "eogonek"), ("Ł", "Lslash"), ("ł", "lslash"),
    ("Ń", "Nacute"), ("ń", "nacute"), ("Ś", "Sacute"), ("ś", "sacute"),
    ("Ź", "Zacute"), ("ź", "zacute"), ("Ż", "Zdotaccent"), ("ż", "zdotaccent"),
    ("Č", "Ccaron"), ("č", "ccaron"), ("Ď", "Dcaron"), ("ď", "dcaron"),
    ("Ě", "Ecaron"), ("ě", "ecaron"), ("Ň", "Ncaron"), ("ň", "ncaron"),
    ("Ř", "Rcaron"), ("ř", "rcaron"), ("Ť", "Tcaron"), ("ť", "tcaron"),
    ("Ů", "Uring"), ("ů", "uring"), ("Ő", "Ohungarumlaut"), ("ő", "ohungarumlaut"),
    ("Ű", "Uhungarumlaut"), ("ű", "uhungarumlaut"), ("Đ", "Dcroat"), ("đ", "dcroat"),
)
EXTRA_CODES = (*range(1, 32), 0x7F, 0x81, 0x8D, 0x8F, 0x90)
# Objects 1 and 3; objects 4 and 5, the fast path's fonts F1 and F2 (the labels' too),
# are written per order from fastfont.py's pieces (Type 3, the glyphs the order shows).
STATIC_OBJECTS = (
    b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n",
    b"3 0 obj\n<< /Font << /F1 4 0 R /F2 5 0 R >> >>\nendobj\n",
)


# -- the layout of text that does not fit (both renderers; see render/_native/layout.pxi)

# Each field's box, in FIELDS order and then the small print: left and right edge and
# baseline in points, size in 1/1000 pt, bold (1) or regular, most lines.  Text that is
# wider than its box at its size is shrunk (to MIN_SIZE at least), then wrapped, then
# cut with an ellipsis.  The boxes keep MIN_GAP (below) clear of the header's
# STAGEDOOR (x 340), the QR code (x 288-404, y 130-246) and the next column.
FIELD_BOXES: tuple[tuple[int, int, int, int, int, int], ...] = (
    (24, 328, 262, 14000, 1, 2),    # event, in the header bar, MIN_GAP + 2 from STAGEDOOR
    (24, 278, 226, 11000, 1, 2),    # venue
    (24, 278, 200, 11000, 0, 2),    # starts_at
    (24, 120, 174, 11000, 1, 2),    # section
    (130, 170, 174, 11000, 1, 2),   # row
    (180, 278, 174, 11000, 1, 2),   # seat
    (24, 278, 148, 11000, 1, 2),    # buyer
    (24, 120, 122, 11000, 0, 2),    # price
    (130, 278, 122, 11000, 0, 2),   # order_id
    (24, 396, 97, 10000, 1, 2),     # admission_code (below the QR code)
    (24, 396, 80, 5000, 0, 11),     # small print: 6 pt leading, down to y = 20
)
MIN_SIZE = 6000

# Where each field's ink may go, up and down: (bottom, top) in 1/1000 pt, in FIELD_BOXES
# order.  A field's box runs from LABEL_CLEAR below its own label's ink down to
# LABEL_CLEAR above the ink of the next row's label: a label's ink (6.5 pt capitals and
# the slash of DATE / TIME; sized for Helvetica's, which Noto Sans' fit inside: 0.07 pt
# below to 4.72 pt above, fastfont.py) lies from LABEL_INK[0] below its baseline to
# LABEL_INK[1] above it.  The event stays inside the header bar (y 250-286), the small
# print above the border (y 12).  Was: from 0.3 pt under the label's baseline, room
# sized for Latin, in which Tibetan, Myanmar, Lao, Sinhala, Thai and Javanese marks came
# within a pixel of the label (issue 39); the values' baselines moved 1 pt down with it.
# The shaped path measures the ink of what it draws (each glyph's outline box, at its offset) and
# places, spaces and shrinks the lines so that all of it lies in here; the fast path
# takes only the codes whose glyph's ink stays in here (fastfont.inside).
# The least room, in 1/1000 pt, between a field's box and the box of the next column
# (section | row | seat, price | order_id), the QR code and the header's STAGEDOOR: a
# right-aligned value must not read as one phrase with its neighbour.
MIN_GAP = 10000
LABEL_INK = (150, 4800)     # a label's ink below and above its baseline, 1/1000 pt
LABEL_CLEAR = 1000          # the least air between a label's ink and a value's, 1/1000 pt


def _between(label_below: int, label_above: int) -> tuple[int, int]:
    """The ink box of a value between two labels' baselines (points)."""
    return (label_below * 1000 + LABEL_INK[1] + LABEL_CLEAR,
            label_above * 1000 - LABEL_INK[0] - LABEL_CLEAR)


FIELD_INK: tuple[tuple[int, int], ...] = (
    (251000, 285000),       # event
    _between(212, 238),     # venue: above DATE / TIME (212), below VENUE (238)
    _between(186, 212),     # starts_at: above SECTION (186)
    _between(160, 186),     # section: above BUYER (160)
    _between(160, 186),     # row
    _between(160, 186),     # seat
    _between(134, 160),     # buyer: above PRICE (134)
    _between(108, 134),     # price: above ADMISSION CODE (108)
    _between(108, 134),     # order_id
    (86000, 108000 - LABEL_INK[0] - LABEL_CLEAR),  # admission_code: above the small print
    (14000, 85000),         # small print
)
