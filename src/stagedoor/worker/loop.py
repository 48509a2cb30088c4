"""The worker: read, handle, ack, with every failure path of the seed.

    recover   XREADGROUP ... STREAMS jobs <cursor>    own pending first, paged
    consume   XREADGROUP COUNT n BLOCK 5000 ... >      n = min(COUNT, free slots)
    handle    parse_job -> run_with_policy -> ack      at most `concurrency` in flight
    reclaim   XAUTOCLAIM ... 60000 <cursor> COUNT n    every 30 s, cursor followed
    ack       XACK with every id finished this tick    never before the handler returned

Why it is shaped this way:
- Slots are reserved *before* a read, so the consume and reclaim loops together
  never hold more entries than there are free slots; an entry that is read sits on
  this consumer's pending list, and one we cannot start would age there for nothing.
- The blocking read has its own client (socket timeout > BLOCK); everything else
  uses the 100 ms client.  After any timeout or connection error on the read the
  reply may have been lost with entries in it, so the next read is of our own
  pending list again, not '>'.
- A cancelled or crashed handler acks nothing: the entry stays pending and comes
  back by `recover` (same consumer name after a restart) or by another worker's
  reclaim.  Only DONE is acked; DEAD is acked inside the dead-letter script.
- Ids that are running here or finished and waiting for their ack are skipped when
  our own pending list or XAUTOCLAIM hands them back, or they would run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import hiredis
import redis

from ..config import ConfigError, Settings
from ..handlers import Context, Registry, load_registry
from ..ops.metrics import WorkerStats
from ..stream import connection
from ..stream.job import MalformedJob, parse_job
from ..stream.queue import DeadLetter, ensure_group, is_nogroup
from ..stream.resp import FastConnection
from .policy import Deadlines, Verdict, run_with_policy

log = logging.getLogger("stagedoor.worker")

Entry = tuple[bytes, list[bytes] | None]
_ACK_FAILED: tuple[type[BaseException], ...] = (redis.ResponseError, *connection.TRANSIENT_ERRORS)
_UNBLOCK_FAILED: tuple[type[BaseException], ...] = (
    TimeoutError, redis.ResponseError, *connection.TRANSIENT_ERRORS)


class BootError(RuntimeError):
    """The worker could not reach a usable Redis within boot_timeout."""


def stream_entries(reply: Any) -> list[Entry]:
    """RESP2 XREADGROUP reply -> [(id, fields or None)]; nil (BLOCK timed out) -> []."""
    if not reply:
        return []
    return [(e[0], e[1]) for e in reply[0][1]]


class Backoff:
    """Exponential backoff with full jitter, reset after a success."""

    def __init__(self, base: float = 0.05, cap: float = 2.0) -> None:
        self.base, self.cap, self.attempt = base, cap, 0

    def next(self) -> float:
        delay = random.uniform(self.base / 2, min(self.cap, self.base * 2 ** self.attempt))
        self.attempt = min(self.attempt + 1, 30)
        return delay

    def reset(self) -> None:
        self.attempt = 0


class Slots:
    """At most `capacity` entries reserved or running; reservation happens before a read."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.reserved = 0
        self.running: dict[bytes, asyncio.Task[None]] = {}
        self._freed = asyncio.Event()

    @property
    def free(self) -> int:
        return self.capacity - self.reserved - len(self.running)

    async def reserve(self, n: int) -> int:
        while self.free <= 0:
            self._freed.clear()
            await self._freed.wait()
        k = min(n, self.free)
        self.reserved += k
        return k

    def try_reserve(self, n: int) -> int:
        k = max(0, min(n, self.free))
        self.reserved += k
        return k

    def unreserve(self, k: int) -> None:
        self.reserved -= k
        if k:
            self._freed.set()

    def start(self, entry_id: bytes, task: asyncio.Task[None]) -> None:
        self.reserved -= 1
        self.running[entry_id] = task
        task.add_done_callback(lambda _t: self._finish(entry_id))

    def _finish(self, entry_id: bytes) -> None:
        self.running.pop(entry_id, None)
        self._freed.set()

    async def wait_idle(self) -> None:
        while self.running:
            self._freed.clear()
            await self._freed.wait()


