"""The registry a worker runs: the built-in handlers (the ticket application's,
BUILTIN) merged with each `--handlers module:attr` plugin, a later kind replacing an
earlier one.

The built-ins are loaded by their spec, as a plugin is, so the handler API (this
package) does not import the application built on it (stagedoor.tickets;
tests/package/test_layers.py keeps it so).  A spec naming a module that has moved (MOVED) is
loaded from where it lives now, with a warning that gives the new name."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import ConfigError
from .registry import Handler, Registry

log = logging.getLogger("stagedoor.handlers")

# the built-in handlers, render_tickets and refund (loaded on first use: they load the
# renderer, which `work --help` and `enqueue --help` must not pay: tests/cli/test_cli_imports.py)
BUILTIN = "stagedoor.tickets.handlers:registry"

# Modules that held handlers under an earlier name -> where they are now.  A spec in an
# operator's settings (handlers = [...], STAGEDOOR_HANDLERS, --handlers) keeps working
# across the move; the new name is the documented one.  Issue 40: the ticket
# application left handlers/ for tickets/, and tickets.py became tickets/handlers.py.
MOVED = {
    "stagedoor.handlers.tickets": "stagedoor.tickets.handlers",
}


def _as_registry(spec: str, obj: Any) -> Registry:
    if isinstance(obj, Registry):
        return obj
    marked = getattr(obj, "__stagedoor_handler__", None)
    if isinstance(marked, Handler):
        return Registry([marked])
    if isinstance(obj, Mapping) and all(callable(v) for v in obj.values()):
        return Registry(Handler(str(k), v) for k, v in obj.items())
    raise ConfigError(f"handlers: {spec!r} is not a Registry, a kind->handler mapping or a "
                      f"function marked with @handler")


def load_spec(spec: str) -> Registry:
    module_name, _, attr = spec.partition(":")
    moved = MOVED.get(module_name)
    if moved is not None:
        log.warning("handlers: %r has moved to %r; loading it from there (write the new "
                    "name in the settings)", spec, f"{moved}:{attr}")
        module_name = moved
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise ConfigError(f"handlers: cannot import {module_name!r}: "
                          f"{type(e).__name__}: {e}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"handlers: module {module_name!r} has no {attr!r}") from None
    return _as_registry(spec, obj)


def load_registry(specs: Iterable[str] = (), *, builtin: bool = True) -> Registry:
    """The built-in handlers, then each spec in order (a later kind replaces an earlier)."""
    registry = Registry()
    for spec in [BUILTIN, *specs] if builtin else specs:
        registry = registry.merged(load_spec(spec))
    return registry
