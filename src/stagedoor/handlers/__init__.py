"""Handlers by kind: what a handler author imports.

    from stagedoor.handlers import handler, Registry, Context, TransientError, PermanentError

- registry.py  Registry (kind -> handler), @handler, loading `module:attr` plugins
- context.py   Context: what a handler gets besides its job (Redis, settings, the
               thread pool, idempotency by outbox_id)
- tickets.py   the built-in handlers, render_tickets and refund
- files.py     atomic writes, paths confined to the tickets directory, stale-tmp sweep
- orders.py    the order store they read (a Redis hash per order)
"""

from ..errors import PermanentError, TransientError
from .context import Context
from .loading import load_registry
from .registry import Handler, Registry, handler

__all__ = ["Context", "Handler", "PermanentError", "Registry", "TransientError", "handler",
           "load_registry"]
