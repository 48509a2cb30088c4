"""`stagedoor doctor` on real hosts: a healthy one is OK (exit 0), and each broken one
is the documented state with the line that says what and what to do: an evicting
maxmemory-policy WARNING (1), Redis unreachable CRITICAL (2), an unwritable tickets
directory CRITICAL (2), an ACL user lacking a command CRITICAL (2), and the workers'
own user reading the server's configuration UNKNOWN (3).

One redis-server for the module, as a production host would have it: AOF with
appendfsync everysec, noeviction, and the workers' user defined with the exact line of
docs/security.md (tests/aclmode.acl_rules); the doctor connects as that user and reads
what only an administrator may through --admin-url (the default user here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from stagedoor.demo.embedded_redis import free_port
from tests.support.aclmode import PASSWORD, USER, acl_rules
from tests.support.servers import SuiteRedis

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SuiteRedis]:
    directory = tmp_path_factory.mktemp("doctor-redis")
    with SuiteRedis(directory, appendonly=True, appendfsync="everysec",
                    extra_args=["--user", USER, *acl_rules().split()]) as server:
        yield server


def worker_url(server: SuiteRedis) -> str:
    return f"redis://{USER}:{PASSWORD}@127.0.0.1:{server.port}/0"


def doctor(tmp_path: Path, *args: str, url: str, admin: str | None = None,
           wrap: tuple[str, ...] = ()) -> tuple[int, str]:
    tickets = tmp_path / "tickets"
    tickets.mkdir(exist_ok=True)
    (tmp_path / "units").mkdir(exist_ok=True)
    cmd = [*wrap, sys.executable, "-m", "stagedoor", "doctor", "--redis-url", url,
           "--tickets-dir", str(tickets), "--unit-dir", str(tmp_path / "units"), *args]
    if admin:
        cmd += ["--admin-url", admin]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env,
                          cwd=tmp_path)
    assert proc.stderr == "", proc.stderr
    return proc.returncode, proc.stdout


def line(out: str, start: str) -> str:
    found = [ln for ln in out.splitlines() if ln.startswith(start)]
    assert len(found) == 1, out
    return found[0]


def test_a_healthy_host_is_ok(host: SuiteRedis, tmp_path: Path) -> None:
    code, out = doctor(tmp_path, url=worker_url(host), admin=host.url)
    assert code == 0, out
    assert out.splitlines()[0].startswith("STAGEDOOR DOCTOR OK - "), out
    assert "WARNING" not in out and "CRITICAL" not in out and "->" not in out, out
    assert line(out, "OK       redis ACL (worker user stagedoor-worker): ").endswith(
        "commands the worker sends are allowed")
    assert line(out, "OK       redis persistence: ") == \
        "OK       redis persistence: appendonly yes, appendfsync everysec"
    assert line(out, "OK       tickets directory: ").endswith(
        "writable, atomic writes by O_TMPFILE + link")
    assert "libharfbuzz" in line(out, "OK       native renderer: ")
    assert PASSWORD not in out   # the URL is shown redacted


def test_json_says_the_same(host: SuiteRedis, tmp_path: Path) -> None:
    code, out = doctor(tmp_path, "--json", url=worker_url(host), admin=host.url)
    data = json.loads(out)
    assert (code, data["state"], data["code"]) == (0, "OK", 0)
    checks = {c["check"]: c for c in data["checks"]}
    assert checks["redis maxmemory-policy"] == {"check": "redis maxmemory-policy",
                                                "state": "OK", "found": "noeviction", "fix": ""}


def test_what_stagedoor_keeps_is_counted_against_the_stream(host: SuiteRedis,
                                                            tmp_path: Path) -> None:
    """The doctor counts stagedoor's keys by family against the stream's memory: a few
    done marks are OK; the job index and marks as keys left by an older version are
    more than the stream, a WARNING that names them and says they expire."""
    admin = redis.Redis(port=host.port)
    try:
        admin.xadd("jobs", {"kind": "render_tickets", "order_id": "1", "outbox_id": "1",
                            "request_id": "r", "trace": "t"})
        admin.hset("stagedoor:marks:0", mapping={"1": "render_tickets"})
        code, out = doctor(tmp_path, url=worker_url(host), admin=host.url)
        found = line(out, "OK       redis keys besides the streams: ")
        assert "stagedoor:marks:<n> 1 keys" in found, found
        pipe = admin.pipeline(transaction=False)
        for n in range(3000):
            pipe.set(f"stagedoor:done:{n}", "render_tickets", ex=600)
        pipe.hset("stagedoor:jobidx:jobs:493000", mapping={f"o:{n}": "1-0" for n in range(500)})
        pipe.execute()
        code, out = doctor(tmp_path, url=worker_url(host), admin=host.url)
        assert code == 1, out
        i = out.splitlines().index(line(out, "WARNING  redis keys besides the streams: "))
        assert "stagedoor:done:<n> 3,000 keys" in out.splitlines()[i], out
        assert "expire on their own" in out.splitlines()[i + 1], out
    finally:
        admin.delete("jobs", "stagedoor:marks:0", "stagedoor:jobidx:jobs:493000",
                     *[f"stagedoor:done:{n}" for n in range(3000)])
        admin.close()


def test_an_evicting_maxmemory_policy_is_a_warning(host: SuiteRedis, tmp_path: Path) -> None:
    admin = redis.Redis(port=host.port)
    admin.config_set("maxmemory-policy", "allkeys-lru")
    try:
        code, out = doctor(tmp_path, url=worker_url(host), admin=host.url)
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()
    assert code == 1, out
    assert out.splitlines()[0].startswith("STAGEDOOR DOCTOR WARNING - 1 warning"), out
    i = out.splitlines().index(line(out, "WARNING  redis maxmemory-policy: "))
    assert out.splitlines()[i] == ("WARNING  redis maxmemory-policy: allkeys-lru: when memory "
                                   "is full Redis evicts keys: queued jobs, order data, done "
                                   "marks")
    assert out.splitlines()[i + 1] == ("         -> CONFIG SET maxmemory-policy noeviction, "
                                       "and the same in redis.conf")


def test_unreachable_redis_is_critical(tmp_path: Path) -> None:
    port = free_port()
    code, out = doctor(tmp_path, url=f"redis://127.0.0.1:{port}/0")
    assert code == 2, out
    assert line(out, "CRITICAL redis: ").startswith(
        f"CRITICAL redis: redis://127.0.0.1:{port}/0 unreachable: "), out
    assert "-> start Redis, or point --redis-url (STAGEDOOR_REDIS_URL) at it" in out


def test_an_unwritable_tickets_directory_is_critical(host: SuiteRedis, tmp_path: Path) -> None:
    """The tickets directory mounted read-only (a user namespace, so it works as root,
    who would write through any mode bits)."""
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    wrap = ("unshare", "--map-root-user", "--mount", "sh", "-c",
            'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
            str(tickets))
    code, out = doctor(tmp_path, url=worker_url(host), admin=host.url, wrap=wrap)
    assert code == 2, out
    assert line(out, "CRITICAL tickets directory: ") == (
        f"CRITICAL tickets directory: {tickets} is not writable by uid 0: "
        "Read-only file system"), out
    assert f"-> chown <worker user> {tickets} (and mount it read-write)" in out
    assert list(tickets.iterdir()) == []


def test_an_acl_user_lacking_a_command_is_critical(host: SuiteRedis, tmp_path: Path) -> None:
    admin = redis.Redis(port=host.port)
    rules = acl_rules().replace(" +xautoclaim", "")
    admin.execute_command("ACL", "SETUSER", "stagedoor-poor", *rules.split())
    try:
        code, out = doctor(tmp_path, url=f"redis://stagedoor-poor:{PASSWORD}@127.0.0.1:"
                           f"{host.port}/0", admin=host.url)
    finally:
        admin.execute_command("ACL", "DELUSER", "stagedoor-poor")
        admin.close()
    assert code == 2, out
    found = line(out, "CRITICAL redis ACL (worker user stagedoor-poor): ")
    assert " 1 of " in found and "XAUTOCLAIM: " in found and "xautoclaim" in found, found
    assert "-> give stagedoor-poor the ACL SETUSER line of docs/security.md" in out


def test_the_workers_own_user_cannot_read_the_configuration(host: SuiteRedis,
                                                            tmp_path: Path) -> None:
    """The worker's user has no INFO, CONFIG or ACL (docs/security.md): those checks
    are UNKNOWN and say to pass --admin-url; the rest is still checked."""
    code, out = doctor(tmp_path, url=worker_url(host))
    assert code == 3, out
    assert line(out, "UNKNOWN  redis ACL (worker user stagedoor-worker): ").startswith(
        "UNKNOWN  redis ACL (worker user stagedoor-worker): ACL DRYRUN refused: ")
    assert line(out, "UNKNOWN  redis configuration: ").startswith(
        "UNKNOWN  redis configuration: cannot read it: ")
    assert "-> pass --admin-url" in out
    assert line(out, "OK       clock: ")


def test_no_password_is_shown(tmp_path: Path) -> None:
    """Unreachable with a password in the URL, or in a file: CRITICAL, and neither shown."""
    secret = "doctor-s3cret-" + os.urandom(4).hex()
    pw_file = tmp_path / "pw"
    pw_file.write_text(secret + "\n")
    port = free_port()
    for url, extra in ((f"redis://ops:{secret}@127.0.0.1:{port}/0", ()),
                       (f"redis://127.0.0.1:{port}/0", ("--redis-password-file", str(pw_file)))):
        for fmt in ((), ("--json",)):
            code, out = doctor(tmp_path, *extra, *fmt, url=url)
            assert code == 2, out
            assert secret not in out, out


def test_an_installed_unit_whose_paths_are_missing_is_critical(tmp_path: Path) -> None:
    """A unit left behind by a removed installation: its ExecStart= is gone."""
    units = tmp_path / "units"
    units.mkdir()
    (units / "stagedoor.service").write_text(
        "[Unit]\nDescription=x\n[Service]\nExecStart=/opt/gone/bin/stagedoor-supervise\n")
    code, out = doctor(tmp_path, "--no-redis", url="redis://127.0.0.1:1/0")
    assert code == 2, out
    assert line(out, "CRITICAL systemd stagedoor.service: ") == (
        f"CRITICAL systemd stagedoor.service: {units}/stagedoor.service: "
        "ExecStart=/opt/gone/bin/stagedoor-supervise is not an executable")
    assert "-> stagedoor systemd install" in out


def test_a_metrics_port_held_by_another_program_is_a_warning(tmp_path: Path) -> None:
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        code, out = doctor(tmp_path, "--no-redis", "--metrics-port", str(port),
                           url="redis://127.0.0.1:1/0")
    assert code == 1, out
    assert line(out, "WARNING  metrics port: ") == (
        f"WARNING  metrics port: 127.0.0.1:{port} is taken by another program: the "
        "supervisor could not serve metrics there")


# -- issue 38: each cause named ------------------------------------------------------------
def test_a_wrong_password_is_not_redis_down(host: SuiteRedis, tmp_path: Path) -> None:
    """redis-py raises its AuthenticationError, a ConnectionError: the advice was "start
    Redis" for a server that is up and said no."""
    code, out = doctor(tmp_path, url=f"redis://{USER}:not-the-password@127.0.0.1:"
                       f"{host.port}/0")
    assert code == 2, out
    found = line(out, "CRITICAL redis: ")
    assert "refused the credentials" in found and "unreachable" not in found, found
    assert "start Redis" not in out and "-> Redis is up: check the user name and the " \
        "password" in out, out


