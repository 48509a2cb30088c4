"""The render process and what its renders are about (issue 37, items 3, 4 and 9).

- a render whose caller gave up before the process was up is never sent; one whose job
  was cancelled (its time limit) never lands a ticket for a refunded
  order: the refund finds nothing rendered, the render process (stopped meanwhile) then
  finishes the stale render, and its PDF must not stay;
- a render process found "hung" while it was not running at all (SIGSTOP: state T) is a
  stall, not the order's fault: a fresh process renders the order, nothing is
  dead-lettered;
- the render host's log lines about an order carry that order's job (request id,
  trace), and lines about the process itself carry no job's.

Real render processes, real signals, a real redis-server for the worker case.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis
from stagedoor.demo.orders import demo_order
from stagedoor.handlers import load_registry
from stagedoor.render.order import RenderFailed
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import enqueue_sync
from stagedoor.telemetry.logs import JsonFormatter, job_context
from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.tickets import render_host
from stagedoor.tickets.orders import put_orders_sync
from stagedoor.tickets.render_host import RenderHost
from tests.support.handlers import faulty_render
from tests.support.worker import (
    add_jobs,
    each_iteration_until,
    eventually,
    gone,
    live_children,
    pending_summary,
    running,
)

HANG = faulty_render.HANG


def _render_processes() -> list[psutil.Process]:
    return live_children(os.getpid(), "render process of worker")


async def test_a_render_of_a_timed_out_job_never_lands_after_the_refund(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """The render process stops (SIGSTOP) with order 2's render in it; the job times out
    and is retried (each time another render of it), the refund finds nothing rendered,
    then the process goes on and the stale renders finish: order 2 is refunded, so its
    PDF must not be there once they did.

    Each step waits for what the next needs, not for a time: the process is up before
    the first read (order 1 is next at boot), order 1's job is acked before the stop
    (its PDF alone can be there before its reply), only the timeouts after the stop
    count (order 2's), and the refund's job is acked before the process goes on.  One
    render thread: the process replies in the order it was sent, so order 3's reply
    comes after the stale renders' ones; the worker's stop then waits for what those
    replies started (landed_late), and the PDF is looked at after that."""
    put_orders_sync(sync_redis, settings, [demo_order(i) for i in (1, 2, 3)])
    fast = settings.replace(block_ms=100, reclaim_interval=0.05, retry_backoff=0.001,
                            job_timeout=1.0, retries=1, render_threads=1)
    tickets = Path(settings.tickets_dir)
    add_jobs(settings, "render_tickets", [1])
    async with running(fast, load_registry()) as w:
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0
                         and (tickets / "order-1.pdf").exists(),
                         what="order 1 rendered and its job acked")
        [proc] = _render_processes()
        ended_before = w.stats.total("retried") + w.stats.total("failed")
        proc.send_signal(signal.SIGSTOP)
        try:
            add_jobs(settings, "render_tickets", [2])
            await eventually(lambda: w.stats.total("retried") + w.stats.total("failed")
                             >= ended_before + 2, what="order 2's job timed out twice")
            enqueue_sync(sync_redis, settings, [make_job("refund", 2, 1002, "rq-r", "tr-r")])
            # order 2's job stays pending (two attempts timed out), the refund's is acked
            await eventually(lambda: sync_redis.hget(settings.key("order", 2), "status")
                             == b"refunded" and pending_summary(sync_redis, settings)[0] == 1,
                             what="order 2 refunded, the refund's job acked")
        finally:
            proc.send_signal(signal.SIGCONT)
        # order 3 goes through the same process after order 2's stale renders
        add_jobs(settings, "render_tickets", [3])
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 1
                         and (tickets / "order-3.pdf").exists(),
                         what="order 3 rendered and its job acked")
    assert not (tickets / "order-2.pdf").exists(), \
        "a render of a timed-out job landed a ticket for a refunded order"
    assert sync_redis.hget(settings.key("order", 2), "status") == b"refunded"


@pytest.mark.parametrize(("socket_timeout", "claim_idle_ms"), [(0.1, 3000), (10.0, 60_000)],
                         ids=["call-timeout-redelivered", "time-limit"])
async def test_a_written_render_whose_job_ends_before_finish_never_outlives_the_refund(
        own_redis: EmbeddedRedis, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        socket_timeout: float, claim_idle_ms: int) -> None:
    """Order 2's render is sent to a stopped render process and the order is refunded
    (nothing rendered yet); Redis is then paused and the process continued: the PDF is
    written and the reply comes, but FINISH_RENDER, which would have found the order
    refunded and removed it, never answers, and the job's attempt ends.  The PDF
    written after the refund must go all the same (the race seen in
    test_a_render_of_a_timed_out_job_never_lands_after_the_refund under load: the time
    limit struck between the reply and FINISH_RENDER's answer).

    No retry (retries=0).  call-timeout-redelivered: FINISH_RENDER's call times out
    (0.1 s), and the check after the attempt fails too (Redis is resumed only after
    that): the job's next delivery (claim_idle_ms 3 s) finds the order refunded and
    removes the PDF.  time-limit: the job's time limit (2 s) cancels the call (10 s
    socket timeout), and the job is left pending for a minute: the check after the
    attempt, answered once Redis is back, removes it."""
    settings = Settings(redis_url=own_redis.url, tickets_dir=str(tmp_path / "tickets"),
                        state_dir=str(tmp_path / "state"), consumer="test", block_ms=100,
                        reclaim_interval=0.05, job_timeout=2.0, retries=0,
                        socket_timeout=socket_timeout, claim_idle_ms=claim_idle_ms)
    client = redis.Redis.from_url(own_redis.url, protocol=2)
    tickets = Path(settings.tickets_dir)
    try:
        put_orders_sync(client, settings, [demo_order(i) for i in (1, 2)])
        add_jobs(settings, "render_tickets", [1])   # next at boot: the process is up first
        async with running(settings, load_registry()) as w:
            # its job acked, not only its PDF there: a process stopped between the
            # write and its reply would keep order 1's job waiting
            await eventually(lambda: pending_summary(client, settings)[0] == 0
                             and (tickets / "order-1.pdf").exists(),
                             what="order 1 rendered and its job acked")
            [proc] = _render_processes()
            proc.send_signal(signal.SIGSTOP)
            try:
                add_jobs(settings, "render_tickets", [2])
                await eventually(lambda: pending_summary(client, settings)[0] == 1,
                                 what="order 2's job delivered")
                enqueue_sync(client, settings, [make_job("refund", 2, 1002, "rq-r", "tr-r")])
                # the refund's job acked, not only the order marked: a refund retried
                # after the pause would remove the PDF itself, and hide the case
                await eventually(lambda: client.hget(settings.key("order", 2), "status")
                                 == b"refunded" and pending_summary(client, settings)[0] == 1,
                                 what="order 2 refunded, the refund's job acked")
                # this test's case is a render in flight when the refund ran, and
                # still in its first attempt here
                assert w.stats.total("failed") == 0
                own_redis.pause()
            finally:
                proc.send_signal(signal.SIGCONT)
            try:
                await eventually((tickets / "order-2.pdf").exists,
                                 what="order 2's render written after the refund")
                await eventually(lambda: w.stats.total("failed") >= 1,
                                 what="order 2's attempt ended with Redis away")
                if socket_timeout < settings.job_timeout:
                    await eventually(lambda: "could not be read" in caplog.text,
                                     what="the check after the attempt failed")
            finally:
                own_redis.resume()
            await eventually(lambda: not (tickets / "order-2.pdf").exists(),
                             what="the refunded order's PDF removed")
        assert client.hget(settings.key("order", 2), "status") == b"refunded"
    finally:
        client.close()


async def test_a_render_cancelled_once_written_is_checked_as_landed_late(
        tmp_path: Path) -> None:
    """A caller cancelled (its job's time limit) after its render's PDF was written: the
    reply may have come already, or be on its way; either way nobody will mark the PDF,
    so landed_late must look at it.  The cancellations land a few loop iterations after
    the PDF appears, across renders: before the fix, a cancellation between the reply
    and the caller's resumption skipped landed_late (15 to 25 of the ~45 renders
    cancelled after their write, in each of 3 runs)."""
    late: list[int] = []

    async def landed_late(order_id: int, path: Path) -> None:
        late.append(order_id)

    # one render thread: the replies come in the order sent (the last render's reply
    # comes after the others', and close() waits for what those started)
    host = RenderHost(Settings(render_threads=1), WorkerStats(["render_tickets"]), None,
                      landed_late)
    written_then_cancelled = []
    try:
        await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
        for order_id in range(100, 160):
            path = tmp_path / f"order-{order_id}.pdf"
            render = asyncio.create_task(host.render_to(order_id,
                                                        demo_order(order_id).to_json(),
                                                        path))
            await each_iteration_until(path.exists)
            for _ in range(order_id % 4):
                await asyncio.sleep(0)
            render.cancel()
            try:
                await render
            except asyncio.CancelledError:
                written_then_cancelled.append(order_id)
        await host.render_to(2, demo_order(2).to_json(), tmp_path / "order-2.pdf")
    finally:
        await host.close()
    assert written_then_cancelled, "no render was cancelled after its write"
    missed = [i for i in written_then_cancelled if i not in late]
    assert not missed, f"{len(missed)} of {len(written_then_cancelled)}: {missed}"


async def test_a_render_cancelled_before_the_process_is_up_is_never_sent(
        tmp_path: Path) -> None:
    """The render process takes a while to start (~0.1 s); a render whose caller gives
    up before that (the job's time limit) waits no more: the process never renders it."""
    host = RenderHost(Settings(), WorkerStats(["render_tickets"]))
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.005):
                await host.render_to(2, demo_order(2).to_json(), tmp_path / "order-2.pdf")
        await host.render_to(3, demo_order(3).to_json(), tmp_path / "order-3.pdf")
        await asyncio.sleep(0.2)
        assert not (tmp_path / "order-2.pdf").exists()
    finally:
        await host.close()
    assert not (tmp_path / "order-2.pdf").exists()


async def test_a_stopped_render_process_is_a_stall_not_a_verdict(tmp_path: Path) -> None:
    """SIGSTOP the render process, then render one order with a short render_timeout:
    the process is found with no result, but it was not running (state T), so no order
    is blamed: a fresh process renders it alone, and nothing counts as a hang."""
    stats = WorkerStats(["render_tickets"])
    host = RenderHost(Settings(render_timeout=1.0), stats)
    try:
        await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
        first = host.pid
        assert first is not None
        os.kill(first, signal.SIGSTOP)
        await host.render_to(2, demo_order(2).to_json(), tmp_path / "order-2.pdf")
        assert (tmp_path / "order-2.pdf").read_bytes().startswith(b"%PDF-")
        assert host.pid is not None and host.pid != first
        assert gone([first])
        assert stats.counters["render_hangs"].get("render_tickets", 0) == 0
    finally:
        await host.close()


class _Lines(logging.Handler):
    """The JSON lines of a logger, formatted where they are logged (the job's fields
    are the logging context's)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(orjson.loads(self.format(record)))


@pytest.fixture
def host_lines() -> Iterator[_Lines]:
    handler = _Lines()
    logger = logging.getLogger("stagedoor.render_host")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _job(order_id: int) -> dict[str, object]:
    return {"request_id": f"req-{order_id}", "trace": f"trace-{order_id}",
            "entry_id": f"{order_id}-0", "kind": "render_tickets", "order_id": order_id,
            "outbox_id": 500 + order_id}


async def test_render_host_lines_carry_their_own_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_lines: _Lines) -> None:
    """Order 1's job starts the render process; order 2's render hangs and gets the
    process killed: those lines carry order 2's job, and a death of the process with no
    render in it carries no job's fields, never order 1's."""
    monkeypatch.setattr(render_host, "SERVE_MODULE", faulty_render.SERVE)
    host = RenderHost(Settings(render_timeout=1.0), WorkerStats(["render_tickets"]))
    hung = demo_order(2)
    hung_json = hung.to_json().replace(b'"buyer":"', f'"buyer":"{HANG} '.encode(), 1)
    try:
        with job_context(_job(1)):
            await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
        with job_context(_job(2)), pytest.raises(RenderFailed, match="render hung"):
            await host.render_to(2, hung_json, tmp_path / "order-2.pdf")
        with job_context(_job(3)):
            await host.render_to(3, demo_order(3).to_json(), tmp_path / "order-3.pdf")
        pid = host.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)    # idle: a death about no order
        await eventually(lambda: any("no render in it" in str(x["msg"])
                                     for x in host_lines.lines), what="the death logged")
    finally:
        await host.close()
    about_2 = [x for x in host_lines.lines if "order 2" in str(x["msg"])]
    assert len(about_2) >= 2, host_lines.lines     # the kill, and the verdict
    for line in about_2:
        assert (line.get("request_id"), line.get("trace"), line.get("outbox_id")) == \
            ("req-2", "trace-2", 502), line
    for line in host_lines.lines:
        assert line.get("request_id") != "req-1", line
        if "order" not in str(line["msg"]):
            assert "request_id" not in line and "trace" not in line, line
