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
    ("venue", b"/F2 11 Tf 0 0 0 rg 24 227 Td"),
    ("starts_at", b"/F1 11 Tf 0 0 0 rg 24 201 Td"),
    ("section", b"/F2 11 Tf 0 0 0 rg 24 175 Td"),
    ("row", b"/F2 11 Tf 0 0 0 rg 130 175 Td"),
    ("seat", b"/F2 11 Tf 0 0 0 rg 180 175 Td"),
    ("buyer", b"/F2 11 Tf 0 0 0 rg 24 149 Td"),
    ("price", b"/F1 11 Tf 0 0 0 rg 24 123 Td"),
    ("order_id", b"/F1 11 Tf 0 0 0 rg 130 123 Td"),
    ("admission_code", b"/F2 10 Tf 0 0 0 rg 24 97 Td"),
)
SMALL_PRINT_OPS = b"/F1 5 Tf 0.3 0.3 0.3 rg 6 TL 24 80 Td"

HEADER = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
# Central European letters that WinAnsi lacks but the standard Helvetica fonts have:
# they take the codes WinAnsi leaves unused (C0 controls print as spaces, so 1-31 are
# free), through /Differences on top of /WinAnsiEncoding.  Order = code order.
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
ENCODING = (b"<< /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [1 "
            + b" ".join(b"/" + name.encode() for _, name in EXTRA_GLYPHS[:31])
            + b" 127 /" + EXTRA_GLYPHS[31][1].encode() + b" 129 /" + EXTRA_GLYPHS[32][1].encode()
            + b" 141 /" + EXTRA_GLYPHS[33][1].encode() + b" 143 /"
            + EXTRA_GLYPHS[34][1].encode() + b" /" + EXTRA_GLYPHS[35][1].encode() + b"] >>")

STATIC_OBJECTS = (
    b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n",
    b"3 0 obj\n<< /Font << /F1 4 0 R /F2 5 0 R >> >>\nendobj\n",
    b"4 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding "
    + ENCODING + b" >>\nendobj\n",
    b"5 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding "
    + ENCODING + b" >>\nendobj\n",
)
