"""The read/handle/ack loop against a real redis-server, one test per seed failure mode."""

from __future__ import annotations

import asyncio
import collections
import contextlib

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.errors import PermanentError, TransientError
from stagedoor.handlers import Registry
from stagedoor.handlers.registry import Handler
from stagedoor.stream.job import Job
from stagedoor.stream.queue import ensure_group_sync
from stagedoor.worker.loop import Worker
from tests.support import readahead_spec
from tests.support.aclmode import worker_url
from tests.support.worker import add_jobs, dead_entries, eventually, pending_summary, raw, running

FAST = {"block_ms": 100, "reclaim_interval": 0.05, "retry_backoff": 0.001}


def recorder() -> tuple[Registry, list[tuple[str, int]]]:
    seen: list[tuple[str, int]] = []
    reg = Registry()

    @reg.register("noop")
    async def noop(job: Job, ctx: object) -> None:
        seen.append((getattr(ctx, "consumer", "?"), job.outbox_id))

    return reg, seen


async def test_drains_and_acks(settings: Settings, sync_redis: redis.Redis) -> None:
    reg, seen = recorder()
    add_jobs(settings, "noop", range(1, 51))
    async with running(settings.replace(**FAST), reg) as w:
        await eventually(lambda: len(seen) == 50, what="50 jobs handled")
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0, what="acks")
    assert sorted(o for _c, o in seen) == list(range(1, 51))
    assert w.stats.total("handled") == 50
    assert sync_redis.xlen(settings.dead_stream) == 0


async def test_malformed_payload_is_dead_lettered_with_fields_and_acked(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reg, seen = recorder()
    ensure_group_sync(sync_redis, settings)
    bad_id = sync_redis.execute_command(
        "XADD", "jobs", "*", "kind", "noop", "order_id", "44x71", "outbox_id", "1",
        "request_id", "r", "trace", "t").decode()
    dup_id = sync_redis.execute_command(
        "XADD", "jobs", "*", "kind", "noop", "order_id", "1", "order_id", "2", "outbox_id",
        "1", "request_id", "r", "trace", "t").decode()
    async with running(settings.replace(**FAST), reg):
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 2, what="two dead letters")
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0, what="acks")
    assert seen == []
    raw_entries = raw(sync_redis).execute_command("XRANGE", "jobs:dead", "-", "+")
    # Both were handled at once: find each by its source id, not by position.
    by_source = {dict(zip(f[-10::2], f[-9::2], strict=True))[b"dead:source_id"]: f
                 for _id, f in raw_entries}
    first, second = by_source[bad_id.encode()], by_source[dup_id.encode()]
    assert first[:10] == [b"kind", b"noop", b"order_id", b"44x71", b"outbox_id", b"1",
                          b"request_id", b"r", b"trace", b"t"]
    meta = dict(zip(first[10::2], first[11::2], strict=True))
    assert b"order_id must be a positive decimal integer" in meta[b"dead:error"]
    assert meta[b"dead:source_id"] == bad_id.encode()
    assert meta[b"dead:deliveries"] == b"1"
    assert meta[b"dead:consumer"] == b"test-00"
    assert float(meta[b"dead:time"]) > 1.7e9
    # The duplicated field is kept as it came, twice, so a human sees the real payload.
    assert second.count(b"order_id") == 2
    assert dict(zip(second[12::2], second[13::2], strict=True))[b"dead:source_id"] == \
        dup_id.encode()


async def test_poison_job_is_dead_lettered_once_without_running(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reg, seen = recorder()
    [entry] = add_jobs(settings, "noop", [7])
    # It killed five workers: delivered 5 times, started each time (the first, fresh
    # start is not recorded; the four after redeliveries are), idle past the threshold.
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "ghost", "COUNT", 1,
                               "STREAMS", "jobs", ">")
    sync_redis.execute_command("XCLAIM", "jobs", "workers", "ghost", 0, entry,
                               "RETRYCOUNT", 5, "IDLE", 10_000)
    sync_redis.set(settings.key("starts", entry), 4)
    s = settings.replace(claim_idle_ms=200, job_timeout=0.1, **FAST)
    async with running(s, reg) as w:
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, what="dead letter")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acked")
        await asyncio.sleep(0.3)  # several more reclaim passes: still exactly one
    assert seen == []
    [dead] = dead_entries(sync_redis, s)
    assert dead[b"dead:deliveries"] == b"6"
    assert dead[b"dead:error"] == b"poison: started 6 times, delivered 6 times (max_deliveries=5)"
    assert dead[b"order_id"] == b"7"
    assert w.stats.total("dead_lettered") == 1
    assert sync_redis.xlen("jobs:dead") == 1


