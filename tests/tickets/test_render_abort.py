"""A renderer failure on one order is that job's failure, never its neighbours' (issue 25).

- an exception of the renderer (native pool, or a renderer called on a thread) is
  RenderFailed: render_tickets dead-letters the job at once with the reason;
- an abort inside the render path, which no Python code can catch (a C library's failed
  assertion did it: tests/render/test_render_crash.py), kills the worker's render process
  (render_isolation = "process", the default), not the worker: shown here with
  tests/support/handlers/faulty_render.py (its ABORT mark) under a real supervisor on a real server.
  The worker keeps its pid, the other orders print, and only the aborting order is
  dead-lettered, once, with the reason;
- a kill -9 of the render process with several renders in flight loses none of them;
- a render that never ends (tests/support/handlers/faulty_render.py's HANG mark) gets
  the render process killed after render_timeout: only its order is dead-lettered;
- a render process that cannot start fails the renders as transient errors, not lost,
  and the worker keeps going;
- in the worker (render_isolation = "none") the same abort kills the worker, and the
  supervisor's poison handling bounds it: the other orders are redelivered and printed,
  only the aborting order ends as a dead letter (poison).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import free_port
from stagedoor.demo.orders import demo_order
from stagedoor.errors import TransientError
from stagedoor.render import reference
from stagedoor.render.order import Order, RenderFailed
from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.tickets import render_host
from stagedoor.tickets.orders import put_orders_sync
from stagedoor.tickets.render_host import RenderHost
from stagedoor.tickets.render_pool import NativeRenderPool, rendered
from tests.support.handlers import faulty_render
from tests.support.supervisor import enqueue, supervisor, wait_for
from tests.support.worker import dead_entries, eventually, gone, live_children, read_fleet
from tests.telemetry.test_exporter import value

MARK = faulty_render.ABORT
REASON = b"render aborted the render process (SIGABRT)"
HANG = faulty_render.HANG
# renders that abort or hang
FAULTY = ["--handlers", "tests.support.handlers.faulty_worker:registry"]


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
    an isolate control (tests/support/render_fuzz.py, REFERENCE_LIMITS): the job's error."""
    t = dataclasses.replace(demo_order(3).tickets[0], event="A \u2066B\u2069")
    with pytest.raises(RenderFailed, match="render failed: AssertionError"):
        rendered(reference.render_order, Order(order_id=3, tickets=(t,)))


def _marked(order_id: int, mark: str) -> Order:
    """A demo order whose event carries `mark` (tests/support/handlers/faulty_render.py's)."""
    order = demo_order(order_id)
    t = dataclasses.replace(order.tickets[0], event=f"Gala {mark}")
    return dataclasses.replace(order, tickets=(t,))


def _store_orders(sync_redis: redis.Redis, settings: Settings, n: int, bad: int,
                  mark: str = MARK) -> None:
    """Demo orders 1..n in the store; order `bad`'s event carries the mark (abort)."""
    orders = [demo_order(i) for i in range(1, n + 1)]
    orders[bad - 1] = _marked(bad, mark)
    put_orders_sync(sync_redis, settings, orders)


def _one_dead_letter(redis_url: str, sync_redis: redis.Redis, settings: Settings,
                     tickets: Path, n: int, bad: int) -> dict[bytes, bytes]:
    """Run render jobs for orders 1..n (one worker holds them all): every order but
    `bad` prints, `bad` is the one dead letter, returned."""
    enqueue(redis_url, "render_tickets", range(1, n + 1))
    good = [i for i in range(1, n + 1) if i != bad]
    wait_for(lambda: all((tickets / f"order-{i}.pdf").exists() for i in good), 60,
             what="every other order printed")
    wait_for(lambda: sync_redis.xlen(settings.dead_stream) == 1, 60,
             what="the aborting order dead-lettered")
    [dead] = dead_entries(sync_redis, settings)
    assert dead[b"order_id"] == str(bad).encode()
    assert not (tickets / f"order-{bad}.pdf").exists()
    return dead


def _all_acked(sync_redis: redis.Redis, settings: Settings, n: int) -> None:
    wait_for(lambda: (g := sync_redis.xinfo_groups(settings.stream)[0])["pending"] == 0
             and g["entries-read"] == n, 30, what="every job acked")


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        return str(r.read().decode())


