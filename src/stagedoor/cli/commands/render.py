"""`stagedoor render ORDER.json -o out.pdf`: render an order's tickets to a PDF file.

The same renderer the worker uses (the native one when it is built, else the pure
Python reference, with a warning), with the same font settings, without Redis: for
checking an order by hand, for the layout, and for comparing the two renderers
(`--reference`).  `stagedoor render --check-fonts` lists, per script, the font that
draws it and the sample letters no configured font has.  Exit codes follow sysexits:
2 usage, 65 bad order data, 66 input unreadable, 69 a script without a font
(--check-fonts), 73 output not writable, 78 a bad font setting.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ... import config, render
from ...exitcodes import (
    EX_CANTCREAT,
    EX_CONFIG,
    EX_DATAERR,
    EX_NOINPUT,
    EX_UNAVAILABLE,
    EX_USAGE,
)
from ...render import fonts, reference
from ...render.order import Order, OrderDataError
from ...tickets.files import write_atomic
from ..flags import given, refuse


def register(sub: Any) -> None:
    p = sub.add_parser(
        "render", help="Render an order (JSON) to a PDF, one page per ticket.",
        description="Read an order as JSON (the format the order store keeps: order_id "
        "and a list of tickets; see src/stagedoor/demo/order.json) and write its tickets "
        "as a PDF, one page per ticket with a QR code of the admission code. Uses the "
        "native renderer when it is built, else the pure-Python reference (with a "
        "warning). Exit status 2 for a usage error, 65 for order data that is not an "
        "order, 66 when the input cannot be read, 69 when --check-fonts finds a script "
        "without a font, 73 when the output cannot be written, 78 for a bad font "
        "setting.")
    p.add_argument("order", metavar="ORDER.json", nargs="?",
                   help="The order to render; - reads stdin.")
    p.add_argument("-o", "--output", metavar="OUT.pdf",
                   help="Where to write the PDF (replaced atomically).")
    p.add_argument("--check-fonts", action="store_true",
                   help="List which font draws each script (and what no font has); "
                   "render nothing.")
    p.add_argument("--reference", action="store_true",
                   help="Use the pure-Python reference renderer even if the native one "
                   "is built (same bytes, much slower).")
    config.add_arguments(p, only=FONT_SETTINGS)
    p.set_defaults(func=run, parser=p)


FONT_SETTINGS = ("render_font_dirs", "render_fonts", "render_font_fallback",
                 "render_han_fonts", "render_han_order", "render_lang_fonts",
                 "render_font_discover", "render_emoji_fonts")


def check_fonts(plan: fonts.FontPlan) -> int:
    """Print one line per script Unicode defines: the font that draws it, what no font
    has.  Exit 69 when a script the settings name (or Han, or emoji) lacks a glyph;
    the scripts no installed font covers at all are named, on the last line."""
    rows = fonts.coverage(plan)
    required = fonts.required(plan)
    width = max(len(font) for _, font, _ in rows)
    failed = False
    for tag, font, lacking in rows:
        if not lacking:
            state = "ok"
        elif font == "-" and tag not in required:
            state = "NO FONT"
        else:
            state = f"MISSING {lacking}"
            failed = failed or tag in required
        print(f"{tag}  {font:{width}}  {state}")
    none = [tag for tag, font, lacking in rows if font == "-" and lacking]
    print(f"{len(rows) - len(none)} of {len(rows)} scripts have a font; none for: "
          f"{' '.join(none) or '-'}")
    warning = fonts.missing_warning(plan)
    if warning:
        print(f"stagedoor render: {warning}", file=sys.stderr)
    return EX_UNAVAILABLE if failed else 0


def _fail(message: str, code: int) -> int:
    print(f"stagedoor render: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    try:
        settings = config.from_args(args)
        plan = fonts.plan_for(settings)
    except config.ConfigError as e:
        return _fail(str(e), EX_CONFIG)
    fonts.use(plan)
    if args.check_fonts:  # renders nothing: the order, output and renderer would be ignored
        refuse(args.parser, given(args, ("order", "output", "reference")),
               "not allowed with --check-fonts (it renders nothing)")
        if not render.native_available():
            return _fail(f"--check-fonts needs the native renderer: "
                         f"{render.native_import_error()}", EX_UNAVAILABLE)
        return check_fonts(plan)
    if args.order is None or args.output is None:
        # as argparse says it (exit 2): they are required but for --check-fonts
        missing = " and ".join(n for n, v in (("ORDER.json", args.order),
                                              ("-o/--output", args.output)) if v is None)
        print(f"stagedoor render: error: the following arguments are required: {missing} "
              "(or --check-fonts)", file=sys.stderr)
        raise SystemExit(EX_USAGE)
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
    try:
        # The worker's own writer: its tmp file goes on every failure path.
        write_atomic(out, pdf, make_dirs=False)
    except OSError as e:
        return _fail(f"cannot write {out}: {e.strerror or e}", EX_CANTCREAT)
    pages = len(order.tickets)
    print(f"{out}: order {order.order_id}, {pages} page{'s' if pages != 1 else ''}, "
          f"{len(pdf)} bytes ({which} renderer)")
    return 0