async def test_batch_mates_of_a_worker_killer_run_alone_and_are_not_poison(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """A crash redelivers every entry the dead worker held: those started again
    after a redelivery run one at a time, so a killer cannot take them down with it."""
    running_now: list[int] = []
    most = [0]
    done: list[int] = []
    reg = Registry()

    @reg.register("noop")
    async def observed(job: Job, ctx: object) -> None:
        running_now.append(job.outbox_id)
        most[0] = max(most[0], len(running_now))
        await asyncio.sleep(0.02)
        running_now.remove(job.outbox_id)
        done.append(job.outbox_id)

    ids = add_jobs(settings, "noop", range(1, 6))
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "ghost", "COUNT", 5,
                               "STREAMS", "jobs", ">")
    for entry in ids:   # two crashes later: delivered 4 times, restarted once already
        sync_redis.execute_command("XCLAIM", "jobs", "workers", "ghost", 0, entry,
                                   "RETRYCOUNT", 3, "IDLE", 10_000)
        sync_redis.set(settings.key("starts", entry), 1)
    s = settings.replace(claim_idle_ms=100, job_timeout=0.05, **FAST)
    async with running(s, reg):
        await eventually(lambda: len(done) == 5, what="all five handled")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acked")
    assert most[0] == 1
    assert sorted(done) == [1, 2, 3, 4, 5]
    assert sync_redis.xlen("jobs:dead") == 0


async def test_trimmed_pending_entries_are_reported_as_deleted(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reg, seen = recorder()
    add_jobs(settings, "noop", range(1, 4))     # go to a ghost that dies
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "ghost", "COUNT", 3,
                               "STREAMS", "jobs", ">")
    add_jobs(settings, "noop", range(4, 6))     # go to us (test-00), then die with us
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "test-00", "COUNT", 2,
                               "STREAMS", "jobs", ">")
    sync_redis.execute_command("XTRIM", "jobs", "MAXLEN", 0)
    s = settings.replace(claim_idle_ms=50, job_timeout=0.04, **FAST)
    await asyncio.sleep(0.06)
    async with running(s, reg) as w:
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="PEL drained")
        await eventually(lambda: w.stats.total("deleted") == 5, what="5 deleted")
    assert seen == []
    assert sync_redis.xlen("jobs:dead") == 0


async def test_two_workers_never_receive_the_same_entry(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reg, seen = recorder()
    add_jobs(settings, "noop", range(1, 1001))
    s = settings.replace(**FAST)
    async with running(s, reg, slot=1), running(s, reg, slot=2):
        await eventually(lambda: len(seen) >= 1000, what="1000 handled")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acks")
    ids = [o for _c, o in seen]
    assert len(ids) == len(set(ids)) == 1000
    by_consumer = collections.Counter(c for c, _o in seen)
    assert set(by_consumer) == {"test-01", "test-02"}


async def test_restart_reads_own_pending_first(settings: Settings,
                                               sync_redis: redis.Redis) -> None:
    reg, seen = recorder()
    add_jobs(settings, "noop", range(1, 6))
    # The worker's previous life read these and died before acking.
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "test-00", "COUNT", 5,
                               "STREAMS", "jobs", ">")
    add_jobs(settings, "noop", range(6, 11))
    async with running(settings.replace(concurrency=1, count=1, **FAST), reg) as w:
        await eventually(lambda: len(seen) == 10, what="10 handled")
    assert [o for _c, o in seen] == list(range(1, 11))
    assert w.stats.total("recovered") == 5


