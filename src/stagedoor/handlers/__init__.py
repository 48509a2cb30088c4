"""Handlers by kind: what a handler author imports.

    from stagedoor.handlers import handler, Registry, Context, TransientError, PermanentError

- registry.py  Registry (kind -> handler), @handler, loading `module:attr` plugins
- context.py   Context: what a handler gets besides its job (Redis, settings, the
               thread pool, idempotency by outbox_id)
- marks.py     how long a done mark lives: the stream's window, read in the background
- loading.py   the registry a worker runs: the built-ins (stagedoor.tickets) merged with
               --handlers plugins

The ticket application that uses this API (its handlers, order store, durable files and
render process) is stagedoor.tickets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..public import resolve_public

# public name -> the module that defines it.  Resolved on first use, so that the render
# process (render_serve.py), which imports this package's file and render modules only,
# does not load redis-py's machinery at its start (~130 ms of its ~300 here).
_PUBLIC = {
    "PermanentError": "stagedoor.errors",
    "TransientError": "stagedoor.errors",
    "Context": "stagedoor.handlers.context",
    "Handler": "stagedoor.handlers.registry",
    "Registry": "stagedoor.handlers.registry",
    "handler": "stagedoor.handlers.registry",
    "load_registry": "stagedoor.handlers.loading",
}

__all__ = ["Context", "Handler", "PermanentError", "Registry", "TransientError", "handler",
           "load_registry"]

if TYPE_CHECKING:
    from ..errors import PermanentError, TransientError
    from .context import Context
    from .loading import load_registry
    from .registry import Handler, Registry, handler


def __getattr__(name: str) -> object:
    return resolve_public(_PUBLIC, globals(), __name__, name)
