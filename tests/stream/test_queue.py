"""Producer side and queue primitives against a real redis-server."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from stagedoor.stream import connection
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import (
    DeadLetter,
    EnqueueError,
    NotReplicated,
    enqueue,
    enqueue_many,
    enqueue_sync,
    original_fields,
)
from tests.support.cli import cli
from tests.support.worker import raw

ROOT = Path(__file__).parents[2]


def groups(client: redis.Redis, stream: str) -> list[bytes]:
    return [g["name"] for g in client.xinfo_groups(stream)]


async def test_first_enqueue_creates_the_group_before_the_entry(
        settings: Settings, sync_redis: redis.Redis) -> None:
    client = connection.async_client(settings)
    try:
        entry = await enqueue(client, settings, make_job("refund", 1, 2, "r", "t"))
    finally:
        await client.aclose()
    assert groups(sync_redis, "jobs") == [b"workers"]
    # The group starts at `$` but was created before the XADD: the entry is undelivered.
    info = sync_redis.xinfo_groups("jobs")[0]
    assert info["lag"] == 1 and info["last-delivered-id"] == b"0-0"
    fields = raw(sync_redis).execute_command("XRANGE", "jobs", entry, entry)[0][1]
    assert fields == [b"kind", b"refund", b"order_id", b"1", b"outbox_id", b"2",
                      b"request_id", b"r", b"trace", b"t"]


def test_enqueue_after_redis_lost_the_group_recreates_it(
        settings: Settings, sync_redis: redis.Redis) -> None:
    enqueue_sync(sync_redis, settings, [make_job("refund", 1, 1, "r", "t")])
    sync_redis.flushall()   # what a Redis that restarted empty looks like
    enqueue_sync(sync_redis, settings, [make_job("refund", 1, 2, "r", "t")])
    assert groups(sync_redis, "jobs") == [b"workers"]
    assert sync_redis.xinfo_groups("jobs")[0]["lag"] == 1


async def test_bulk_enqueue_is_pipelined_and_trimmed_approximately(
        settings: Settings, sync_redis: redis.Redis) -> None:
    s = settings.replace(maxlen=1000)
    sync_redis.config_resetstat()
    client = connection.async_client(s)
    ids: list[str] = []
    try:
        for start in range(1, 5001, 500):
            ids += await enqueue_many(client, s, [make_job("refund", i, i, "r", "t")
                                                  for i in range(start, start + 500)],
                                      chunk=500)
            # A worker keeps up (reads and acks), so the backlog stays below the
            # producer's refusal level (95 % of maxlen) and only handled jobs are trimmed.
            reply = raw(sync_redis).execute_command("XREADGROUP", "GROUP", "workers", "w",
                                                    "COUNT", 1000, "STREAMS", "jobs", ">")
            sync_redis.xack("jobs", "workers", *[e[0] for e in reply[0][1]])
    finally:
        await client.aclose()
    assert len(ids) == len(set(ids)) == 5000
    length = sync_redis.xlen("jobs")
    assert 1000 <= length < 5000    # MAXLEN ~ trims whole nodes, never below the cap
    stats = sync_redis.info("commandstats")["cmdstat_evalsha"]
    ran = stats["calls"] - stats.get("failed_calls", 0) - stats.get("rejected_calls", 0)
    assert ran == 10                # one round trip (one script call) per chunk of 500


async def test_dead_letter_script_acks_and_writes_exactly_once(
        settings: Settings, sync_redis: redis.Redis, aredis: aioredis.Redis) -> None:
    [entry] = enqueue_sync(sync_redis, settings, [make_job("refund", 1, 1, "r", "t")])
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "w", "STREAMS", "jobs", ">")
    fields = [b"kind", b"refund", b"order_id", b"1"]
    dead = DeadLetter(aredis, settings)
    first = await dead(entry, fields, error="bad", deliveries=1, consumer="w")
    again = await dead(entry, fields, error="bad", deliveries=1, consumer="w")  # a retry
    assert first is not None and again is None
    assert sync_redis.xlen("jobs:dead") == 1
    assert sync_redis.xpending("jobs", "workers")["pending"] == 0
    stored = raw(sync_redis).execute_command("XRANGE", "jobs:dead", "-", "+")[0][1]
    assert original_fields(stored) == fields


async def test_dead_letter_of_an_entry_whose_stream_was_deleted_is_not_an_error(
        settings: Settings, sync_redis: redis.Redis, aredis: aioredis.Redis) -> None:
    """DEL jobs (or FLUSHDB) while a job runs: its entry is pending nowhere any more;
    the script's XPENDING answered NOGROUP, an error that left it "unexpected"."""
    [entry] = enqueue_sync(sync_redis, settings, [make_job("refund", 1, 1, "r", "t")])
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "w", "STREAMS", "jobs", ">")
    sync_redis.delete("jobs")
    dead = DeadLetter(aredis, settings)
    assert await dead(entry, [b"kind", b"refund"], error="bad", deliveries=1,
                      consumer="w") is None
    assert not sync_redis.exists("jobs:dead")


