"""Dispatch: an entry becomes a task in a slot, and a task becomes an ack, a dead letter
or an entry left pending.

    parse_job -> run_with_policy(handler) -> DONE: ack | DEAD: dead-letter | PENDING: log
                                           -> every outcome settled (settle.py: the job
                                              stats, the ack queue)

A reply's first deliveries start in C (entries.FastDispatch: parse, context, run); what
finishes there comes back as outcomes for settle.py, what waits or fails goes on here.

Nothing here may crash the loop: an unexpected error leaves the entry pending (it comes
back), and a cancelled handler acks nothing.  A malformed entry, a permanent error and
poison (too many starts, decided by redelivery.py) go to the dead-letter stream with
their reason, and the dead-letter script acks them in the same step.

A redelivered entry's start is counted here, as its handler starts (not when it was
read: the batch-mates queued behind a job that kills the process never start, and
must not be counted as if they had).  An entry left pending keeps its last error
(stagedoor:lasterr:<id>), so a poison verdict says what actually went wrong.  One
left pending because Redis failed it asks the reader to re-read the own pending list
at once; one refused for memory puts the worker in the outage state (outage.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from asyncio.tasks import _enter_task, _leave_task
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis

from ..backoff import Backoff
from ..config import Settings
from ..errors import MalformedJob
from ..handlers import Context, Handler, Registry
from ..stream import connection
from ..stream.errors import first_line, is_oom, master_changed
from ..stream.job import Job, make_job, parse_job
from ..stream.keys import lasterr_key, settled_key, starts_key
from ..stream.queue import DeadLetter
from ..telemetry.logs import job_context
from ..telemetry.metrics import WorkerStats
from ..telemetry.tracing import JobTracer, entry_ms
from . import eager
from .acks import Acker
from .entries import FastDispatch, fast_job
from .outage import Outage
from .policy import Begun, Cancellable, Deadlines, Verdict, begin, run_with_policy
from .settle import (
    ACK,
    DEAD,
    DELETED,
    DELETED_ACKED,
    DONE,
    DONE_ACKED,
    ENDED,
    FAILED,
    RETRIED,
    STARTED,
    Settle,
)
from .slots import Slots

log = logging.getLogger("stagedoor.worker")

Entry = tuple[bytes, list[bytes] | None]
# A job the C dispatch began (worker/_entries.pyx): its Job, Handler and first attempt.
Started = tuple[Job, Handler, Begun]
STARTS_TTL = 86_400  # a start count or last error outlives any redelivery cycle
_BEST_EFFORT: tuple[type[BaseException], ...] = (redis.RedisError, *connection.TRANSIENT_ERRORS)


class Dispatcher:
    """Starts handler tasks for entries and settles each one's outcome."""

    def __init__(self, settings: Settings, registry: Registry, ctx: Context, *,
                 slots: Slots, acker: Acker, dead_letter: DeadLetter, deadlines: Deadlines,
                 stats: WorkerStats, consumer: str, outage: Outage) -> None:
        self.settings = settings
        self.registry = registry
        self.ctx = ctx
        self.slots = slots
        self.acker = acker
        self.dead_letter = dead_letter
        self.deadlines = deadlines
        self.stats = stats
        self.consumer = consumer
        self.outage = outage
        self.kinds = registry.kinds
        self.cmd = ctx.redis
        self.tracer: JobTracer | None = None  # set by Worker.run when tracing is on
        # The worker's loop, taken once at the first dispatch, not once a reply:
        # asyncio.get_running_loop() is a getpid() system call on Python 3.11 (its fork
        # check; docs/benchmarks.md, "Why the code is the way it is").
        self.loop: asyncio.AbstractEventLoop | None = None
        # For the per-entry fast path: each known kind that parse_job accepts, as the
        # bytes on the stream -> the str a Job carries.
        self.kind_names = {k.encode(): k for k in self.kinds if _parses(k)}
        # The reader's: re-read the own pending list soon (set when the reader is made).
        self.recover_soon: Callable[[], None] = lambda: None
        # Every outcome is written down there (the stats, the ack queue): settle.py.
        self.settle = Settle(stats, acker).settle
        # First deliveries in C (worker/_entries.pyx); their outcomes go to settle.
        self.fast = FastDispatch(
            kind_names=self.kind_names, max_field_bytes=settings.max_field_bytes,
            handlers={h.kind: h for h in registry if inspect.iscoroutinefunction(h.fn)},
            ctx=ctx, consumer=consumer, generic=self._start_new, begun=self._start_begun,
            done=DONE, started=STARTED)

    def dispatch(self, entries: Sequence[Entry], reserved: int,
                 counts: dict[bytes, int] | None, starts: dict[bytes, int] | None = None,
                 in_task: bool = True) -> None:
        """Start a task per entry in the slots `reserved` for them; give back the rest.

        counts: delivery counts (None: first delivery); starts: starts recorded before
        of redelivered entries (None: a first delivery; see redelivery.py); in_task:
        False when called from a protocol callback (the read-ahead), where no task is
        current and asking asyncio.current_task (a Python call a reply) is spent."""
        if self.outage.active and entries:
            # Read while Redis refuses writes: they cannot finish; leave them pending for
            # the re-read of the own pending list once it takes writes again.
            for _ in entries:
                self.outage.enter(job_left=True)
            self.slots.unreserve(reserved)
            return
        loop = self.loop
        if loop is None:
            loop = self.loop = asyncio.get_running_loop()
        outer = asyncio.current_task(loop) if in_task else None
        # Eagerly: a job that never waits (a no-op, a cache hit) is done before the next
        # entry is looked at, and costs no Task (eager.py).  The caller's task is left
        # once for the whole reply; each job is the current task while it runs.
        if outer is not None:
            _leave_task(loop, outer)
        finished = 0
        settled: list[Any] = []  # the C dispatch's outcomes, settled as one batch
        try:
            if counts is None and self.tracer is None:
                finished = self.fast.run(entries, loop, settled)
            else:
                for entry_id, fields in entries:
                    deliveries = 1 if counts is None else counts.get(entry_id, 1)
                    prior = None if starts is None else starts.get(entry_id, 0)
                    finished += self._start(entry_id, fields, deliveries, prior, loop)
        finally:
            if settled:  # whatever escaped (a handler's SystemExit): what finished counts
                self.settle(settled)
            if outer is not None:
                _enter_task(loop, outer)
        self.slots.unreserve(finished + reserved - len(entries))
        self.stats.gauges["in_flight"] = len(self.slots.running)

    def _start(self, entry_id: bytes, fields: list[bytes] | None, deliveries: int,
               prior: int | None, loop: asyncio.AbstractEventLoop,
               begun: Started | None = None, run: eager.EagerRun | None = None,
               context: contextvars.Context | None = None) -> int:
        """Run a job eagerly: 1 if it finished, 0 if it goes on as a Task in its slot."""
        if run is None:
            run = eager.EagerRun()
        task = eager.start(self.handle(entry_id, fields, deliveries, prior, run, begun),
                           loop, run, None, context)
        if task is None:
            return 1
        self.slots.start(entry_id, task)
        return 0

    def _start_new(self, entry_id: bytes, fields: list[bytes] | None) -> int:
        """A first delivery the C dispatch leaves to Python, whole."""
        return self._start(entry_id, fields, 1, None, self.loop or asyncio.get_running_loop())

    def _start_begun(self, entry_id: bytes, fields: list[bytes], job: Job, handler: Handler,
                     coro: Any, first: Any, error: BaseException | None, started: float,
                     run: eager.EagerRun, context: contextvars.Context) -> int:
        """A first delivery whose handler the C dispatch ran eagerly and which suspended
        (coro yielded `first`) or raised `error`: run_with_policy goes on from there."""
        if error is None:
            limit = handler.timeout or self.settings.job_timeout
            # what is left of its limit: it has been running since `started`
            expired = self.deadlines.start(run, limit - (time.perf_counter() - started))
            attempt = eager.resume(coro, first)
        else:
            expired, attempt = [False], eager.raising(error)
        return self._start(entry_id, fields, 1, None, self.loop or asyncio.get_running_loop(),
                           (job, handler, Begun(attempt, started, expired)), run, context)

    async def handle(self, entry_id: bytes, fields: list[bytes] | None,
                     deliveries: int, prior: int | None = None,
                     run: eager.EagerRun | None = None, begun: Started | None = None) -> None:
        """prior: starts recorded before, None for a first delivery (never recorded);
        run: the job's stand-in for its Task (eager.py), what a time limit cancels;
        begun: a first delivery the C dispatch parsed, counted and began running."""
        try:
            if fields is None:
                # Trimmed while pending: nothing to run; ack so the PEL stops returning it.
                log.warning("entry %s was trimmed before it was handled",
                            entry_id.decode(), extra={"entry_id": entry_id.decode()})
                if prior is None:
                    self.settle([entry_id, "", DELETED, None, None])
                else:
                    self.settle([entry_id, "", DELETED_ACKED, None, None])
                    await self._ack_and_forget(entry_id)
                return
            if self.tracer is None or begun is not None:
                await self._handle(entry_id, fields, deliveries, prior, run, begun)
                return
            eid = entry_id.decode()
            with self.tracer.job(stream=self.settings.stream, group=self.settings.group,
                                 consumer=self.consumer, entry_id=eid,
                                 trace=raw_field(fields, b"trace"), deliveries=deliveries,
                                 kind=metric_kind(fields, self.kinds)):
                await self._handle(entry_id, fields, deliveries, prior, run)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # Nothing may crash the loop; the entry stays pending and comes back.
            if is_oom(e):
                self.outage.enter(e, job_left=True)
            elif is_redis_trouble(e):
                log.warning("Redis failed while handling %s (%s: %s); left pending, "
                            "re-reading the own pending list", entry_id.decode(),
                            type(e).__name__, first_line(e),
                            extra={"entry_id": entry_id.decode(), "consumer": self.consumer})
                self.recover_soon()
            else:
                log.exception("unexpected error handling %s; left pending",
                              entry_id.decode())
        finally:
            # Not counting this job: a Task's slot is freed after this, an eager one
            # (never in `running`) before.
            running = self.slots.running
            self.stats.gauges["in_flight"] = len(running) - (entry_id in running)

    async def _handle(self, entry_id: bytes, fields: list[bytes], deliveries: int,
                      prior: int | None, run: eager.EagerRun | None,
                      begun: Started | None = None) -> None:
        s = self.settings
        if begun is not None:
            await self._run(entry_id, fields, deliveries, run, *begun)
            return
        # A first delivery's common entry in C (entries.py); anything else, and every
        # refusal with its reason, is parse_job's.
        job = fast_job(fields, self.kind_names, s.max_field_bytes) if prior is None else None
        if job is not None:
            pass
        elif prior is not None:
            # The first, fresh start counts as one; this one would be prior + 2.
            if prior + 2 > s.max_deliveries:
                reason = (f"poison: started {prior + 2} times, delivered {deliveries} "
                          f"times (max_deliveries={s.max_deliveries})")
                last = await self._last_error(entry_id)
                if last:
                    reason += f"; last error: {last}"
                await self.release_lease_of(entry_id, fields)
                await self.dead(entry_id, fields, deliveries, reason,
                                metric_kind(fields, self.kinds), forget=True)
                return
            await self._count_start(entry_id)
        if job is None:
            try:
                job = parse_job(fields, self.kinds, max_field_bytes=s.max_field_bytes)
            except MalformedJob as e:
                await self.dead(entry_id, fields, deliveries, f"malformed: {e}",
                                metric_kind(fields, self.kinds), forget=prior is not None)
                return
        # Time since Redis added the entry (its id) to now, the handler's start.  The
        # worker's clock against Redis': both NTP-synced, or the histogram says so.
        self.settle([entry_id, job.kind, STARTED, time.time() - entry_ms(entry_id) / 1000,
                     None])
        await self._run(entry_id, fields, deliveries, run, job, self.registry.get(job.kind),
                        prior=prior)

    async def _run(self, entry_id: bytes, fields: list[bytes], deliveries: int,
                   run: eager.EagerRun | None, job: Job, handler: Handler,
                   begun: Begun | None = None, prior: int | None = None) -> None:
        """Run the handler under the policy and settle the outcome (ack, dead letter, or
        left pending); begun: its first attempt is already under way; prior: the
        starts recorded before this one (None: a first delivery, never recorded)."""
        s = self.settings
        fields_of_job = {"request_id": job.request_id, "trace": job.trace, "kind": job.kind,
                         "order_id": job.order_id, "outbox_id": job.outbox_id,
                         "entry_id": entry_id.decode(), "deliveries": deliveries,
                         "consumer": self.consumer}
        tracer = self.tracer
        # Every line logged while the job runs, from any logger, carries its fields.
        with job_context(fields_of_job):
            limit = handler.timeout or s.job_timeout
            task: Cancellable | None = run if run is not None else asyncio.current_task()
            assert task is not None

            def attempt() -> Awaitable[None]:
                return handler.fn(job, self.ctx)

            outcome, took = await run_with_policy(
                begun or begin(attempt, task, limit, self.deadlines), attempt,
                time_limit=limit, settings=s, deadlines=self.deadlines,
                retried=self._retried(entry_id, job.kind), task=task)
            if outcome.verdict is Verdict.DONE:
                if prior is None:
                    self.settle([entry_id, job.kind, DONE, None, took])
                else:
                    self.settle([entry_id, job.kind, DONE_ACKED, None, took])
                    await self._ack_and_forget(entry_id)
                return
            self.settle([entry_id, job.kind,
                         FAILED if outcome.verdict is Verdict.PENDING and not outcome.outage
                         else ENDED, None, took])
            if outcome.verdict is Verdict.DEAD:
                await self._release_lease(job, entry_id)
                await self.dead(entry_id, fields, deliveries, outcome.reason, job.kind,
                                forget=prior is not None)
            elif outcome.outage:
                # No release: the own pending list runs it again under this same holder.
                self.outage.enter(outcome.error, job_left=True)  # no line per job
            else:
                await self._release_lease(job, entry_id)
                if tracer is not None:
                    tracer.event("stagedoor.left_pending", {"reason": outcome.reason,
                                                            "attempts": outcome.attempts})
                    tracer.fail(outcome.reason)
                log.error("job failed after %d attempts, left pending for redelivery: %s",
                          outcome.attempts, outcome.reason)
                await self._keep_error(entry_id, outcome.reason,
                                       settled=None if prior is None else prior + 1)
                if is_redis_trouble(outcome.error):
                    self.recover_soon()

    async def dead(self, entry_id: bytes, fields: list[bytes], deliveries: int,
                   reason: str, kind: str, *, forget: bool = False) -> None:
        """Dead-letter (and so ack) the entry, retrying while Redis is away; forget: a
        redelivered entry, whose start count and last error go once it is dead."""
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
            except redis.ResponseError as e:
                if not is_oom(e):
                    raise
                self.outage.enter(e, job_left=True)  # jobs:dead refused: stays pending
                return
            if dead_id is not None:
                if forget:
                    await self._forget(entry_id)
                self.settle([entry_id, kind, DEAD, None, None])
                if self.tracer is not None:
                    self.tracer.event("stagedoor.dead_letter", {
                        "reason": reason, "dead_letter.id": dead_id.decode(),
                        "messaging.redis.message.delivery_count": deliveries})
                    self.tracer.fail(reason)
                log.error("dead-lettered %s as %s: %s", entry_id.decode(), dead_id.decode(),
                          reason, extra={"entry_id": entry_id.decode(), "kind": kind,
                                         "error": reason, "deliveries": deliveries})
            return
        log.error("could not dead-letter %s (%s); left pending", entry_id.decode(), last)
        self.recover_soon()

    # -- the outbox lease of a delivery that did not succeed --------------------------
    async def _release_lease(self, job: Job, entry_id: bytes) -> None:
        """Best effort: the delivery runs nothing any more, so its lease goes now, not
        after job_timeout (context.py); a failure here leaves it to run out."""
        try:
            await self.ctx.release_lease(job, self.ctx.holder_of(entry_id.decode()))
        except _BEST_EFFORT as e:
            log.debug("could not release the lease of %s: %s", entry_id.decode(), e)

    async def release_lease_of(self, entry_id: bytes, fields: list[bytes]) -> None:
        """The lease a previous start of this entry under this consumer may have left
        (killed while it held it), for an entry that will not run again (poison)."""
        try:
            job = parse_job(fields, self.kinds, max_field_bytes=self.settings.max_field_bytes)
        except MalformedJob:
            return  # no job, no lease
        await self._release_lease(job, entry_id)

    # -- what a redelivered entry carries across deliveries ---------------------------
    # Its start count, settled starts and last error live while it is pending and go
    # when it is acked or dead-lettered, so they are bounded by the pending list (the
    # stream's cap), not by the jobs ever redelivered; STARTS_TTL only reaps what a
    # worker killed between the ack and the DEL left behind.
    def _entry_keys(self, entry_id: bytes) -> tuple[str, str, str]:
        eid = entry_id.decode()
        return (starts_key(self.settings, eid), settled_key(self.settings, eid),
                lasterr_key(self.settings, eid))

    async def _ack_and_forget(self, entry_id: bytes) -> None:
        """A redelivered entry done: XACK and DEL its keys in one write, the XACK first
        (a redelivery is rare: the coalesced ack path is for first deliveries)."""
        try:
            pipe = self.cmd.pipeline(transaction=False)
            pipe.execute_command("XACK", self.settings.stream, self.settings.group, entry_id)
            pipe.delete(*self._entry_keys(entry_id))
            await pipe.execute()
        except _BEST_EFFORT as e:
            # The acker retries the ack until it lands; the keys then run out (STARTS_TTL).
            log.debug("could not ack %s with its keys (%s); acking alone",
                      entry_id.decode(), e)
            self.settle([entry_id, "", ACK, None, None])

    async def _forget(self, entry_id: bytes) -> None:
        try:
            await self.cmd.delete(*self._entry_keys(entry_id))
        except _BEST_EFFORT as e:
            log.debug("could not delete the start count of %s: %s", entry_id.decode(), e)

    def _retried(self, entry_id: bytes, kind: str) -> Callable[[int, str, float, float], None]:
        """What run_with_policy tells of each retry: the failed attempt settled, and an
        event on the job's span when tracing."""
        tracer = self.tracer

        def retried(attempt: int, reason: str, delay: float, took: float) -> None:
            self.settle([entry_id, kind, RETRIED, None, took])
            if tracer is not None:
                tracer.event("stagedoor.retry", {"attempt": attempt, "reason": reason,
                                                 "delay_s": delay})
        return retried

    async def _count_start(self, entry_id: bytes) -> None:
        key = starts_key(self.settings, entry_id.decode())
        pipe = self.cmd.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, STARTS_TTL)
        await pipe.execute()

    async def _keep_error(self, entry_id: bytes, reason: str, *,
                          settled: int | None = None) -> None:
        """Best effort: the reason a delivery failed, for a later poison verdict; and for
        a recorded start (settled: the starts recorded with it), that it ended here in a
        failure, not in a crash: the next redelivery need not run it alone
        (redelivery.isolate).  Lost, the entry only runs alone once more."""
        eid = entry_id.decode()
        try:
            if settled is None:
                await self.cmd.set(lasterr_key(self.settings, eid), reason[:500],
                                   ex=STARTS_TTL)
                return
            pipe = self.cmd.pipeline(transaction=False)
            pipe.set(lasterr_key(self.settings, eid), reason[:500], ex=STARTS_TTL)
            pipe.set(settled_key(self.settings, eid), settled, ex=STARTS_TTL)
            await pipe.execute()
        except _BEST_EFFORT as e:
            log.debug("could not keep the last error of %s: %s", entry_id.decode(), e)

    async def _last_error(self, entry_id: bytes) -> str | None:
        try:
            raw = await self.cmd.get(lasterr_key(self.settings, entry_id.decode()))
        except _BEST_EFFORT:
            return None
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else None


def is_redis_trouble(exc: BaseException | None) -> bool:
    """Redis stalled, reset or refused for memory, or answered as a replica (a failover:
    MASTERDOWN from a script on a demoted master stays a ResponseError in redis-py): not
    the job's fault, run it again soon."""
    return exc is not None and (isinstance(exc, redis.ConnectionError | redis.TimeoutError)
                                or is_oom(exc) or master_changed(exc))


def _parses(kind: str) -> bool:
    try:
        make_job(kind, 1, 1, "r", "t")  # parse_job is the judge of a kind, too
    except ValueError:
        return False
    return True




def raw_field(fields: Sequence[bytes], name: bytes) -> str:
    """A field of an entry that may not parse, as text ('' when absent)."""
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == name:
            return fields[i + 1].decode("utf-8", "replace")
    return ""


def metric_kind(fields: Sequence[bytes], kinds: frozenset[str]) -> str:
    """The metrics label of an entry that may not parse: a known kind or 'invalid'.

    Never the raw value: a label per garbage payload would blow up the metrics."""
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == b"kind":
            value = fields[i + 1].decode("utf-8", "replace")
            return value if value in kinds else "invalid"
    return "invalid"
