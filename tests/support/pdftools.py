"""PDF checks with real tools, shared by the renderer tests: qpdf, poppler (pdftotext,
pdffonts, pdftoppm), pypdf, zxing-cpp."""

from __future__ import annotations

import io
import re
import subprocess
import zlib
from pathlib import Path

import pypdf
import zxingcpp
from PIL import Image


def qpdf_check(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "check.pdf"
    path.write_bytes(data)
    proc = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "No syntax or stream encoding errors found" in out, out
    assert "WARNING" not in out.upper(), out


def page_texts(data: bytes) -> list[str]:
    return [p.extract_text() for p in pypdf.PdfReader(io.BytesIO(data)).pages]


def pdftotext(data: bytes, tmp_path: Path) -> str:
    path = tmp_path / "text.pdf"
    path.write_bytes(data)
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], check=True,
                          capture_output=True, text=True).stdout


def scan(data: bytes, tmp_path: Path) -> list[list[str]]:
    """Rasterise at 150 dpi with pdftoppm, decode each page with zxing-cpp."""
    path = tmp_path / "scan.pdf"
    path.write_bytes(data)
    subprocess.run(["pdftoppm", "-r", "150", "-png", str(path), str(tmp_path / "page")],
                   check=True)
    pages = sorted(tmp_path.glob("page-*.png"))
    result = []
    for p in pages:
        with Image.open(p) as img:
            result.append([b.text for b in zxingcpp.read_barcodes(img)])
    return result


def content_streams(data: bytes) -> list[bytes]:
    """Every stream of the file, inflated."""
    return [zlib.decompress(m.group(2)) for m in re.finditer(
        rb"/Length (\d+) /Filter /FlateDecode >>\nstream\n(.*?)\nendstream", data, re.S)]


def strip_actual_text(data: bytes, tmp_path: Path) -> bytes:
    """The file with every /ActualText span taken out (streams re-deflated, the xref
    rebuilt by qpdf), so that only the fonts' ToUnicode maps give the text back."""
    def fix(m: re.Match[bytes]) -> bytes:
        body = zlib.decompress(m.group(2))
        body = re.sub(rb"/Span << /ActualText <[0-9A-F]*> >> BDC\n(.*?)EMC\n", rb"\1",
                      body, flags=re.S)
        # and the spans of single lines inside a field's BT .. ET (linetext.pxi)
        body = re.sub(rb" /Span << /ActualText <[0-9A-F]*> >> BDC(.*?) EMC", rb"\1",
                      body, flags=re.S)
        z = zlib.compress(body)
        return b"/Length %d /Filter /FlateDecode >>\nstream\n" % len(z) + z + b"\nendstream"
    out = re.sub(rb"/Length (\d+) /Filter /FlateDecode >>\nstream\n(.*?)\nendstream", fix,
                 data, flags=re.S)
    src, dst = tmp_path / "with-actual-text.pdf", tmp_path / "without-actual-text.pdf"
    src.write_bytes(out)
    proc = subprocess.run(["qpdf", str(src), str(dst)], capture_output=True, text=True)
    assert proc.returncode in (0, 3), proc.stderr   # 3: warned (the offsets it rebuilt)
    stripped = dst.read_bytes()
    assert b"ActualText" not in b"".join(content_streams(out))
    return stripped


def pdffonts(data: bytes, tmp_path: Path) -> list[list[str]]:
    """The rows of poppler's pdffonts: name, type..., emb, sub, uni, object, generation."""
    path = tmp_path / "fonts.pdf"
    path.write_bytes(data)
    out = subprocess.run(["pdffonts", str(path)], check=True, capture_output=True,
                         text=True).stdout
    return [line.split() for line in out.splitlines()[2:]]
