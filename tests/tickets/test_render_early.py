"""The render process started at the worker's boot, when render_tickets jobs are next
(issue 36, "isolation at no cost"): tickets.start_render_process, a start hook.

- with render_tickets among the next entries the group delivers, the hook starts the
  render process in the background: it is up before any render asks for it, and the
  first render uses it (no second start);
- with only other kinds next (a no-op fleet: bench/perfcheck.py's drain), a quiet
  stream, or render_isolation = "none", it starts nothing: such a worker pays no
  process it may never use;
- a worker that stops while that start is under way leaves no process behind (not
  even for the ~0.1 s until a process whose exec was cancelled sees EOF);
- the boot's start hooks (lifecycle.on_start, as a worker runs them) end only once that
  process is ready, so the worker reads no job it cannot render yet; a process that is
  not ready within RENDER_BOOT_WAIT is not waited for longer (the worker reads on);
- the worker's font plan, which the process's first frame carries, is made while the
  process imports (after the exec), and the process renders with it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.handlers.context import Context
from stagedoor.render import fonts
from stagedoor.render.order import Order
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import enqueue_sync, ensure_group_sync
from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.tickets import handlers as tickets
from stagedoor.tickets import render_host
from stagedoor.tickets.handlers import start_render_process
from stagedoor.tickets.render_host import RenderHost
from stagedoor.worker import lifecycle
from tests.support.handlers import mute_render
from tests.support.pdftools import pdffonts


def _settings(redis_url: str, tmp_path: Path, isolation: str = "process") -> Settings:
    return Settings(redis_url=redis_url, tickets_dir=str(tmp_path / "tickets"),
                    state_dir=str(tmp_path / "state"), consumer="test",
                    render_isolation=isolation)


@pytest.fixture
async def contexts(redis_url: str) -> AsyncIterator[list[Context]]:
    """Contexts made by the test (`_context`), closed at its end (their render hosts)."""
    made: list[Context] = []
    yield made
    for ctx in made:
        host = ctx.state.get("render")
        if host is not None:
            await host.close()
        await ctx.redis.aclose()
        ctx.executor.shutdown()


def _context(settings: Settings, made: list[Context]) -> Context:
    ctx = Context(settings, aioredis.Redis.from_url(settings.redis_url, protocol=2),
                  "test", ThreadPoolExecutor(2), WorkerStats(["render_tickets"]))
    made.append(ctx)
    return ctx


def _fill(sync_redis: redis.Redis, settings: Settings, kinds: list[str]) -> None:
    ensure_group_sync(sync_redis, settings)
    enqueue_sync(sync_redis, settings, [make_job(kind, i + 1, i + 1)
                                        for i, kind in enumerate(kinds)])


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children()}


@pytest.mark.server
async def test_render_jobs_next_start_the_render_process_at_boot(
        redis_url: str, sync_redis: redis.Redis, tmp_path: Path,
        contexts: list[Context]) -> None:
    settings = _settings(redis_url, tmp_path)
    # a few other jobs first: the hook looks at the next entries, not only the first
    _fill(sync_redis, settings, ["noop", "noop", "render_tickets", "noop"])
    ctx = _context(settings, contexts)
    await start_render_process(ctx)
    host = ctx.state.get("render")
    assert isinstance(host, RenderHost)
    for _ in range(600):    # up in the background, no render asked for (60 s at most)
        if host.pid is not None and host._out is not None:
            break
        await asyncio.sleep(0.1)
    assert host.pid is not None and host.starts == 1
    assert psutil.Process(host.pid).is_running()
    order = demo_order(7)
    (tmp_path / "tickets").mkdir()
    path = tmp_path / "tickets" / "order-7.pdf"
    _lost, tickets = await host.render(order.order_id, order.to_json(), path)
    assert path.read_bytes().startswith(b"%PDF") and tickets == len(order.tickets)
    assert host.starts == 1     # the first render ran in the process started at boot


@pytest.mark.server
@pytest.mark.parametrize("case", ["noop", "quiet", "none", "no-stream", "delivered"])
async def test_no_render_in_sight_starts_nothing(
        case: str, redis_url: str, sync_redis: redis.Redis, tmp_path: Path,
        contexts: list[Context]) -> None:
    settings = _settings(redis_url, tmp_path, "none" if case == "none" else "process")
    if case in ("noop", "delivered"):
        _fill(sync_redis, settings, ["noop"] * 20 + ["render_tickets"])
    elif case == "quiet":
        ensure_group_sync(sync_redis, settings)
    elif case == "none":
        _fill(sync_redis, settings, ["render_tickets"])
    if case == "delivered":     # the render job was read already: nothing comes
        sync_redis.xreadgroup(settings.group, "other", {settings.stream: ">"}, count=21)
    before = _children()
    ctx = _context(settings, contexts)
    await start_render_process(ctx)
    await asyncio.sleep(0.2)
    assert "render" not in ctx.state
    assert _children() == before


@pytest.mark.server
async def test_a_stop_during_the_boot_s_start_leaves_no_process(
        redis_url: str, sync_redis: redis.Redis, tmp_path: Path,
        contexts: list[Context]) -> None:
    settings = _settings(redis_url, tmp_path)
    _fill(sync_redis, settings, ["render_tickets"])
    before = _children()
    for delay in (0.0, 0.001, 0.02, 0.1):   # before the exec, during it, before "ready"
        ctx = _context(settings, contexts)
        await start_render_process(ctx)
        await asyncio.sleep(delay)
        host = ctx.state.pop("render")
        assert isinstance(host, RenderHost)
        await host.close()
        gone = _children() - before
        for pid in gone:    # a child not reaped yet is a zombie at most, never running
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


@pytest.mark.server
async def test_the_boot_ends_once_the_render_process_is_ready(
        redis_url: str, sync_redis: redis.Redis, tmp_path: Path,
        contexts: list[Context]) -> None:
    """Before: the boot went on to the first read while the process was starting; the
    first jobs read waited ~0.1-0.4 s on this worker for it (the whole drain's rate
    0.92 of render_isolation = "none" at rest, its steady window 1.0)."""
    settings = _settings(redis_url, tmp_path)
    _fill(sync_redis, settings, ["render_tickets"] * 3)
    ctx = _context(settings, contexts)
    await lifecycle.on_start(tickets.registry, ctx)     # the worker's boot, its hooks
    host = ctx.state.get("render")
    assert isinstance(host, RenderHost)
    assert host.pid is not None and psutil.Process(host.pid).is_running()
    assert host._out is not None, "the boot ended before the render process was ready"
    assert await host.started(0.0)


@pytest.mark.server
async def test_a_render_process_slow_to_start_holds_the_boot_no_longer_than_the_wait(
        redis_url: str, sync_redis: redis.Redis, tmp_path: Path,
        contexts: list[Context], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(render_host, "SERVE_MODULE", mute_render.SERVE)
    monkeypatch.setattr(tickets, "RENDER_BOOT_WAIT", 1.0)
    settings = _settings(redis_url, tmp_path)
    _fill(sync_redis, settings, ["render_tickets"])
    ctx = _context(settings, contexts)
    loop = asyncio.get_running_loop()
    t = loop.time()
    await lifecycle.on_start(tickets.registry, ctx)
    waited = loop.time() - t
    host = ctx.state.get("render")
    assert isinstance(host, RenderHost) and host.pid is not None
    assert host._out is None    # not ready: mute
    assert waited >= 1.0, waited    # the wait's bound, not a speed
    assert "not ready within 1s of the boot; reading on" in caplog.text


@pytest.mark.server
async def test_no_render_in_sight_the_boot_waits_for_nothing(
        redis_url: str, sync_redis: redis.Redis, tmp_path: Path,
        contexts: list[Context]) -> None:
    settings = _settings(redis_url, tmp_path)
    _fill(sync_redis, settings, ["noop"] * 3)
    ctx = _context(settings, contexts)
    before = _children()
    await lifecycle.on_start(tickets.registry, ctx)
    assert "render" not in ctx.state and _children() == before


@pytest.mark.server
async def test_the_boot_s_font_plan_is_made_while_the_process_imports_and_is_its_plan(
        redis_url: str, sync_redis: redis.Redis, tmp_path: Path,
        contexts: list[Context], monkeypatch: pytest.MonkeyPatch) -> None:
    """The font plan (reading the fonts' coverage, ~20 ms) is made once the render
    process is exec'd, while it imports, not before the exec; and it is the settings'
    plan the process renders with (its first frame carries it).  Before: made first,
    the exec after it (the plan's time added to the boot)."""
    settings = _settings(redis_url, tmp_path).replace(
        render_fonts=["Cyrl=NotoSerif-Regular.ttf"])
    _fill(sync_redis, settings, ["render_tickets"])
    ctx = _context(settings, contexts)
    made: list[int | None] = []
    use_settings = fonts.use_settings

    def recorded(s: Settings) -> fonts.FontPlan:
        host = ctx.state.get("render")
        made.append(host.pid if isinstance(host, RenderHost) else None)
        return use_settings(s)
    monkeypatch.setattr(fonts, "use_settings", recorded)
    try:
        await lifecycle.on_start(tickets.registry, ctx)
        host = ctx.state.get("render")
        assert isinstance(host, RenderHost) and host.pid is not None
        assert made and made[0] == host.pid, made   # exec'd before the plan was made
        base = demo_order(9).tickets[0]
        order = Order(order_id=9, tickets=(dataclasses.replace(base, buyer="Анна Лебедева"),))
        (tmp_path / "tickets").mkdir()
        path = tmp_path / "tickets" / "order-9.pdf"
        await host.render(order.order_id, order.to_json(), path)
    finally:
        fonts.use(fonts.plan())     # the other tests' default plan, in this process
    names = [row[0] for row in pdffonts(path.read_bytes(), tmp_path)]
    assert any(n.endswith("+NotoSerif") or "NotoSerif" in n for n in names), names


@pytest.mark.server
async def test_a_plan_that_fails_fails_the_start_and_leaves_no_process(
        redis_url: str, tmp_path: Path, contexts: list[Context],
        caplog: pytest.LogCaptureFixture) -> None:
    """start(prepare): a prepare that raises (font settings the plan cannot be made of)
    fails that start with its error; the process exec'd for it is killed and reaped."""
    settings = _settings(redis_url, tmp_path)
    host = RenderHost(settings, WorkerStats(["render_tickets"]))
    before = _children()

    def broken() -> None:
        raise ValueError("no such font")
    try:
        host.start(broken)
        assert not await host.started(30.0)
        assert host.pid is None
        for pid in _children() - before:   # reaped, or a zombie at most
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
        assert "render process failed to start (ValueError: no such font)" in caplog.text
    finally:
        await host.close()
