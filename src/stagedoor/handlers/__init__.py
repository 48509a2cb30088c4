"""Handlers by kind: what a handler author imports.

    from stagedoor.handlers import handler, Registry, Context, TransientError, PermanentError

- registry.py  Registry (kind -> handler), @handler, loading `module:attr` plugins
- context.py   Context: what a handler gets besides its job (Redis, settings, the
               thread pool, idempotency by outbox_id)
- marks.py     how long a done mark lives: the stream's window, read in the background
- tickets.py   the built-in handlers, render_tickets and refund
- loading.py   the registry a worker runs: the built-ins merged with --handlers plugins
- files.py     atomic writes, paths confined to the tickets directory, stale-tmp sweep
- durable.py   the directory fsync shared by the renames that land together
- _durable.pyx the same durable write and group commit in C, the GIL released once a
               file, and the sink the render pool writes through
- render_pool.py   render_tickets' render and write on the native pool's C threads
- render_host.py   the worker's side of the render process (render_isolation):
                   started, fed, replaced when it dies or hangs, culprits run alone
- runstate.py     whether a process runs at all (stopped, frozen by a cgroup, no CPU
                   time): read before render_host blames a render for a hang
- render_serve.py  the render process itself: render_pool behind a socket
- orders.py    the order store they read (a Redis hash per order)
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
