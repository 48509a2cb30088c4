"""Redis memory bounded by the streams' caps (issue 36), on real servers.

The seed's last section as a test: an on-sale night of enqueue and drain at several
times the stream's cap, on a Redis whose `maxmemory` holds the buyers' sessions, the
stream at its cap and little more.  Under `allkeys-lru` every session survives; under
`noeviction` no producer is refused for memory.  And what stagedoor keeps besides the
streams stays below the stream's own memory, whatever the volume; a redelivered job's
start count and last error go with its entry.

The cap is 5,000 here (maxlen is an operator's setting; the default 100,000 is measured
in bench/measure_memory.py): the job index this replaced held ~160 bytes a job for a day,
4.8 MB over this night, and evicted sessions or filled Redis within the first third.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.errors import TransientError
from stagedoor.handlers import Context, Registry
from stagedoor.handlers.marks import turnover_ttl
from stagedoor.stream.job import Job
from stagedoor.stream.keys import done_key, marks_key, settled_key, starts_key
from tests.support.aclmode import server_args
from tests.support.servers import SuiteRedis
from tests.support.worker import add_jobs, eventually, running

pytestmark = pytest.mark.server

CAP = 5_000
NIGHT = 6 * CAP  # jobs over the night: six times the stream's cap
SESSIONS = 20_000
CHUNK = 1_000


def stagedoor_keys(client: redis.Redis, settings: Settings) -> dict[str, int]:
    """Bytes of every key that is neither a buyer's session nor one of the two streams."""
    streams = {settings.stream, settings.dead_stream}
    out: dict[str, int] = {}
    for key in client.scan_iter(count=1000):
        name = key.decode()
        if name.startswith("session:") or name in streams:
            continue
        out[name] = int(client.memory_usage(name, samples=0) or 0)
    return out


def night_registry() -> Registry:
    reg = Registry()

    @reg.register("render_tickets")
    async def handled(job: Job, ctx: Context) -> None:
        return None

    return reg


@pytest.mark.parametrize("policy", ["allkeys-lru", "noeviction"])
def test_an_on_sale_night_keeps_every_session(tmp_path: Path, policy: str) -> None:
    server = SuiteRedis(tmp_path / "redis", extra_args=server_args()).start()
    try:
        client = redis.Redis.from_url(server.url, protocol=2)
        pipe = client.pipeline(transaction=False)
        for n in range(SESSIONS):
            pipe.set(f"session:{n:08d}", f"buyer-{n:08d}:" + "s" * 48)
        pipe.execute()
        settings = Settings(redis_url=server.url, maxlen=CAP, consumer="night",
                            tickets_dir=str(tmp_path / "tickets"), block_ms=100)
        # Room for the sessions, the stream at its cap (~0.6 MB at five fields) and the
        # server's own buffers, with 3 MB to spare; and no more.
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used + 3 * 2**20)
        client.config_set("maxmemory-policy", policy)

        async def night() -> None:
            async with running(settings, night_registry()) as w:
                for start in range(0, NIGHT, CHUNK):
                    add_jobs(settings, "render_tickets", range(start + 1, start + CHUNK + 1))
                    await eventually(lambda n=start + CHUNK: w.stats.total("handled") >= n,
                                     30, f"{start + CHUNK} jobs handled")

        asyncio.run(night())
        # (add_jobs raises RedisOutOfMemory on a refusal: under noeviction there was none)
        survivors = sum(1 for _ in client.scan_iter(match="session:*", count=5000))
        assert survivors == SESSIONS, f"{SESSIONS - survivors} sessions evicted"
        assert int(client.info("stats")["evicted_keys"]) == 0
        stream_bytes = int(client.memory_usage(settings.stream, samples=0) or 0)
        assert client.xlen(settings.stream) <= CAP + 200  # MAXLEN ~ trims whole nodes
        kept = stagedoor_keys(client, settings)
        assert sum(kept.values()) <= stream_bytes, kept
    finally:
        server.stop()


async def test_a_redelivered_jobs_marks_go_with_its_entry(settings: Settings,
                                                          sync_redis: redis.Redis) -> None:
    """A job that failed once (its last error kept, its second start counted) leaves no
    per-entry key once it is acked; one that turns out poison leaves none once it is
    dead-lettered.  (They used to stay a day each, whatever the stream's cap.)"""
    s = settings.replace(retries=0, claim_idle_ms=200, job_timeout=0.1, reclaim_interval=0.05,
                         block_ms=100,
                         max_deliveries=3)
    failed: set[int] = set()
    reg = Registry()

    @reg.register("render_tickets")
    async def once(job: Job, ctx: Context) -> None:
        if job.order_id not in failed:
            failed.add(job.order_id)
            raise TransientError("gateway answered 503")

    @reg.register("refund")
    async def always(job: Job, ctx: Context) -> None:
        raise TransientError("gateway answered 503")

    async with running(s, reg) as w:
        (ok,) = add_jobs(s, "render_tickets", [8101])
        (poison,) = add_jobs(s, "refund", [8102])
        await eventually(lambda: w.stats.total("handled") == 1 and
                         w.stats.total("dead_lettered") == 1, 20, "both settled")

        def keys(eid: str) -> list[str]:
            return [k for k in (starts_key(s, eid), settled_key(s, eid),
                                s.key("lasterr", eid)) if sync_redis.exists(k)]
        await eventually(lambda: not keys(ok) and not keys(poison), 5,
                         "the per-entry keys deleted")
        assert sync_redis.xpending(s.stream, s.group)["pending"] == 0


