"""worker/_entries.pyx FastDispatch: a first delivery started in C ends exactly as it
does on the Python path (Dispatcher.handle + run_with_policy).

Each test runs twice against a real redis-server: "c" with the extension's dispatch
and read-ahead streak (what the worker runs), "python" with their executable
specifications instead: every entry through Dispatcher.handle (GeneralDispatch below)
and tests/support/readahead_spec.py's PyStreak.  Same handler, same assertions: the
ack, the counters and histograms, the dead letter and its reason, retries, time
limits, the log fields and the context.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.errors import PermanentError, TransientError
from stagedoor.handlers import Registry
from stagedoor.handlers.registry import Handler
from stagedoor.stream.job import Job
from stagedoor.telemetry.logs import current_job
from stagedoor.worker import dispatch
from stagedoor.worker.loop import Worker
from tests.support import readahead_spec
from tests.support.worker import add_jobs, dead_entries, eventually, pending_summary, running

FAST = {"block_ms": 100, "reclaim_interval": 0.05, "retry_backoff": 0.001}
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")

pytestmark = pytest.mark.parametrize("path", ["c", "python"])


@asynccontextmanager
async def worker_on(path: str, settings: Settings, reg: Registry,
                    monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Worker, list[int]]]:
    """A running worker on the named path; yields it and the outbox ids that went
    through Dispatcher.handle (the Python path's entry point)."""
    handled: list[int] = []
    handle = dispatch.Dispatcher.handle

    def counting(self: dispatch.Dispatcher, entry_id: bytes, fields: Any, *a: Any,
                 **k: Any) -> Awaitable[None]:
        outbox = dict(zip(fields[::2], fields[1::2], strict=True)).get(b"outbox_id", b"0")
        handled.append(int(outbox))
        return handle(self, entry_id, fields, *a, **k)

    monkeypatch.setattr(dispatch.Dispatcher, "handle", counting)
    if path == "python":
        readahead_spec.use_python(monkeypatch)  # the read-ahead's streak in Python too
    async with running(settings.replace(**FAST), reg) as w:
        if path == "python":
            w.dispatcher.fast = GeneralDispatch(w.dispatcher)
        else:
            assert type(w.reader.ahead.core).__name__ == "Streak"
        yield w, handled


class GeneralDispatch:
    """What FastDispatch.run does, as the spec says it: each entry started on the
    general path (Dispatcher.handle + run_with_policy), as a redelivery is."""

    def __init__(self, dispatcher: dispatch.Dispatcher) -> None:
        self.dispatcher = dispatcher

    def run(self, entries: Any, loop: asyncio.AbstractEventLoop, settled: list[Any]) -> int:
        return sum(self.dispatcher._start(entry_id, fields, 1, None, loop)
                   for entry_id, fields in entries)


def acked(client: redis.Redis, settings: Settings) -> bool:
    return pending_summary(client, settings)[0] == 0


async def test_a_job_that_never_waits_is_counted_timed_and_acked(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[Any, str, Any]] = []
    reg = Registry()

    @reg.register("noop")
    async def noop(job: Job, ctx: object) -> None:
        seen.append((dict(current_job() or {}), VAR.get(), asyncio.current_task()))
        VAR.set(f"job {job.outbox_id}")  # must not leak into the next job
        logging.getLogger("test.handler").warning("rendering %d", job.outbox_id)

    caplog.set_level(logging.WARNING, "test.handler")
    async with worker_on(path, settings, reg, monkeypatch) as (w, handled):
        ids = add_jobs(settings, "noop", [1, 2, 3])
        await eventually(lambda: acked(sync_redis, settings) and len(seen) == 3, what="acks")
        test_task = asyncio.current_task()
    assert handled == ([] if path == "c" else [1, 2, 3])  # C: never through handle()
    assert w.stats.counters["handled"]["noop"] == 3
    assert sum(w.stats.durations["noop"][:-1]) == 3  # [buckets..., +Inf, sum]
    assert sum(w.stats.waits["noop"][:-1]) == 3
    assert w.stats.gauges["in_flight"] == 0
    fields = [f for f, _v, _t in seen]
    assert fields == [{"request_id": f"req{i}", "trace": f"tr{i}", "kind": "noop",
                       "order_id": i, "outbox_id": i, "entry_id": ids[i - 1],
                       "deliveries": 1, "consumer": "test-00"} for i in (1, 2, 3)]
    assert [v for _f, v, _t in seen] == ["unset"] * 3
    tasks = [t for _f, _v, t in seen]
    assert len(set(map(id, tasks))) == 3 and test_task not in tasks
    assert all(type(t).__name__ == "EagerRun" for t in tasks)
    assert current_job() is None
    assert [r.getMessage() for r in caplog.records] == [f"rendering {i}" for i in (1, 2, 3)]


async def test_kinds_interleaved_in_one_reply_are_each_counted(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The C path hands a reply's outcomes to settle as one batch: kinds a, b, a, a and a
    job that fails in the middle of the reply end with the same counters as one
    settled outcome per job (the Python path)."""
    reg = Registry()
    ran: list[tuple[str, int]] = []

    for kind in ("alpha", "beta"):
        @reg.register(kind)
        async def handler(job: Job, ctx: object) -> None:
            ran.append((job.kind, job.outbox_id))
            if job.outbox_id == 3:
                raise PermanentError("no such order")

    kinds = ["alpha", "beta", "beta", "alpha", "alpha", "beta", "alpha"]
    async with worker_on(path, settings, reg, monkeypatch) as (w, _handled):
        # one MULTI: the worker's blocked read is served once, with all seven
        pipe = sync_redis.pipeline(transaction=True)
        for i, kind in enumerate(kinds, 1):
            pipe.xadd(settings.stream, dict(zip(
                ["kind", "order_id", "outbox_id", "request_id", "trace"],
                [kind, str(i), str(i), f"req{i}", f"tr{i}"], strict=True)))
        pipe.execute()
        await eventually(lambda: acked(sync_redis, settings) and len(ran) == 7, what="acks")
    assert [o for _k, o in ran] == list(range(1, 8))  # in the stream's order
    assert w.stats.counters["handled"]["alpha"] == 4
    assert w.stats.counters["handled"]["beta"] == 2  # the third failed: dead, not handled
    assert len(dead_entries(sync_redis, settings)) == 1


async def test_a_job_that_waits_goes_on_as_a_task_and_is_acked(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    after: list[tuple[int, Any]] = []
    reg = Registry()

    @reg.register("noop")
    async def waits(job: Job, ctx: object) -> None:
        await asyncio.sleep(0.05)
        after.append((job.outbox_id, (current_job() or {}).get("outbox_id")))

    async with worker_on(path, settings, reg, monkeypatch) as (w, handled):
        add_jobs(settings, "noop", [1, 2])
        await eventually(lambda: acked(sync_redis, settings) and len(after) == 2,
                         what="acks")
    assert sorted(after) == [(1, 1), (2, 2)]  # its log fields are still its own
    assert sorted(handled) == [1, 2]  # what waited went on in handle()
    assert w.stats.counters["handled"]["noop"] == 2
    # the wait is in the durations (a lower bound: uvloop's timers may round 1 ms down)
    assert w.stats.durations["noop"][-1] >= 0.09
    await eventually(lambda: w.stats.gauges["in_flight"] == 0, what="in_flight 0")


async def test_a_permanent_error_before_any_wait_is_dead_lettered_once(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []
    reg = Registry()

    @reg.register("noop")
    async def broken(job: Job, ctx: object) -> None:
        attempts.append(job.outbox_id)
        raise PermanentError(f"order {job.order_id} not found")

    async with worker_on(path, settings, reg, monkeypatch) as (w, _handled):
        add_jobs(settings, "noop", [7])
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, what="dead letter")
        await eventually(lambda: acked(sync_redis, settings), what="ack")
    assert attempts == [7]
    [dead] = dead_entries(sync_redis, settings)
    assert dead[b"dead:error"] == b"permanent error: PermanentError: order 7 not found"
    assert w.stats.counters["dead_lettered"]["noop"] == 1
    assert w.stats.counters["handled"]["noop"] == 0


async def test_a_transient_error_before_any_wait_is_retried(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []
    reg = Registry()

    @reg.register("noop")
    async def flaky(job: Job, ctx: object) -> None:
        attempts.append(job.outbox_id)
        if len(attempts) < 3:
            raise TransientError("payment api away")

    async with worker_on(path, settings.replace(retries=3), reg, monkeypatch) as (w, _h):
        add_jobs(settings, "noop", [1])
        await eventually(lambda: acked(sync_redis, settings) and len(attempts) == 3,
                         what="ack after retries")
    assert w.stats.counters["retried"]["noop"] == 2
    assert w.stats.counters["handled"]["noop"] == 1
    assert sum(w.stats.durations["noop"][:-1]) == 3  # every attempt is timed


async def test_a_handler_bug_before_any_wait_is_logged_retried_and_left_pending(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    reg = Registry()

    @reg.register("noop")
    async def buggy(job: Job, ctx: object) -> None:
        raise KeyError("seat")

    async with worker_on(path, settings.replace(retries=1), reg, monkeypatch) as (w, _h):
        add_jobs(settings, "noop", [1])
        await eventually(lambda: w.stats.total("failed") == 1, what="left pending")
    assert pending_summary(sync_redis, settings) == (1, {"test-00": 1})
    assert "handler raised" in caplog.text and "KeyError: 'seat'" in caplog.text
    assert w.stats.counters["retried"]["noop"] == 1


async def test_the_time_limit_of_a_job_that_waits_runs_from_its_start(
        path: str, settings: Settings, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """0.3 s of work before its first wait count towards its 0.6 s limit: the attempt is
    cancelled at 0.6 s, before its 0.5 s wait ends (0.8 s), not at 0.9 s."""
    reg = Registry()

    async def slow_start(job: Job, ctx: object) -> None:
        time.sleep(0.3)  # noqa: ASYNC251 - blocks, as CPU-bound work before a first await
        await asyncio.sleep(0.5)

    reg.add(Handler("noop", slow_start, timeout=0.6))
    async with worker_on(path, settings.replace(retries=0), reg, monkeypatch) as (w, _h):
        add_jobs(settings, "noop", [1])
        await eventually(lambda: w.stats.total("failed") + w.stats.total("handled") == 1,
                         what="an outcome")
    assert (w.stats.total("failed"), w.stats.total("handled")) == (1, 0)
    assert "timed out after 0.6s" in caplog.text


async def test_a_plain_function_returning_a_coroutine_is_run_too(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    done: list[int] = []
    reg = Registry()

    async def body(job: Job) -> None:
        done.append(job.outbox_id)

    def plain(job: Job, ctx: object) -> Awaitable[None]:  # not a coroutine function
        return body(job)

    reg.add(Handler("noop", plain))
    async with worker_on(path, settings, reg, monkeypatch) as (w, handled):
        add_jobs(settings, "noop", [1, 2])
        await eventually(lambda: acked(sync_redis, settings) and len(done) == 2, what="acks")
    assert sorted(handled) == [1, 2]  # the C dispatch leaves it to handle(), whole
    assert w.stats.counters["handled"]["noop"] == 2


async def test_an_entry_the_c_path_does_not_accept_gets_the_python_verdict(
        path: str, settings: Settings, sync_redis: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Registry()

    @reg.register("noop")
    async def noop(job: Job, ctx: object) -> None:
        pass

    async with worker_on(path, settings, reg, monkeypatch) as (w, handled):
        sync_redis.xadd(settings.stream, {"kind": "noop", "order_id": "x"})
        add_jobs(settings, "noop", [1])
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1
                         and acked(sync_redis, settings), what="dead letter and acks")
    assert handled == ([0] if path == "c" else [0, 1])  # 0: the entry without an outbox_id
    [dead] = dead_entries(sync_redis, settings)
    assert dead[b"dead:error"].startswith(b"malformed: ")
    assert w.stats.counters["handled"]["noop"] == 1
    assert w.stats.counters["dead_lettered"]["noop"] == 1  # its kind is known
