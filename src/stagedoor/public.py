"""A package's public names resolved on first use (PEP 562 `__getattr__`), so that
importing a package costs only what its caller uses: the CLI's `--version`, a worker's
start and the render process (tickets/render_serve.py) do not load redis-py's machinery
for names they never touch.  Below every package that uses it: it imports nothing of
stagedoor."""

from __future__ import annotations

import importlib


def resolve_public(public: dict[str, str], scope: dict[str, object], package: str,
                   name: str) -> object:
    """A package's __getattr__ (PEP 562): its public `name` from the module `public`
    names, imported on first use and then kept in the package's `scope`."""
    module = public.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    scope[name] = value
    return value
