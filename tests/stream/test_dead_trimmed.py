"""Dead letters trimmed at the cap (MAXLEN ~ dead_maxlen) are counted, shown and logged.

issue 24 item 6: 1,300 permanent failures with dead_maxlen 100 kept 111 dead letters
and nothing said that 1,189 were gone.  Real worker, real Redis, in the worker's ACL
user under SD_TEST_ACL=1.
"""

from __future__ import annotations

import json
import logging
import re

import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from stagedoor.console import jobs
from stagedoor.console.client import console_client
from stagedoor.errors import PermanentError
from stagedoor.handlers import Registry
from stagedoor.stream import connection
from stagedoor.stream.job import Job
from stagedoor.stream.keys import dead_gone_key, dead_trimmed_key
from stagedoor.stream.queue import DeadLetter
from stagedoor.telemetry.exporter import render_metrics
from stagedoor.telemetry.inspect import queue_status
from tests.console.test_status import cli
from tests.support.worker import add_jobs, eventually, pending_summary, running

FAST = {"block_ms": 100, "reclaim_interval": 0.05, "retry_backoff": 0.001, "count": 100,
        "concurrency": 100, "dead_maxlen": 100}
JOBS = 1300


def failing() -> Registry:
    reg = Registry()

    @reg.register("refund")
    async def refund(job: Job, ctx: object) -> None:
        raise PermanentError("card closed")

    return reg


async def test_dead_letters_trimmed_at_the_cap_are_counted_exactly(
        settings: Settings, redis_url: str, sync_redis: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    s = settings.replace(**FAST)
    add_jobs(s, "refund", range(1, JOBS + 1))
    caplog.set_level(logging.WARNING, logger="stagedoor.queue")
    async with running(s, failing()) as w:
        await eventually(lambda: w.stats.total("dead_lettered") == JOBS, 60,
                         what=f"{JOBS} dead letters")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acks")
    kept = sync_redis.xlen(s.dead_stream)
    trimmed = int(sync_redis.get(dead_trimmed_key(s)) or 0)
    assert kept < JOBS and trimmed > 0            # the cap did trim
    assert kept + trimmed == JOBS                 # ... and every trimmed one is counted

    status = queue_status(connection.sync_client(s), s)
    assert status["dead"] == {"name": s.dead_stream, "length": kept, "maxlen": 100,
                              "trimmed": trimmed}
    # what an operator sees: `stagedoor status` and its --json
    proc = cli("status", "--redis-url", redis_url, "--dead-maxlen", "100")
    assert proc.returncode == 0, proc.stderr
    assert (f"dead      jobs:dead: {kept} entries of ~100 (dead_maxlen), {trimmed} older ones "
            "TRIMMED at the cap (gone)") in proc.stdout
    proc = cli("status", "--redis-url", redis_url, "--dead-maxlen", "100", "--json")
    assert json.loads(proc.stdout)["dead"] == status["dead"]
    text = render_metrics({}, None, status, 0, stream=s.stream).decode()
    assert f'stagedoor_dead_letters_trimmed_total{{stream="jobs"}} {float(trimmed)}' in text
    assert 'stagedoor_dead_letter_maxlen{stream="jobs"} 100.0' in text

    # One line per XADD that trimmed (MAXLEN ~ drops whole nodes), never one per entry,
    # and the lines add up to the count.
    lines = [r.getMessage() for r in caplog.records if "oldest dead letters trimmed" in
             r.getMessage()]
    per_line = [int(m[1]) for m in (re.search(r": (\d+) oldest dead letters", t)
                                    for t in lines) if m]
    assert len(per_line) == len(lines) and sum(per_line) == trimmed
    assert 0 < len(lines) < trimmed // 10
    totals = [int(m[1]) for m in (re.search(r", (\d+) in all", t) for t in lines) if m]
    assert max(totals) == trimmed  # the running total (lines of concurrent jobs interleave)


async def test_a_count_that_cannot_be_written_never_costs_the_dead_letter(
        settings: Settings, sync_redis: redis.Redis, aredis: aioredis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    s = settings.replace(dead_maxlen=1)
    sync_redis.hset(dead_trimmed_key(s), "not", "a counter")  # INCRBY: WRONGTYPE
    ids = add_jobs(s, "refund", range(1, 201))
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "w", "STREAMS", "jobs", ">")
    dead = DeadLetter(aredis, s)
    for n, entry in enumerate(ids, 1):
        assert await dead(entry, [b"kind", b"refund"], error="bad", deliveries=1,
                          consumer="w") is not None
        if sync_redis.xlen(s.dead_stream) < n:
            break  # the cap trimmed: the count could not be written
    else:
        raise AssertionError("MAXLEN ~ 1 never trimmed in 200 dead letters")
    assert sync_redis.xpending("jobs", "workers")["pending"] == len(ids) - n  # acked
    assert any("could not be written" in r.getMessage() for r in caplog.records)


async def test_a_job_whose_dead_letter_the_cap_trimmed_is_still_dead(
        settings: Settings, redis_url: str, sync_redis: redis.Redis) -> None:
    """Issue 38: a dead-lettered job read ACKED once the dead-letter stream's cap
    (MAXLEN ~ dead_maxlen) trimmed its dead letter.  The dead-letter script records
    each trimmed one's job in the removed dead letters' stream, as the console's
    removals do: every job stays DEAD, "dead letter removed (trimmed at the cap...)"."""
    s = settings.replace(**FAST)
    ids = add_jobs(s, "refund", range(1, 201))
    async with running(s, failing()) as w:
        await eventually(lambda: w.stats.total("dead_lettered") == 200, 60,
                         what="200 dead letters")
        await eventually(lambda: pending_summary(sync_redis, s)[0] == 0, what="acks")
    trimmed = int(sync_redis.get(dead_trimmed_key(s)) or 0)
    assert trimmed > 0, "the cap never trimmed"
    kept = {fields[b"dead:source_id"].decode()
            for _, fields in sync_redis.xrange(s.dead_stream)}
    gone = [eid for eid in ids if eid not in kept]
    assert len(gone) == trimmed
    records = sync_redis.xrange(dead_gone_key(s))
    assert sorted(f[b"source_id"].decode() for _, f in records) == sorted(gone)
    assert {f[b"how"] for _, f in records} == {b"trimmed"}
    client = console_client(s)
    try:
        for eid in gone:
            (e,) = (await jobs.lookup(client, s, entry_id=eid)).entries
            assert (e.state, e.dead_removed) == ("dead", "trimmed at the cap, dead_maxlen"), \
                eid
    finally:
        await client.aclose()
    proc = cli("job", "--entry-id", gone[-1], "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert "DEAD" in proc.stdout, proc.stdout
    assert "dead letter removed (trimmed at the cap, dead_maxlen)" in proc.stdout, proc.stdout