def _render_processes(worker: int) -> list[int]:
    return [c.pid for c in live_children(worker)]


@pytest.mark.server
def test_abort_inside_the_render_path_costs_only_its_order(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    settings = Settings(redis_url=redis_url)
    bad = 4
    _store_orders(sync_redis, settings, 9, bad)     # the aborting order among 8 others
    tickets = tmp_path / "tickets"
    port = free_port()
    args = ["--workers", "1", "--max-deliveries", "2", "--concurrency", "16",
            "--metrics-port", str(port), *FAULTY]
    with supervisor(tmp_path, redis_url, args, handlers=False) as sup:
        [worker] = sup.wait_ready(1).values()
        dead = _one_dead_letter(redis_url, sync_redis, settings, tickets, 9, bad)
        _all_acked(sync_redis, settings, 9)
        assert REASON in dead[b"dead:error"], dead
        assert not dead[b"dead:error"].startswith(b"poison"), dead
        st = sup.status()
        assert st["restarts"] == 0
        assert sup.ready_pids() == {0: worker}      # the same worker process throughout
        wait_for(lambda: 'stagedoor_jobs_render_aborts_total{kind="render_tickets",'
                         'stream="jobs"} 1.0' in _scrape(port), 10, 0.1, "the abort counted")
        text = _scrape(port)
        assert 'stagedoor_jobs_handled_total{kind="render_tickets",stream="jobs"} 8.0' in text
        assert f"order {bad}: render aborted the render process (SIGABRT)" in sup.stderr()
        # the worker renders on: the next order starts a new render process if the abort
        # left none (one is started by a render, not by a death with nothing to run)
        put_orders_sync(sync_redis, settings, [demo_order(10)])
        enqueue(redis_url, "render_tickets", [10])
        wait_for(lambda: (tickets / "order-10.pdf").exists(), 30,
                 what="an order after the abort printed")
        [host] = _render_processes(worker)
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
        wait_for(lambda: gone([host]), 10,
                 what="the render process gone with its worker")
    # delivered once: the dead letter came from the first delivery, not from poison
    assert sync_redis.xlen(settings.dead_stream) == 1


@pytest.mark.server
def test_the_render_process_s_memory_is_the_worker_s(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    """max_worker_memory sees the worker's RSS with its render process's: the heartbeat's
    RSS (what the supervisor recycles by) is the two together, so a leak in the native
    renderer, which runs in that process, still recycles the worker."""
    settings = Settings(redis_url=redis_url)
    put_orders_sync(sync_redis, settings, [demo_order(1)])
    tickets = tmp_path / "tickets"
    with supervisor(tmp_path, redis_url, ["--workers", "1"], handlers=False) as sup:
        [worker] = sup.wait_ready(1).values()
        enqueue(redis_url, "render_tickets", [1])
        wait_for(lambda: (tickets / "order-1.pdf").exists(), 30, what="the render")
        [host] = _render_processes(worker)
        own, child = (psutil.Process(p).memory_info().rss for p in (worker, host))
        assert child > 10 * 2**20, child     # fonts and the native pool: tens of MB

        def reported() -> int:
            rss = [p["rss"] for p in sup.status().get("processes", [])
                   if p["pid"] == worker]
            return int(rss[0]) if rss else 0

        def registered() -> int:    # the fleet registry's (stagedoor status, the console)
            rss = [w.rss_bytes for w in read_fleet(settings).workers if w.pid == worker]
            return rss[0] if rss else 0
        # heartbeats come every second; both processes' RSS move a little between looks
        for look, what in ((reported, "heartbeat"), (registered, "fleet registry")):
            wait_for(lambda look=look: look() > own + child * 0.8, 10, 0.1,
                     f"the {what}'s RSS to count the render process")
            assert look() < (own + child) * 1.25, what
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def _slot_cpu(port: int, slot: int = 0) -> float:
    return value(_scrape(port).encode(), "stagedoor_worker_cpu_seconds_total",
                 slot=str(slot))


def _cpu(pid: int, reaped: bool = True) -> float:
    t = psutil.Process(pid).cpu_times()
    own = t.user + t.system
    return own + t.children_user + t.children_system if reaped else own


@pytest.mark.server
def test_the_render_process_s_cpu_is_the_worker_s(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    """The slot's CPU counter is the worker's with its render process's, where a real
    job's work is done, and it keeps a render process's CPU after that process is gone
    (it goes on counting up, not back)."""
    settings = Settings(redis_url=redis_url)
    n = 800
    put_orders_sync(sync_redis, settings, [demo_order(i) for i in range(1, n + 1)])
    tickets = tmp_path / "tickets"
    port = free_port()
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--metrics-port", str(port)],
                    handlers=False) as sup:
        [worker] = sup.wait_ready(1).values()
        enqueue(redis_url, "render_tickets", range(1, n + 1))
        wait_for(lambda: len(list(tickets.glob("order-*.pdf"))) == n, 120,
                 what="every order printed")
        _all_acked(sync_redis, settings, n)
        [host] = _render_processes(worker)
        child = _cpu(host)
        # the precondition that makes the test mean something: the renders took CPU
        # (one run here: 0.29 s for 500 orders)
        assert child > 0.2, child
        # both are idle now: the counter is the two together (a little CPU goes on)
        wait_for(lambda: _slot_cpu(port) >= _cpu(worker, reaped=False) + child * 0.9,
                 10, 0.1, "the slot's CPU to count the render process")
        total = _cpu(worker) + _cpu(host)
        assert _slot_cpu(port) <= total * 1.1 + 0.1, (_slot_cpu(port), total)
        # the render process gone (reaped by the worker): its CPU stays in the counter
        before = _slot_cpu(port)
        os.kill(host, signal.SIGKILL)
        wait_for(lambda: not _render_processes(worker), 10, 0.1, "the render process reaped")
        wait_for(lambda: _cpu(worker) >= _cpu(worker, reaped=False) + child * 0.99, 10,
                 0.1, "its CPU in the worker's children's")
        after = _slot_cpu(port)
        assert after >= before, (before, after)
        assert after >= _cpu(worker, reaped=False) + child * 0.9, (after, child)
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


@pytest.mark.server
def test_kill_9_of_the_render_process_loses_no_job(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    """The render process killed while it renders several orders: every order prints,
    none is dead-lettered, and the worker is the same process throughout."""
    settings = Settings(redis_url=redis_url)
    n = 600
    put_orders_sync(sync_redis, settings, [demo_order(i) for i in range(1, n + 1)])
    tickets = tmp_path / "tickets"
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--concurrency", "16"],
                    handlers=False) as sup:
        [worker] = sup.wait_ready(1).values()
        enqueue(redis_url, "render_tickets", [1])
        wait_for(lambda: (tickets / "order-1.pdf").exists(), 30, what="the first render")
        [host] = _render_processes(worker)
        enqueue(redis_url, "render_tickets", range(2, n + 1))
        wait_for(lambda: len(list(tickets.glob("order-*.pdf"))) >= 20, 30,
                 what="renders under way")
        os.kill(host, signal.SIGKILL)
        wait_for(lambda: len(list(tickets.glob("order-*.pdf"))) == n, 120,
                 what="every order printed")
        wait_for(lambda: sync_redis.xinfo_groups(settings.stream)[0]["pending"] == 0, 30,
                 what="every job acked")
        assert not sync_redis.exists(settings.dead_stream)
        assert sup.status()["restarts"] == 0
        assert sup.ready_pids() == {0: worker}
        assert _render_processes(worker) != [host]
        assert re.search(r"render process died \(SIGKILL\) with [1-9][0-9]* renders in "
                         "flight", sup.stderr()), sup.stderr()[-3000:]
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


async def test_a_render_process_that_cannot_start_fails_renders_as_transient(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A render process that dies before it is ready (here its Python cannot start: a
    PYTHONHOME where there is none) is restarted with a backoff; after three starts in
    a row the waiting renders fail as TransientError (retried by the worker, not lost),
    and a later render tries again."""
    monkeypatch.setenv("PYTHONHOME", str(tmp_path / "no-python-here"))
    host = RenderHost(Settings(), WorkerStats(["render_tickets"]))
    try:
        t0 = time.monotonic()
        with pytest.raises(TransientError, match="render process cannot start: it died "
                                                 "before it was ready"):
            await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
        assert host.starts == 3
        assert time.monotonic() - t0 >= 0.3     # 0.1 + 0.2 s of backoff between them
        assert host.pid is None
        monkeypatch.delenv("PYTHONHOME")        # the host is fixed: the next render prints
        await host.render_to(2, demo_order(2).to_json(), tmp_path / "order-2.pdf")
        assert (tmp_path / "order-2.pdf").exists()
    finally:
        await host.close()


async def test_a_render_that_hangs_is_killed_and_costs_only_its_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A render that never ends (tests/support/handlers/faulty_render.py's HANG mark, as a
    native loop that does not terminate would) holds a thread of the render process
    for good.  After render_timeout the process is killed; a hung render alone in it is
    its order's RenderFailed at once, several are run again one at a time, and the
    renders that do end print.  Without this, each hang (and each retry of its job) took
    a thread of the process until no render of the worker could run."""
    monkeypatch.setattr(render_host, "SERVE_MODULE", faulty_render.SERVE)
    stats = WorkerStats(["render_tickets"])
    host = RenderHost(Settings(render_timeout=1.0), stats)
    why = r"render hung: no result in 1s \(render_timeout\)"
    try:
        await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
        first = host.pid
        assert first is not None
        # alone in the process when it is found hung: its verdict, and the process is gone
        with pytest.raises(RenderFailed, match=why):
            await host.render_to(2, _marked(2, HANG).to_json(), tmp_path / "order-2.pdf")
        assert gone([first])
        assert stats.counters["render_hangs"]["render_tickets"] == 1
        # two hanging among six: each is run alone again and fails, the others print
        bad = {4, 7}
        runs = [host.render_to(i, (_marked(i, HANG) if i in bad else demo_order(i)).to_json(),
                               tmp_path / f"order-{i}.pdf") for i in range(3, 9)]
        results = dict(zip(range(3, 9), await asyncio.gather(*runs, return_exceptions=True),
                           strict=True))
        for i, result in results.items():
            if i in bad:
                assert isinstance(result, RenderFailed) and re.fullmatch(why, str(result)), \
                    result
                assert not (tmp_path / f"order-{i}.pdf").exists()
            else:
                assert isinstance(result, dict), result
                assert (tmp_path / f"order-{i}.pdf").read_bytes().startswith(b"%PDF-")
        assert stats.counters["render_hangs"]["render_tickets"] == 3
        assert stats.counters["render_deaths"][""] == 4   # 2 alone, 1 with two, 1 alone
        # and the worker renders on, in a process of its own
        await host.render_to(9, demo_order(9).to_json(), tmp_path / "order-9.pdf")
        assert host.pid is not None and host.pid != first
    finally:
        await host.close()


async def test_a_stop_while_suspects_run_alone_settles_every_render(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker stops (close()) while the renders a dead process had are being run
    again one at a time: close() returns (the one alone hangs: its process is killed
    after STOP_TIMEOUT), every render waiting on it settles as a transient error (its
    job is retried, not lost, and not blamed), the orders that printed before stay
    printed, and no render process is left behind."""
    monkeypatch.setattr(render_host, "SERVE_MODULE", faulty_render.SERVE)
    monkeypatch.setattr(render_host, "STOP_TIMEOUT", 2.0)
    stats = WorkerStats(["render_tickets"])
    host = RenderHost(Settings(render_timeout=1.0), stats)
    bad = {4, 7}
    runs = {i: asyncio.ensure_future(host.render_to(
        i, (_marked(i, HANG) if i in bad else demo_order(i)).to_json(),
        tmp_path / f"order-{i}.pdf")) for i in range(3, 9)}
    seen: list[int] = []    # the render processes, as they come

    def died() -> bool:     # the first, killed with both hung renders in it
        if host.pid is not None and host.pid not in seen:
            seen.append(host.pid)
        return bool(stats.counters["render_deaths"][""])
    try:
        await eventually(died, 30, "the first render process killed")
        # the next process: the first suspect runs alone in it
        await eventually(lambda: host.pid not in (None, *seen), 30, "the next process")
        first, second = seen[0], host.pid
        assert not any(runs[i].done() for i in bad)
    finally:
        async with asyncio.timeout(30):     # a hang guard, not a speed check
            await host.close()
            settled = await asyncio.gather(*runs.values(), return_exceptions=True)
    results = dict(zip(runs, settled, strict=True))
    for i in bad:
        assert isinstance(results[i], TransientError), results[i]
        assert "the worker is stopping" in str(results[i])
        assert not (tmp_path / f"order-{i}.pdf").exists()
    for i in set(runs) - bad:
        assert isinstance(results[i], dict), results[i]
        assert (tmp_path / f"order-{i}.pdf").read_bytes().startswith(b"%PDF-")
    assert stats.counters["render_hangs"]["render_tickets"] == 0   # no verdict was due
    assert first is not None and second is not None and gone([first, second])
    # no render process of this test is left (they run faulty_render.SERVE, not the
    # real module: a look for "render_serve" could not fail here)
    assert live_children(os.getpid(), faulty_render.SERVE) == []


@pytest.mark.server
def test_a_hung_render_under_a_supervisor_dead_letters_only_its_order(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    """The same through the product: a worker under a supervisor on a real server, one
    order of six hangs; it is dead-lettered once with the reason, the others print and
    are acked, the worker keeps its pid, and the hang is counted."""
    settings = Settings(redis_url=redis_url)
    bad = 3
    _store_orders(sync_redis, settings, 6, bad, mark=HANG)
    tickets = tmp_path / "tickets"
    port = free_port()
    args = ["--workers", "1", "--render-timeout", "1", "--metrics-port", str(port),
            *FAULTY]
    with supervisor(tmp_path, redis_url, args, handlers=False) as sup:
        [worker] = sup.wait_ready(1).values()
        dead = _one_dead_letter(redis_url, sync_redis, settings, tickets, 6, bad)
        _all_acked(sync_redis, settings, 6)
        assert b"render hung: no result in 1s (render_timeout)" in dead[b"dead:error"], dead
        assert sup.ready_pids() == {0: worker} and sup.status()["restarts"] == 0
        wait_for(lambda: 'stagedoor_jobs_render_hangs_total{kind="render_tickets",'
                         'stream="jobs"} 1.0' in _scrape(port), 10, 0.1, "the hang counted")
        assert f"order {bad}: render hung" in sup.stderr()
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
    assert sync_redis.xlen(settings.dead_stream) == 1


async def test_the_render_process_exits_when_its_worker_closes(tmp_path: Path) -> None:
    """close() (the worker's stop): the renders in flight finish, then the process exits."""
    host = RenderHost(Settings(), WorkerStats(["render_tickets"]))
    await host.render_to(1, demo_order(1).to_json(), tmp_path / "order-1.pdf")
    pid = host.pid
    assert pid is not None
    runs = [asyncio.ensure_future(host.render_to(i, demo_order(i).to_json(),
                                                 tmp_path / f"order-{i}.pdf"))
            for i in range(2, 30)]
    await asyncio.gather(*runs)
    await host.close()
    assert gone([pid])
    assert len(os.listdir(tmp_path)) == 29


@pytest.mark.server
def test_abort_in_the_worker_is_bounded_by_poison_handling(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    """render_isolation = "none": the abort kills the worker (SIGABRT); the other orders
    it held are redelivered and printed, and only the aborting order ends as a dead
    letter (poison)."""
    settings = Settings(redis_url=redis_url)
    bad = 4
    _store_orders(sync_redis, settings, 8, bad)
    tickets = tmp_path / "tickets"
    args = ["--workers", "1", "--max-deliveries", "2", "--concurrency", "8",
            "--render-isolation", "none", *FAULTY]
    with supervisor(tmp_path, redis_url, args, handlers=False) as sup:
        sup.wait_ready(1)
        dead = _one_dead_letter(redis_url, sync_redis, settings, tickets, 8, bad)
        assert dead[b"dead:error"].startswith(b"poison:"), dead
        st = sup.status()
        assert st["restarts"] >= 1      # the worker did die (SIGABRT), and came back
        assert "SIGABRT" in sup.stderr() or "signal 6" in sup.stderr(), sup.stderr()[-3000:]
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0
