"""stagedoor: a supervised fleet of Redis-stream workers that render ticket PDFs.

The public API, for producers and handler authors (README "Producing jobs", "Handlers"):

    from stagedoor import config, make_job, sync_client, enqueue_sync
    from stagedoor import handler, Registry, Context, TransientError, PermanentError
    from stagedoor import StagedoorError    # the base of every error stagedoor raises

The names are resolved on first use, so `import stagedoor` stays cheap for the
supervisor (which must not load redis-py's machinery it does not use) and for the
native extension.  Where each lives:

    stream/      job boundary, producer, Redis clients, the lean hot-path connection
    worker/      one worker process: lifecycle, reader, redelivery, dispatch, acks, policy
    handlers/    the handler API: registry, context, done marks, the registry a worker runs
    tickets/     the ticket application: its handlers, the order store, durable files,
                 the render process
    render/      renderer(), the pure-Python reference, QR; _render.pyx is native
    supervisor/  the process tree: select loop, pool, pure decisions, reporting, systemd
    telemetry/   what the worker and supervisor report: metrics, logs, traces, the
                 queue's numbers, the Prometheus exporter (below the console)
    console/     the operator's queries and actions, shared by cli/ and web/: jobs,
                 pending, dead letters, fleet and pause, status --check, doctor
    cli/         `stagedoor` and `stagedoor-supervise`
    web/         the operator's console (`stagedoor web`)
    demo/        demo orders and an embedded redis-server (demo and tests only)
    config/      settings (every layer reads them); errors.py (the error classes every
                 layer shares, the handler API's among them); exitcodes.py (the exit
                 code contract between workers, the supervisor, the cli and the systemd
                 unit); backoff.py (the one exponential backoff every layer waits with)

    and beside them: version.py (__version__, read by the layers below this facade);
    public.py (public names resolved on first use, here and in handlers/ and render/);
    redaction.py (secrets masked out of every output); proctitle.py (process titles in
    `ps`); thai_dictionary.py (where libthai finds its word-break dictionary);
    _render.pyx (the native renderer, with _render.pxd, _render.pyi and _pthread.pxd)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .public import resolve_public
from .thai_dictionary import use_packaged as _use_packaged_thai_dictionary
from .version import __version__

# before any renderer loads libthai: the repaired wheel's dictionary when the host has none
_use_packaged_thai_dictionary()

# public name -> the module that defines it
_PUBLIC = {
    "Job": "stagedoor.stream.job",
    "MalformedJob": "stagedoor.errors",
    "make_job": "stagedoor.stream.job",
    "parse_job": "stagedoor.stream.job",
    "enqueue": "stagedoor.stream.queue",
    "enqueue_many": "stagedoor.stream.queue",
    "enqueue_sync": "stagedoor.stream.queue",
    "ensure_group": "stagedoor.stream.queue",
    "ensure_group_sync": "stagedoor.stream.queue",
    "async_client": "stagedoor.stream.connection",
    "sync_client": "stagedoor.stream.connection",
    "TransientError": "stagedoor.errors",
    "PermanentError": "stagedoor.errors",
    "StagedoorError": "stagedoor.errors",
    "Context": "stagedoor.handlers",
    "Registry": "stagedoor.handlers",
    "handler": "stagedoor.handlers",
}

__all__ = [  # noqa: RUF022 (grouped by module, as _PUBLIC)
    "__version__", "config",
    "Job", "MalformedJob", "make_job", "parse_job",
    "enqueue", "enqueue_many", "enqueue_sync", "ensure_group", "ensure_group_sync",
    "async_client", "sync_client",
    "TransientError", "PermanentError", "StagedoorError",
    "Context", "Registry", "handler",
]

if TYPE_CHECKING:
    from . import config
    from .errors import MalformedJob, PermanentError, StagedoorError, TransientError
    from .handlers import Context, Registry, handler
    from .stream.connection import async_client, sync_client
    from .stream.job import Job, make_job, parse_job
    from .stream.queue import (
        enqueue,
        enqueue_many,
        enqueue_sync,
        ensure_group,
        ensure_group_sync,
    )


def __getattr__(name: str) -> object:
    if name == "config":
        return importlib.import_module("stagedoor.config")
    return resolve_public(_PUBLIC, globals(), "stagedoor", name)
