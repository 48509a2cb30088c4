"""Operator input and what reaches the operator's terminal (issue 12: #5, #10-#13).

Each case runs the real CLI as a subprocess against a real redis-server: bad settings
are one line and exit 78, a full Redis is one line and exit 75 with what went in,
rediss:// against plain text names the TLS handshake, dead letters are escaped and
truncated on a terminal, and integer fields are ASCII digits and nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis
from stagedoor.errors import MalformedJob
from stagedoor.handlers import Registry
from stagedoor.stream.job import Job, parse_job
from stagedoor.stream.queue import dead_letter_fields, ensure_group_sync
from tests.support.cli import cli, one_line
from tests.support.worker import dead_entries, eventually, running

ROOT = Path(__file__).resolve().parents[2]
EX_TEMPFAIL = 75


# -- #10: every setting through one validator --------------------------------------------


@pytest.fixture
def non_utf8_toml(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'stream = "caf\xe9"\n')
    return path


@pytest.mark.parametrize(("argv", "needle"), [
    (["--socket-timeout", "nan"], "socket_timeout"),
    (["--socket-timeout=-inf"], "socket_timeout"),
    (["--connect-timeout", "nan"], "connect_timeout"),
    (["--redis-url", "redis://127.0.0.1:notaport/0"], "port"),
    (["--redis-url", "redis://127.0.0.1:99999/0"], "port"),
    (["--redis-url", "redis://127.0.0.1:6390/0?socket_timeout=abc"], "socket_timeout"),
    (["--redis-url", "redis://127.0.0.1:6390/0?socket_timeout=nan"], "socket_timeout"),
    (["--redis-url", "redis://127.0.0.1:6390/notadb"], "database"),
    (["--config", "/"], "directory"),
])
def test_bad_settings_are_one_line_and_exit_78(argv: list[str], needle: str) -> None:
    proc = cli("status", *argv)
    assert proc.returncode == 78, proc.stderr
    assert needle in one_line(proc.stderr)


def test_toml_nan_and_non_utf8_toml_are_exit_78(tmp_path: Path, non_utf8_toml: Path) -> None:
    nan = tmp_path / "nan.toml"
    nan.write_text("socket_timeout = nan\n")
    inf = tmp_path / "inf.toml"
    inf.write_text("retry_backoff = inf\n")
    for path, needle in ((nan, "socket_timeout"), (inf, "retry_backoff"),
                         (non_utf8_toml, "UTF-8")):
        proc = cli("status", "--config", str(path))
        assert proc.returncode == 78, proc.stderr
        assert needle in one_line(proc.stderr)
    proc = cli("status", env={"STAGEDOOR_SOCKET_TIMEOUT": "nan"})
    assert proc.returncode == 78 and "socket_timeout" in one_line(proc.stderr)


def test_supervisor_refuses_the_same_bad_settings_with_78(non_utf8_toml: Path) -> None:
    for argv in (["--socket-timeout", "nan"], ["--redis-url", "redis://h:notaport/0"],
                 ["--config", str(non_utf8_toml)], ["--config", "/"]):
        proc = subprocess.run([sys.executable, "-c", "import sys; from stagedoor.cli."
                               "supervise import main; sys.exit(main())", *argv],
                              env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 78, (argv, proc.stderr)
        one_line(proc.stderr)


def test_render_to_a_read_only_filesystem_is_one_line_73(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, f"cannot mount a read-only tmpfs: {mounted.stderr}"
    try:
        proc = cli("render", str(ROOT / "src/stagedoor/demo/order.json"), "-o",
                   str(ro / "x.pdf"))
        assert proc.returncode == 73, proc.stderr
        assert "Read-only file system" in one_line(proc.stderr)
    finally:
        subprocess.run(["umount", str(ro)], check=True)


# -- #11: rediss:// against a plain-text server -------------------------------------------


def test_rediss_against_plain_text_says_the_tls_handshake_failed(redis_url: str) -> None:
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    proc = cli("status", "--redis-url", f"rediss://127.0.0.1:{port}/0",
               "--connect-timeout", "2")
    assert proc.returncode == 69, proc.stderr
    line = one_line(proc.stderr)
    assert "TLS handshake" in line, line
    assert "plain" in line and "rediss://" in line, line


# -- #12: dead letters on a terminal ----------------------------------------------------


@pytest.fixture
def dead_client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, protocol=2)
    yield c
    c.close()


def test_dead_list_and_show_escape_control_chars_and_truncate(dead_client: redis.Redis,
                                                              redis_url: str) -> None:
    evil = b"\x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\x00\x9b"
    huge = b"A" * 1_000_000
    fields = [b"kind", evil, b"order_id", huge, b"outbox_id", b"1", b"request_id", b"r",
              b"trace", b"t"]
    ids = []
    for _ in range(5):
        payload = dead_letter_fields(fields, error="malformed: " + evil.decode("latin-1"),
                                     source_id="1-0", deliveries=1, consumer="c")
        ids.append(dead_client.execute_command("XADD", "jobs:dead", "*", *payload).decode())
    listing = cli("dead", "list", "--redis-url", redis_url)
    assert listing.returncode == 0, listing.stderr
    for ch in ("\x1b", "\x07", "\x00", "\r", "\x9b"):
        assert ch not in listing.stdout, repr(ch)
    assert "\\x1b" in listing.stdout
    assert len(listing.stdout) < 5_000, f"listing is {len(listing.stdout)} bytes"

    show = cli("dead", "show", ids[0], "--redis-url", redis_url)
    assert show.returncode == 0, show.stderr
    for ch in ("\x1b", "\x07", "\x00", "\r", "\x9b"):
        assert ch not in show.stdout, repr(ch)
    assert "A" * 1_000_000 in show.stdout, "show prints the whole value"

    as_json = cli("dead", "list", "--json", "--redis-url", redis_url)
    rows = orjson.loads(as_json.stdout)
    assert rows[0]["order_id_raw"] == "A" * 1_000_000, "--json is complete"
    assert rows[0]["kind"] == evil.decode("utf-8", "backslashreplace")
    doc = orjson.loads(cli("dead", "show", ids[0], "--json", "--redis-url", redis_url).stdout)
    assert doc["fields"][0] == ["kind", evil.decode("utf-8", "backslashreplace")]


# -- #13: integer fields are ASCII digits -------------------------------------------------


@pytest.mark.parametrize("raw", [b"103\n", b"103\r\n", b" 103", b"+103", b"1_03",
                                 "\uff11\uff10\uff13".encode(), b"0x67"])
def test_parse_job_refuses_anything_but_ascii_digits(raw: bytes) -> None:
    fields = [b"kind", b"render_tickets", b"order_id", raw, b"outbox_id", b"1",
              b"request_id", b"r", b"trace", b"t"]
    with pytest.raises(MalformedJob, match="order_id"):
        parse_job(fields)


def test_parse_job_refuses_a_trailing_newline_in_tokens_and_kind() -> None:
    with pytest.raises(MalformedJob, match="request_id"):
        parse_job([b"kind", b"refund", b"order_id", b"1", b"outbox_id", b"1",
                   b"request_id", b"r\n", b"trace", b"t"])
    with pytest.raises(MalformedJob, match="kind"):
        parse_job([b"kind", b"refund\n", b"order_id", b"1", b"outbox_id", b"1",
                   b"request_id", b"r", b"trace", b"t"])


async def test_worker_dead_letters_an_order_id_with_a_trailing_newline(
        settings: Settings, sync_redis: redis.Redis) -> None:
    seen: list[int] = []
    registry = Registry()

    @registry.register("render_tickets")
    async def record(job: Job, ctx: object) -> None:
        seen.append(job.order_id)

    ensure_group_sync(sync_redis, settings)
    sync_redis.execute_command("XADD", "jobs", "*", "kind", "render_tickets", "order_id",
                               "103\n", "outbox_id", "1", "request_id", "r", "trace", "t")
    fast = settings.replace(block_ms=100)
    async with running(fast, registry) as w:
        await eventually(lambda: w.stats.total("dead_lettered") == 1, what="dead-lettered")
    assert seen == []
    [dead] = dead_entries(sync_redis, settings)
    assert b"order_id" in dead[b"dead:error"]


def test_cli_enqueue_refuses_a_number_with_a_newline(settings: Settings,
                                                     sync_redis: redis.Redis) -> None:
    for line in ('{"kind": "refund", "order_id": "103\\n", "outbox_id": 1}\n',
                 '{"kind": "refund", "order_id": " 103", "outbox_id": 1}\n',
                 '{"kind": "refund", "order_id": "\\uff11", "outbox_id": 1}\n'):
        proc = cli("enqueue", "--file", "-", "--redis-url", settings.redis_url, stdin=line)
        assert proc.returncode == 65, proc.stderr
        assert "order_id" in one_line(proc.stderr)
    proc = cli("enqueue", "--kind", "refund", "--order-id", "103\n", "--outbox-id", "1",
               "--redis-url", settings.redis_url)
    assert proc.returncode == 2, proc.stderr
    assert not sync_redis.exists("jobs")


# -- #5: enqueue against a full Redis -----------------------------------------------------


def fill_up(client: redis.Redis, headroom: int) -> None:
    """maxmemory just above what is used now (noeviction, as the README recommends)."""
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + headroom)


def test_enqueue_against_full_redis_is_one_line_75_with_what_went_in(
        own_redis: EmbeddedRedis, tmp_path: Path) -> None:
    client = redis.Redis.from_url(own_redis.url, protocol=2)
    try:
        ensure_group_sync(client, Settings(redis_url=own_redis.url))
        # ~100 bytes a job: some 10,000 fit; a chunk's request (~0.3 MB) always does.
        fill_up(client, 1_500_000)
        lines = "".join(f'{{"kind": "refund", "order_id": {i}, "outbox_id": {i}}}\n'
                        for i in range(1, 50_001))
        proc = cli("enqueue", "--file", "-", "--redis-url", own_redis.url, stdin=lines)
        assert proc.returncode == EX_TEMPFAIL, proc.stderr
        line = one_line(proc.stderr)
        assert "out of memory" in line
        added = client.xlen("jobs")
        assert 0 < added < 50_000
        assert f"{added} of 50000" in line, line
        last = client.xrevrange("jobs", count=1)[0][0].decode()
        assert f"last id {last}" in line, line
        assert len(proc.stdout.split()) == added, "the ids that went in are printed"
        client.config_set("maxmemory", 1)  # full for sure: a single job does not fit either
        single = cli("enqueue", "--kind", "refund", "--order-id", "1", "--outbox-id", "1",
                     "--redis-url", own_redis.url)
        assert single.returncode == EX_TEMPFAIL, single.stderr
        assert "out of memory" in one_line(single.stderr)
    finally:
        client.config_set("maxmemory", 0)
        client.close()
