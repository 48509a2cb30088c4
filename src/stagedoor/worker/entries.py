"""The per-entry fast path, if the extension is built: `fast_job(fields, kind_names, max)`
`FastDispatch`, and the read-ahead's `Streak` and `ReplyWait`.

stagedoor.worker._entries (Cython) turns the common entry into a Job without
parse_job's Python calls, and FastDispatch runs a reply's first deliveries from there to their ack
(dispatch.py says when); without it (a checkout that was never built) the worker runs
on parse_job and Dispatcher.handle alone and says so once at boot (FAST_PATH_ERROR), as
it does for the renderer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..stream.job import Job

FastJob = Callable[[object, dict[bytes, str], int], Job | None]

fast_job: FastJob | None
FastDispatch: Any
pack_xack: Callable[[bytes, bytes, list[bytes]], bytes] | None
Streak: Any
CReplyWait: Any
try:
    from ._entries import FastDispatch, Streak, fast_job, pack_xack
    from ._entries import ReplyWait as CReplyWait
    FAST_PATH_ERROR = ""
except ImportError as e:  # pragma: no cover - a checkout whose extensions were not built
    fast_job = None
    FastDispatch = None
    pack_xack = None
    Streak = None
    CReplyWait = None
    FAST_PATH_ERROR = str(e)
