"""Renders that land after their job ended, where nothing used to check them (issue 37's
landed-late check, in the two places it did not reach):

- render_isolation = "none": the worker's own native pool (and the threads it falls
  back to) goes on rendering after the job's time limit cancelled it; when the PDF
  lands, an order refunded meanwhile must lose it (the refund found nothing rendered);
- render_isolation = "process", at the worker's stop: a render of a cancelled job
  still in the process replies after the stop began; that reply must be read and
  checked, not lost with the socket.

A render "slower than its job's time limit" is made so without timing: the native
pool's submissions of one order are held back (HeldPool) until the test lets them
go, or the render process is stopped (SIGSTOP) until the worker's stop has begun.
Real redis-server, real native renders, real render processes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.handlers import load_registry
from stagedoor.render.order import Order
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import enqueue_sync
from stagedoor.tickets import render_pool
from stagedoor.tickets.orders import put_orders_sync
from stagedoor.tickets.render_host import RenderHost
from stagedoor.tickets.render_pool import LocalRender
from tests.support.worker import (
    add_jobs,
    each_iteration_until,
    eventually,
    live_children,
    pending_summary,
    running,
)

REMOVED = "the PDF a render of its cancelled job wrote after that was removed"


class HeldPool:
    """The native RenderPool, with the renders of some orders held back (not submitted)
    until release(): a render that starts after its job's time limit, as one stuck
    behind slow renders on a busy pool does.  The rest is the pool's own."""

    def __init__(self, pool: Any, order_ids: set[int]) -> None:
        self._pool = pool
        self._ids = order_ids
        self.fd = pool.fd
        self.held: list[tuple[Order, Any, Any]] = []
        self.submitted = 0
        self.collected = 0  # results the loop's reader took

    def submit(self, order: Order, sink: Any, token: Any) -> None:
        self.submitted += 1
        if order.order_id in self._ids:
            self.held.append((order, sink, token))
        else:
            self._pool.submit(order, sink, token)

    def release(self) -> None:
        held, self.held = self.held, []
        for args in held:
            self._pool.submit(*args)

    def read_more_than(self, n: int) -> Callable[[], bool]:
        """Has the loop's reader taken more than `n` results?"""
        return lambda: self.collected > n

    def collect(self) -> Any:
        done = self._pool.collect()
        self.collected += len(done)
        return done

    @property
    def pending(self) -> int:
        return int(self._pool.pending) + len(self.held)

    def close(self) -> Any:
        self.release()
        return self._pool.close()


def _attempts_ended(w: Any) -> int:
    return int(w.stats.total("retried") + w.stats.total("failed"))


async def _refund_acked(client: redis.Redis, settings: Settings, order_id: int,
                        pending: int) -> None:
    """Refund the order and wait until its job is acked (`pending` jobs left): a refund
    retried later would remove the PDF itself and hide the case."""
    enqueue_sync(client, settings, [make_job("refund", order_id, 1000 + order_id,
                                             "rq-r", "tr-r")])
    await eventually(lambda: client.hget(settings.key("order", order_id), "status")
                     == b"refunded" and pending_summary(client, settings)[0] == pending,
                     what=f"order {order_id} refunded, the refund's job acked")


def _with_orders(client: redis.Redis, settings: Settings, isolation: str) -> Settings:
    """Orders 1 and 2 stored, order 1's render job queued (next at boot: a render
    process is up first), and the settings of these tests: a 1 s time limit, no retry,
    no redelivery for a minute (only the landed-late check can remove a PDF)."""
    put_orders_sync(client, settings, [demo_order(i) for i in (1, 2)])
    add_jobs(settings, "render_tickets", [1])
    return settings.replace(render_isolation=isolation, block_ms=100,
                            reclaim_interval=0.05, job_timeout=1.0, retries=0,
                            claim_idle_ms=60_000)


