"""The native render pool (stagedoor._render.RenderPool, tickets/render_pool.py): C
threads that render orders and write them durably (tickets/_durable.FileSink) without
the GIL, and report through an eventfd to the event loop.

Real threads, a real directory, a real redis-server for the worker cases; the PDFs are
compared with render_order's bytes and opened with qpdf."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest
import redis

from stagedoor import _render
from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order, world_order
from stagedoor.handlers import load_registry
from stagedoor.render.order import Order
from stagedoor.tickets._durable import DirSync, FileSink
from stagedoor.tickets.orders import put_orders_sync
from stagedoor.tickets.render_host import RenderHost
from stagedoor.tickets.render_pool import LocalRender, NativeRenderPool
from tests.support.worker import add_jobs, eventually, running


def _collect_all(pool: _render.RenderPool, n: int) -> list[tuple[object, BaseException | None]]:
    """Wait on the eventfd (as the loop's reader does) until n orders came back."""
    import select

    done: list[tuple[object, BaseException | None]] = []
    while len(done) < n:
        ready, _, _ = select.select([pool.fd], [], [], 10)
        assert ready, f"only {len(done)} of {n} orders came back in 10 s"
        done += pool.collect()
    return done


def test_pool_threads_write_the_same_bytes_as_render_order(tmp_path: Path) -> None:
    orders = [demo_order(i) for i in range(1, 41)] + [world_order(i) for i in range(41, 81)]
    sync = DirSync(tmp_path)
    pool = _render.RenderPool(4)
    try:
        sinks = {}
        for o in orders:
            sink = FileSink(os.fsencode(tmp_path), f"order-{o.order_id}.pdf".encode(), sync)
            sinks[o.order_id] = sink
            pool.submit(o, sink, o.order_id)
        assert pool.pending == len(orders)
        done = _collect_all(pool, len(orders))
    finally:
        assert pool.close() == []
    assert sorted(t for t, _ in done) == [o.order_id for o in orders]  # type: ignore[type-var]
    assert all(err is None for _, err in done)
    assert pool.pending == 0
    for o in orders:
        assert sinks[o.order_id].result() is None
        pdf = tmp_path / f"order-{o.order_id}.pdf"
        assert pdf.read_bytes() == _render.render_order(o), o.order_id
    assert 1 <= sync.fsyncs <= len(orders)
    assert sorted(os.listdir(tmp_path)) == sorted(f"order-{o.order_id}.pdf" for o in orders)
    subprocess.run(["qpdf", "--check", str(tmp_path / "order-41.pdf")], check=True,
                   capture_output=True)


def test_pool_errors_come_back_with_their_order_and_leave_nothing(tmp_path: Path) -> None:
    """A render error (a QR payload too long) comes back from collect() as the exception
    render_order raises; an order that cannot be read raises at submit; a sink whose
    directory is missing says so in result(); the other orders are written."""
    good = demo_order(1)
    bad = Order(order_id=2, tickets=(dataclasses.replace(good.tickets[0],
                                                         admission_code="A" * 3000),))
    pool = _render.RenderPool(2)
    try:
        with pytest.raises(ValueError, match="no tickets"):
            pool.submit(Order(order_id=3, tickets=()),
                        FileSink(os.fsencode(tmp_path), b"order-3.pdf"), 3)
        sinks = {1: FileSink(os.fsencode(tmp_path), b"order-1.pdf"),
                 2: FileSink(os.fsencode(tmp_path), b"order-2.pdf"),
                 4: FileSink(os.fsencode(tmp_path / "gone"), b"order-4.pdf")}
        pool.submit(good, sinks[1], 1)
        pool.submit(bad, sinks[2], 2)
        pool.submit(demo_order(4), sinks[4], 4)
        done = dict(_collect_all(pool, 3))
    finally:
        pool.close()
    assert done[1] is None and sinks[1].result() is None
    assert isinstance(done[2], ValueError) and "QR data too long" in str(done[2])
    with pytest.raises(RuntimeError, match="never written"):
        sinks[2].result()
    assert done[4] is None
    with pytest.raises(FileNotFoundError) as e:
        sinks[4].result()
    assert e.value.filename == str(tmp_path / "gone")
    assert os.listdir(tmp_path) == ["order-1.pdf"]


def test_the_pool_keeps_a_sink_alive_until_it_is_collected(tmp_path: Path) -> None:
    """The caller may drop its sink at once: the pool holds it (its C struct is what the
    pool thread writes through) until collect() gives the task back."""
    import gc

    pool = _render.RenderPool(2)
    try:
        for i in range(1, 51):
            pool.submit(demo_order(i), FileSink(os.fsencode(tmp_path),
                                                f"order-{i}.pdf".encode()), i)
            gc.collect()
        done = _collect_all(pool, 50)
    finally:
        pool.close()
    assert all(err is None for _, err in done)
    for i in range(1, 51):
        assert (tmp_path / f"order-{i}.pdf").read_bytes() == _render.render_order(demo_order(i))


def test_close_finishes_what_was_submitted_and_refuses_more(tmp_path: Path) -> None:
    pool = _render.RenderPool(1)
    sinks = [FileSink(os.fsencode(tmp_path), f"order-{i}.pdf".encode()) for i in range(20)]
    for i, sink in enumerate(sinks):
        pool.submit(demo_order(i + 1), sink, i)
    left = pool.close()                     # nothing collected yet: all come back here
    assert sorted(t for t, _ in left) == list(range(20))  # type: ignore[type-var]
    assert all(s.result() is None for s in sinks)
    assert pool.close() == []               # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(demo_order(1), sinks[0], 0)


async def test_native_pool_on_the_event_loop(tmp_path: Path) -> None:
    """NativeRenderPool: futures resolved by the eventfd reader; True when written,
    the write's OSError when not; close() settles what is still running."""
    pool = NativeRenderPool.start(2)
    assert pool is not None, "the native extensions are built in every test run"
    try:
        sync = DirSync(tmp_path)
        futs = [pool.render_to(demo_order(i), tmp_path / f"order-{i}.pdf", sync)
                for i in range(1, 9)]
        assert await asyncio.gather(*futs) == [True] * 8
        with pytest.raises(FileNotFoundError):
            await pool.render_to(demo_order(9), tmp_path / "none" / "order-9.pdf", None)
        last = pool.render_to(demo_order(10), tmp_path / "order-10.pdf", sync)
    finally:
        pool.close()
    assert last.done() and last.result() is True
    assert sorted(os.listdir(tmp_path)) == sorted(f"order-{i}.pdf" for i in range(1, 11)
                                                  if i != 9)


@pytest.mark.parametrize("where", ["process", "render-pool", "thread-pool"])
async def test_worker_renders_on_either_pool(settings: Settings, sync_redis: redis.Redis,
                                             monkeypatch: pytest.MonkeyPatch,
                                             where: str) -> None:
    """render_tickets through a real worker: in its render process (the default), and in
    the worker (render_isolation = "none") on the native pool, or on the Python thread
    pool where the native one is not there (forced here); the same PDFs."""
    if where == "thread-pool":
        monkeypatch.setattr(NativeRenderPool, "start", classmethod(lambda cls, n: None))
    settings = dataclasses.replace(
        settings, render_isolation="process" if where == "process" else "none")
    orders = [demo_order(i) for i in range(1, 21)] + [world_order(i) for i in range(21, 31)]
    put_orders_sync(sync_redis, settings, orders)
    add_jobs(settings, "render_tickets", [o.order_id for o in orders])
    async with running(settings, load_registry()) as w:
        await eventually(lambda: w.stats.total("handled") == len(orders), what="rendered")
        render = w.ctx.state.get("render")
        if where == "process":
            assert isinstance(render, RenderHost) and render.pid is not None
            host = render.pid
        else:
            assert isinstance(render, LocalRender)
            assert (render.pool is not None) == (where == "render-pool")
            pool = render.pool
    if where == "process":    # the worker's stop ended its render process
        assert not psutil.pid_exists(host) or \
            psutil.Process(host).status() == psutil.STATUS_ZOMBIE
    else:
        assert pool is None or pool.pending == 0
    for o in orders:
        pdf = Path(settings.tickets_dir) / f"order-{o.order_id}.pdf"
        assert pdf.read_bytes() == _render.render_order(o)
        assert sync_redis.hget(settings.key("order", o.order_id), "rendered") == \
            str(pdf).encode()
    assert w.stats.total("retried") == 0


@pytest.mark.parametrize("where", ["process", "render-pool"])
async def test_a_tickets_directory_removed_between_renders_is_made_again(
        settings: Settings, sync_redis: redis.Redis, where: str) -> None:
    """The worker makes the tickets directory once (then remembers it); removed by an
    operator's cleanup meanwhile, the next render's write fails on the directory, which
    is made again and the render tried once more (files.directory_missing): the order
    prints on its first run, nothing retried, wherever the render runs."""
    settings = dataclasses.replace(
        settings, render_isolation="process" if where == "process" else "none")
    tickets = Path(settings.tickets_dir)
    put_orders_sync(sync_redis, settings, [demo_order(i) for i in (1, 2)])
    async with running(settings, load_registry()) as w:
        add_jobs(settings, "render_tickets", [1])
        await eventually(lambda: w.stats.total("handled") == 1, what="first rendered")
        shutil.rmtree(tickets)
        add_jobs(settings, "render_tickets", [2])
        await eventually(lambda: w.stats.total("handled") == 2, what="second rendered")
    assert (tickets / "order-2.pdf").read_bytes() == _render.render_order(demo_order(2))
    assert w.stats.total("retried") == 0 and w.stats.total("failed") == 0
