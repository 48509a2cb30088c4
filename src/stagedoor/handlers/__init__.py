"""Handlers by kind: what a handler author imports.

    from stagedoor.handlers import handler, Registry, Context, TransientError, PermanentError

- registry.py  Registry (kind -> handler), @handler
- context.py   Context: what a handler gets besides its job (Redis, settings, the
               thread pool, idempotency by outbox_id)
- marks.py     how long a done mark lives: the stream's window, read in the background
- loading.py   the registry a worker runs: the built-ins merged with the --handlers
               `module:attr` plugins, old spec names resolved (MOVED)

The built-in handlers are an application on this API, stagedoor.tickets (its handlers,
order store, durable files and render process), loaded by their spec like a plugin:
nothing here imports it (tests/package/test_layers.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..public import resolve_public

# public name -> the module that defines it.  Resolved on first use, so that a caller of
# one module here (the CLI's `work` and `enqueue` import loading.py, for --help too) does
# not load context.py, and redis-py's machinery with it.
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
