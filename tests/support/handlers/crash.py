"""Handlers for the crash tests, run inside `stagedoor work` subprocesses.

`slow` writes <dir>/start-<outbox_id>-<pid> when it starts, then waits for the
file <dir>/release to exist, then writes <dir>/done-<outbox_id>-<pid>.  The test
kills the worker between the two.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from stagedoor.handlers import Registry
from stagedoor.stream.job import Job

registry = Registry()


def _dir() -> Path:
    return Path(os.environ["CRASH_TEST_DIR"])


@registry.register("slow", timeout=20)
async def slow(job: Job, ctx: object) -> None:
    d = _dir()
    (d / f"start-{job.outbox_id}-{os.getpid()}").touch()
    while not (d / "release").exists():  # noqa: ASYNC110 - another process writes it
        await asyncio.sleep(0.01)
    (d / f"done-{job.outbox_id}-{os.getpid()}").touch()
