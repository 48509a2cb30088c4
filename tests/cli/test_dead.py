"""`stagedoor dead ...` as a subprocess against the suite's real Redis."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import free_port
from stagedoor.stream.connection import sync_client
from stagedoor.stream.queue import dead_letter_fields
from tests.support.cli import cli, one_line

ROOT = Path(__file__).resolve().parents[2]


def job_fields(order: int) -> list[bytes]:
    return [b"kind", b"render_tickets", b"order_id", str(order).encode(),
            b"outbox_id", str(88000 + order).encode(), b"request_id", b"7f3a9c2e",
            b"trace", b"4bf92f35"]


@pytest.fixture
def client(settings: Settings) -> Iterator[redis.Redis]:
    c = sync_client(settings)
    yield c
    c.close()


def add_dead(client: redis.Redis, fields: list[bytes] | None, *, error: str = "boom",
             source: str = "1758200000000-0", deliveries: int = 6) -> str:
    payload = dead_letter_fields(fields, error=error, source_id=source, deliveries=deliveries,
                                 consumer="host-03")
    return str(client.execute_command("XADD", "jobs:dead", "*", *payload).decode())


def entries(client: redis.Redis, key: str) -> list[tuple[str, list[bytes]]]:
    return [(e[0].decode(), list(e[1])) for e in client.execute_command("XRANGE", key, "-", "+")]


# -- list / show --------------------------------------------------------------------------------


def test_list_json_types_for_a_malformed_entry(client: redis.Redis, redis_url: str) -> None:
    fields = job_fields(1)
    fields[3] = b"44x71"  # the spring's payload: not an integer
    add_dead(client, fields, error="malformed: order_id must be a positive decimal integer")
    add_dead(client, None, error="trimmed")
    proc = cli("dead", "list", "--json", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    empty, malformed = orjson.loads(proc.stdout)
    assert malformed["order_id"] is None and malformed["order_id_raw"] == "44x71"
    assert malformed["deliveries"] == 6
    assert empty["order_id"] is None and "order_id_raw" not in empty
    table = cli("dead", "list", "--redis-url", redis_url).stdout
    assert "44x71" in table


def test_list_and_show(client: redis.Redis, redis_url: str) -> None:
    first = add_dead(client, job_fields(4471), error="MalformedJob: order_id must be ...",
                     source="1758200000000-0")
    second = add_dead(client, job_fields(4472), error="TimeoutError: render took 30s",
                      source="1758200000001-0")
    proc = cli("dead", "list", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "jobs:dead: 2 entries, newest 2 first"
    assert lines[1].split() == ["id", "time", "kind", "order_id", "source_id", "error"]
    assert lines[2].split()[:5] == [second, lines[2].split()[1], "render_tickets", "4472",
                                    "1758200000001-0"]
    assert lines[2].endswith("TimeoutError: render took 30s")
    assert lines[3].startswith(first) and "4471" in lines[3] and "MalformedJob" in lines[3]
    assert lines[2].split()[1].endswith("Z")

    proc = cli("dead", "list", "--count", "1", "--json", "--redis-url", redis_url)
    rows = orjson.loads(proc.stdout)
    assert [r["id"] for r in rows] == [second]
    assert rows[0]["error"] == "TimeoutError: render took 30s"
    assert rows[0]["source_id"] == "1758200000001-0"
    # integers as integers, as `stagedoor status --json` gives them
    assert rows[0]["kind"] == "render_tickets" and rows[0]["order_id"] == 4472
    assert rows[0]["deliveries"] == 6 and rows[0]["consumer"] == "host-03"
    assert "order_id_raw" not in rows[0]

    proc = cli("dead", "show", first, "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    shown = [line.split(None, 1) for line in proc.stdout.splitlines()]
    names = [row[0] for row in shown]
    assert names == ["id", "kind", "order_id", "outbox_id", "request_id", "trace", "dead:error",
                     "dead:source_id", "dead:deliveries", "dead:consumer", "dead:time", "(time)"]
    assert shown[0][1] == first
    assert dict((r[0], r[1]) for r in shown)["dead:error"] == "MalformedJob: order_id must be ..."
    proc = cli("dead", "show", first, "--json", "--redis-url", redis_url)
    doc = orjson.loads(proc.stdout)
    assert doc["fields"][:2] == [["kind", "render_tickets"], ["order_id", "4471"]]
    assert len(doc["fields"]) == 10

    proc = cli("dead", "show", "1-0", "--redis-url", redis_url)
    assert proc.returncode == 1
    assert one_line(proc.stderr) == "stagedoor dead show: no entry 1-0 in jobs:dead"


def test_list_empty(redis_url: str) -> None:
    proc = cli("dead", "list", "--redis-url", redis_url)
    assert proc.returncode == 0
    assert proc.stdout == "jobs:dead: no dead-letter entries\n"


# -- replay -------------------------------------------------------------------------------------


def test_replay_one(client: redis.Redis, redis_url: str) -> None:
    keep = add_dead(client, job_fields(1))
    dead_id = add_dead(client, job_fields(4471))
    proc = cli("dead", "replay", dead_id, "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    jobs = entries(client, "jobs")
    assert len(jobs) == 1
    new_id, fields = jobs[0]
    assert fields == job_fields(4471)  # the original fields, no dead:*
    assert new_id != dead_id
    assert proc.stdout.splitlines() == [
        f"replayed   {dead_id} -> jobs {new_id} (kind render_tickets, order_id 4471)",
        "replayed 1 of 1"]
    assert [e[0] for e in entries(client, "jobs:dead")] == [keep]
    # The group was ensured before the XADD, so a worker reading '>' gets the job.
    groups = client.execute_command("XINFO", "GROUPS", "jobs")
    assert groups[0][1] == b"workers"
    got = client.execute_command("XREADGROUP", "GROUP", "workers", "w", "STREAMS", "jobs", ">")
    assert got[0][1][0][0].decode() == new_id

    # Replaying it again finds nothing and adds nothing.
    proc = cli("dead", "replay", dead_id, "--redis-url", redis_url)
    assert proc.returncode == 1
    assert f"not found  {dead_id}" in proc.stdout
    assert len(entries(client, "jobs")) == 1


def test_replay_keeps_the_dead_entry_when_the_xadd_fails(client: redis.Redis,
                                                          redis_url: str) -> None:
    dead_id = add_dead(client, job_fields(4471))
    # A stream whose last id is the largest possible: XADD * fails there.
    client.execute_command("XADD", "jobs", "18446744073709551615-18446744073709551615",
                           "kind", "x")
    proc = cli("dead", "replay", dead_id, "--redis-url", redis_url)
    assert proc.returncode == 1
    assert "Redis error" in one_line(proc.stderr)
    assert [e[0] for e in entries(client, "jobs:dead")] == [dead_id]
    assert len(entries(client, "jobs")) == 1


def test_replay_all_in_order_and_skip_entries_without_fields(client: redis.Redis,
                                                             redis_url: str) -> None:
    ids = [add_dead(client, job_fields(n)) for n in (1, 2)]
    empty = add_dead(client, None, error="entry trimmed")
    ids.append(add_dead(client, job_fields(3)))
    proc = cli("dead", "replay", "--all", "--redis-url", redis_url)
    assert proc.returncode == 1  # one entry could not be replayed
    assert proc.stdout.splitlines()[-1] == "replayed 3 of 4, 1 not replayed"
    assert f"skipped    {empty}" in proc.stdout
    jobs = entries(client, "jobs")
    assert [f[3] for _, f in jobs] == [b"1", b"2", b"3"]  # oldest first
    assert [e[0] for e in entries(client, "jobs:dead")] == [empty]

    proc = cli("dead", "replay", "--all", "--redis-url", redis_url)
    assert "replayed 0 of 1" in proc.stdout
    client.execute_command("DEL", "jobs:dead")
    proc = cli("dead", "replay", "--all", "--redis-url", redis_url)
    assert proc.returncode == 0
    assert proc.stdout == "jobs:dead: nothing to replay\n"


def test_replay_all_pages(client: redis.Redis, redis_url: str) -> None:
    pipe = client.pipeline(transaction=False)
    for n in range(250):
        pipe.execute_command("XADD", "jobs:dead", "*",
                             *dead_letter_fields(job_fields(n + 1), error="e", source_id="1-0",
                                                 deliveries=1, consumer="c"))
    pipe.execute()
    proc = cli("dead", "replay", "--all", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "replayed 250 of 250"
    assert client.xlen("jobs") == 250 and client.xlen("jobs:dead") == 0


# -- purge --------------------------------------------------------------------------------------


def test_purge_refuses_without_yes_and_tty(client: redis.Redis, redis_url: str) -> None:
    add_dead(client, job_fields(1))
    proc = cli("dead", "purge", "--redis-url", redis_url)
    assert proc.returncode == 2
    assert "without --yes" in one_line(proc.stderr)
    assert client.xlen("jobs:dead") == 1


def test_purge_yes(client: redis.Redis, redis_url: str) -> None:
    for n in range(3):
        add_dead(client, job_fields(n + 1))
    client.execute_command("XADD", "jobs", "*", "kind", "x")
    proc = cli("dead", "purge", "--yes", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "purged 3 entries from jobs:dead\n"
    assert client.xlen("jobs:dead") == 0
    assert client.xlen("jobs") == 1  # the job stream is untouched
    proc = cli("dead", "purge", "--yes", "--redis-url", redis_url)
    assert proc.stdout == "jobs:dead: nothing to purge\n"


@pytest.mark.parametrize(("answer", "purged"), [("n\n", False), ("y\n", True)])
def test_purge_asks_on_a_terminal(client: redis.Redis, redis_url: str, answer: str,
                                  purged: bool) -> None:
    add_dead(client, job_fields(1))
    master, slave = os.openpty()
    try:
        os.write(master, answer.encode())
        proc = cli("dead", "purge", "--redis-url", redis_url, stdin=slave)
    finally:
        os.close(slave)
        os.close(master)
    assert "Delete 1 dead-letter entries from jobs:dead" in proc.stdout
    assert proc.returncode == (0 if purged else 1), proc.stderr
    assert client.xlen("jobs:dead") == (0 if purged else 1)


# -- by error (the CLI twin of the console's /dead/errors page) ---------------------------------


def test_dead_letters_grouped_by_error_and_one_group_purged_and_replayed(
        client: redis.Redis, redis_url: str) -> None:
    """Issue 38 item 8: the console counted dead letters by error (count, first and last
    seen) and acted on a group; the CLI had no such view.  `dead errors` is the page's
    query; --error-is TEXT selects one group whole (not the other group whose error
    contains its text), after a dry run; each action is audited with its filter."""
    declined = [add_dead(client, job_fields(n), error="card declined",
                         source=f"1758200000000-{n}") for n in (1, 2, 3)]
    longer = add_dead(client, job_fields(4), error="card declined twice",
                      source="1758200000000-4")
    timeout = add_dead(client, job_fields(5), error="TimeoutError: render took 30s",
                       source="1758200000000-5")
    url = ("--redis-url", redis_url)
    proc = cli("dead", "errors", *url)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "jobs:dead: 5 dead letters in 3 error groups; all 5 read, most first"
    assert lines[1].split() == ["count", "first", "seen", "last", "seen", "kinds", "error"]
    assert lines[2].split()[0] == "3" and lines[2].endswith("  card declined")
    assert {lines[3].split()[0], lines[4].split()[0]} == {"1"}
    assert "--error-is TEXT" in lines[-1]
    doc = orjson.loads(cli("dead", "errors", "--json", *url).stdout)
    assert doc["total"] == 5 and doc["complete"] is True
    first = doc["groups"][0]
    assert (first["error"], first["count"], first["first_id"], first["last_id"],
            first["kinds"]) == ("card declined", 3, declined[0], declined[-1],
                                ["render_tickets"])

    proc = cli("dead", "purge", "--error-is", "card declined", "--dry-run", *url)
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[-1] for line in proc.stdout.splitlines()[:-1]] == declined
    assert client.xlen("jobs:dead") == 5    # a dry run touches nothing
    proc = cli("dead", "purge", "--error-is", "card declined", "--yes", *url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "purged 3 entries from jobs:dead\n"
    left = [e[0] for e in entries(client, "jobs:dead")]
    assert left == [longer, timeout]
    proc = cli("dead", "replay", "--error-is", "TimeoutError: render took 30s", "--yes", *url)
    assert proc.returncode == 0, proc.stderr
    assert [e[0] for e in entries(client, "jobs:dead")] == [longer]
    audit = [e[1] for e in entries(client, "stagedoor:audit:jobs")]
    detail = [(dict(zip(f[::2], f[1::2], strict=True))) for f in audit]
    assert [(d[b"action"], d[b"count"], d[b"via"]) for d in detail] == \
        [(b"purge", b"3", b"cli"), (b"replay", b"1", b"cli")]
    assert detail[0][b"detail"].startswith(b"error-is='card declined' upto=")
    assert detail[1][b"detail"] == f"error-is='TimeoutError: render took 30s' {timeout}".encode()


def test_dead_errors_on_an_empty_stream(redis_url: str) -> None:
    proc = cli("dead", "errors", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "jobs:dead: no dead-letter entries\n"


# -- arguments and exit codes -------------------------------------------------------------------


@pytest.mark.parametrize("argv", [("dead",), ("dead", "list"), ("dead", "show"),
                                  ("dead", "errors"), ("dead", "replay"), ("dead", "purge"),
                                  ("status",), ()])
def test_help_exits_0(argv: tuple[str, ...]) -> None:
    proc = cli(*argv, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: stagedoor")
    if argv[:1] == ("dead",) and len(argv) == 2:
        assert "--redis-url" in proc.stdout and "--dead-stream" in proc.stdout


@pytest.mark.parametrize("argv", [
    ("dead",),
    ("dead", "frobnicate"),
    ("dead", "list", "--count", "x"),
    ("dead", "list", "--count", "0"),
    ("dead", "show"),
    ("dead", "show", "not-an-id"),
    ("dead", "replay"),
    ("dead", "replay", "1-0", "--all"),
    ("dead", "replay", "1-0", "x"),
    ("dead", "purge", "--bogus"),
])
def test_wrong_arguments_exit_2_with_one_line(argv: tuple[str, ...]) -> None:
    proc = cli(*argv)
    assert proc.returncode == 2, proc
    line = one_line(proc.stderr)
    assert line.startswith("stagedoor") and "error:" in line
    assert proc.stdout == ""


@pytest.mark.parametrize("action", [("list",), ("show", "1-0"), ("replay", "1-0"),
                                    ("replay", "--all"), ("purge", "--yes")])
def test_unreachable_redis_is_69(action: tuple[str, ...]) -> None:
    proc = cli("dead", *action, "--redis-url", f"redis://127.0.0.1:{free_port()}/0")
    assert proc.returncode == 69
    assert "cannot reach Redis" in one_line(proc.stderr)


def test_stream_names_from_flags(client: redis.Redis, redis_url: str) -> None:
    payload = dead_letter_fields(job_fields(9), error="e", source_id="1-0", deliveries=1,
                                 consumer="c")
    dead_id = client.execute_command("XADD", "other:dead", "*", *payload).decode()
    proc = cli("dead", "replay", dead_id, "--stream", "other", "--dead-stream", "other:dead",
               "--group", "g2", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert client.xlen("other") == 1 and client.xlen("other:dead") == 0
    assert client.execute_command("XINFO", "GROUPS", "other")[0][1] == b"g2"
    assert client.xlen("jobs") == 0