async def _order_1_rendered(client: redis.Redis, settings: Settings) -> None:
    """Order 1's PDF there and its job acked (not only the PDF: a reply still on its
    way would keep the job pending)."""
    await eventually(lambda: pending_summary(client, settings)[0] == 0
                     and (Path(settings.tickets_dir) / "order-1.pdf").exists(),
                     what="order 1 rendered and its job acked")


async def test_none_a_render_landing_after_its_job_and_the_refund_is_removed(
        settings: Settings, sync_redis: redis.Redis, caplog: pytest.LogCaptureFixture
        ) -> None:
    """render_isolation = "none": order 2's render is held on the worker's native pool
    past its job's time limit (retries=0, redelivery a minute away), the order is
    refunded (nothing rendered: nothing to cancel), then the render goes and writes
    the PDF.  Nobody marks it; the landed-late check must remove it.  Before the fix
    the PDF stayed (until the job's redelivery, claim_idle_ms)."""
    caplog.set_level(logging.INFO, logger="stagedoor")
    fast = _with_orders(sync_redis, settings, "none")
    tickets = Path(settings.tickets_dir)
    async with running(fast, load_registry()) as w:
        await _order_1_rendered(sync_redis, settings)
        local = w.ctx.state.get("render")
        assert isinstance(local, LocalRender)
        assert local.pool is not None, "the native pool is not built here"
        held = HeldPool(local.pool._pool, {2})
        local.pool._pool = held
        ended_before = _attempts_ended(w)
        add_jobs(settings, "render_tickets", [2])
        await eventually(lambda: held.held, what="order 2's render submitted")
        await eventually(lambda: _attempts_ended(w) > ended_before,
                         what="order 2's job timed out")
        await _refund_acked(sync_redis, settings, 2, pending=1)
        assert not (tickets / "order-2.pdf").exists()
        held.release()
        await eventually(lambda: held.pending == 0, what="order 2's render done")
    # the worker's stop waited for the landed-late check
    assert not (tickets / "order-2.pdf").exists(), \
        "a render of a timed-out job landed a ticket for a refunded order"
    assert REMOVED in caplog.text
    assert sync_redis.hget(settings.key("order", 2), "status") == b"refunded"


