"""The outbox lease (stagedoor:running:<outbox id>) after a job that did not succeed.

A failed delivery (dead-lettered, left pending, judged poison) runs nothing any more,
so it gives its lease back, if it still holds it: the holder token is compared, and
another delivery's lease is never released.  Without that, a replay of the dead
letters (new entries, so new holders) failed every job again on "outbox N is running"
until job_timeout ran out (issue 24, item 5).
"""

from __future__ import annotations

import asyncio

import redis

from stagedoor.config import Settings
from stagedoor.console import deadletters
from stagedoor.demo.orders import demo_order
from stagedoor.errors import TransientError
from stagedoor.handlers import Context, Registry, load_registry
from stagedoor.stream.job import Job, make_job
from stagedoor.stream.keys import lease_key, starts_key
from stagedoor.stream.queue import enqueue_sync, ensure_group_sync
from stagedoor.tickets.orders import put_orders_sync
from tests.support.worker import (
    add_jobs,
    dead_entries,
    eventually,
    pending_summary,
    raw,
    running,
)

RETRIES = 2
FAST = {"block_ms": 100, "retry_backoff": 0.001, "retries": RETRIES}


def replay_one(client: redis.Redis, settings: Settings, dead_id: str
               ) -> tuple[str, str | None]:
    """Replay one dead entry with a blocking client, through the console's script
    (console.deadletters.REPLAY_LUA): ('ok', new id), ('missing', None), ('empty', None)
    or ('full', None)."""
    script = client.register_script(deadletters.REPLAY_LUA)
    keys, argv = deadletters.replay_args(settings, [dead_id])
    status, new_id = script(keys=keys, args=argv)[2][:2]
    return status.decode(), (new_id.decode() if new_id else None)


def lease_keys(client: redis.Redis, settings: Settings) -> list[bytes]:
    return list(client.scan_iter(match=settings.key("running", "*"), count=1000))


async def test_permanent_failures_release_their_leases_and_a_replay_of_all_runs(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """render_tickets for orders not in the store: each takes its lease (BEGIN) and
    fails permanently.  Then the orders arrive and every dead letter is replayed at
    once, while the worker still runs: every replayed job is handled, no lease is left."""
    n = 200
    ensure_group_sync(sync_redis, settings)
    add_jobs(settings, "render_tickets", range(1, n + 1))
    async with running(settings.replace(**FAST), load_registry()) as w:
        await eventually(lambda: sync_redis.xlen(settings.dead_stream) == n, 30,
                         "every job dead-lettered")
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0, 10, "acks")
        assert lease_keys(sync_redis, settings) == []
        put_orders_sync(sync_redis, settings, [demo_order(i) for i in range(1, n + 1)])
        for dead_id, _f in raw(sync_redis).execute_command(
                "XRANGE", settings.dead_stream, "-", "+"):
            assert replay_one(sync_redis, settings, dead_id.decode())[0] == "ok"
        await eventually(lambda: w.stats.total("handled") == n, 60, "every replay handled")
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0, 10, "acks")
    assert w.stats.total("failed") == 0
    assert sync_redis.xlen(settings.dead_stream) == 0
    assert lease_keys(sync_redis, settings) == []


def _leasing_registry(fail: set[int], ran: list[int] | None = None,
                      kind: str = "lease") -> Registry:
    """A handler that takes the lease (already_done), then fails as told by outbox id:
    in `fail` -> TransientError, else done; `ran` gets the outbox id of each attempt
    that got past the lease."""
    reg = Registry()

    @reg.register(kind)
    async def lease(job: Job, ctx: Context) -> None:
        if await ctx.already_done(job):
            return
        if ran is not None:
            ran.append(job.outbox_id)
        await asyncio.sleep(0)
        if job.outbox_id in fail:
            raise TransientError("dependency away")
        await ctx.mark_done(job)

    return reg


async def test_a_job_left_pending_releases_its_lease_and_never_another_s(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """Left pending after its retries: its own lease is gone at once (another consumer
    may reclaim it without waiting for job_timeout); a lease another delivery holds on
    the same outbox id is left alone."""
    ensure_group_sync(sync_redis, settings)
    s = settings.replace(**FAST, job_timeout=20.0, claim_idle_ms=30_000)
    other = lease_key(s, 8, 8)
    add_jobs(s, "lease", [7])
    ran: list[int] = []
    async with running(s, _leasing_registry({7, 8}, ran), consumer="c1") as w:
        await eventually(lambda: w.stats.total("failed") == 1, 10, "job 7 left pending")
        assert not sync_redis.exists(lease_key(s, 7, 7))
        # Job 8's lease is someone else's (a slow delivery on another worker): ours
        # fails on it, and must not release it.
        sync_redis.set(other, b"c9/1-1", px=20_000)
        add_jobs(s, "lease", [8])
        await eventually(lambda: w.stats.total("failed") == 2, 10, "job 8 left pending")
    assert sync_redis.get(other) == b"c9/1-1"
    # Retried in the same delivery (same holder), job 7 never waited on its own lease:
    # every attempt ran; job 8 never got past the other holder's.
    assert ran == [7] * (RETRIES + 1)
    # A second worker takes job 7 over at once and finishes it.
    ids: list[bytes | str | int | memoryview] = [
        e["message_id"] for e in sync_redis.xpending_range(s.stream, s.group, "-", "+", 10, "c1")]
    sync_redis.xclaim(s.stream, s.group, "c2", 0, ids)
    ran.clear()
    async with running(s, _leasing_registry({8}, ran), consumer="c2") as w2:
        await eventually(lambda: w2.stats.total("handled") == 1, 10, "job 7 handled on c2")
    assert ran == [7]  # at its first attempt there: c1's lease was gone


async def test_a_poison_verdict_releases_the_lease_of_its_own_entry(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """An entry whose previous start killed this consumer's process (its lease still
    names `<consumer>/<entry id>`) and is now judged poison: dead-lettered, lease gone."""
    s = settings.replace(**FAST, max_deliveries=3, job_timeout=20.0, claim_idle_ms=30_000)
    ensure_group_sync(sync_redis, s)
    [entry] = enqueue_sync(sync_redis, s, [make_job("lease", 5, 5, "r5", "t5")])
    eid = entry.decode() if isinstance(entry, bytes) else entry
    sync_redis.xreadgroup(s.group, "c1", {s.stream: ">"}, count=1)
    sync_redis.set(starts_key(s, eid), 5)
    sync_redis.set(lease_key(s, 5, 5), f"c1/{eid}", px=20_000)
    async with running(s, _leasing_registry(set()), consumer="c1"):
        await eventually(lambda: sync_redis.xlen(s.dead_stream) == 1, 10, "poison verdict")
    [dead] = dead_entries(sync_redis, s)
    assert dead[b"dead:error"].startswith(b"poison")
    assert not sync_redis.exists(lease_key(s, 5, 5))
