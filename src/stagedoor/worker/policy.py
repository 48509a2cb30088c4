"""run_with_policy: time limit, retries with backoff and jitter, and the failure verdict.

Transient: TransientError, a time limit, and the errors of a Redis or network that
is away for a moment (redis.ConnectionError, timeouts, OSError).  Anything else a
handler raises is a bug: logged with its traceback, retried like a transient error,
and bounded by the poison counter.  Errors no delivery will fix (a read-only
filesystem, EACCES, a WRONGTYPE order key: stagedoor.stream.errors) are permanent at
once; Redis's OOM reply leaves the entry pending without retries (outage=True), for
the worker to pause on.

The loop asks one question of a handler run: what to do with the entry.  DONE is
acked; DEAD goes to the dead-letter stream (and is acked there); PENDING is left on
the pending list, to be re-delivered after the claim threshold, where the delivery
count makes it poison if it keeps failing.  A cancelled run raises CancelledError
and, like a crash, acks nothing.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..backoff import Schedule
from ..config import Settings
from ..errors import PermanentError, StagedoorError, TransientError
from ..stream.connection import TRANSIENT_ERRORS
from ..stream.errors import first_line, is_oom, is_permanent
from ..telemetry.metrics import WorkerStats

log = logging.getLogger("stagedoor.policy")


class JobTimedOut(StagedoorError, TimeoutError):
    """The attempt ran past its time limit and was cancelled."""


RETRYABLE: tuple[type[BaseException], ...] = (TransientError, *TRANSIENT_ERRORS)


class Verdict(enum.Enum):
    DONE = "done"
    DEAD = "dead"
    PENDING = "pending"


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reason: str = ""
    attempts: int = 1
    outage: bool = False  # PENDING because Redis refuses writes (OOM), not the job's fault
    error: BaseException | None = None  # the last exception, when there was one


_DONE_AT_ONCE = Outcome(Verdict.DONE)  # the common outcome, made once (frozen)


@dataclass(frozen=True, slots=True)
class Begun:
    """A first attempt begun before run_with_policy was called (worker/_entries.pyx ran
    the handler eagerly, and it suspended or raised): what to await to go on with it,
    when it started (time.perf_counter()), and its time limit's flag from
    Deadlines.start ([False] and not registered when it raised)."""

    attempt: Awaitable[None]
    started: float
    expired: list[bool]


class Cancellable(Protocol):
    """What the deadline sweeper needs of a running job: asyncio.Task or eager.EagerRun."""

    def cancel(self, msg: Any = None) -> bool: ...
    def uncancel(self) -> int: ...


class Deadlines:
    """Time limits of every running attempt, enforced by one sweeper task per worker.

    asyncio.timeout() per job makes and cancels an event-loop timer for every job, a
    large share of a short job's cost (docs/benchmarks.md, "Why the code is the way it is").
    One sweep every `period` seconds cancels the attempts past their deadline
    instead; a limit is then enforced to within `period`, which is nothing next to
    limits in seconds.
    """

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self._running: dict[Cancellable, tuple[float, list[bool]]] = {}

    def start(self, task: Cancellable, limit: float) -> list[bool]:
        expired = [False]
        self._running[task] = (time.monotonic() + limit, expired)
        return expired

    def finish(self, task: Cancellable) -> None:
        self._running.pop(task, None)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            now = time.monotonic()
            for task, (deadline, expired) in list(self._running.items()):
                if now >= deadline:
                    expired[0] = True
                    del self._running[task]
                    task.cancel()


async def run_with_policy(run: Callable[[], Awaitable[None]], *, kind: str, time_limit: float,
                          settings: Settings, stats: WorkerStats, deadlines: Deadlines,
                          on_retry: Callable[[int, str, float], None] | None = None,
                          task: Cancellable | None = None, begun: Begun | None = None
                          ) -> Outcome:
    """Run a handler under its time limit, retrying transient failures; return a verdict.

    on_retry(attempt, reason, delay) is told of each retry (the job's span records it).
    Log lines name the job through the caller's logs.job_context.  task: what a time
    limit cancels, the job's Task or the EagerRun standing in for it (eager.py); by
    default the current task.  begun: the first attempt, already under way (its Deadlines
    entry is `task`'s), instead of a call of `run`."""
    attempt = 0
    if task is None:
        task = asyncio.current_task()
        assert task is not None
    while True:
        if begun is not None:
            started, expired, running = begun.started, begun.expired, begun.attempt
            begun = None
        else:
            started = time.perf_counter()
            expired = deadlines.start(task, time_limit)
            running = run()
        try:
            try:
                await running
            except asyncio.CancelledError:
                if not expired[0]:
                    raise               # shutdown: the entry stays pending
                task.uncancel()
                raise JobTimedOut from None
            finally:
                deadlines.finish(task)
        except PermanentError as e:
            # timed like any other run: the Metrics tab's execution time (and the
            # exporter's histogram) covers the failures that dead-letter at once too
            stats.observe(kind, time.perf_counter() - started)
            return Outcome(Verdict.DEAD, f"permanent error: {type(e).__name__}: {e}",
                           attempt + 1)
        except Exception as e:
            if is_permanent(e):  # EROFS, EACCES, WRONGTYPE: no delivery will fare better
                stats.observe(kind, time.perf_counter() - started)
                return Outcome(Verdict.DEAD, f"permanent error: {type(e).__name__}: "
                               f"{first_line(e)}", attempt + 1)
            if is_oom(e):
                # Redis refuses writes: retrying now cannot help; the worker pauses and
                # runs the job again from its own pending list when memory is back.
                stats.observe(kind, time.perf_counter() - started)
                return Outcome(Verdict.PENDING, f"{type(e).__name__}: {first_line(e)}",
                               attempt + 1, outage=True, error=e)
            failure: BaseException = e
            if isinstance(e, RETRYABLE):
                reason = (f"timed out after {time_limit:g}s" if isinstance(e, JobTimedOut)
                          else f"{type(e).__name__}: {e}")
            else:  # a handler bug: retry, then leave it to the poison counter
                log.exception("handler raised")
                reason = f"{type(e).__name__}: {e}"
        else:
            stats.observe(kind, time.perf_counter() - started)
            return Outcome(Verdict.DONE, attempts=attempt + 1) if attempt else _DONE_AT_ONCE
        stats.observe(kind, time.perf_counter() - started)
        if attempt >= settings.retries:
            return Outcome(Verdict.PENDING, reason, attempt + 1, error=failure)
        stats.inc("retried", kind)
        # full jitter from 0 (backoff.py): spreads a burst of retries across the pool
        delay = Schedule(settings.retry_backoff, settings.retry_backoff_max).delay(attempt)
        log.warning("retrying in %.3fs: %s", delay, reason)
        if on_retry is not None:
            on_retry(attempt + 1, reason, delay)
        attempt += 1
        await asyncio.sleep(delay)