class Acker:
    """Coalesces acks: every id finished since the last XACK goes in the next one.

    Two ways out: the consume loop takes what is queued and sends it in the same
    write as its next XREADGROUP (one syscall per batch instead of two: on loopback
    the write is the costliest part of a round trip), and this task flushes
    whatever is still queued after ack_flush_ms, so an ack never waits for a 5 s
    BLOCK read.  Either way an id is sent only after its handler returned.
    """

    def __init__(self, conn: FastConnection, settings: Settings,
                 reader_blocked: Callable[[], bool] = lambda: True) -> None:
        self._conn = conn
        self._settings = settings
        self._reader_blocked = reader_blocked
        self.queued: list[bytes] = []
        self.flushing: set[bytes] = set()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._backoff = Backoff()

    def add(self, entry_id: bytes) -> None:
        self.queued.append(entry_id)
        self._idle.clear()
        self._wake.set()

    def __contains__(self, entry_id: bytes) -> bool:
        return entry_id in self.flushing or entry_id in self.queued

    def __len__(self) -> int:
        return len(self.queued) + len(self.flushing)

    def take(self) -> list[bytes]:
        """Everything queued, now counted as being sent; settle() it afterwards."""
        batch, self.queued = self.queued, []
        self.flushing.update(batch)
        return batch

    def settle(self, batch: list[bytes], error: BaseException | None) -> None:
        self.flushing.difference_update(batch)
        if error is None:
            self._backoff.reset()
        else:
            log.warning("XACK of %d ids failed (%s); will retry", len(batch), error)
            self.queued[:0] = batch
            self._wake.set()
        if not self.queued and not self.flushing:
            self._idle.set()

    def xack(self, batch: list[bytes]) -> bytes:
        s = self._settings
        packed: bytes = hiredis.pack_command(("XACK", s.stream, s.group, *batch))  # type: ignore[arg-type]
        return packed

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._reader_blocked():
                # The consume loop is between reads and will carry these with its next.
                await asyncio.sleep(self._settings.ack_flush_ms / 1000)
            batch = self.take()
            if not batch:
                continue  # the consume loop sent them with its read
            try:
                await self._conn.send(self.xack(batch))
            except _ACK_FAILED as e:  # MISCONF, READONLY, NOPERM too: retry, never give up
                self.settle(batch, e)
                await asyncio.sleep(self._backoff.next())
                continue
            self.settle(batch, None)

    async def drain(self) -> None:
        await self._idle.wait()

    async def connect(self) -> None:
        await self._conn.connect()

    async def aclose(self) -> None:
        await self._conn.aclose()


