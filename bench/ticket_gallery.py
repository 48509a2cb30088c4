"""The ticket images of docs/tickets/: `PYTHONPATH=src:. python -m bench.ticket_gallery`.

Renders, with the renderer the worker uses (the native one when it is built), one page
per script family with its hardest text (bench/ticket_corpus.py: stacked marks, tall
wrapped lines, right-to-left values in narrow columns, conjuncts cut by an ellipsis,
names of nothing but combining marks) and one per sample order of
src/stagedoor/demo/scripts/, rasterises each with poppler's pdftoppm at 150 dpi (so
that a reader can judge the marks; issue 39) and keeps 16 colours (PNGs the repository
can carry).  Options: --out DIR
(default docs/tickets), --dpi N.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

from bench import ticket_corpus
from stagedoor.render import renderer
from stagedoor.render.order import Order

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "src" / "stagedoor" / "demo" / "scripts"


def pages() -> dict[str, Order]:
    out = {f"family-{name}": order for name, order in ticket_corpus.orders().items()}
    for path in sorted(SAMPLES.glob("*.json")):
        out[path.stem] = Order.from_json(path.read_bytes())
    return out


def rasterise(pdf: bytes, png: Path, dpi: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t.pdf"
        src.write_bytes(pdf)
        subprocess.run(["pdftoppm", "-png", "-r", str(dpi), "-f", "1", "-l", "1",
                        "-singlefile", str(src), str(Path(tmp) / "page")], check=True)
        with Image.open(Path(tmp) / "page.png") as im:
            im.convert("RGB").quantize(colors=16).save(png, optimize=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "tickets")
    ap.add_argument("--dpi", type=int, default=150)
    args = ap.parse_args(argv)
    render = renderer()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, order in pages().items():
        png = args.out / f"{name}.png"
        rasterise(render(order), png, args.dpi)
        print(f"{png} {png.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