async def test_none_threads_a_cancelled_write_that_lands_is_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The threads path (no native pool, or a file system without unnamed files): a
    render whose caller is cancelled runs on in its thread; when its PDF is written,
    landed_late runs, and aclose() waits for the write and the check."""
    monkeypatch.setattr(render_pool, "unnamed_files", lambda: False)
    gate = threading.Event()
    late: list[tuple[int, bool]] = []

    async def landed_late(order_id: int, path: Path) -> None:
        late.append((order_id, path.exists()))  # noqa: ASYNC240  (a test: one stat)

    async def run_in_thread(fn: Callable[..., Any], *args: Any) -> Any:
        def gated() -> Any:
            gate.wait(10)   # the write waits until the caller was cancelled
            return fn(*args)
        return await asyncio.to_thread(gated)

    local = LocalRender(1, run_in_thread, landed_late)
    assert local.pool is None
    path = tmp_path / "order-2.pdf"
    render = asyncio.create_task(local.render_to(demo_order(2), path))
    await asyncio.sleep(0.05)
    render.cancel()
    with pytest.raises(asyncio.CancelledError):
        await render
    assert not path.exists() and not late
    gate.set()
    await local.aclose()
    assert path.read_bytes().startswith(b"%PDF-")
    assert late == [(2, True)]


async def test_none_native_a_render_cancelled_after_its_write_is_checked(
        tmp_path: Path) -> None:
    """The native pool: a caller cancelled after its render's PDF was written (its
    future set, the caller not resumed yet) or before (its future cancelled, the render
    lands later): landed_late runs once either way.  Each half fails without its side
    of the fix (LocalRender.render_into's except clause; NativeRenderPool._ready)."""
    late: list[int] = []

    async def landed_late(order_id: int, path: Path) -> None:
        late.append(order_id)

    local = LocalRender(1, asyncio.to_thread, landed_late)
    if local.pool is None:
        pytest.fail("the native pool is not built here")
    watched = HeldPool(local.pool._pool, set())     # holds nothing: counts what is read
    local.pool._pool = watched
    cancelled = []
    try:
        for order_id in range(100, 140):
            path = tmp_path / f"order-{order_id}.pdf"
            # the last order's result read: the next one read is this order's
            await each_iteration_until(lambda: watched.collected == watched.submitted)
            read_more = watched.read_more_than(watched.collected)
            render = asyncio.create_task(local.render_to(demo_order(order_id), path))
            if order_id % 2:    # once the reader settled it: the caller not resumed yet
                await each_iteration_until(read_more)
            for _ in range(order_id % 3):     # else from before the submit on
                await asyncio.sleep(0)
            render.cancel()
            try:
                await render
            except asyncio.CancelledError:
                cancelled.append(order_id)
    finally:
        await local.aclose()
    landed = [i for i in cancelled if (tmp_path / f"order-{i}.pdf").exists()]
    assert landed, f"no cancelled render wrote its PDF: {cancelled}"
    assert sorted(late) == sorted(landed), (cancelled, late)


async def test_process_a_render_replying_after_the_stop_began_is_checked(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """render_isolation = "process": order 2's render is in the render process, stopped
    (SIGSTOP), when its job times out; the order is refunded; the worker is stopped,
    and only once its stop reached the render host is the process continued.  It
    renders order 2 and replies: the worker must read that reply and check the PDF
    before it exits.  Before the fix close() closed the socket, the reply was lost, and
    the PDF stayed (until the job's redelivery, claim_idle_ms)."""
    fast = _with_orders(sync_redis, settings, "process")
    tickets = Path(settings.tickets_dir)
    worker = running(fast, load_registry())
    w = await worker.__aenter__()
    stopping: asyncio.Task[Any] | None = None
    try:
        await _order_1_rendered(sync_redis, settings)
        [proc] = live_children(os.getpid(), "render process of worker")
        host = w.ctx.state.get("render")
        assert isinstance(host, RenderHost)
        ended_before = _attempts_ended(w)
        proc.send_signal(signal.SIGSTOP)
        try:
            add_jobs(settings, "render_tickets", [2])
            await eventually(lambda: _attempts_ended(w) > ended_before,
                             what="order 2's job timed out")
            await _refund_acked(sync_redis, settings, 2, pending=1)
            stopping = asyncio.create_task(worker.__aexit__(None, None, None))
            await eventually(lambda: host._closing, what="the stop reached the render host")
        finally:
            proc.send_signal(signal.SIGCONT)
    finally:
        await (stopping if stopping is not None else worker.__aexit__(None, None, None))
    assert not proc.is_running() or proc.status() == "zombie"
    assert not (tickets / "order-2.pdf").exists(), \
        "a render of a timed-out job, replying after the stop began, left its PDF"
    assert sync_redis.hget(settings.key("order", 2), "status") == b"refunded"


async def test_a_late_check_that_fails_is_logged_with_its_job_not_dropped(
        caplog: pytest.LogCaptureFixture) -> None:
    """A landed-late check that raises (a bug, or what no handler of it expected) is
    logged where it ran, with its job's fields, and the stop's wait goes on.  Before:
    wait() gathered it with return_exceptions and dropped it without a word (before
    the stop, asyncio said it only when the task was collected)."""
    from stagedoor.telemetry.logs import JOB_FIELDS

    seen: list[Any] = []

    async def broken() -> None:
        seen.append(JOB_FIELDS.get(None))
        raise RuntimeError("cannot check order 5")

    checks = render_pool.LateChecks()
    with caplog.at_level(logging.ERROR, logger="stagedoor.render"):
        checks.run(broken(), {"order_id": 5, "kind": "render_tickets"})
        await checks.wait()
    assert seen == [{"order_id": 5, "kind": "render_tickets"}]
    [record] = [r for r in caplog.records if r.name == "stagedoor.render"]
    assert record.getMessage() == "the check of a PDF written after its job ended failed"
    assert record.exc_info is not None and "cannot check order 5" in str(record.exc_info[1])