class Worker:
    """One consumer of the group. `await run()` until `request_stop()` (or burst drained)."""

    def __init__(self, settings: Settings, registry: Registry | None = None, *,
                 slot: int = 0, consumer: str | None = None, burst: bool = False,
                 on_ready: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else load_registry(settings.handlers)
        self.consumer = consumer or settings.consumer_name(slot)
        self.slot = slot
        self.burst = burst
        self.stats = WorkerStats()
        self.ready = asyncio.Event()
        self._on_ready = on_ready
        self._stopping = asyncio.Event()
        self._recover = True
        self._recover_cursor = b"0"
        self._claim_cursor = b"0-0"
        self._reclaim_due = False
        self._reading = False
        self._kinds = self.registry.kinds

    # -- lifecycle -----------------------------------------------------------------
    def request_stop(self) -> None:
        """Graceful: stop reading, let in-flight jobs finish within graceful_timeout."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def run(self) -> None:
        s = self.settings
        self.cmd = connection.async_client(s, name=self.consumer)
        # The hot path: XREADGROUP '>' and XACK on lean hiredis connections (resp.py).
        self.reader = FastConnection(s, timeout=s.read_socket_timeout,
                                     name=self.consumer + ":read")
        self.deadlines = Deadlines()
        self.executor = ThreadPoolExecutor(s.render_threads,
                                           thread_name_prefix=f"render-{self.slot}")
        self.slots = Slots(s.concurrency)
        self.acker = Acker(FastConnection(s, timeout=s.socket_timeout,
                                          name=self.consumer + ":ack"), s,
                           reader_blocked=lambda: self._reading)
        self.dead_letter = DeadLetter(self.cmd, s)
        self.ctx = Context(settings=s, redis=self.cmd, consumer=self.consumer,
                           executor=self.executor, stats=self.stats)
        tasks: list[asyncio.Task[Any]] = []
        try:
            await self._boot()
            self.ready.set()
            if self._on_ready:
                self._on_ready()
            self._warn_if_render_is_slow()
            for h in self.registry:
                if h.timeout and h.timeout * 1000 >= s.claim_idle_ms:
                    log.warning("handler %s has a %gs time limit, not below claim_idle_ms=%d: "
                                "other workers will reclaim its jobs while they run",
                                h.kind, h.timeout, s.claim_idle_ms)
            log.info("worker %s ready (concurrency %d, count %d, block %d ms)", self.consumer,
                     s.concurrency, s.count, s.block_ms, extra={"consumer": self.consumer})
            # Everything alive now lives for the whole process: keep the collector off it.
            gc.freeze()
            consume = asyncio.create_task(self._consume(), name="consume")
            reclaim = asyncio.create_task(self._reclaim_timer(), name="reclaim")
            stop = asyncio.create_task(self._stopping.wait(), name="stop")
            tasks = [asyncio.create_task(self.acker.run(), name="ack"),
                     asyncio.create_task(self.deadlines.run(), name="deadlines"),
                     consume, reclaim, stop]
            # Any of these ending on its own is a bug: fail loudly so the supervisor
            # restarts the process, rather than run on without acks or time limits.
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t is not stop and not t.cancelled() and t.exception():
                    raise t.exception()  # type: ignore[misc]
                if t is not stop and t is not consume:
                    raise RuntimeError(f"worker task {t.get_name()} ended unexpectedly")
            await self._drain(consume, reclaim)
        finally:
            for t in tasks:
                t.cancel()
            for t in self.slots.running.values():
                t.cancel()
            await asyncio.gather(*tasks, *self.slots.running.values(), return_exceptions=True)
            self.executor.shutdown(wait=False, cancel_futures=True)
            await self.reader.aclose()
            await self.acker.aclose()
            await self.cmd.aclose()

    def _warn_if_render_is_slow(self) -> None:
        if "render_tickets" not in self._kinds:
            return
        from ..render import native_import_error

        why = native_import_error()
        if why:
            log.error("NATIVE RENDERER MISSING (%s): render_tickets falls back to the "
                      "pure-Python reference, ~30x slower; rebuild with `pip install -e .`",
                      why, extra={"consumer": self.consumer})

    async def _boot(self) -> None:
        s = self.settings
        deadline = time.monotonic() + s.boot_timeout
        backoff = Backoff(0.05, 1.0)
        while True:
            try:
                # HELLO, not INFO: INFO is @dangerous and cannot be granted for one
                # section, and the least-privilege ACL should not need it.
                hello = await self.cmd.execute_command("HELLO", "2")
                connection.check_version({"redis_version": dict(
                    zip(hello[::2], hello[1::2], strict=False)).get(b"version", b"")})
                await ensure_group(self.cmd, s)
                # Open the hot-path connections now: READY means all of them work, and
                # the first burst of jobs does not pay for connects and TLS handshakes.
                await self.reader.connect()
                await self.acker.connect()
                return
            except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as e:
                # redis-py files these under ConnectionError; no retry makes them right.
                raise ConfigError(f"Redis refused the credentials: {e}") from None
            except connection.TRANSIENT_ERRORS as e:
                if time.monotonic() > deadline:
                    raise BootError(f"Redis unreachable for {s.boot_timeout:g}s: {e}") from e
                delay = backoff.next()
                log.warning("Redis not reachable (%s); retrying in %.2fs", e, delay)
                await asyncio.sleep(delay)

    async def _drain(self, consume: asyncio.Task[None], reclaim: asyncio.Task[None]) -> None:
        """Stop reading, finish in-flight jobs within graceful_timeout, flush acks."""
        reclaim.cancel()
        await self._stop_reading(consume)
        await asyncio.gather(consume, reclaim, return_exceptions=True)
        timeout = self.settings.graceful_timeout
        try:
            async with asyncio.timeout(timeout):
                await self.slots.wait_idle()
        except TimeoutError:
            log.warning("%d jobs still running after %gs; leaving them pending",
                        len(self.slots.running), timeout)
            for t in self.slots.running.values():
                t.cancel()
            await asyncio.gather(*self.slots.running.values(), return_exceptions=True)
        try:
            async with asyncio.timeout(max(1.0, timeout)):
                await self.acker.drain()
        except TimeoutError:
            log.error("%d acks could not be sent; those jobs stay pending and will run "
                      "again", len(self.acker))

    async def _stop_reading(self, consume: asyncio.Task[None]) -> None:
        """End the consume loop without abandoning a read Redis may already have served.

        Cancelling a BLOCK read whose reply is on its way would leave those entries
        delivered to us and never started, pending until a worker of this name comes
        back or the claim threshold passes.  CLIENT UNBLOCK makes a read that is still
        waiting return empty at once; a reply already sent arrives and is dispatched.
        """
        if consume.done():
            return
        if self._reading and self.reader.client_id is not None:
            try:
                await self.cmd.execute_command("CLIENT", "UNBLOCK", self.reader.client_id)
                async with asyncio.timeout(self.settings.read_socket_timeout):
                    await asyncio.shield(consume)
                return
            except _UNBLOCK_FAILED as e:
                log.warning("could not end the blocking read cleanly (%s); cancelling it", e)
            except Exception:  # the loop failed on its own; run() reports it
                return
        # Repeat the cancel: on Python 3.11 a wait_for inside redis-py can swallow one
        # that lands as its call completes (CPython gh-86296), and the loop reads on.
        while not consume.done():
            consume.cancel()
            await asyncio.wait([consume], timeout=0.5)

    # -- reading -------------------------------------------------------------------
    def _busy(self, entry_id: bytes) -> bool:
        return entry_id in self.slots.running or entry_id in self.acker

    async def _consume(self) -> None:
        s = self.settings
        backoff = Backoff()
        group, stream, me = s.group, s.stream, self.consumer
        while True:
            n = await self.slots.reserve(s.count)
            try:
                if self._reclaim_due:
                    self._reclaim_due = False
                    self.slots.unreserve(n)
                    n = 0
                    await self.reclaim_once()
                elif self._recover:
                    entries = stream_entries(await self.cmd.execute_command(
                        "XREADGROUP", "GROUP", group, me, "COUNT", n,
                        "STREAMS", stream, self._recover_cursor))
                    if not entries:
                        self._recover, self._recover_cursor = False, b"0"
                        self.slots.unreserve(n)
                        n = 0
                        continue
                    self._recover_cursor = entries[-1][0]
                    fresh = [e for e in entries if not self._busy(e[0])]
                    self.stats.inc("recovered", n=len(fresh))
                    counts = await self._delivery_counts([e[0] for e in fresh])
                    held, n = n, 0
                    await self._dispatch_redelivered(fresh, held, counts)
                else:
                    block = ("BLOCK", s.block_ms) if not self.burst else ()
                    read = self.reader.packed("XREADGROUP", "GROUP", group, me, "COUNT", n,
                                              *block, "STREAMS", stream, ">")
                    acks = self.acker.take()
                    self._reading = True
                    try:
                        if acks:
                            ack_reply, reply = await self.reader.send_many(
                                [self.acker.xack(acks), read])
                            self.acker.settle(acks, ack_reply if isinstance(
                                ack_reply, BaseException) else None)
                            if isinstance(reply, BaseException):
                                raise reply
                        else:
                            reply = await self.reader.send(read)
                    except BaseException as e:
                        if acks and self.acker.flushing.intersection(acks):
                            self.acker.settle(acks, e)
                        raise
                    finally:
                        self._reading = False
                    entries = stream_entries(reply)
                    self._dispatch(entries, n, None)
                    if self.stopping:
                        return
                    n = 0
                    if not entries and self.burst:
                        await self._burst_check()
                backoff.reset()
            except asyncio.CancelledError:
                self.slots.unreserve(n)
                raise
            except redis.ResponseError as e:
                self.slots.unreserve(n)
                if not is_nogroup(e):
                    raise
                log.warning("group %s is gone (Redis restarted empty?); recreating", group)
                await self._ensure_group_quietly()
                self._recover, self._recover_cursor = True, b"0"
            except connection.TRANSIENT_ERRORS as e:
                self.slots.unreserve(n)
                # The reply may have been lost with entries in it: read our own PEL next.
                self._recover, self._recover_cursor = True, b"0"
                delay = backoff.next()
                log.warning("read failed (%s: %s); re-reading own pending in %.2fs",
                            type(e).__name__, e, delay)
                await asyncio.sleep(delay)

    async def _burst_check(self) -> None:
        await self.slots.wait_idle()
        await self.acker.drain()
        if self._recover:
            return
        self._stopping.set()
        await asyncio.Event().wait()  # the run() loop cancels us

    async def _ensure_group_quietly(self) -> None:
        with contextlib.suppress(*connection.TRANSIENT_ERRORS):
            await ensure_group(self.cmd, self.settings)

    async def _delivery_counts(self, ids: Sequence[bytes]) -> dict[bytes, int]:
        if not ids:
            return {}
        s = self.settings
        reply = await self.cmd.execute_command(
            "XPENDING", s.stream, s.group, ids[0], ids[-1],
            len(ids) + len(self.slots.running) + len(self.acker) + 1, self.consumer)
        return {row[0]: int(row[3]) for row in reply}

    def _dispatch(self, entries: Sequence[Entry], reserved: int,
                  counts: dict[bytes, int] | None, starts: dict[bytes, int] | None = None
                  ) -> None:
        for entry_id, fields in entries:
            deliveries = 1 if counts is None else counts.get(entry_id, 1)
            started = 0 if starts is None else starts.get(entry_id, 0)
            task = asyncio.create_task(self._handle(entry_id, fields, deliveries, started))
            self.slots.start(entry_id, task)
        self.slots.unreserve(reserved - len(entries))
        self.stats.gauges["in_flight"] = len(self.slots.running)

    async def _dispatch_redelivered(self, entries: Sequence[Entry], reserved: int,
                                    counts: dict[bytes, int]) -> None:
        """Entries delivered before (own pending, XAUTOCLAIM): count starts, isolate some.

        The delivery count alone is a poor poison counter: a crash adds 1 to every
        entry the dead worker held, so the innocent jobs that ran beside a
        worker-killing one would reach max_deliveries with it.  Redelivered entries
        count their starts (stagedoor:starts:<id>, one pipelined INCR per batch); one
        that was started again after a redelivery, or is on its last allowed start,
        runs alone, nothing else in flight, so a crash then is its own.  The poison
        verdict is on starts; the first, fresh delivery counts as one.
        """
        try:
            starts = await self._record_starts([e[0] for e in entries if e[1] is not None])
        except BaseException:
            self.slots.unreserve(reserved)
            raise
        limit = self.settings.max_deliveries
        together: list[Entry] = []
        alone: list[Entry] = []
        for entry in entries:
            recorded = starts.get(entry[0], 0)
            isolate = entry[1] is not None and (recorded >= 2 or recorded + 1 == limit)
            (alone if isolate else together).append(entry)
        self._dispatch(together, reserved, counts, starts)
        if alone:
            log.warning("running %d redelivered entries one at a time: each was started "
                        "before and may be what killed a worker", len(alone))
        for entry in alone:
            # Nothing else running and every finished job acked: if this one kills the
            # process, it takes no one with it.
            await self.slots.wait_idle()
            await self.acker.drain()
            self._dispatch([entry], await self.slots.reserve(1), counts, starts)
            await self.slots.wait_idle()
            await self.acker.drain()

    async def _record_starts(self, ids: Sequence[bytes]) -> dict[bytes, int]:
        if not ids:
            return {}
        pipe = self.cmd.pipeline(transaction=False)
        for entry_id in ids:
            key = self.settings.key("starts", entry_id.decode())
            pipe.incr(key)
            pipe.expire(key, 86_400)
        replies = await pipe.execute()
        return {entry_id: int(replies[2 * i]) for i, entry_id in enumerate(ids)}

    # -- reclaiming ------------------------------------------------------------------
    async def _reclaim_timer(self) -> None:
        """Mark a reclaim pass due every reclaim_interval; the consume loop runs it.

        The pass runs between reads, not beside them, because the blocking read holds
        every free slot while it waits; so a pass is late by at most one BLOCK."""
        while True:
            await asyncio.sleep(self.settings.reclaim_interval)
            self._reclaim_due = True

    async def reclaim_once(self) -> int:
        """One pass of XAUTOCLAIM following the cursor; returns how many entries it took."""
        s = self.settings
        taken = 0
        while True:
            n = self.slots.try_reserve(s.reclaim_count)
            if n == 0:
                return taken
            try:
                cursor, entries, deleted = await self.cmd.execute_command(
                    "XAUTOCLAIM", s.stream, s.group, self.consumer, s.claim_idle_ms,
                    self._claim_cursor, "COUNT", n)
            except BaseException:
                self.slots.unreserve(n)
                raise
            self._claim_cursor = cursor
            if deleted:
                self.stats.inc("deleted", n=len(deleted))
                log.warning("%d pending entries were trimmed before they were handled: %s",
                            len(deleted), b", ".join(deleted[:10]).decode())
            mine = [(e[0], e[1]) for e in entries if not self._busy(e[0])]
            try:
                counts = await self._delivery_counts([e[0] for e in mine])
            except BaseException:
                self.slots.unreserve(n)
                raise
            self.stats.inc("reclaimed", n=len(mine))
            await self._dispatch_redelivered(mine, n, counts)
            taken += len(mine)
            if cursor == b"0-0":
                return taken

    # -- handling --------------------------------------------------------------------
    async def _handle(self, entry_id: bytes, fields: list[bytes] | None,
                      deliveries: int, started: int = 0) -> None:
        """started: starts recorded since the first delivery (redelivered entries only)."""
        s = self.settings
        try:
            if fields is None:
                # Trimmed while pending: nothing to run; ack so the PEL stops returning it.
                self.stats.inc("deleted")
                log.warning("entry %s was trimmed before it was handled",
                            entry_id.decode(), extra={"entry_id": entry_id.decode()})
                self.acker.add(entry_id)
                return
            if started and started + 1 > s.max_deliveries:
                await self._dead(entry_id, fields, deliveries,
                                 f"poison: started {started + 1} times, delivered "
                                 f"{deliveries} times (max_deliveries={s.max_deliveries})",
                                 _kind(fields, self._kinds))
                return
            try:
                job = parse_job(fields, self._kinds, max_field_bytes=s.max_field_bytes)
            except MalformedJob as e:
                await self._dead(entry_id, fields, deliveries, f"malformed: {e}",
                                 _kind(fields, self._kinds))
                return
            handler = self.registry.get(job.kind)

            def extra() -> dict[str, object]:  # built only when a line is logged
                return {"request_id": job.request_id, "trace": job.trace, "kind": job.kind,
                        "order_id": job.order_id, "outbox_id": job.outbox_id,
                        "entry_id": entry_id.decode(), "deliveries": deliveries,
                        "consumer": self.consumer}

            outcome = await run_with_policy(
                lambda: handler.fn(job, self.ctx), kind=job.kind,
                time_limit=handler.timeout or s.job_timeout, settings=s, stats=self.stats,
                deadlines=self.deadlines, extra=extra)
            if outcome.verdict is Verdict.DONE:
                self.stats.inc("handled", job.kind)
                self.acker.add(entry_id)
            elif outcome.verdict is Verdict.DEAD:
                await self._dead(entry_id, fields, deliveries, outcome.reason, job.kind)
            else:
                self.stats.inc("failed", job.kind)
                log.error("job failed after %d attempts, left pending for redelivery: %s",
                          outcome.attempts, outcome.reason, extra=extra())
        except asyncio.CancelledError:
            raise
        except Exception:
            # Nothing may crash the loop; the entry stays pending and comes back.
            log.exception("unexpected error handling %s; left pending", entry_id.decode())
        finally:
            self.stats.gauges["in_flight"] = len(self.slots.running) - 1

    async def _dead(self, entry_id: bytes, fields: list[bytes], deliveries: int,
                    reason: str, kind: str) -> None:
        backoff = Backoff()
        for _attempt in range(max(3, self.settings.retries + 1)):
            try:
                dead_id = await self.dead_letter(entry_id, fields, error=reason,
                                                 deliveries=deliveries,
                                                 consumer=self.consumer)
            except connection.TRANSIENT_ERRORS as e:
                await asyncio.sleep(backoff.next())
                last: BaseException = e
                continue
            if dead_id is not None:
                self.stats.inc("dead_lettered", kind)
                log.error("dead-lettered %s as %s: %s", entry_id.decode(), dead_id.decode(),
                          reason, extra={"entry_id": entry_id.decode(), "kind": kind,
                                         "error": reason, "deliveries": deliveries})
            return
        log.error("could not dead-letter %s (%s); left pending", entry_id.decode(), last)


def _kind(fields: Sequence[bytes], kinds: frozenset[str]) -> str:
    """The metrics label of an entry that may not parse: a known kind or 'invalid'.

    Never the raw value: a label per garbage payload would blow up the metrics."""
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == b"kind":
            value = fields[i + 1].decode("utf-8", "replace")
            return value if value in kinds else "invalid"
    return "invalid"

