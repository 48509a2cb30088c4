"""The worker: one consumer of the group, composed of small parts, run until stopped.

    reader.py      recover own pending, consume '>' (ahead: readahead.py) -> entries
    reclaim.py     XAUTOCLAIM passes -> entries
    redelivery.py  delivery counts, start counts, isolation of suspicious entries
    dispatch.py    entry -> task: parse_job -> run_with_policy -> ack / dead / pending
    acks.py        XACK, coalesced, piggybacked on the next read
    slots.py       at most `concurrency` entries held, reserved before a read
    lifecycle.py   boot, then drain and stop

Worker builds the parts when it is made (not in run(): run only connects, starts the
tasks and drains), then runs them.  A cancelled or crashed handler acks nothing: the
entry stays pending and comes back by `recover` (same consumer name after a restart)
or by another worker's reclaim.  Only DONE is acked; DEAD is acked inside the
dead-letter script.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import mmap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..config import Settings
from ..handlers import Context, Registry, load_registry
from ..stream import connection
from ..stream.queue import DeadLetter
from ..stream.resp import FastConnection
from ..telemetry import shared_counts, tracing
from ..telemetry.metrics import WorkerStats
from . import lifecycle
from .acks import Acker
from .dispatch import Dispatcher
from .outage import Outage
from .ownership import NameClaim
from .policy import Deadlines
from .presence import Pause, Presence
from .reader import Reader
from .redelivery import Redelivery
from .slots import Slots

log = logging.getLogger("stagedoor.worker")


class Worker:
    """One consumer of the group. `await run()` until `request_stop()` (or burst drained)."""

    def __init__(self, settings: Settings, registry: Registry | None = None, *,
                 slot: int = 0, consumer: str | None = None, burst: bool = False,
                 on_ready: Callable[[], None] | None = None,
                 tracer: tracing.JobTracer | None = None,
                 killer: tuple[str, str] | None = None,
                 counts_page: mmap.mmap | None = None,
                 go: asyncio.Event | None = None) -> None:
        """killer: (entry id, cause) of an entry that killed this slot's previous worker
        while it ran alone, as its supervisor saw it: dead-lettered at boot.
        counts_page: the page its supervisor reads its counters from after a crash
        (telemetry/shared_counts.py).  go: set when no other process of this consumer name is
        left (a held replacement reads nothing before)."""
        s = self.settings = settings
        self.registry = registry if registry is not None else load_registry(settings.handlers)
        self.consumer = consumer or settings.consumer_name(slot)
        self.slot = slot
        self.burst = burst
        self.stats = WorkerStats(self.registry.kinds)  # every kind counted from 0
        if counts_page is not None:  # before the parts take a reference to a Counter
            shared_counts.share(counts_page, self.stats.counters)
        self.ready = asyncio.Event()
        self._on_ready = on_ready
        self._stopping = asyncio.Event()
        # Set when no other process of this consumer name is left (the supervisor's
        # word, worker/child.py): READY comes before it, the first read after it.
        self._go = go
        self.tracer = tracer  # None: run() sets it up from OTEL_* (telemetry/tracing.py)
        # The parts.  Nothing here connects or starts a thread: that is run()'s.
        self.cmd = connection.async_client(s, name=self.consumer)
        self.executor = ThreadPoolExecutor(s.render_threads,
                                           thread_name_prefix=f"render-{slot}")
        self.ctx = Context(settings=s, redis=self.cmd, consumer=self.consumer,
                           executor=self.executor, stats=self.stats)
        self.deadlines = Deadlines()
        self.slots = Slots(s.concurrency)
        self.outage = Outage(s, self.cmd, self.stats, self.consumer)
        self.pause = Pause(self.stats, self.consumer)
        reader: Reader  # the acker asks it whether a read is on the wire
        self.acker = Acker(FastConnection(s, timeout=s.socket_timeout,
                                          name=self.consumer + ":ack"), s,
                           reader_blocked=lambda: reader.blocking)
        self.dispatcher = Dispatcher(s, self.registry, self.ctx, slots=self.slots,
                                     acker=self.acker, dead_letter=DeadLetter(self.cmd, s),
                                     deadlines=self.deadlines, stats=self.stats,
                                     consumer=self.consumer, outage=self.outage)
        self.redelivery = Redelivery(s, self.cmd, consumer=self.consumer, slots=self.slots,
                                     acker=self.acker, dispatcher=self.dispatcher)
        # The hot path: XREADGROUP '>' and XACK on lean hiredis connections (resp.py).
        self.reader = reader = Reader(
            s, self.cmd, FastConnection(s, timeout=s.read_socket_timeout,
                                        name=self.consumer + ":read"),
            consumer=self.consumer, slots=self.slots, acker=self.acker,
            dispatcher=self.dispatcher, redelivery=self.redelivery, stats=self.stats,
            stop=self._stopping, outage=self.outage, pause=self.pause, burst=burst)
        self.dispatcher.recover_soon = reader.recover_soon
        # One consumer name, one reading process, whoever started the others
        # (ownership.py): nothing is read, own pending list included, before it is ours.
        self.claim = NameClaim(s, self.cmd, consumer=self.consumer, stats=self.stats,
                               on_lost=self._name_lost, on_back=self._name_back)
        self.presence = Presence(s, self.cmd, consumer=self.consumer, slot=slot,
                                 stats=self.stats, slots=self.slots, pause=self.pause,
                                 unblock=self._unblock_read, claim=self.claim)
        self.killer = killer

    def request_stop(self) -> None:
        """Graceful: stop reading, let in-flight jobs finish within graceful_timeout."""
        self._stopping.set()

    async def _unblock_read(self) -> None:
        """The fleet was paused: end a blocking read that waits (a reply already sent
        is still dispatched), so nothing new is taken after this heartbeat."""
        r = self.reader
        if r.reading and r.blocking and r.conn.client_id is not None:
            with contextlib.suppress(Exception):
                await self.acker.conn.call("CLIENT", "UNBLOCK", r.conn.client_id)

    async def _name_lost(self) -> None:
        """Another process holds our consumer name now: read nothing more."""
        self.pause.name(False)
        await self._unblock_read()

    def _name_back(self) -> None:
        """The name is ours again: read on, our own pending list first (the other
        process may have left entries on it)."""
        self.reader.recover_soon()
        self.pause.name(True)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def _boot(self) -> None:
        await lifecycle.boot(self.settings, self.cmd, self.reader, self.acker, self.outage)
        await lifecycle.on_start(self.registry, self.ctx)
        if self.killer is not None:  # before the own pending list is read again
            try:
                await self.redelivery.dead_letter_killer(*self.killer)
            except Exception as e:  # never a boot failure: the start count decides
                log.warning("could not dead-letter %s, which killed the previous "
                            "worker (%s): %s: %s", *self.killer, type(e).__name__, e)

    async def run(self) -> None:
        s = self.settings
        tasks: list[asyncio.Task[Any]] = []
        try:
            # Tracing (stagedoor[otel] + OTEL_*) starts its export thread here, after the
            # fork; None when it is off, and then it costs one `is None` per job.
            if self.tracer is None:
                self.tracer = tracing.setup_or_config_error()
            self.dispatcher.tracer = self.tracer
            # Before boot: a worker that cannot render refuses to start (exit 78) rather
            # than report ready; the renderer it runs is a gauge (alert on "reference").
            renderer = lifecycle.check_renderer(s, self.registry)
            if renderer is not None:
                for name in ("native", "reference"):
                    self.stats.gauges["renderer_" + name] = float(name == renderer)
            # A stop at any moment of the boot ends it: the worker never becomes READY
            # and reads nothing (lifecycle.unless_stopped).
            if not await lifecycle.unless_stopped(self._boot(), self._stopping, "booting"):
                return
            go = self._go
            if go is None or go.is_set():  # the usual case: the name is ours by READY
                with contextlib.suppress(Exception):
                    await self.claim.attempt()
            # The fleet registry and the pause flag, before the first read: a worker
            # that starts while the fleet is paused reads nothing.
            with contextlib.suppress(Exception):
                await self.presence.beat()
            tasks.append(asyncio.create_task(self.presence.run(), name="presence"))
            self.ready.set()
            if self._on_ready:
                self._on_ready()
            lifecycle.warn_at_start(s, self.registry, self.consumer)
            log.info("worker %s ready (concurrency %d, count %d, block %d ms)", self.consumer,
                     s.concurrency, s.count, s.block_ms, extra={"consumer": self.consumer})
            if go is not None and not go.is_set():
                log.info("worker %s waits to read: another process of this name is still "
                         "finishing its jobs", self.consumer, extra={"consumer": self.consumer})
                if not await lifecycle.unless_stopped(go.wait(), self._stopping,
                                                      "waiting for the consumer name"):
                    return
            if not self.claim.owned and not await lifecycle.unless_stopped(
                    self.claim.acquire(), self._stopping, "waiting for the consumer name"):
                return
            # Everything alive now lives for the whole process: keep the collector off it.
            gc.freeze()
            consume = asyncio.create_task(self.reader.consume(), name="consume")
            reclaim = asyncio.create_task(self.reader.reclaimer.timer(), name="reclaim")
            stop = asyncio.create_task(self._stopping.wait(), name="stop")
            tasks += [asyncio.create_task(self.acker.run(), name="ack"),
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
            await lifecycle.drain(s, self.cmd, self.reader, self.slots, self.acker,
                                  consume, reclaim)
        finally:
            await lifecycle.cancel_and_wait([*tasks, *self.slots.running.values()])
            # what the drain handled since the last beat, into the console's per-kind
            # ring (telemetry/kindstats.py); bounded: Redis may be what ends this worker
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.presence.flush_kinds(), 2.0)
            await self.claim.release()  # after the drain and its acks: the name is free
            await self.reader.conn.aclose()
            await self.acker.aclose()
            # the handlers' close hooks may still use the executor (ctx.to_thread): the
            # landed-late checks of renders that wrote after their job ended remove a
            # refunded order's PDF there (tickets/handlers.py); shut down after them
            await self.ctx.aclose()
            self.executor.shutdown(wait=False, cancel_futures=True)
            await self.cmd.aclose()
            if self.tracer is not None:  # flush the last spans, bounded
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.to_thread(self.tracer.shutdown), 5)