async def test_never_reads_more_entries_than_free_slots(
        settings: Settings, sync_redis: redis.Redis) -> None:
    gate = asyncio.Event()
    started: list[int] = []
    reg = Registry()

    @reg.register("noop")
    async def blocked(job: Job, ctx: object) -> None:
        started.append(job.outbox_id)
        await gate.wait()

    add_jobs(settings, "noop", range(1, 51))
    s = settings.replace(concurrency=3, **FAST)
    async with running(s, reg):
        await eventually(lambda: len(started) == 3, what="3 running")
        await asyncio.sleep(0.3)   # several BLOCK periods: the loop must not read more
        assert pending_summary(sync_redis, s) == (3, {"test-00": 3})
        gate.set()
        await eventually(lambda: len(started) == 50, what="all started")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acks")


async def test_transient_failure_retries_then_leaves_pending(
        settings: Settings, sync_redis: redis.Redis) -> None:
    attempts: list[int] = []
    reg = Registry()

    @reg.register("noop")
    async def flaky(job: Job, ctx: object) -> None:
        attempts.append(job.outbox_id)
        raise TransientError("payment api away")

    add_jobs(settings, "noop", [1])
    async with running(settings.replace(retries=2, **FAST), reg) as w:
        await eventually(lambda: w.stats.total("failed") == 1, what="failure recorded")
    assert attempts == [1, 1, 1]
    assert pending_summary(sync_redis, settings)[0] == 1
    assert sync_redis.xlen("jobs:dead") == 0


async def test_permanent_error_is_dead_lettered_at_once(
        settings: Settings, sync_redis: redis.Redis) -> None:
    attempts: list[int] = []
    reg = Registry()

    @reg.register("noop")
    async def broken(job: Job, ctx: object) -> None:
        attempts.append(job.outbox_id)
        raise PermanentError("order 1 not found")

    add_jobs(settings, "noop", [1])
    async with running(settings.replace(**FAST), reg):
        await eventually(lambda: sync_redis.xlen("jobs:dead") == 1, what="dead letter")
        await eventually(lambda: pending_summary(sync_redis, settings)[0] == 0, what="ack")
    assert attempts == [1]
    [dead] = dead_entries(sync_redis, settings)
    assert dead[b"dead:error"] == b"permanent error: PermanentError: order 1 not found"


async def test_handler_cancelled_at_shutdown_leaves_entry_pending(
        settings: Settings, sync_redis: redis.Redis) -> None:
    started = asyncio.Event()
    reg = Registry()

    @reg.register("noop")
    async def forever(job: Job, ctx: object) -> None:
        started.set()
        await asyncio.sleep(3600)

    add_jobs(settings, "noop", [1])
    async with running(settings.replace(graceful_timeout=0.2, **FAST), reg):
        await asyncio.wait_for(started.wait(), 10)
    assert pending_summary(sync_redis, settings) == (1, {"test-00": 1})
    assert sync_redis.xlen("jobs:dead") == 0


async def test_graceful_stop_finishes_in_flight_jobs_and_acks(
        settings: Settings, sync_redis: redis.Redis) -> None:
    done: list[int] = []
    started = asyncio.Event()
    reg = Registry()

    @reg.register("noop")
    async def slowish(job: Job, ctx: object) -> None:
        started.set()
        await asyncio.sleep(0.3)
        done.append(job.outbox_id)

    add_jobs(settings, "noop", [1, 2])
    async with running(settings.replace(graceful_timeout=5, **FAST), reg):
        await asyncio.wait_for(started.wait(), 10)
    assert sorted(done) == [1, 2]
    assert pending_summary(sync_redis, settings)[0] == 0


async def test_reclaim_takes_over_a_dead_consumers_jobs_following_the_cursor(
        settings: Settings, sync_redis: redis.Redis) -> None:
    reg, seen = recorder()
    add_jobs(settings, "noop", range(1, 46))
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "ghost", "COUNT", 45,
                               "STREAMS", "jobs", ">")
    s = settings.replace(claim_idle_ms=100, job_timeout=0.05, reclaim_count=4, **FAST)
    async with running(s, reg) as w:
        await eventually(lambda: len(seen) == 45, what="all 45 reclaimed and handled")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acks")
    assert w.stats.total("reclaimed") == 45
    assert sorted(o for _c, o in seen) == list(range(1, 46))


