"""No path adds to the job stream past the backlog refusal level (issue 36).

`dead replay` used to XADD with the cap but without enqueue's backlog check: on a
paused fleet's backlog it let MAXLEN ~ trim jobs no worker had read.  Here a real
Redis holds a backlog just under the refusal level (maxlen 1000: refuses above 950),
the dead letters would carry it past maxlen, and the replay must stop at the level,
leave the rest untouched, trim nothing unread and say so (the browser test of the
confirm page is tests/web/test_web_browser.py::test_bulk_replay_warns_and_stops_at_the_level).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream.backlog import AUDIT_LUA, AUDIT_SCAN_CAP
from stagedoor.stream.job import Job
from stagedoor.stream.keys import trimmed_key
from stagedoor.stream.queue import dead_letter_fields
from tests.support.cli import cli, one_line

pytestmark = pytest.mark.server

MAXLEN = 1000  # refusal level: 95% (the default) = 950
FILLED, READ, DEAD = 960, 20, 300  # backlog 940: 10 fit


def job(n: int) -> list[bytes]:
    return Job(kind="render_tickets", order_id=n, outbox_id=90000 + n, request_id="r",
               trace="t").fields()


def fill_backlog(client: redis.Redis, s: Settings, filled: int = FILLED,
                 read: int = READ) -> list[str]:
    """`filled` jobs on the stream (bare XADDs: past what enqueue would take is the
    point), the first `read` of them delivered and acked: a paused fleet's backlog."""
    client.execute_command("XGROUP", "CREATE", s.stream, s.group, "$", "MKSTREAM")
    pipe = client.pipeline(transaction=False)
    for n in range(filled):
        pipe.execute_command("XADD", s.stream, "*", *job(n + 1))
    ids = [i.decode() for i in pipe.execute()]
    if read:
        client.execute_command("XREADGROUP", "GROUP", s.group, "w", "COUNT", read,
                               "STREAMS", s.stream, ">")
        client.execute_command("XACK", s.stream, s.group, *ids[:read])
    return ids


def add_dead_letters(client: redis.Redis, s: Settings, n: int) -> list[str]:
    pipe = client.pipeline(transaction=False)
    for k in range(n):
        pipe.execute_command("XADD", s.dead_stream, "*", *dead_letter_fields(
            job(50_000 + k), error="boom", source_id="1-0", deliveries=6, consumer="c"))
    return [i.decode() for i in pipe.execute()]


def audit(client: redis.Redis, s: Settings) -> tuple[int, int]:
    """(backlog, unread jobs trimmed) as the worker's audit counts them."""
    r = client.register_script(AUDIT_LUA)(keys=[s.stream], args=[
        s.group, trimmed_key(s), 0, AUDIT_SCAN_CAP])
    return int(r[0]), int(r[1])


def unread(client: redis.Redis, s: Settings) -> list[str]:
    """What a worker reading now gets: every undelivered entry, oldest first."""
    got: Any = client.execute_command("XREADGROUP", "GROUP", s.group, "w", "COUNT", 5000,
                                      "STREAMS", s.stream, ">")
    return [i.decode() for i, _ in got[0][1]] if got else []


