"""stagedoor.telemetry.inspect and `stagedoor status` against the suite's real Redis."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import free_port
from stagedoor.stream.connection import async_client, sync_client
from stagedoor.telemetry.inspect import (
    InspectError,
    aqueue_status,
    build_status,
    id_ms,
    queue_gauges,
    queue_status,
)
from tests.support.cli import cli, one_line
from tests.support.paths import SRC
from tests.support.servers import SERVER

ROOT = Path(__file__).resolve().parents[2]


def now_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def ensure_group(client: redis.Redis, s: Settings) -> None:
    client.execute_command("XGROUP", "CREATE", s.stream, s.group, "$", "MKSTREAM")


def read(client: redis.Redis, s: Settings, consumer: str, count: int) -> list[Any]:
    reply = client.execute_command("XREADGROUP", "GROUP", s.group, consumer, "COUNT", count,
                                   "STREAMS", s.stream, ">")
    return list(reply[0][1]) if reply else []


# XINFO GROUPS lag of a group with 2 of 5 entries read, after XTRIM MAXLEN 0, and after
# 2 more were added and read: Redis 7.0 keeps counting the trimmed 3 both times, Redis
# 8.2 says 0 once the stream is empty, Valkey 8.1 re-syncs once the group read on.
LAG_AFTER_TRIM = {"redis": (3, 3), "valkey": (3, 0), "redis8": (0, 0)}


def lag_method(st: dict[str, Any]) -> str:
    """The status's method: "lag" where the server's own lag agrees with entries-added -
    entries-read (Redis 7.0, Valkey here), "counters" where it does not (Redis 8.2 after
    a trim).  Nothing was counted before in these tests (no skew)."""
    group, stream = st["group"], st["stream"]
    agrees = group["lag"] == stream["entries_added"] - group["entries_read"]
    return "lag" if agrees else "counters"


def reports_inactive(client: redis.Redis) -> bool:
    """Whether XINFO CONSUMERS has `inactive` on this server (a feature, not a version)."""
    rows = client.execute_command("XINFO", "CONSUMERS", "jobs", "workers")
    return any(b"inactive" in row[::2] for row in rows)


def job(n: int) -> list[str]:
    return ["kind", "render_tickets", "order_id", str(n), "outbox_id", str(n),
            "request_id", f"r{n}", "trace", f"t{n}"]


@pytest.fixture
def client(settings: Settings) -> Any:
    c = sync_client(settings)
    yield c
    c.close()


# -- the numbers ------------------------------------------------------------------------------


def test_missing_stream_and_group_are_reported(client: redis.Redis, settings: Settings) -> None:
    st = queue_status(client, settings)
    assert st["stream"] == {"name": "jobs", "exists": False, "length": 0, "first_id": None,
                            "last_id": None, "last_generated_id": None, "entries_added": None}
    assert st["group"]["exists"] is False
    assert st["pending"] == {"count": 0, "oldest": None, "by_consumer": {}}
    assert st["consumers"] == []
    assert st["queue_age_ms"] is None
    assert st["trimmed_backlog"]["alarm"] is False
    assert st["dead"] == {"name": "jobs:dead", "length": 0, "maxlen": 10_000, "trimmed": 0}
    assert abs(st["time_ms"] - now_ms(client)) < 1000


def test_stream_without_group(client: redis.Redis, settings: Settings) -> None:
    client.execute_command("XADD", "jobs", "*", *job(1))
    st = queue_status(client, settings)
    assert st["stream"]["exists"] is True
    assert st["stream"]["length"] == 1
    assert st["group"]["exists"] is False
    assert st["pending"]["count"] == 0
    assert st["queue_age_ms"] is None


def test_every_number(client: redis.Redis, settings: Settings) -> None:
    ensure_group(client, settings)
    t0 = now_ms(client)
    a = f"{t0 - 10_000}-0"
    b = f"{t0 - 5_000}-0"
    client.execute_command("XADD", "jobs", a, *job(1))
    client.execute_command("XADD", "jobs", b, *job(2))
    c = client.execute_command("XADD", "jobs", "*", *job(3)).decode()
    d = client.execute_command("XADD", "jobs", "*", *job(4)).decode()
    client.execute_command("XADD", "jobs:dead", "*", "kind", "x", "dead:error", "e")
    client.execute_command("XADD", "jobs:dead", "*", "kind", "y", "dead:error", "e")
    assert [e[0].decode() for e in read(client, settings, "test-00", 1)] == [a]

    st = queue_status(client, settings)
    now = st["time_ms"]
    assert st["stream"] == {"name": "jobs", "exists": True, "length": 4, "first_id": a,
                            "last_id": d, "last_generated_id": d, "entries_added": 4}
    assert st["group"] == {"name": "workers", "exists": True, "last_delivered_id": a,
                           "entries_read": 1, "lag": 3, "consumers": 1}
    assert st["pending"]["count"] == 1
    assert st["pending"]["by_consumer"] == {"test-00": 1}
    oldest = st["pending"]["oldest"]
    assert oldest["id"] == a and oldest["consumer"] == "test-00"
    assert oldest["deliveries"] == 1
    assert oldest["age_ms"] == now - (t0 - 10_000)
    assert 10_000 <= oldest["age_ms"] < 12_000
    assert 0 <= oldest["idle_ms"] < 2_000
    # The queue age is that of the oldest UNDELIVERED entry, b, read from its id.
    assert st["oldest_undelivered_id"] == b
    assert st["queue_age_ms"] == now - (t0 - 5_000)
    assert 5_000 <= st["queue_age_ms"] < 7_000
    row = st["consumers"][0]
    assert st["consumers"] == [{"name": "test-00", "pending": 1, "idle_ms": row["idle_ms"],
                                "inactive_ms": row["inactive_ms"]}]
    # `inactive` where the server reports it (7.2+, Valkey), None where not (7.0)
    assert (row["inactive_ms"] is None) == (not reports_inactive(client))
    assert row["inactive_ms"] is None or 0 <= row["inactive_ms"] < 2_000
    assert st["trimmed_backlog"] == {"alarm": False, "undelivered_trimmed": 0,
                                     "method": "lag"}
    assert st["dead"]["length"] == 2

    # A second consumer takes b and c; the first acks a.
    assert len(read(client, settings, "test-01", 2)) == 2
    client.execute_command("XACK", "jobs", "workers", a)
    time.sleep(0.05)
    st = queue_status(client, settings)
    assert st["group"]["last_delivered_id"] == c
    assert st["group"]["entries_read"] == 3 and st["group"]["lag"] == 1
    assert st["pending"]["count"] == 2
    assert st["pending"]["by_consumer"] == {"test-01": 2}
    assert st["pending"]["oldest"]["id"] == b
    assert st["pending"]["oldest"]["consumer"] == "test-01"
    assert st["oldest_undelivered_id"] == d
    assert 0 <= st["queue_age_ms"] < 2_000
    by_name = {row["name"]: row for row in st["consumers"]}
    assert by_name["test-00"]["pending"] == 0 and by_name["test-01"]["pending"] == 2
    assert by_name["test-00"]["idle_ms"] >= by_name["test-01"]["idle_ms"] >= 50

    # Everything delivered: nothing is waiting, the queue age is 0.
    read(client, settings, "test-01", 10)
    st = queue_status(client, settings)
    assert st["oldest_undelivered_id"] is None and st["queue_age_ms"] == 0
    assert st["group"]["lag"] == 0


def test_trimmed_backlog_alarm(client: redis.Redis, settings: Settings) -> None:
    ensure_group(client, settings)
    for n in range(5):
        client.execute_command("XADD", "jobs", "*", *job(n))
    read(client, settings, "test-00", 2)
    st = queue_status(client, settings)
    assert st["trimmed_backlog"]["alarm"] is False

    # Three never-delivered entries trimmed away.
    client.execute_command("XTRIM", "jobs", "MAXLEN", 0)
    st = queue_status(client, settings)
    assert st["stream"]["length"] == 0
    # The servers disagree on lag here, which is why the alarm does not read it.
    assert st["group"]["lag"] == LAG_AFTER_TRIM[SERVER.name][0]
    assert st["trimmed_backlog"] == {"alarm": True, "undelivered_trimmed": 3,
                                     "method": lag_method(st)}
    assert st["pending"]["count"] == 2  # the PEL still names the trimmed delivered ones

    # New work arrives: still behind the gap, still alarming, 3 lost.
    for n in range(2):
        client.execute_command("XADD", "jobs", "*", *job(10 + n))
    st = queue_status(client, settings)
    assert st["trimmed_backlog"] == {"alarm": True, "undelivered_trimmed": 3,
                                     "method": lag_method(st)}

    # Once the group reads past the gap the alarm clears, also where the server's lag
    # keeps counting the lost entries (7.0 never re-syncs entries-read after a trim).
    read(client, settings, "test-00", 10)
    st = queue_status(client, settings)
    assert st["group"]["lag"] == LAG_AFTER_TRIM[SERVER.name][1]
    assert st["trimmed_backlog"]["alarm"] is False


def test_an_id_ahead_of_the_clock_is_reported_not_clamped(client: redis.Redis,
                                                          settings: Settings,
                                                          redis_url: str) -> None:
    """A foreign XADD with an id an hour ahead: every later id carries that hour, so
    the entries' ids no longer say when they were queued.  The queue age is unknown
    (never 0, which hid an old backlog from the 60 s and 600 s alarms), status warns,
    --check warns, and the exporter has the gap."""
    ensure_group(client, settings)
    now_ms = int(client.time()[0]) * 1000
    client.execute_command("XADD", "jobs", f"{now_ms + 3_600_000}-0", *job(1))
    client.execute_command("XADD", "jobs", "*", *job(2))  # by Redis: the future hour
    st = queue_status(client, settings)
    assert st["queue_age_ms"] is None
    assert 3_590_000 <= st["ids_ahead_ms"] <= 3_600_000
    text = cli("status", "--redis-url", redis_url).stdout
    assert "queue age UNKNOWN" in text and "IDS AHEAD WARNING" in text, text
    check = cli("status", "--check", "--redis-url", redis_url)
    assert check.returncode == 1, check.stdout  # WARNING
    assert "queue age unknown: entry ids are" in check.stdout, check.stdout
    assert queue_gauges(st)["stream_ids_ahead_seconds"] >= 3590
    assert "queue_age_seconds" not in queue_gauges(st)


def test_status_shows_what_stagedoor_keeps_besides_the_streams(client: redis.Redis,
                                                               settings: Settings,
                                                               redis_url: str) -> None:
    """Per-job keys by family against the stream (issue 37 item 7): the done marks' hashes
    and a redelivered entry's start count are counted, and more than the stream's own
    memory (here 2,000 marks as keys of their own, the layout before issue 36) warns."""
    ensure_group(client, settings)
    client.execute_command("XADD", "jobs", "*", *job(1))
    client.hset("stagedoor:marks:0", mapping={"1": "render_tickets"})
    client.set("stagedoor:starts:1-0", 2)
    doc = orjson.loads(cli("status", "--json", "--redis-url", redis_url).stdout)
    assert doc["kept"]["state"] == "OK", doc["kept"]
    assert "stagedoor:marks:<n> 1 keys" in doc["kept"]["found"]
    assert "stagedoor:starts:<n> 1 keys" in doc["kept"]["found"]
    pipe = client.pipeline(transaction=False)
    for n in range(2000):
        pipe.set(f"stagedoor:done:{n}", "render_tickets", ex=600)
    pipe.execute()
    text = cli("status", "--redis-url", redis_url).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("kept "))
    assert line.startswith("kept      WARNING: ") and "stagedoor:done:<n> 2,000 keys" in line
    assert "expire on their own" in line, line


def test_trimming_only_delivered_entries_is_no_alarm(client: redis.Redis,
                                                      settings: Settings) -> None:
    # Ids far apart, so the first entry left is newer than "the id after the cursor".
    ensure_group(client, settings)
    for ms in (1000, 2000, 3000, 4000):
        client.execute_command("XADD", "jobs", f"{ms}-0", *job(ms))
    read(client, settings, "test-00", 2)
    client.execute_command("XTRIM", "jobs", "MINID", "3000-0")  # drops the 2 delivered
    st = queue_status(client, settings)
    assert st["stream"]["first_id"] == "3000-0" and st["group"]["last_delivered_id"] == "2000-0"
    assert st["trimmed_backlog"] == {"alarm": False, "undelivered_trimmed": 0,
                                     "method": "lag"}
    # ... but one more, undelivered, is a loss.
    client.execute_command("XTRIM", "jobs", "MINID", "4000-0")
    st = queue_status(client, settings)
    assert st["trimmed_backlog"] == {"alarm": True, "undelivered_trimmed": 1,
                                     "method": lag_method(st)}


def test_ids_fallback_when_redis_has_no_counters(settings: Settings) -> None:
    # Pure logic on replies as Redis gives them when lag and entries-read are null.
    stream_info = [b"length", 1, b"last-generated-id", b"5000-0", b"entries-added", 9,
                   b"first-entry", [b"5000-0", [b"kind", b"x"]],
                   b"last-entry", [b"5000-0", [b"kind", b"x"]]]
    group = [[b"name", b"workers", b"consumers", 0, b"pending", 0,
              b"last-delivered-id", b"1000-0", b"entries-read", None, b"lag", None]]
    first = [(100, 0), stream_info, group, [], [0, None, None, None], [], 0]
    st = build_status(settings, first, [[[b"5000-0", [b"kind", b"x"]]]])
    assert st["trimmed_backlog"] == {"alarm": True, "undelivered_trimmed": None,
                                     "method": "ids"}
    assert st["queue_age_ms"] == 100_000 - 5000
    group[0][7] = b"5000-0"  # caught up with the newest entry: nothing is missing
    st = build_status(settings, first, [[]])
    assert st["trimmed_backlog"]["alarm"] is False
    # The first entry is the id right after the cursor: nothing can be missing between.
    group[0][7] = b"4999-0"
    stream_info[7] = [b"4999-1", [b"kind", b"x"]]
    stream_info[3] = b"5000-0"
    st = build_status(settings, first, [[[b"4999-1", [b"kind", b"x"]]]])
    assert st["trimmed_backlog"]["alarm"] is False
    stream_info[7] = [b"4999-2", [b"kind", b"x"]]  # 4999-1 existed and is gone (maybe)
    st = build_status(settings, first, [[[b"4999-2", [b"kind", b"x"]]]])
    assert st["trimmed_backlog"]["alarm"] is True


def test_wrong_type_is_one_line_error(client: redis.Redis, settings: Settings) -> None:
    client.set("jobs", "not a stream")
    with pytest.raises(InspectError, match="WRONGTYPE") as info:
        queue_status(client, settings)
    assert "\n" not in str(info.value)


async def test_async_twin_matches(aredis: aioredis.Redis, settings: Settings) -> None:
    sync = sync_client(settings)
    try:
        ensure_group(sync, settings)
        t0 = now_ms(sync)
        sync.execute_command("XADD", "jobs", f"{t0 - 5000}-0", *job(1))
        sync.execute_command("XADD", "jobs", "*", *job(2))
        read(sync, settings, "test-00", 1)
        expected = queue_status(sync, settings)
    finally:
        sync.close()
    client = async_client(settings)
    try:
        got = await aqueue_status(client, settings)
    finally:
        await client.aclose()

    def stable(st: dict[str, Any]) -> dict[str, Any]:
        st = orjson.loads(orjson.dumps(st))
        st.pop("time_ms")
        st.pop("queue_age_ms")
        st["pending"]["oldest"].pop("age_ms")
        st["pending"]["oldest"].pop("idle_ms")
        for row in st["consumers"]:
            row.pop("idle_ms")
            row.pop("inactive_ms")
        return st

    assert stable(got) == stable(expected)
    assert got["pending"]["oldest"]["age_ms"] >= 5000
    assert got["oldest_undelivered_id"] is not None
    assert id_ms(got["pending"]["oldest"]["id"]) == t0 - 5000


# -- the command ------------------------------------------------------------------------------


def test_status_json(client: redis.Redis, settings: Settings, redis_url: str) -> None:
    ensure_group(client, settings)
    t0 = now_ms(client)
    client.execute_command("XADD", "jobs", f"{t0 - 5000}-0", *job(1))
    client.execute_command("XADD", "jobs", "*", *job(2))
    read(client, settings, "test-00", 1)
    proc = cli("status", "--json", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    st = orjson.loads(proc.stdout)
    assert st["stream"]["length"] == 2
    assert st["group"]["lag"] == 1
    assert st["pending"]["count"] == 1
    assert st["pending"]["oldest"]["consumer"] == "test-00"
    assert st["pending"]["oldest"]["age_ms"] >= 5000
    assert st["consumers"][0]["name"] == "test-00"
    assert st["trimmed_backlog"]["alarm"] is False


def test_status_table(client: redis.Redis, settings: Settings, redis_url: str) -> None:
    ensure_group(client, settings)
    for n in range(3):
        client.execute_command("XADD", "jobs", "*", *job(n))
    read(client, settings, "host-07", 1)
    client.execute_command("XTRIM", "jobs", "MAXLEN", 0)
    client.execute_command("XADD", "jobs:dead", "*", "kind", "x", "dead:error", "e")
    proc = cli("status", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "stream    jobs: length 0" in out
    [group] = client.execute_command("XINFO", "GROUPS", "jobs")
    lag = dict(zip(group[::2], group[1::2], strict=True))[b"lag"]
    assert f"lag {lag}" in out  # the server's own figure (2 on 7.0 and Valkey, 0 on 8.2)
    assert "pending   1: oldest" in out and "on host-07" in out
    assert "TRIMMED   ALARM: 2 entries were trimmed" in out
    assert "dead      jobs:dead: 1 entries" in out
    assert "host-07" in out.split("consumer", 1)[1]


def test_a_malformed_worker_record_is_shown_as_malformed(client: redis.Redis,
                                                         redis_url: str) -> None:
    """Issue 38 item 6: `"paused": "no"` read as paused, `"started": 1e20` as a time."""
    ensure_group(client, Settings(redis_url=redis_url))
    good = {"consumer": "w-good", "host": "h1", "slot": 0, "pid": 11, "version": "1",
            "renderer": None, "started": time.time() - 60, "handled": 5, "in_flight": 0,
            "rss_bytes": 2**20, "paused": False, "seen_ms": int(time.time() * 1000)}
    bad = {**good, "consumer": "w-bad", "pid": 12, "paused": "no"}
    worse = {**good, "consumer": "w-worse", "pid": 13, "started": 1e20}
    for record in (good, bad, worse):
        client.hset("stagedoor:fleet:jobs", record["consumer"], 1)
        client.set(f"stagedoor:worker:jobs:{record['consumer']}", orjson.dumps(record))
    client.set("stagedoor:worker:jobs:w-junk", b"\xff not json")
    client.hset("stagedoor:fleet:jobs", "w-junk", 1)
    proc = cli("status", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "workers   1 live" in out and " 11 " in out
    assert " 12 " not in out and " 13 " not in out  # never shown as workers
    assert "MALFORMED presence record of w-bad: paused: 'no' is not true or false" in out
    assert "MALFORMED presence record of w-worse: started: 1e+20 is not a time" in out
    assert "MALFORMED presence record of w-junk: not JSON" in out
    proc = cli("status", "--json", "--redis-url", redis_url)
    fleet = orjson.loads(proc.stdout)["fleet"]
    assert [w["consumer"] for w in fleet["workers"]] == ["w-good"]
    assert sorted(m["consumer"] for m in fleet["malformed"]) == ["w-bad", "w-junk", "w-worse"]


def test_status_env_and_missing_stream(redis_url: str) -> None:
    env_url = redis_url
    proc = cli("status", "--stream", "other", env={"STAGEDOOR_REDIS_URL": env_url})
    assert proc.returncode == 0, proc.stderr
    assert "stream    other: MISSING" in proc.stdout
    assert "group     workers: MISSING" in proc.stdout


def test_status_unreachable_is_69_with_one_line() -> None:
    url = f"redis://ops:s3cret@127.0.0.1:{free_port()}/0"
    proc = cli("status", "--redis-url", url)
    assert proc.returncode == 69
    line = one_line(proc.stderr)
    assert line.startswith("stagedoor status: cannot reach Redis at redis://ops:***@127.0.0.1:")
    assert "s3cret" not in proc.stderr
    assert proc.stdout == ""


def test_status_help_and_bad_arguments() -> None:
    proc = cli("status", "--help")
    assert proc.returncode == 0
    assert "--json" in proc.stdout and "--redis-url" in proc.stdout
    proc = cli("status", "--bogus")
    assert proc.returncode == 2
    assert "unrecognized arguments: --bogus" in one_line(proc.stderr)
    proc = cli("status", "--redis-url")
    assert proc.returncode == 2
    one_line(proc.stderr)


def test_status_bad_setting_is_78() -> None:
    proc = cli("status", "--redis-url", "http://127.0.0.1:1/")
    assert proc.returncode == 78
    assert "redis_url" in one_line(proc.stderr)


# -- --check: a monitoring plugin ----------------------------------------------------------------

def check(redis_url: str, *more: str) -> tuple[int, str]:
    proc = cli("status", "--check", "--redis-url", redis_url, *more)
    assert proc.stderr == "", proc.stderr
    return proc.returncode, one_line(proc.stdout)


def test_check_ok_warning_critical(client: redis.Redis, settings: Settings,
                                   redis_url: str) -> None:
    ensure_group(client, settings)
    client.execute_command("XADD", "jobs", "*", *job(1))
    code, line = check(redis_url)
    assert code == 0, line
    assert line.startswith("STAGEDOOR OK - queue healthy | queue_age=")
    assert "lag=1;50000;80000;0;100000" in line and "dead=0;1;1000;0" in line

    client.execute_command("XADD", "jobs:dead", "*", "kind", "x", "dead:error", "e")
    code, line = check(redis_url)
    assert code == 1 and "WARNING: 1 dead letters (stagedoor dead list)" in line, line

    t0 = now_ms(client)
    client.execute_command("XADD", "jobs", "*", *job(2))  # a newer one; then an old one waits
    client.execute_command("DEL", "jobs")
    ensure_group(client, settings)
    client.execute_command("XADD", "jobs", f"{t0 - 120_000}-0", *job(3))
    code, line = check(redis_url)
    assert code == 1 and re.search(r"WARNING: queue age 12\ds >= 60s", line), line
    code, line = check(redis_url, "--crit-age", "100")
    assert code == 2 and re.search(r"CRITICAL: queue age 12\ds >= 100s", line), line
    code, line = check(redis_url, "--maxlen", "2", "--warn-dead", "5")
    assert code == 1 and "WARNING: 1 undelivered is 50% of MAXLEN 2" in line, line
    assert "dead letters" not in line.split("|")[0]
    code, line = check(redis_url, "--maxlen", "1")
    assert code == 2 and "CRITICAL: 1 undelivered is 100% of MAXLEN 1" in line, line


def test_check_critical_on_trimmed_jobs_and_json(client: redis.Redis, settings: Settings,
                                                 redis_url: str) -> None:
    ensure_group(client, settings)
    for n in range(4):
        client.execute_command("XADD", "jobs", "*", *job(n))
    read(client, settings, "host-07", 1)
    client.execute_command("XTRIM", "jobs", "MAXLEN", 0)  # three jobs nobody took
    code, line = check(redis_url)
    assert code == 2
    assert line.startswith("STAGEDOOR CRITICAL - CRITICAL: 3 jobs were trimmed before any "
                           "worker took them")
    proc = cli("status", "--check", "--json", "--redis-url", redis_url)
    assert proc.returncode == 2
    doc = orjson.loads(proc.stdout)
    assert doc["check"]["state"] == "CRITICAL" and doc["check"]["code"] == 2
    assert doc["trimmed_backlog"]["alarm"] is True  # the whole status comes along


def test_check_unknown_when_redis_is_away_or_wrong() -> None:
    url = f"redis://ops:s3cret@127.0.0.1:{free_port()}/0"
    code, line = check(url)
    assert code == 3
    assert line.startswith("STAGEDOOR UNKNOWN - cannot reach Redis at redis://ops:***@")
    assert "s3cret" not in line


def test_check_group_missing_is_a_warning(client: redis.Redis, redis_url: str) -> None:
    client.execute_command("XADD", "jobs", "*", *job(1))
    code, line = check(redis_url)
    assert code == 1 and "group workers missing" in line, line
    proc = cli("status", "--check", "--watch", "--redis-url", redis_url)
    assert proc.returncode == 2 and "not allowed with" in proc.stderr


# -- --watch: throughput and time to drain -------------------------------------------------------

def test_watch_sample_rate_and_drain() -> None:
    from stagedoor.cli.commands.status import format_watch
    from stagedoor.telemetry.inspect import watch_sample

    def status(t_ms: int, read: int, pending: int, lag: int) -> dict[str, object]:
        return {"time_ms": t_ms, "stream": {"entries_added": read + lag},
                "group": {"entries_read": read, "lag": lag}, "pending": {"count": pending},
                "queue_age_ms": 900, "dead": {"length": 2},
                "trimmed_backlog": {"alarm": False}}

    first = watch_sample(status(10_000, 100, 10, 400), None)
    assert first["done"] == 90 and first["rate"] is None and first["drain_seconds"] is None
    assert "(-)  drained in -" in format_watch(first)
    second = watch_sample(status(12_000, 300, 10, 200), (10.0, first["done"]))
    assert second["rate"] == 100.0                      # 200 more done in 2 s
    assert second["drain_seconds"] == 2.1               # (200 waiting + 10 pending) / 100
    assert "done 290 (100.0/s)  drained in 2.1s  dead 2" in format_watch(second)
    stuck = watch_sample(status(14_000, 300, 10, 200), (12.0, second["done"]))
    assert stuck["rate"] == 0 and "drained in never at this rate" in format_watch(stuck)
    empty = watch_sample(status(16_000, 300, 0, 0), (14.0, stuck["done"]))
    assert empty["drain_seconds"] == 0


def test_watch_prints_lines_as_the_queue_drains(client: redis.Redis, settings: Settings,
                                               redis_url: str) -> None:
    ensure_group(client, settings)
    for n in range(50):
        client.execute_command("XADD", "jobs", "*", *job(n))
    proc = subprocess.Popen(
        [sys.executable, "-m", "stagedoor.cli", "status", "--watch", "--json", "--interval",
         "0.2", "--samples", "4", "--redis-url", redis_url], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")},
             "PYTHONPATH": str(SRC)})
    assert proc.stdout is not None
    first = orjson.loads(proc.stdout.readline())
    assert first["waiting"] == 50 and first["rate"] is None
    read(client, settings, "w-00", 50)  # a worker takes all 50 ...
    ids = [e[0] for e in client.execute_command("XRANGE", "jobs", "-", "+")]
    client.execute_command("XACK", "jobs", "workers", *ids)  # ... and finishes them
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    rest = [orjson.loads(line) for line in out.splitlines()]
    assert len(rest) == 3
    assert rest[-1]["waiting"] == 0 and rest[-1]["pending"] == 0 and rest[-1]["done"] == 50
    assert any(s["rate"] and s["rate"] > 0 for s in rest)
    assert rest[-1]["drain_seconds"] == 0
