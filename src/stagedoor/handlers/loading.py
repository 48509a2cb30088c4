"""The registry a worker runs: the built-in handlers (tickets.py) merged with each
`--handlers module:attr` plugin, a later kind replacing an earlier one.  Above both
registry.py and tickets.py (which registers on a Registry), so neither imports the other."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import ConfigError
from .registry import Handler, Registry


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
    if builtin:
        # here: the built-ins load the renderer (~350 ms), which `work --help` and
        # `enqueue --help`, importing this module, must not pay (bench.measure_startup)
        from ..tickets.handlers import registry as tickets

        registry = registry.merged(tickets)
    for spec in specs:
        registry = registry.merged(load_spec(spec))
    return registry
