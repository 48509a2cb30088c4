"""Handlers for the supervisor tests, loaded in the workers with
--handlers tests.support.handlers.basic:registry (PYTHONPATH includes the repo root).

Every handler appends a line "<event> <pid> <unix time>" to <SUP_TEST_MARKS>/<outbox_id>.log,
so a test sees each delivery (start) and each completion (done) of a job, by which
process, and when.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from stagedoor.errors import PermanentError
from stagedoor.handlers import Context, Registry
from stagedoor.stream.job import Job

registry = Registry()


def mark(job: Job, event: str, extra: str = "") -> None:
    folder = os.environ.get("SUP_TEST_MARKS")
    if not folder:
        return
    line = f"{event} {os.getpid()} {time.time():.6f}{' ' + extra if extra else ''}\n"
    fd = os.open(os.path.join(folder, f"{job.outbox_id}.log"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@registry.register("noop")
async def noop(job: Job, ctx: Context) -> None:
    mark(job, "done")


@registry.register("slow")
async def slow(job: Job, ctx: Context) -> None:
    mark(job, "start")
    await asyncio.sleep(float(os.environ.get("SUP_TEST_SLOW", "1.0")))
    mark(job, "done")


@registry.register("refuse")
async def refuse(job: Job, ctx: Context) -> None:
    """Fails for good at once (dead-lettered, counted failed), after SUP_TEST_SLOW/10."""
    mark(job, "start")
    await asyncio.sleep(float(os.environ.get("SUP_TEST_SLOW", "1.0")) / 10)
    mark(job, "refused")
    raise PermanentError(f"order {job.order_id} refused on purpose")


@registry.register("envdump")
async def envdump(job: Job, ctx: Context) -> None:
    mark(job, "done", f"NOTIFY_SOCKET={os.environ.get('NOTIFY_SOCKET', '')}"
                      f" WATCHDOG_USEC={os.environ.get('WATCHDOG_USEC', '')}")


@registry.register("crash")
async def crash(job: Job, ctx: Context) -> None:
    """A job that kills every worker that takes it (the poison of the seed)."""
    mark(job, "start")
    os.kill(os.getpid(), signal.SIGKILL)


@registry.register("block")
async def block(job: Job, ctx: Context) -> None:
    """Blocks the event loop itself: the worker is hung, its heartbeats stop."""
    mark(job, "start")
    time.sleep(float(os.environ.get("SUP_TEST_BLOCK", "60")))  # noqa: ASYNC251 - on purpose


@registry.register("settingsdump")
async def settingsdump(job: Job, ctx: Context) -> None:
    mark(job, "done", f"count={ctx.settings.count} consumer={ctx.consumer}")