async def test_reclaim_skips_jobs_still_running_here(settings: Settings,
                                                     sync_redis: redis.Redis) -> None:
    runs: list[int] = []
    reg = Registry()

    async def slow(job: Job, ctx: object) -> None:
        runs.append(job.outbox_id)
        await asyncio.sleep(0.6)

    reg.add(Handler("noop", slow, timeout=5))  # a per-kind limit longer than the threshold
    add_jobs(settings, "noop", [1])
    s = settings.replace(claim_idle_ms=100, job_timeout=0.05, **FAST)
    async with running(s, reg) as w:
        await eventually(lambda: w.stats.total("handled") == 1, what="handled")
    assert runs == [1]
    assert pending_summary(sync_redis, s)[0] == 0


async def test_worker_survives_redis_restart_and_recreates_group(
        own_redis: object, tmp_path: object, sync_redis: redis.Redis) -> None:
    from stagedoor.demo.embedded_redis import EmbeddedRedis

    assert isinstance(own_redis, EmbeddedRedis)
    reg, seen = recorder()
    s = Settings(redis_url=own_redis.url, consumer="test", **FAST)  # type: ignore[arg-type]
    client = redis.Redis.from_url(own_redis.url, protocol=2)
    try:
        async with running(s, reg):
            add_jobs(s, "noop", range(1, 11))
            await eventually(lambda: len(seen) == 10, what="first 10")
            own_redis.restart(wipe=True)           # comes back empty: no stream, no group
            await asyncio.sleep(0.3)               # the worker hits NOGROUP / reconnects
            add_jobs(s, "noop", range(11, 21))     # the producer recreates the group
            await eventually(lambda: len(seen) == 20, limit=15, what="10 after restart")
            await eventually(lambda: pending_summary(client, s)[0] == 0, what="acks")
    finally:
        client.close()
    assert sorted(o for _c, o in seen) == list(range(1, 21))


async def test_tests_run_on_uvloop_like_production() -> None:
    assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")


async def test_time_limit_cancels_the_attempt_and_retries_then_leaves_it_pending(
        settings: Settings, sync_redis: redis.Redis, caplog: object) -> None:
    attempts: list[int] = []
    reg = Registry()

    async def stuck(job: Job, ctx: object) -> None:
        attempts.append(job.outbox_id)
        await asyncio.sleep(3600)

    reg.add(Handler("noop", stuck, timeout=0.1))
    add_jobs(settings, "noop", [1])
    async with running(settings.replace(retries=1, **FAST), reg) as w:
        await eventually(lambda: w.stats.total("failed") == 1, what="timed out twice")
    assert attempts == [1, 1]
    assert pending_summary(sync_redis, settings) == (1, {"test-00": 1})
    assert "timed out after 0.1s" in getattr(caplog, "text", "")


def _entries_read(client: redis.Redis, s: Settings) -> int:
    for g in client.xinfo_groups(s.stream):
        if g["name"] in (s.group, s.group.encode()):
            return int(g["entries-read"] or 0)
    raise AssertionError("group not found")