async def test_dead_letter_of_a_huge_payload_keeps_the_first_fields(
        settings: Settings, sync_redis: redis.Redis, aredis: aioredis.Redis) -> None:
    fields = [b"f%d" % i for i in range(10_000)]
    sync_redis.execute_command("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
    entry = sync_redis.execute_command("XADD", "jobs", "*", *fields)
    sync_redis.execute_command("XREADGROUP", "GROUP", "workers", "w", "STREAMS", "jobs", ">")
    await DeadLetter(aredis, settings)(entry, fields, error="malformed: odd", deliveries=1,
                                       consumer="w")
    stored = raw(sync_redis).execute_command("XRANGE", "jobs:dead", "-", "+")[0][1]
    meta = dict(zip(stored[-10::2], stored[-9::2], strict=True))
    assert meta[b"dead:error"] == b"malformed: odd [dead letter keeps the first 256 of 5000 fields]"
    assert len(original_fields(stored)) == 512


def test_not_replicated_has_a_repr() -> None:
    """NotReplicated is an EnqueueError and a redis-py ConnectionError; redis-py's
    __repr__ reads what its __init__ sets, which EnqueueError's (first in the MRO) never
    ran: repr() raised AttributeError, and with it asyncio's repr of a task that raised
    it (an async producer's error became a crash in the test's event loop)."""
    e = NotReplicated(["1-1"], 2, 0, Settings(redis_url="redis://127.0.0.1:1/0",
                                              wait_replicas=1))
    assert repr(e) == "network:NotReplicated"
    assert e.ids == ["1-1"] and e.total == 2 and e.acked == 0 and e.wanted == 1
    assert str(e).endswith("1 of 2 jobs went in unconfirmed")
    assert isinstance(e, redis.ConnectionError)


def test_server_version_floor() -> None:
    assert connection.check_version({"redis_version": "7.0.5"}) == (7, 0, 5)
    assert connection.check_version({b"redis_version": b"7.2.4"}) == (7, 2, 4)
    for old in ("6.2.14", "7.0.4"):
        with pytest.raises(connection.ServerTooOld, match=r"needs Redis >= 7\.0\.5"):
            connection.check_version({"redis_version": old})


def _cli(settings: Settings, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return cli("enqueue", *args, env={"STAGEDOOR_REDIS_URL": settings.redis_url}, stdin=stdin)


def test_cli_enqueue_one_and_many(settings: Settings, sync_redis: redis.Redis) -> None:
    one = _cli(settings, "--kind", "render_tickets", "--order-id", "4471", "--outbox-id",
               "88210", "--request-id", "7f3a9c2e", "--trace", "4bf92f35")
    assert one.returncode == 0, one.stderr
    lines = "".join(f'{{"kind": "refund", "order_id": {i}, "outbox_id": {i}}}\n'
                    for i in range(1, 101))
    many = _cli(settings, "--file", "-", stdin=lines)
    assert many.returncode == 0, many.stderr
    assert len(many.stdout.split()) == 100
    assert sync_redis.xlen("jobs") == 101


def test_cli_enqueue_refuses_a_bad_line_and_adds_nothing(
        settings: Settings, sync_redis: redis.Redis) -> None:
    lines = ('{"kind": "refund", "order_id": 1, "outbox_id": 1}\n'
             '{"kind": "refund", "order_id": "x1", "outbox_id": 2}\n')
    r = _cli(settings, "--file", "-", stdin=lines)
    assert r.returncode == 65
    assert r.stderr.strip() == "stagedoor enqueue: line 2: order_id must be an integer, " \
                               "got 'x1'"
    assert not sync_redis.exists("jobs")


def test_cli_enqueue_refuses_kinds_the_workers_do_not_know(
        settings: Settings, sync_redis: redis.Redis) -> None:
    r = _cli(settings, "--kind", "nosuch", "--order-id", "1", "--outbox-id", "1")
    assert r.returncode == 65
    assert r.stderr.strip() == ("stagedoor enqueue: unknown kind 'nosuch': the workers know "
                                "refund, render_tickets (more with --handlers module:registry "
                                "or STAGEDOOR_HANDLERS)")
    lines = ('{"kind": "refund", "order_id": 1, "outbox_id": 1}\n'
             '{"kind": "ping", "order_id": 2, "outbox_id": 2}\n')
    r = _cli(settings, "--file", "-", stdin=lines)
    assert r.returncode == 65 and "line 2: unknown kind 'ping'" in r.stderr
    assert not sync_redis.exists("jobs")  # nothing went in
    # told about a registry (as the workers are), the producer accepts its kinds
    r = _cli(settings, "--file", "-", "--handlers", "tests.support.handlers.plugin:registry",
             stdin=lines)
    assert r.returncode == 0, r.stderr
    assert sync_redis.xlen("jobs") == 2
    r = _cli(settings, "--kind", "ping", "--order-id", "3", "--outbox-id", "3",
             "--handlers", "tests.no_such_module:registry")
    assert r.returncode == 78 and "cannot import 'tests.no_such_module'" in r.stderr


def test_cli_enqueue_writes_a_traceparent_unless_given_a_trace(
        settings: Settings, sync_redis: redis.Redis) -> None:
    from stagedoor.telemetry.tracing import is_traceparent

    assert _cli(settings, "--kind", "refund", "--order-id", "1", "--outbox-id", "1"
                ).returncode == 0
    assert _cli(settings, "--kind", "refund", "--order-id", "2", "--outbox-id", "2",
                "--trace", "4bf92f35").returncode == 0
    traces = [f[b"trace"].decode() for _, f in sync_redis.xrange("jobs")]
    assert is_traceparent(traces[0]) and traces[1] == "4bf92f35"


def test_make_job_with_known_kinds() -> None:
    assert make_job("refund", 1, 1, "r", "t", kinds={"refund"}).kind == "refund"
    with pytest.raises(ValueError, match="refusing to enqueue: unknown kind 'nosuch'"):
        make_job("nosuch", 1, 1, "r", "t", kinds={"refund"})
    assert make_job("nosuch", 1, 1, "r", "t").kind == "nosuch"  # format only


def test_a_loss_before_the_first_read_is_counted_once(
        settings: Settings, sync_redis: redis.Redis) -> None:
    """Jobs trimmed before the group ever read: slot 0's audit and every producer chunk
    look again and again while nobody reads; the loss is counted once, and status agrees."""
    from stagedoor.stream.backlog import AUDIT_LUA, trimmed_key
    from stagedoor.stream.queue import ensure_group_sync
    from stagedoor.telemetry.inspect import queue_status

    s = settings
    ensure_group_sync(sync_redis, s)
    pipe = sync_redis.pipeline(transaction=False)
    for i in range(1, 3001):
        pipe.execute_command("XADD", s.stream, "MAXLEN", "~", 1000, "*",
                             *make_job("render_tickets", i, i, "r", "t").fields())
    pipe.execute()
    lost = 3000 - sync_redis.xlen(s.stream)
    assert lost > 1000
    audit = sync_redis.register_script(AUDIT_LUA)
    found = [int(audit(keys=[s.stream], args=[s.group, trimmed_key(s), 0, 20000])[1])
             for _ in range(3)]
    assert found == [lost, 0, 0], "a second look finds nothing new"
    enqueue_sync(sync_redis, s, [make_job("render_tickets", 5000, 5000, "r", "t")])
    assert int(sync_redis.hget(trimmed_key(s), "count") or 0) == lost
    trimmed = queue_status(connection.sync_client(s), s)["trimmed_backlog"]
    assert isinstance(trimmed, dict)
    assert trimmed["undelivered_trimmed"] == lost, trimmed


def test_a_chunk_redis_never_answered_is_reported_unknown_not_lost(own_redis: Any) -> None:
    """Redis stalls (SIGSTOP) while a chunk's script is on the wire: the producer cannot
    know whether it ran, so the error says the chunk's jobs may have gone in, never
    "0 of N went in" (a caller following that would send them twice unwittingly); and
    after the stall they are all on the stream."""
    s = Settings(redis_url=own_redis.url, socket_timeout=0.2)
    client = connection.sync_client(s, timeout=0.2)
    enqueue_sync(client, s, [make_job("render_tickets", 1, 1, "r", "t")])  # warm
    jobs = [make_job("render_tickets", i, i, "r", "t") for i in range(2, 12)]
    own_redis.pause()
    try:
        with pytest.raises(EnqueueError) as info:
            enqueue_sync(client, s, jobs)
    finally:
        own_redis.resume()
    e = info.value
    assert (e.ids, e.total, e.unknown) == ([], 10, 10)
    assert "0 of 10 jobs went in; the next 10 may have gone in too" in str(e), str(e)
    assert "\n" not in str(e)
    client.close()
    checker = redis.Redis.from_url(own_redis.url, protocol=2)
    assert checker.xlen(s.stream) == 11  # the script ran once Redis went on
    checker.close()


def test_a_refused_connection_is_reported_as_nothing_sent(tmp_path: Path) -> None:
    from stagedoor.demo.embedded_redis import free_port

    s = Settings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    client = connection.sync_client(s, timeout=0.2)
    with pytest.raises(EnqueueError) as info:
        enqueue_sync(client, s, [make_job("render_tickets", 1, 1, "r", "t")])
    assert info.value.unknown == 0 and "may have gone in" not in str(info.value)
