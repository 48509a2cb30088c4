"""Helpers for the worker tests: a worker running in the test's loop, polling waits."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import redis

from stagedoor.config import Settings
from stagedoor.console import fleet
from stagedoor.console.client import console_client
from stagedoor.handlers import Registry
from stagedoor.stream import connection
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import enqueue_sync
from stagedoor.worker.loop import Worker
from tests.support.aclmode import worker_url


@contextlib.asynccontextmanager
async def running(settings: Settings, registry: Registry, *, slot: int = 0,
                  consumer: str | None = None, **more: Any) -> AsyncIterator[Worker]:
    worker = Worker(settings.replace(redis_url=worker_url(settings.redis_url)), registry,
                    slot=slot, consumer=consumer, **more)
    task = asyncio.create_task(worker.run())
    ready = asyncio.create_task(worker.ready.wait())
    await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED, timeout=10)
    if task.done():
        ready.cancel()
        task.result()
    try:
        yield worker
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 30)


async def eventually(predicate: Callable[[], Any | Awaitable[Any]], limit: float = 10,
                     what: str = "condition") -> Any:
    deadline = time.monotonic() + limit
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        await asyncio.sleep(0.01)


async def each_iteration_until(done: Callable[[], bool], limit: float = 10) -> None:
    """Look at `done` on every loop iteration (eventually() sleeps 10 ms between looks):
    a render's result or reply may be read in any of them."""
    async with asyncio.timeout(limit):
        while True:
            if done():
                return
            await asyncio.sleep(0)


def poll(predicate: Callable[[], Any], timeout: float = 10, what: str = "condition", *,
         interval: float = 0.01) -> Any:
    """Poll a condition until it is truthy and return it (never a bare sleep as sync)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def add_jobs(settings: Settings, kind: str, ids: range | list[int]) -> list[str]:
    client = connection.sync_client(settings, timeout=5)
    try:
        return enqueue_sync(client, settings,
                            [make_job(kind, i, i, f"req{i}", f"tr{i}") for i in ids])
    finally:
        client.close()


def raw(client: redis.Redis) -> redis.Redis:
    """The same connections, without redis-py's reply parsing (a dict hides duplicates)."""
    out = redis.Redis(connection_pool=client.connection_pool)
    for name in connection.RAW_COMMANDS:
        out.response_callbacks.pop(name, None)
    return out


def pending_summary(client: redis.Redis, settings: Settings) -> tuple[int, dict[str, int]]:
    count, _lo, _hi, consumers = raw(client).execute_command("XPENDING", settings.stream,
                                                        settings.group)
    return int(count), {c.decode(): int(n) for c, n in (consumers or [])}


def dead_entries(client: redis.Redis, settings: Settings) -> list[dict[bytes, bytes]]:
    return [dict(zip(f[::2], f[1::2], strict=True))
            for _id, f in raw(client).execute_command("XRANGE", settings.dead_stream, "-", "+")]


def kill_all_of(procs: Iterable[Any], timeout: float = 10) -> None:
    """SIGKILL every process of `procs` (psutil.Process handles, taken while they were
    known to be ours: psutil checks a handle's start time, so a recycled pid is never
    killed) and wait until each is gone (a zombie counts: its reaper is not ours).  A
    stopped one (SIGSTOP) is continued first, so that it dies now."""
    import psutil

    procs = list(procs)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(signal.SIGCONT)
            p.kill()
    # a handle no longer running is gone (or its pid is someone else's now)
    poll(lambda: gone([p.pid for p in procs if p.is_running()]), timeout,
         what="killed processes to be gone")


def gone(pids: Iterable[int]) -> bool:
    """Every process of pids has exited (a zombie counts as gone)."""
    import psutil

    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def live_children(pid: int, cmdline: str | None = None) -> list[Any]:
    """The children of pid that are running (not zombies), as psutil processes; those
    whose command line holds `cmdline` if given.  A child that exits between the
    listing and the look at it is gone, not an error (the render tests kill and reap
    them while they look)."""
    import psutil

    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in children:
        try:
            if c.status() == psutil.STATUS_ZOMBIE:
                continue
            if cmdline is not None and cmdline not in " ".join(c.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        out.append(c)
    return out


def read_fleet(settings: Settings) -> fleet.Fleet:
    """The fleet registry as `stagedoor status` and the console read it."""
    async def go() -> fleet.Fleet:
        c = console_client(settings)
        try:
            return await fleet.fleet(c, settings)
        finally:
            await c.aclose()
    return asyncio.run(go())
