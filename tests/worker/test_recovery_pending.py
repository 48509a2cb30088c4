"""Work left pending by a transient outage comes back at the speed of the fleet.

A handler fails transiently while a Redis key (the "outage") exists, so every job is
left pending; the key goes, and the fleet must take the whole pending set back at
close to its drain rate, not a few slots' worth per reclaim interval (issue 24, item
5: 48 a minute with two idle workers).  claim_idle_ms still protects an entry a live,
slow worker is running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.orders import demo_order
from stagedoor.errors import TransientError
from stagedoor.handlers import Context, Registry, load_registry
from stagedoor.stream.job import Job
from stagedoor.stream.queue import ensure_group_sync
from stagedoor.tickets.orders import put_orders_sync
from tests.support.worker import add_jobs, dead_entries, eventually, pending_summary, running
from tests.tickets.test_hardening_files import tmpfs

JOBS = 1000
SLOW_S = 2.5


def outage_registry(flag: str, slow_starts: list[str]) -> Registry:
    reg = Registry()

    @reg.register("flaky")
    async def flaky(job: Job, ctx: Context) -> None:
        # A round trip, as a real handler waits on something: the job holds its slot.
        if await ctx.redis.exists(flag):
            raise TransientError("dependency away")

    @reg.register("slow")
    async def slow(job: Job, ctx: Context) -> None:
        slow_starts.append(ctx.consumer)
        await asyncio.sleep(SLOW_S)

    return reg


async def test_jobs_left_pending_by_an_outage_come_back_at_the_fleet_s_pace(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """Two workers; 1,000 jobs fail while the outage lasts (each at least once fresh,
    some again after a reclaim); once it is over all are handled within a bound far
    below count / free slots x reclaim_interval (1000 / 16 x 30 s = 31 min); a slow job
    that starts as the recovery begins is never taken from its live worker."""
    flag = settings.key("test-outage")
    s = settings.replace(block_ms=1000, retries=0, claim_idle_ms=3000, job_timeout=2.9,
                         reclaim_interval=30.0)
    ensure_group_sync(sync_redis, s)
    sync_redis.set(flag, 1)
    slow_starts: list[str] = []
    reg = outage_registry(flag, slow_starts)
    add_jobs(s, "flaky", range(1, JOBS + 1))
    async with contextlib.AsyncExitStack() as stack:
        ws = [await stack.enter_async_context(running(s, reg, slot=i + 1)) for i in range(2)]

        def total(name: str) -> int:
            return sum(w.stats.total(name) for w in ws)

        await eventually(lambda: total("failed") >= JOBS, 30, "every job failed once")
        # Some are taken back while the outage lasts and fail again (their start was
        # recorded and ended in a failure, not a crash: no reason to run them alone).
        await eventually(lambda: total("failed") >= JOBS + 50, 30,
                         "jobs reclaimed during the outage failing again")
        sync_redis.delete(flag)
        add_jobs(s, "slow", [JOBS + 1])
        await eventually(lambda: total("handled") == JOBS + 1, 45,
                         "every job handled once the outage is over")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, 10, "acks")
    assert dead_entries(sync_redis, s) == []
    assert len(slow_starts) == 1, slow_starts  # never reclaimed from its live worker


async def test_an_entry_a_live_worker_runs_is_not_reclaimed_before_claim_idle_ms(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """Reclaim passes run back to back while a pending backlog is taken (the first
    test); an entry that a live worker is running stays with it until claim_idle_ms."""
    flag = settings.key("test-outage")
    s = settings.replace(block_ms=200, retries=0, claim_idle_ms=4000, job_timeout=3.0,
                         reclaim_interval=0.05)
    ensure_group_sync(sync_redis, s)
    slow_starts: list[str] = []
    reg = outage_registry(flag, slow_starts)
    add_jobs(s, "slow", [1])
    async with running(s, reg, consumer="slowpoke") as w:
        await eventually(lambda: len(slow_starts) == 1, 10, "the slow job started")
        async with running(s, reg, consumer="hungry", slot=2):
            await eventually(lambda: w.stats.total("handled") == 1, 10, "slow job done")
    assert slow_starts == ["slowpoke"]


async def test_entries_that_failed_after_a_redelivery_are_not_run_one_at_a_time(
        settings: Settings, sync_redis: redis.Redis, caplog: pytest.LogCaptureFixture
        ) -> None:
    """A redelivered entry whose start ended in a failure (the worker lived) is no
    crash suspect: the next redelivery runs it with the others, not alone."""
    flag = settings.key("test-outage")
    s = settings.replace(block_ms=200, retries=0, claim_idle_ms=1000, job_timeout=0.9,
                         reclaim_interval=0.1, max_deliveries=10)
    ensure_group_sync(sync_redis, s)
    sync_redis.set(flag, 1)
    reg = outage_registry(flag, [])
    add_jobs(s, "flaky", range(1, 21))
    with caplog.at_level(logging.WARNING, logger="stagedoor.worker"):
        async with running(s, reg) as w:
            # a fresh failure and two failed redeliveries each, on average
            await eventually(lambda: w.stats.total("failed") >= 20 * 3, 30,
                             "failed redeliveries")
            sync_redis.delete(flag)
            await eventually(lambda: w.stats.total("handled") == 20, 30, "all handled")
    alone = [r.getMessage() for r in caplog.records if "one at a time" in r.getMessage()]
    assert alone == []


def fill_to_the_brim(filler: Path) -> Path:
    """Write zeros until the file system says ENOSPC: every write after fails."""
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


async def test_render_jobs_failed_on_a_full_disk_come_back_once_space_is_back(
        settings: Settings, sync_redis: redis.Redis, tmp_path: Path) -> None:
    """A real full disk (a tmpfs filled to the brim): every render_tickets job fails on
    ENOSPC and is left pending on one of two workers; space comes back; all are
    rendered well inside a bound the old pace (200 / 16 a 30 s: 6 min) could not meet."""
    n = 200
    with tmpfs(tmp_path / "disk", "8m") as disk:
        tickets = disk / "tickets"
        tickets.mkdir()
        filler = fill_to_the_brim(disk / "filler")
        orders = [demo_order(i) for i in range(1, n + 1)]
        put_orders_sync(sync_redis, settings, orders)
        s = settings.replace(tickets_dir=str(tickets), block_ms=1000, retries=0,
                             claim_idle_ms=3000, job_timeout=2.9, reclaim_interval=30.0)
        ensure_group_sync(sync_redis, s)
        add_jobs(s, "render_tickets", range(1, n + 1))
        async with contextlib.AsyncExitStack() as stack:
            reg = load_registry()
            ws = [await stack.enter_async_context(running(s, reg, slot=i + 1))
                  for i in range(2)]
            await eventually(lambda: sum(w.stats.total("failed") for w in ws) >= n, 30,
                             "every render failed on the full disk")
            os.unlink(filler)
            await eventually(lambda: sum(w.stats.total("handled") for w in ws) == n, 45,
                             "every order rendered once space is back")
            await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, 10, "acks")
        assert all((tickets / f"order-{o.order_id}.pdf").exists() for o in orders)
        assert dead_entries(sync_redis, s) == []
