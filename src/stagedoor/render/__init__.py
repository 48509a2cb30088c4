"""Ticket PDFs: `renderer()` picks the native extension, else the pure-Python reference.

The package, one job per module:

- order.py      Order and Ticket, parsed and bounded: what a PDF is rendered from
- reference.py  the pure-Python renderer, byte-identical to the native one: test oracle
                and fallback
- qr.py         the QR encoder in pure Python (reference for the native one)
- tables.py     the tables both read: QR error correction, the static page content
- fontplan.py   a font plan and what one order asks of it (its Han and language faces,
                its shaping language), below both renderers
- fonts.py      which font file draws which script: the installed fonts and the settings
- installed.py  what the installed font files cover, script by script (cached)
- fastfont.py   the fast path's fonts: Noto Sans and its bold as Type 3 fonts
- emoji.py      which characters of a field form one emoji, for both renderers
- shaped/       the reference's shaped-text path (HarfBuzz, bidi, layout, Type 3 fonts),
                step by step what _native/ does in C
- _native/      the native extension's source: declarations of the C libraries it calls
                (.pxd) and its units by concern (.pxi), included by stagedoor/_render.pyx
                and compiled as `stagedoor._render` (its docstring lists each file)

`renderer()` returns the native `render_order` when the extension imports; when it does
not, the reference, and native_import_error() says why (the worker logs it loudly).
The reference (and its shaped-text modules) is imported only when it is asked for
(`renderer()` without the extension, `stagedoor.render.render_order`): a worker with the
native renderer never needs it, and it is a large share of the worker's own imports
(docs/benchmarks.md, "Moved from comments").
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from . import fontplan
from .order import Order

RenderFn = Callable[[Order], bytes]


def _default_plan() -> fontplan.FontPlan:
    """The settings' font plan (fonts.current) for a native render that was given none:
    fonts.py (the configuration, the installed fonts' coverage) imported on first use,
    since the reference renderer, which imports it, no longer is at import."""
    from .fonts import current  # not at import: render.order's importers skip fonts.py

    return current()


# Before the extension's first render: it imports this package (through tables.py) and
# asks fontplan.default() when nothing configured it (a test, a script of the user's).
fontplan.provide_default(_default_plan)

__all__ = ["RenderFn", "native_available", "native_import_error", "renderer"]


def __getattr__(name: str) -> RenderFn:
    """`render_order`: the pure-Python reference renderer, imported on first use."""
    if name == "render_order":
        from .reference import render_order  # not at import: the native renderer's start

        return render_order
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _native() -> tuple[RenderFn | None, str | None]:
    """(the native render_order or None, why not).  Looked up on first use, not at import:
    the extension reads tables.py from this package when it initialises, so importing
    it from here at import time would see it half-initialised when it is imported first."""
    try:  # optional, and a cycle at import: the extension imports this package
        from .._render import render_order as native
    except ImportError as e:  # not built: say why, the caller logs it loudly
        return None, (f"native renderer stagedoor._render not importable ({e}); "
                      "using the pure-Python reference renderer, about 100x slower. "
                      "Run `stagedoor doctor`: it says what this host lacks. Install the "
                      "manylinux wheel (it carries the native libraries; README Install), "
                      "or build it: pip install . (needs a C compiler, pkg-config and the "
                      "zlib, HarfBuzz, fribidi, libunibreak and libthai headers)")
    return native, None


def native_available() -> bool:
    return _native()[0] is not None


def native_import_error() -> str | None:
    """Why the native renderer is not used (None when it is)."""
    return _native()[1]


def renderer() -> RenderFn:
    """The native render_order when it imports, else the pure-Python reference (imported
    here, when it is needed: a cost of a render process's start otherwise, in
    docs/benchmarks.md)."""
    native = _native()[0]
    if native is not None:
        return native
    from .reference import render_order  # not at import: the render process's start

    return render_order
