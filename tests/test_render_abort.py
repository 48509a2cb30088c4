"""A renderer failure on one order is that job's failure, never its neighbours' (issue 25).

- an exception of the renderer (native pool, or a renderer called on a thread) is
  RenderFailed: render_tickets dead-letters the job at once with the reason;
- an abort inside the render path, which no Python code can catch (a C library's failed
  assertion did it: tests/test_render_crash.py), kills the worker: shown here with the
  _STAGEDOOR_TEST_RENDER_ABORT hook of handlers/tickets.py under a real supervisor on a
  real server.  The other orders that worker held are redelivered and printed, and only
  the aborting order ends as a dead letter (poison).
"""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path

import pytest
import redis
from tests.helpers_supervisor import enqueue, supervisor, wait_for
from tests.workerkit import dead_entries

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.handlers.orders import put_orders_sync
from stagedoor.handlers.render_pool import NativeRenderPool
from stagedoor.handlers.tickets import _rendered
from stagedoor.render import reference
from stagedoor.render.order import Order, RenderFailed

MARK = "ABORT-IN-RENDER-7d1c"


async def test_native_pool_render_error_is_render_failed(tmp_path: Path) -> None:
    pool = NativeRenderPool.start(2)
    assert pool is not None, "the native extensions are built in the test venv"
    try:
        with pytest.raises(RenderFailed, match="render failed: ValueError: order has no "
                                               "tickets"):
            await pool.render_to(Order(order_id=1, tickets=()), tmp_path / "o.pdf", None)
        # the pool still renders the next order
        assert await pool.render_to(demo_order(2), tmp_path / "order-2.pdf", None)
    finally:
        pool.close()
    assert (tmp_path / "order-2.pdf").read_bytes().startswith(b"%PDF-")


def test_thread_path_render_error_is_render_failed() -> None:
    """The reference renderer (the fallback where the extension is not built) raises on
    an isolate control (tests/render_fuzz.py, REFERENCE_LIMITS): the job's error."""
    t = dataclasses.replace(demo_order(3).tickets[0], event="A \u2066B\u2069")
    with pytest.raises(RenderFailed, match="render failed: AssertionError"):
        _rendered(reference.render_order, Order(order_id=3, tickets=(t,)))


@pytest.mark.server
def test_abort_inside_the_render_path_loses_no_other_job(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    settings = Settings(redis_url=redis_url)
    orders = [demo_order(i) for i in range(1, 9)]
    bad = 4
    t = dataclasses.replace(orders[bad - 1].tickets[0], event=f"Gala {MARK}")
    orders[bad - 1] = dataclasses.replace(orders[bad - 1], tickets=(t,))
    put_orders_sync(sync_redis, settings, orders)
    tickets = tmp_path / "tickets"
    args = ["--workers", "1", "--max-deliveries", "2", "--concurrency", "8"]
    with supervisor(tmp_path, redis_url, args, handlers=False,
                    env={"_STAGEDOOR_TEST_RENDER_ABORT": MARK}) as sup:
        sup.wait_ready(1)
        enqueue(redis_url, "render_tickets", range(1, 9))   # one worker holds them all
        good = [i for i in range(1, 9) if i != bad]
        wait_for(lambda: all((tickets / f"order-{i}.pdf").exists() for i in good), 60,
                 what="every other order printed")
        wait_for(lambda: sync_redis.xlen(settings.dead_stream) == 1, 60,
                 what="the aborting order dead-lettered")
        [dead] = dead_entries(sync_redis, settings)
        assert dead[b"order_id"] == str(bad).encode()
        assert dead[b"dead:error"].startswith(b"poison:"), dead
        assert not (tickets / f"order-{bad}.pdf").exists()
        st = sup.status()
        assert st["restarts"] >= 1      # the worker did die (SIGABRT), and came back
        assert "SIGABRT" in sup.stderr() or "signal 6" in sup.stderr(), sup.stderr()[-3000:]
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