def _streak_core(core: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the read-ahead's streak in C (worker/_entries.pyx, what the worker runs) or in
    Python (tests/support/readahead_spec.py, its executable specification)."""
    if core == "python":
        readahead_spec.use_python(monkeypatch)


@pytest.mark.parametrize("core", ["c", "python"])
@pytest.mark.parametrize("read_ahead", [1, 2])
async def test_reads_ahead_during_a_backlog_never_holding_more_than_the_slots(
        settings: Settings, sync_redis: redis.Redis, read_ahead: int, core: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """read_ahead 2: while a reply's jobs run, the next read is already on the wire;
    together they never hold more entries than concurrency (the pending list says so).
    read_ahead 1: one read at a time, as the seed's loop."""
    _streak_core(core, monkeypatch)
    s = settings.replace(concurrency=8, read_ahead=read_ahead, **FAST)
    seen: list[int] = []
    on_wire: list[int] = []
    held: list[int] = []
    reg = Registry()
    worker_box: list[object] = []

    @reg.register("noop")
    async def look(job: Job, ctx: object) -> None:
        seen.append(job.outbox_id)
        on_wire.append(worker_box[0].reader.reading)  # type: ignore[attr-defined]
        if len(seen) % 10 == 0:  # entries delivered here and not acked yet
            held.append(pending_summary(sync_redis, s)[0])

    add_jobs(s, "noop", range(1, 401))
    sync_redis.config_resetstat()
    async with running(s, reg) as w:
        worker_box.append(w)
        await eventually(lambda: len(seen) == 400, what="all handled")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acks")
    assert sorted(seen) == list(range(1, 401))
    assert held and max(held) <= 8, held
    reads = int(sync_redis.info("commandstats")["cmdstat_xreadgroup"]["calls"])
    if read_ahead == 1:
        assert set(on_wire) == {0}
        assert reads < 400 // 4, reads  # 8 entries a read
    else:
        assert max(on_wire) == 1 and on_wire.count(1) > 300, collections.Counter(on_wire)
        assert reads >= 400 // 4, reads  # at most concurrency / read_ahead entries a read


@pytest.mark.parametrize("core", ["c", "python"])
async def test_stop_during_read_ahead_runs_every_entry_it_was_sent(
        settings: Settings, sync_redis: redis.Redis, core: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A graceful stop in the middle of a backlog: the reads still on the wire are
    collected and their jobs run and are acked; nothing is left delivered and not run."""
    _streak_core(core, monkeypatch)
    s = settings.replace(concurrency=8, read_ahead=2, graceful_timeout=10, **FAST)
    seen: list[int] = []
    reg = Registry()
    worker_box: list[object] = []

    @reg.register("noop")
    async def count(job: Job, ctx: object) -> None:
        seen.append(job.outbox_id)
        if len(seen) == 300:
            worker_box[0].request_stop()  # type: ignore[attr-defined]
        await asyncio.sleep(0)

    add_jobs(s, "noop", range(1, 3001))
    async with running(s, reg) as w:
        worker_box.append(w)
        await eventually(lambda: w.stopping and len(seen) >= 300, what="stop requested")
    read = _entries_read(sync_redis, s)
    assert 300 <= read < 3000, read
    assert len(seen) == len(set(seen)) == read  # every entry delivered here ran, once
    assert pending_summary(sync_redis, s)[0] == 0  # and was acked


@pytest.mark.parametrize("core", ["c", "python"])
async def test_a_hard_stop_mid_streak_gives_back_its_slots_and_loses_nothing(
        settings: Settings, sync_redis: redis.Redis, core: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker cancelled (a hard stop) while reads ahead are on the wire: the streak
    gives back their slots and queues their acks again; an entry Redis delivered and the
    worker never ran stays pending, and the worker started again (the same consumer, as
    the supervisor restarts it) runs it from its own pending list: every job runs."""
    _streak_core(core, monkeypatch)
    s = settings.replace(concurrency=8, read_ahead=2, **FAST)
    seen: list[int] = []
    reg = Registry()

    @reg.register("noop")
    async def count(job: Job, ctx: object) -> None:
        seen.append(job.outbox_id)

    add_jobs(s, "noop", range(1, 3001))
    worker = Worker(s.replace(redis_url=worker_url(s.redis_url)), reg)
    task = asyncio.create_task(worker.run())
    await eventually(lambda: len(seen) >= 300, what="a streak under way")
    assert worker.reader.reading > 0  # reads ahead on the wire
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert worker.reader.reading == 0 and worker.slots.reserved == 0
    assert not worker.reader.ahead.core.wire
    first = set(seen)
    assert len(first) < 3000
    async with running(s, reg):
        await eventually(lambda: set(seen) >= set(range(1, 3001)), what="every job run")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acks")
