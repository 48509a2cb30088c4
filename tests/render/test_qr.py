"""The QR encoders (stagedoor.render.qr and the C one in stagedoor._render) against zxing-cpp.

zxing-cpp is an independent decoder: a symbol it reads back to the same bytes, with the
version and error correction level we meant, was encoded right (format and version
information, Reed-Solomon blocks, interleaving, masking).  The two encoders must also
agree module for module, on every version, since the PDFs must be byte-identical.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
import zxingcpp
from PIL import Image

from stagedoor import _render
from stagedoor.render import qr


def symbol_image(matrix: list[list[bool]], scale: int = 4) -> Image.Image:
    n = len(matrix)
    side = (n + 8) * scale
    img = Image.new("L", (side, side), 255)
    for y, row in enumerate(matrix):
        for x, dark in enumerate(row):
            if dark:
                img.paste(0, ((x + 4) * scale, (y + 4) * scale,
                              (x + 5) * scale, (y + 5) * scale))
    return img


def decode(matrix: list[list[bool]]) -> zxingcpp.Barcode:
    found = zxingcpp.read_barcodes(symbol_image(matrix))
    assert len(found) == 1, "zxing-cpp found no (or more than one) QR code"
    return found[0]


def extra(code: zxingcpp.Barcode) -> dict[str, Any]:
    return cast(dict[str, Any], code.extra)


def payload(n: int) -> bytes:
    return ("SD-" + "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ" * 80)[:n].encode()


# (length in bytes of ASCII data, the version level M needs for it)
VERSION_CASES = [(1, 1), (14, 1), (15, 2), (26, 2), (27, 3), (62, 4), (63, 5), (84, 5),
                 (85, 6), (122, 7), (152, 8), (180, 9), (213, 10), (251, 11), (400, 15),
                 (1000, 26), (2331, 40)]


@pytest.mark.parametrize(("n", "version"), VERSION_CASES)
def test_version_is_the_smallest_that_fits(n: int, version: int) -> None:
    assert qr.choose_version(payload(n)) == version
    assert len(_render.qr_matrix(payload(n))) == 4 * version + 17


@pytest.mark.parametrize(("n", "version"), VERSION_CASES)
def test_zxing_decodes_native_symbol(n: int, version: int) -> None:
    data = payload(n)
    code = decode(_render.qr_matrix(data))
    assert code.bytes == data
    assert code.text == data.decode()
    assert code.ec_level == "M"
    assert extra(code)["Version"] == str(version)


@pytest.mark.parametrize("n", [1, 15, 63, 122, 213, 400])
def test_native_equals_reference(n: int) -> None:
    for data in (payload(n), bytes(range(256)) * (n // 256) + bytes(range(n % 256))):
        assert _render.qr_matrix(data) == qr.encode(data)


def test_native_equals_reference_every_version() -> None:
    # the C code has a bitset fast path up to version 10 and a scalar one above
    for ver in range(1, 41):
        n = qr.data_codewords(ver) - 3  # fills version ver, the largest that fits it
        data = payload(n)
        assert qr.choose_version(data) == ver
        assert _render.qr_matrix(data) == qr.encode(data), ver


def test_the_chosen_mask_has_the_lowest_penalty() -> None:
    data = payload(40)
    ver = qr.choose_version(data)
    codewords = qr.add_ecc_and_interleave(qr.data_codeword_bytes(data, ver), ver)
    scores = []
    for mask in range(8):
        m = qr._Matrix(ver)
        m.draw_function_patterns()
        m.draw_codewords(codewords)
        m.apply_mask(mask)
        m.draw_format_bits(mask)
        scores.append(m.penalty())
    best = scores.index(min(scores))
    assert extra(decode(qr.encode(data)))["DataMask"] == best
    assert len(set(scores)) > 1  # the rules do tell the masks apart


def test_non_ascii_is_utf8_with_eci() -> None:
    text = "Zoë Łukasz Żółć 李"
    code = decode(_render.qr_matrix(text.encode()))
    assert code.text == text


def test_empty_and_too_long() -> None:
    assert _render.qr_matrix(b"") == qr.encode(b"")
    assert len(qr.encode(b"")) == 21
    with pytest.raises(ValueError, match="QR data too long"):
        _render.qr_matrix(payload(2332))
    with pytest.raises(ValueError, match="QR data too long"):
        qr.encode(payload(2332))


def test_known_symbol_structure() -> None:
    m = _render.qr_matrix(b"HELLO")
    assert len(m) == 21
    finder = [[max(abs(x - 3), abs(y - 3)) not in (2, 4) for x in range(7)] for y in range(7)]
    assert [row[:7] for row in m[:7]] == finder
    assert [row[-7:] for row in m[:7]] == finder
    assert [row[:7] for row in m[-7:]] == finder
    assert [m[6][x] for x in range(8, 13)] == [True, False, True, False, True]  # timing
    assert m[21 - 8][8]  # the dark module
