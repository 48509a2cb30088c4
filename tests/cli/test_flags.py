"""Flags: a flag the command would ignore is refused (exit 2, one line); help texts say
what the commands do (issue 24, item 9)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import redis

from tests.support.cli import SUPERVISE, cli


def refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert proc.stdout == ""


def test_conflicting_flags_are_refused(redis_url: str, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"kind": "render_tickets", "order_id": 7, "outbox_id": 7}\n')
    # --file takes every job from the file: --kind & co. would be ignored.
    refused(cli("enqueue", "--kind", "refund", "--order-id", "1", "--outbox-id", "1",
                "--file", str(jobs), "--redis-url", redis_url), "--kind", "--file")
    refused(cli("enqueue", "--trace", "00-abc", "--file", str(jobs), "--redis-url", redis_url),
            "--trace")
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        assert client.xlen("jobs") == 0  # nothing went in
    finally:
        client.close()
    # Flags of one mode of status, without it.
    refused(cli("status", "--interval", "5", "--redis-url", redis_url), "--interval",
            "--watch")
    refused(cli("status", "--samples", "3", "--check", "--redis-url", redis_url), "--samples")
    refused(cli("status", "--warn-age", "5", "--crit-dead", "9", "--redis-url", redis_url),
            "--warn-age", "--crit-dead", "--check")
    refused(cli("status", "--warn-lag", "0.5", "--watch", "--redis-url", redis_url),
            "--warn-lag")
    refused(cli("status", "--check", "--watch", "--redis-url", redis_url), "--watch")
    # render --check-fonts renders nothing: an order and an output would be ignored.
    refused(cli("render", "--check-fonts", str(jobs), "-o", str(tmp_path / "x.pdf")),
            "--order", "--check-fonts")
    # Each mode still takes its own flags.
    proc = cli("status", "--watch", "--samples", "1", "--interval", "0.1",
               "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    proc = cli("enqueue", "--file", str(jobs), "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr


def test_json_with_check_is_the_check(redis_url: str) -> None:
    """--json --check is one mode: the status with the verdict, and the verdict's exit."""
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        client.xadd("jobs", {"kind": "render_tickets"})
    finally:
        client.close()
    for flags in (("--json", "--check"), ("--check", "--json")):
        proc = cli("status", *flags, "--warn-dead", "5", "--redis-url", redis_url)
        assert proc.returncode == 1, proc.stdout + proc.stderr  # group missing: WARNING
        doc = orjson.loads(proc.stdout)
        assert doc["check"]["state"] == "WARNING" and doc["stream"]["length"] == 1


def test_help_says_what_an_empty_redis_url_does() -> None:
    for command in (("status",), ("enqueue",), ("dead", "list"), ("work",)):
        text = " ".join(cli(*command, "--help").stdout.split())
        assert "start an embedded" not in text and "Required (empty is a config error, exit " \
            "78)" in text, command
        proc = cli(*command, *(("--kind", "render_tickets", "--order-id", "1",
                                "--outbox-id", "1") if command == ("enqueue",) else ()),
                   *(("--burst",) if command == ("work",) else ()))
        assert proc.returncode == 78 and "redis_url is empty" in proc.stderr, (command,
                                                                                proc.stderr)
    sup = cli("--help", entry=SUPERVISE).stdout
    assert "embedded" not in sup or "demo" in sup
    assert cli("--workers", "1", entry=SUPERVISE).returncode == 78
    assert "embedded redis-server" in cli("demo", "--help").stdout
