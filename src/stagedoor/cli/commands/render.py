"""`stagedoor render ORDER.json -o out.pdf`: render an order's tickets to a PDF file.

The same renderer the worker uses (the native one when it is built, else the pure
Python reference, with a warning), without Redis: for checking an order by hand, for
the layout, and for comparing the two renderers (`--reference`).  Exit codes follow
sysexits: 65 bad order data, 66 input unreadable, 73 output not writable.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ... import render
from ...exitcodes import EX_CANTCREAT, EX_DATAERR, EX_NOINPUT
from ...render import reference
from ...render.order import Order, OrderDataError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "render", help="Render an order (JSON) to a PDF, one page per ticket.",
        description="Read an order as JSON (the format the order store keeps: order_id "
        "and a list of tickets; see src/stagedoor/demo/order.json) and write its tickets "
        "as a PDF, one page per ticket with a QR code of the admission code. Uses the "
        "native renderer when it is built, else the pure-Python reference (with a "
        "warning). Exit status 65 for order data that is not an order, 66 when the input "
        "cannot be read, 73 when the output cannot be written.")
    p.add_argument("order", metavar="ORDER.json", help="The order to render; - reads stdin.")
    p.add_argument("-o", "--output", metavar="OUT.pdf", required=True,
                   help="Where to write the PDF (replaced atomically).")
    p.add_argument("--reference", action="store_true",
                   help="Use the pure-Python reference renderer even if the native one "
                   "is built (same bytes, much slower).")
    p.set_defaults(func=run)


def _fail(message: str, code: int) -> int:
    print(f"stagedoor render: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    try:
        raw = sys.stdin.buffer.read() if args.order == "-" else Path(args.order).read_bytes()
    except OSError as e:
        return _fail(f"cannot read {args.order}: {e.strerror or e}", EX_NOINPUT)
    try:
        order = Order.from_json(raw)
    except OrderDataError as e:
        return _fail(str(e), EX_DATAERR)
    fn: render.RenderFn
    if args.reference:
        fn, which = reference.render_order, "reference"
    else:
        fn = render.renderer()
        which = "native" if render.native_available() else "reference"
        why = render.native_import_error()
        if why:
            print(f"stagedoor render: warning: {why}", file=sys.stderr)
    try:
        pdf = fn(order)
    except ValueError as e:
        return _fail(str(e), EX_DATAERR)
    out = Path(args.output)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(pdf)
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        return _fail(f"cannot write {out}: {e.strerror or e}", EX_CANTCREAT)
    pages = len(order.tickets)
    print(f"{out}: order {order.order_id}, {pages} page{'s' if pages != 1 else ''}, "
          f"{len(pdf)} bytes ({which} renderer)")
    return 0