def test_a_missing_font_directory_is_named(tmp_path: Path) -> None:
    gone = tmp_path / "no-such-fonts"
    code, out = doctor(tmp_path, "--no-redis", "--render-font-dirs", str(gone),
                       url="redis://127.0.0.1:1/0")
    assert code == 2, out
    assert line(out, "CRITICAL font directories: ") == \
        f"CRITICAL font directories: not a directory: {gone}"
    assert max(len(ln) for ln in out.splitlines()) < 600, out  # was one line of 6 KB
    assert " more; covered: nothing" in line(out, "CRITICAL fonts: ")


def test_a_tickets_directory_whose_parent_is_missing_is_a_warning(tmp_path: Path) -> None:
    tickets = tmp_path / "srv" / "stagedoor" / "tickets"  # the volume was not mounted
    code, out = doctor(tmp_path, "--no-redis", "--tickets-dir", str(tickets),
                       url="redis://127.0.0.1:1/0")
    assert code == 1, out
    assert line(out, "WARNING  tickets directory: ") == (
        f"WARNING  tickets directory: {tickets} does not exist, nor does its parent "
        f"{tickets.parent}: the nearest that does is {tmp_path}")
    # only its last component missing: the worker makes it, as before
    code, out = doctor(tmp_path, "--no-redis", "--tickets-dir", str(tmp_path / "new"),
                       url="redis://127.0.0.1:1/0")
    assert line(out, "OK       tickets directory: ").endswith("the worker makes it "
                                                            f"({tmp_path} is writable)")


def test_a_wrong_argument_is_64_not_critical(tmp_path: Path) -> None:
    for args in (("--no-such-flag",), ("--metrics-port", "abc")):
        cmd = [sys.executable, "-m", "stagedoor", "doctor", "--no-redis", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env={k: v for k, v in os.environ.items()
                                if not k.startswith("STAGEDOOR_")})
        assert r.returncode == 64, (args, r.returncode, r.stderr)
        assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
        assert "error:" in r.stderr and "Traceback" not in r.stderr


def test_a_worker_extension_that_does_not_load_is_critical(tmp_path: Path) -> None:
    """The worker requires stagedoor.worker._entries (a worker without it exits 78), so
    the doctor says no worker can start: CRITICAL, not the WARNING of a slower path it
    gave when the worker had a Python fallback."""
    code = ("import sys; sys.modules['stagedoor.worker._entries'] = None\n"
            "from stagedoor.console.doctor import host\n"
            "for f in host.native(): print(f.check, f.state, f.found, sep='|')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    rows = {name: (int(state), detail) for name, state, detail in
            (ln.split("|", 2) for ln in r.stdout.splitlines())}
    state, detail = rows["stagedoor.worker._entries"]
    assert state == 2 and "no worker can start" in detail, rows