def test_a_done_mark_lives_for_the_streams_turnover() -> None:
    s = Settings(maxlen=100_000, idempotency_ttl=7 * 86_400)
    now = 1_800_000_000_000
    # a full stream whose oldest entry is ten minutes old turns over in ten minutes
    assert turnover_ttl(s, now, now - 600_000, 100_000) == 600
    # a young one of 1,000 entries in 10 s: 100,000 take 1,000 s at that rate
    assert turnover_ttl(s, now, now - 10_000, 1_000) == 1_000
    # a fast one: 100,000 entries in 5 s
    assert turnover_ttl(s, now, now - 5_000, 100_000) == 5
    # no estimate: empty, or an id ahead of the clock (the last TTL stands)
    assert turnover_ttl(s, now, None, 0) is None
    assert turnover_ttl(s, now, now + 3_600_000, 10) is None
    assert turnover_ttl(s, now, now - 30 * 86_400_000, 100_000) == 7 * 86_400  # the cap


async def test_marks_take_the_turnover_of_the_real_stream(settings: Settings,
                                                          sync_redis: redis.Redis) -> None:
    """A worker's done marks live as long as its stream takes to turn over: a full
    stream (maxlen 2 here) whose oldest entry is an hour old keeps them an hour, not 7
    days."""
    s = settings.replace(block_ms=100, maxlen=2)
    sync_redis.execute_command("XGROUP", "CREATE", s.stream, s.group, "$", "MKSTREAM")
    sec, usec = sync_redis.time()
    now_ms = int(sec) * 1000 + int(usec) // 1000
    sync_redis.execute_command("XADD", s.stream, f"{now_ms - 3_600_000}-0", "kind", "old")
    sync_redis.execute_command("XGROUP", "SETID", s.stream, s.group, "$")
    reg = Registry()

    @reg.register("render_tickets")
    async def guarded(job: Job, ctx: Context) -> None:
        if not await ctx.already_done(job):
            await ctx.mark_done(job)

    async with running(s, reg) as w:
        add_jobs(s, "render_tickets", [9001])
        await eventually(lambda: w.stats.total("handled") == 1, 10, "the first job")
        await asyncio.sleep(1.1)  # the turnover is read at most once a second
        add_jobs(s, "render_tickets", [9201])  # (another hash of marks: 9201 // 128)
        await eventually(lambda: w.stats.total("handled") == 2, 10, "the second job")
    first, second = (sync_redis.ttl(marks_key(s, n, n)) for n in (9001, 9201))
    sec, usec = sync_redis.time()
    # the turnover was read some time after now_ms: the hour plus at most that long
    elapsed = (int(sec) * 1000 + int(usec) // 1000 - now_ms) / 1000
    assert sync_redis.hget(marks_key(s, 9001, 9001), "9001") == b"render_tickets"
    assert first > 6 * 86_400  # before the first read: idempotency_ttl
    # 9201's mark took the turnover read at 9001's: 2 entries (the hour-old one and
    # 9001's) over an hour, so maxlen (2) entries take an hour
    assert 3_590 <= second <= 3_600 + math.ceil(elapsed), (second, elapsed)


async def test_a_mark_kept_before_the_upgrade_still_counts(settings: Settings,
                                                           sync_redis: redis.Redis) -> None:
    """Marks were keys of their own for 7 days before issue 36: a job done just before
    an upgrade and delivered again after it is skipped, not run twice."""
    s = settings.replace(block_ms=100)
    sync_redis.set(done_key(s, 9301, 9301), "render_tickets", ex=600)
    ran: list[int] = []
    reg = Registry()

    @reg.register("render_tickets")
    async def guarded(job: Job, ctx: Context) -> None:
        if not await ctx.already_done(job):
            ran.append(job.order_id)
            await ctx.mark_done(job)

    async with running(s, reg) as w:
        add_jobs(s, "render_tickets", [9301, 9302])
        await eventually(lambda: w.stats.total("handled") == 2, 10, "both handled")
    assert ran == [9302] and w.stats.total("duplicates") == 1
