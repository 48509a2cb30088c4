"""What a handler gets besides its job: Redis, settings, the thread pool, idempotency.

Idempotency is by outbox_id (the job's identity, the seed's Topic 45): a handler
that has side effects calls `already_done` first and `mark_done` last.  The loop
itself does not check it, so a no-op handler pays nothing, and a handler that is
naturally idempotent need not care.

already_done also takes a lease on the outbox id (stagedoor:running:<id>, held for
the job's time limit), so two deliveries of one job cannot run their side effects
at once: the second gets a TransientError and is retried after the first finished
(and is then skipped as done).  The lease names its holder as `<consumer>/<entry
id>` (lease_holder): the same entry back under this consumer name (a retry, or a
previous life of this worker killed mid-job, redelivered from its own pending list)
takes it over at once, so a successor need not wait for the lease to run out; another
entry of the same outbox id waits, even in the same worker.

A delivery that ends without success (dead-lettered, left pending, judged poison)
runs nothing any more: the worker releases its lease (release_lease), only if the
lease still names this delivery, so a replay of dead letters or another worker's
reclaim runs at once instead of failing on "is running" until the lease runs out.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.asyncio as aioredis

from ..config import Settings
from ..errors import TransientError
from ..stream import keys
from ..stream.job import Job
from ..stream.resp import FastConnection
from ..telemetry.logs import current_job
from ..telemetry.metrics import WorkerStats
from .marks import MarkWindow

T = TypeVar("T")


@dataclass
class Context:
    """What a handler gets besides its job; one per worker, shared by its handlers.

    Attributes:
        settings: the worker's Settings (stream names, time limits, ...).
        redis: the worker's asyncio redis-py client (100 ms calls); use it for the
            handler's own keys (settings.key(...) names them under the prefix).
        consumer: this worker's consumer name (stable per supervisor slot).
        executor: the worker's thread pool (render_threads); reach it through
            `to_thread`, never block the event loop with CPU or file work.
        stats: the worker's counters; `stats.inc(name, kind)` counts in the metrics.
        log: a logger ("stagedoor.handler"); any logger will do: every line logged
            while a job runs carries its request_id, trace, ids and kind, and every
            `extra=` is kept (docs/handlers.md, Logging).
        state: per-worker handler state (clients, caches) built on first use.

    Idempotency is by the job's outbox_id: call `already_done(job)` first (it also
    takes the lease that keeps two deliveries of one job from running at once) and
    `mark_done(job)` last.  A handler raises TransientError to be retried,
    PermanentError to be dead-lettered.
    """

    settings: Settings
    redis: aioredis.Redis  # the 100 ms client
    consumer: str
    executor: ThreadPoolExecutor
    stats: WorkerStats
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("stagedoor.handler"))
    state: dict[str, Any] = field(default_factory=dict)  # per-worker handler state

    def lean(self) -> FastConnection:
        """The handlers' own lean connection (resp.FastConnection), opened on first use.

        One connection for every handler of this worker: a call writes once and its
        reply comes back in order, so concurrent handlers share it without a pool."""
        conn = self.state.get("lean")
        if conn is None:
            conn = self.state["lean"] = FastConnection(
                self.settings, timeout=self.settings.socket_timeout,
                name=self.consumer + ":handlers")
        assert isinstance(conn, FastConnection)
        return conn

    def on_close(self, fn: Callable[[], Any]) -> None:
        """Call `fn` (no arguments; a coroutine function is awaited) when the worker
        stops, after its jobs ended: for what a handler started (a pool, a client)."""
        self.state.setdefault("on_close", []).append(fn)

    async def aclose(self) -> None:
        """Close what the handlers opened (the worker calls this when it stops)."""
        for fn in reversed(self.state.pop("on_close", [])):
            try:
                done = fn()
                if asyncio.iscoroutine(done):
                    await done
            except Exception:
                logging.getLogger("stagedoor.handlers").exception("closing %r failed", fn)
        conn = self.state.pop("lean", None)
        if conn is not None:
            await conn.aclose()

    async def to_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run CPU or file work in the worker's pool so the loop keeps reading and acking.

        The function runs in a copy of the caller's context, so its log lines carry the
        job's fields and its spans nest under the job's span, as in the handler."""
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await loop.run_in_executor(self.executor, call)

    def done_key(self, job: Job) -> str:
        """The hash that holds the job's done mark (field: its outbox id)."""
        return keys.marks_key(self.settings, job.order_id, job.outbox_id)

    def old_done_key(self, job: Job) -> str:
        """Its done mark as it was kept before issue 36 (a key of its own), read only."""
        return keys.done_key(self.settings, job.order_id, job.outbox_id)

    def lease_key(self, job: Job) -> str:
        return keys.lease_key(self.settings, job.order_id, job.outbox_id)

    async def already_done(self, job: Job, *, lease_ms: int | None = None) -> bool:
        """True if this outbox id was handled; else take its lease (or TransientError)."""
        scripts = self._scripts()
        ms = lease_ms or int(self.settings.job_timeout * 1000)
        state = await scripts[0](keys=[self.done_key(job), self.lease_key(job),
                                       self.old_done_key(job)],
                                 args=[self.lease_holder(), ms, job.outbox_id])
        if state == b"done":
            self.skipped_as_done(job)
            return True
        if state != b"ok":
            raise self.lease_held(job, state)
        return False

    def skipped_as_done(self, job: Job) -> None:
        """Count and log a delivery of a job that was already handled."""
        self.stats.inc("duplicates", job.kind)
        self.log.info("outbox_id %d already handled; skipping", job.outbox_id,
                      extra=log_extra(job))

    def lease_holder(self) -> str:
        """Who holds a lease this delivery takes: `<consumer>/<entry id>`.

        The entry id is in the holder so that a second delivery of one outbox id to the
        same worker (a duplicated XADD: another entry) waits for the first instead of
        running beside it, while the same entry coming back to this consumer name (a
        retry, or its own pending list after a kill and respawn) takes its lease over
        at once.  Outside a worker's job (a handler called directly) it is the consumer.
        """
        job = current_job()
        entry = job.get("entry_id") if job else None
        return self.holder_of(entry) if entry else self.consumer

    def holder_of(self, entry_id: str) -> str:
        """The lease holder of a delivery of entry_id to this consumer."""
        return f"{self.consumer}/{entry_id}"

    async def release_lease(self, job: Job, holder: str) -> bool:
        """Delete the job's lease if `holder` still holds it; True if it did.

        Compare and delete in one script: a lease that ran out and was taken by another
        delivery meanwhile is theirs and stays."""
        script = self.state.get("lease_release")
        if script is None:
            script = self.state["lease_release"] = self.redis.register_script(_RELEASE)
        return bool(await script(keys=[self.lease_key(job)], args=[holder]))

    @staticmethod
    def lease_held(job: Job, holder: bytes) -> TransientError:
        """The retryable error of a delivery whose job runs elsewhere right now."""
        return TransientError(f"outbox_id {job.outbox_id} is running on "
                              f"{holder.decode(errors='replace')}")

    async def mark_done(self, job: Job) -> None:
        await self._scripts()[1](keys=[self.done_key(job), self.lease_key(job)],
                                 args=[job.kind, self.mark_ttl(), job.outbox_id])

    def mark_ttl(self) -> int:
        """Seconds a done mark written now lives: the stream's window (marks.py), so the
        marks alive are bounded by the entries the stream holds, not the jobs handled."""
        window = self.state.get("mark_window")
        if window is None:
            window = self.state["mark_window"] = MarkWindow(self.redis, self.settings)
        return int(window.ttl())

    def _scripts(self) -> tuple[Any, Any]:
        scripts = self.state.get("idempotency")
        if scripts is None:
            scripts = self.state["idempotency"] = (self.redis.register_script(_BEGIN),
                                                   self.redis.register_script(_FINISH))
        return scripts


# KEYS: done marks hash, lease, the old done key. ARGV: consumer, lease ms, outbox id.
# -> 'done' | 'ok' | holder's name
_BEGIN = """
if redis.call('HGET', KEYS[1], ARGV[3]) or redis.call('EXISTS', KEYS[3]) == 1 then
  return 'done'
end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 'ok'
"""
# KEYS: done marks hash, lease. ARGV: kind, ttl s, outbox id.
_FINISH = """
redis.call('HSET', KEYS[1], ARGV[3], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return 1
"""


# KEYS: lease. ARGV: holder. -> 1 if released, 0 if absent or another's
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def log_extra(job: Job, **more: object) -> dict[str, object]:
    """The fields that join a job's log lines to the checkout that queued it."""
    return {"request_id": job.request_id, "trace": job.trace, "kind": job.kind,
            "order_id": job.order_id, "outbox_id": job.outbox_id, **more}