def test_replay_stops_at_the_refusal_level_and_trims_nothing_unread(
        settings: Settings, sync_redis: redis.Redis, redis_url: str) -> None:
    s = settings
    filled = fill_backlog(sync_redis, s)
    dead = add_dead_letters(sync_redis, s, DEAD)
    flags = ("--redis-url", redis_url, "--maxlen", str(MAXLEN))
    fit = 950 - (FILLED - READ)

    # The dry run says how many fit now, and touches nothing.
    proc = cli("dead", "replay", "--all", "--dry-run", *flags)
    assert proc.returncode == 0, proc.stderr
    warning = proc.stdout.splitlines()[-1]
    assert warning.startswith(f"warning: only {fit} of {DEAD} fit now: the backlog of jobs "
                              f"is {FILLED - READ} entries, the refusal level 95% of maxlen "
                              f"1000 (950)"), warning
    assert f"leaves the other {DEAD - fit} in jobs:dead" in warning
    doc = orjson.loads(cli("dead", "replay", "--all", "--dry-run", "--json", *flags).stdout)
    assert doc["count"] == DEAD and doc["fit_now"] == fit
    assert doc["room"]["backlog"] == FILLED - READ and doc["room"]["refuse_above"] == 950
    assert sync_redis.xlen(s.dead_stream) == DEAD and sync_redis.xlen(s.stream) == FILLED

    proc = cli("dead", "replay", "--all", "--yes", *flags)
    # Nothing unread was trimmed: every undelivered job is still there to read, and the
    # audit finds no loss.  (Before the fix all 300 went in: 1,260 entries, and
    # MAXLEN ~ 1000 trimmed the oldest 200, 180 of them unread.)
    assert audit(sync_redis, s) == (950, 0)
    assert sync_redis.hget(trimmed_key(s), "count") is None
    waiting = unread(sync_redis, s)
    assert waiting[:FILLED - READ] == filled[READ:]
    assert len(waiting) == 950
    # It went as far as the level and said so: exit 75, how many went back, how many
    # did not and why, in one line.
    assert proc.returncode == 75, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"replayed {fit} of {DEAD}, {DEAD - fit} not replayed"
    assert proc.stdout.count("replayed   ") == fit
    # (stderr also carries the audit log line of the 10 replayed: console/audit.py)
    said = "\n".join(ln for ln in proc.stderr.splitlines() if '"stagedoor.audit"' not in ln)
    assert '"audit_action":"replay","audit_count":10' in proc.stderr
    line = one_line(said)
    assert line.startswith("stagedoor dead replay: stopped at the backlog refusal level: "
                           "the backlog of jobs is 950 entries"), line
    assert f"{DEAD - fit} dead letters left in jobs:dead, untouched ({dead[fit]} to " \
           f"{dead[-1]})" in line
    # The rest are still dead letters, as they were: the oldest went back first.
    left = sync_redis.xrange(s.dead_stream)
    assert [i.decode() for i, _ in left] == dead[fit:]
    assert left[0][1][b"order_id"] == str(50_000 + fit).encode()

    # At the level, a second run replays nothing and says so (JSON: the counts).
    proc = cli("dead", "replay", "--all", "--yes", "--json", *flags)
    assert proc.returncode == 75
    doc = orjson.loads(proc.stdout)
    assert (doc["replayed"], doc["not_replayed"], doc["stopped_at_refusal_level"]) == (
        0, DEAD - fit, DEAD - fit)
    assert doc["room"]["fits"] == 0
    assert sync_redis.xlen(s.dead_stream) == DEAD - fit

    # The workers caught up (all read and acked): the rest go back, exit 0.
    sync_redis.execute_command("XACK", s.stream, s.group, *waiting)
    proc = cli("dead", "replay", "--all", "--yes", *flags)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"replayed {DEAD - fit} of {DEAD - fit}"
    assert sync_redis.xlen(s.dead_stream) == 0
    assert audit(sync_redis, s) == (DEAD - fit, 0)


def test_replay_by_id_stops_too(settings: Settings, sync_redis: redis.Redis,
                                redis_url: str) -> None:
    """Single ids (the web's checked rows call the same function) stop at the level."""
    s = settings
    fill_backlog(sync_redis, s, filled=950, read=0)
    first, second = add_dead_letters(sync_redis, s, 2)
    proc = cli("dead", "replay", first, second, "--redis-url", redis_url, "--maxlen", "1000")
    assert proc.returncode == 75
    assert proc.stdout.splitlines() == ["replayed 0 of 2, 2 not replayed"]
    assert f"2 dead letters left in jobs:dead, untouched ({first} to {second})" in proc.stderr
    assert sync_redis.xlen(s.stream) == 950 and sync_redis.xlen(s.dead_stream) == 2
