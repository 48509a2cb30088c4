"""Security: a least-privilege ACL user runs the real worker path, TLS, the password
kept out of ps and logs, payload size caps, and PDF text escaping under fuzzing.

The ACL line is read from docs/security.md, so the documented line is the tested one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import secrets
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import free_port
from stagedoor.demo.orders import demo_order
from stagedoor.render.order import Order, Ticket
from stagedoor.tickets.orders import OrderStore
from tests.support.cli import cli
from tests.support.faults.harness import REPO, Procs, Producer, wait_for
from tests.support.faults.invariants import (
    Ledger,
    check_all,
    dead_entries,
    dead_meta,
    raw_client,
    wait_drained,
)
from tests.support.paths import SRC
from tests.support.servers import SERVER, require_tls
from tests.support.servers import SuiteRedis as EmbeddedRedis
from tests.support.tlscerts import make_certs

DOC = REPO / "docs" / "security.md"
USER = "stagedoor-worker"


def acl_setuser(password: str) -> list[str]:
    """The ACL SETUSER line of docs/security.md (the first; the second is Cluster's)."""
    line = re.findall(r"^ACL SETUSER stagedoor-worker .*$", DOC.read_text(), re.M)[0]
    digest = hashlib.sha256(password.encode()).hexdigest()
    return shlex.split(line.replace("#<sha256-of-password>", f"#{digest}"))


def password_file(tmp_path: Path, password: str) -> Path:
    path = tmp_path / "redis-password"
    path.write_text(password + "\n")
    path.chmod(0o600)
    return path


def put_orders(url: str, settings_: Settings, orders: list[Order]) -> None:
    async def main() -> None:
        client = aioredis.Redis.from_url(url, protocol=2)
        store = OrderStore(client, settings_)
        for order in orders:
            await store.put(order)
        await client.aclose()
    asyncio.run(main())


@pytest.fixture
def admin_pw() -> str:
    return secrets.token_hex(16)


@pytest.fixture
def acl_server(tmp_path: Path, admin_pw: str) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(tmp_path / "acl-redis", password=admin_pw) as server:
        yield server


@pytest.fixture
def admin(acl_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(acl_server.url, protocol=2, socket_timeout=5)
    yield client
    client.close()


# -- ACL --------------------------------------------------------------------------------------

def test_acl_user_runs_the_whole_worker_path_with_no_denials(
        tmp_path: Path, acl_server: EmbeddedRedis, admin: redis.Redis) -> None:
    worker_pw = secrets.token_hex(16)
    assert admin.execute_command(*acl_setuser(worker_pw)) in (b"OK", "OK", True)
    admin.execute_command("ACL", "LOG", "RESET")
    s = Settings(redis_url=acl_server.url, consumer="f", tickets_dir=str(tmp_path / "tickets"))
    put_orders(acl_server.url, s, [demo_order(1), demo_order(2)])
    ledger = Ledger(tmp_path / "ledger")
    producer = Producer(admin, s, ledger.directory)
    # A consumer that took a job and died: the worker has to reclaim it.
    producer.enqueue("ledger", [100])
    admin.execute_command("XREADGROUP", "GROUP", "workers", "ghost", "COUNT", 1,
                          "STREAMS", "jobs", ">")
    url = f"redis://{USER}@127.0.0.1:{acl_server.port}/0"
    procs = Procs(tmp_path, url, ledger.directory)
    try:
        sup = procs.supervisor(1, {"redis_password_file": str(password_file(tmp_path, worker_pw)),
                                   "claim_idle_ms": 300, "job_timeout": 0.2})
        sup.wait_log("worker f-00 ready")
        producer.enqueue("render_tickets", [1, 2])
        producer.enqueue("refund", [2], outbox_offset=1000)
        producer.enqueue("ledger", range(3, 13))
        bad = producer.enqueue_raw(["kind", "ledger", "order_id", "x"], None)
        try:
            wait_for(lambda: ledger.done() >= {100, *range(3, 13)}, 20,
                     what="jobs as the ACL user")
        except AssertionError as e:
            denied = {(r[r.index(b"object") + 1], r[r.index(b"reason") + 1])
                      for r in admin.execute_command("ACL", "LOG")}
            raise AssertionError(f"{e}; ACL denials: {denied}\n{sup.text()[-2000:]}") from None
        wait_for(lambda: (tmp_path / "tickets" / "order-1.pdf").exists(), what="a PDF")
        check_all(admin, s, ledger, poison={bad: "missing fields"},
                  excused=[r["entry_id"] for r in ledger.enqueued()
                           if r["kind"] in ("render_tickets", "refund")])
        # The refund is excused above (it may wait for order 2's render, or time out once
        # at 0.2 s on a loaded box, and be retried): it has to land, perhaps later.
        try:
            wait_for(lambda: admin.hget("stagedoor:order:2", "status") == b"refunded", 20,
                     what="the refund of order 2")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{sup.text()[-6000:]}") from None
        # outbox ids 1 and 100 share a hash of done marks (keys.MARK_BUCKET)
        assert admin.hget("stagedoor:marks:0", "1") and admin.hget("stagedoor:marks:0", "100")
        # Slot 0 reports the queue status every 5 s: wait for one report.
        wait_for(lambda: int(admin.info("commandstats").get("cmdstat_time", {})
                             .get("calls", 0)) >= 1, 10, what="a queue status report")
        sup.signal(signal.SIGTERM)
        assert sup.wait(15) == 0
    finally:
        procs.close()
    denials = admin.execute_command("ACL", "LOG")
    assert not denials, f"the worker needed more than the documented ACL: {denials}"
    clients_seen = {row.decode() for row in admin.execute_command("ACL", "USERS")}
    assert USER in clients_seen


REFUSED: list[tuple[str, ...]] = [
    ("FLUSHALL",), ("FLUSHDB",), ("KEYS", "*"), ("SCAN", "0"), ("CONFIG", "GET", "*"),
    ("CONFIG", "SET", "appendonly", "no"), ("SCRIPT", "FLUSH"), ("EVAL", "return 1", "0"),
    ("DEL", "jobs"), ("SET", "jobs", "x"), ("EXPIRE", "jobs", "0"), ("HSET", "jobs", "a", "b"),
    ("XDEL", "jobs", "1-0"), ("XTRIM", "jobs", "MAXLEN", "0"),
    ("XADD", "stagedoor:x", "*", "a", "b"),
    ("XGROUP", "DESTROY", "jobs", "workers"), ("XGROUP", "DELCONSUMER", "jobs", "workers", "x"),
    ("XGROUP", "SETID", "jobs", "workers", "$"), ("CLIENT", "LIST"), ("CLIENT", "KILL", "ID", "1"),
    ("ACL", "LIST"), ("ACL", "SETUSER", "x"), ("MONITOR",), ("SUBSCRIBE", "c"),
    ("GET", "session:1"), ("SET", "session:1", "x"),
    ("HSET", "other:1", "a", "b"), ("XADD", "other", "*", "a", "b"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "other", ">"),
]


def test_acl_user_is_refused_everything_else(acl_server: EmbeddedRedis,
                                             admin: redis.Redis) -> None:
    worker_pw = secrets.token_hex(16)
    admin.execute_command(*acl_setuser(worker_pw))
    admin.execute_command("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
    admin.set("session:1", "buyer")
    user = redis.Redis(host="127.0.0.1", port=acl_server.port, username=USER,
                       password=worker_pw, protocol=2, socket_timeout=5)
    try:
        assert user.xlen("jobs") == 0  # allowed, for contrast
        allowed = []
        for command in REFUSED:
            try:
                user.execute_command(*command)
            except redis.exceptions.NoPermissionError:
                continue
            allowed.append(command)
        assert not allowed, f"the worker user may run: {allowed}"
        # A script runs with the caller's permissions: no key outside the patterns.
        admin.hset("other:1", "f", "secret")
        sha = admin.script_load("return redis.call('HGET', KEYS[1], 'f')")
        # Matched by error class (NOPERM) and the command named, not by the text:
        # 7.0 says "no permissions to access one of the keys", 7.2+ and Valkey "No
        # permissions to access a key"; a script's refused command is "can't run this
        # command" on 7.0 and "ACL failure in script" later.
        with pytest.raises(redis.exceptions.NoPermissionError):
            user.evalsha(sha, 1, "other:1")
        assert user.evalsha(sha, 1, "stagedoor:x") is None
        with pytest.raises(redis.ResponseError,
                           match=r"(?i)(can't run this command|no permissions to run "
                                 r"the 'flushall' command)") as refused:
            user.evalsha(admin.script_load("return redis.call('FLUSHALL')"), 0)
        assert "@user_script" in str(refused.value), "refused inside the script"
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=acl_server.port, username=USER,
                        password="wrong", protocol=2).ping()
    finally:
        user.close()
    assert admin.get("session:1") == b"buyer"


# -- TLS --------------------------------------------------------------------------------------

@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    require_tls()
    certs = make_certs(tmp_path / "certs")
    port = free_port()
    data = tmp_path / "tls-redis"
    data.mkdir()
    proc = subprocess.Popen(
        [SERVER.server, "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(port),
         "--tls-cert-file", str(certs["cert"]), "--tls-key-file", str(certs["key"]),
         "--tls-ca-cert-file", str(certs["ca"]), "--tls-auth-clients", "no",
         "--dir", str(data), "--save", "", "--appendonly", "no",
         "--logfile", str(data / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(certs["ca"]),
                         protocol=2, socket_timeout=1)

    def up() -> bool:
        assert proc.poll() is None, (data / "redis.log").read_text()
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError):
            return False
    try:
        wait_for(up, 10, what="redis-server with TLS")
        client.close()
        yield port, certs["ca"]
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.tls
def test_worker_over_tls_verifies_the_server(tmp_path: Path,
                                             tls_server: tuple[int, Path]) -> None:
    port, ca = tls_server
    url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}"
    s = Settings(redis_url=url, consumer="f")
    client = redis.Redis.from_url(url, protocol=2, socket_timeout=5)
    assert client.connection_pool.connection_kwargs["ssl_ca_certs"] == str(ca)
    plain = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=1)
    with pytest.raises(redis.ConnectionError):
        plain.ping()  # no plain-text listener answers
    plain.close()
    ledger = Ledger(tmp_path / "ledger")
    producer = Producer(client, s, ledger.directory)
    procs = Procs(tmp_path, url, ledger.directory)
    try:
        w = procs.worker(0)
        producer.enqueue("ledger", range(1, 21))
        wait_for(lambda: ledger.done() >= set(range(1, 21)), what="jobs over TLS")
        # A rerun only for a job the worker logged a retry of.  (Found here: redis-py
        # built an SSLContext with the system CA store for every new connection, and
        # a burst on a cold pool timed jobs out; the worker now shares one context
        # and opens its hot-path connections at boot.)
        retried = {ln["outbox_id"] for ln in w.log_lines()
                   if "retrying" in ln.get("msg", "") and "outbox_id" in ln}
        assert not retried, "a burst over TLS should not time jobs out"
        check_all(client, s, ledger)
        w.signal(signal.SIGTERM)
        assert w.wait(10) == 0
        # Without the CA the server's certificate is refused: the worker never boots.
        bad = procs.worker(1, {"boot_timeout": 1}, url=f"rediss://127.0.0.1:{port}/0",
                           ready=False)
        assert bad.wait(15) == 69
        assert "certificate verify failed" in bad.text()
    finally:
        procs.close()
        client.close()


@pytest.mark.tls
def test_cli_over_tls_every_time(tmp_path: Path, tls_server: tuple[int, Path]) -> None:
    """stagedoor enqueue, status and dead list over rediss://, several runs each.  (Found
    here: every run failed with "Connection not ready": a new connection carried no
    command in its handshake, so the server's TLS 1.3 session tickets were still unread
    when redis-py's pool checked it for stray data.)"""
    port, ca = tls_server
    url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}"
    for i in range(3):
        for args in (["enqueue", "--kind", "render_tickets", "--order-id", str(i + 1),
                      "--outbox-id", str(i + 1)], ["status", "--json"], ["dead", "list"]):
            out = cli(*args, "--redis-url", url)
            assert out.returncode == 0, (args, out.stderr)
    client = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(ca),
                         protocol=2, socket_timeout=5)
    try:
        assert client.xlen("jobs") == 3
    finally:
        client.close()


# -- the password -----------------------------------------------------------------------------

def _cmdlines(pids: list[int]) -> str:
    out = []
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return "\n".join(out)


def _tree(pid: int) -> list[int]:
    import psutil

    return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]


@pytest.mark.server
def test_password_file_keeps_the_password_out_of_ps_and_logs(tmp_path: Path) -> None:
    pw = "pw-" + secrets.token_hex(12)
    with EmbeddedRedis(tmp_path / "pw-redis", password=pw) as server:
        url = f"redis://127.0.0.1:{server.port}/0"
        s = Settings(redis_url=server.url, consumer="f")
        admin = redis.Redis.from_url(server.url, protocol=2, socket_timeout=5)
        ledger = Ledger(tmp_path / "ledger")
        producer = Producer(admin, s, ledger.directory)
        procs = Procs(tmp_path, url, ledger.directory)
        opts = {"redis_password_file": str(password_file(tmp_path, pw)), "log_level": "debug"}
        try:
            w = procs.worker(0, opts)
            sup = procs.supervisor(2, opts)
            sup.wait_log("all 2 workers ready")
            producer.enqueue("ledger", range(1, 31))
            wait_for(lambda: ledger.done() >= set(range(1, 31)), what="jobs")
            # Make them log connection errors too: Redis goes away and comes back.
            server.restart()
            admin.close()
            w.wait_log("read failed")
            producer.enqueue("ledger", range(31, 41))
            wait_for(lambda: ledger.done() >= set(range(31, 41)), 20, what="jobs after")
            pids = [w.pid, *_tree(sup.pid)]
            assert len(pids) == 4
            cmdlines = _cmdlines(pids)
            # They were given the password's file, and ps shows neither it nor the
            # password: setproctitle replaced each command line with a title.
            assert all("--redis-password-file" in proc.argv for proc in (w, sup))
            assert cmdlines.count("stagedoor-supervise: worker slot") == 2, cmdlines
            assert "stagedoor work: worker f-00" in cmdlines and pw not in cmdlines
            ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            assert pw not in ps
            for pid in pids:
                assert pw.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
            sup.signal(signal.SIGTERM)
            w.signal(signal.SIGTERM)
            assert sup.wait(15) == 0 and w.wait(15) == 0
            for proc in (w, sup):
                text = proc.text()
                assert "read failed" in text or proc is sup
                assert pw not in text, f"{proc.name} logged the password"
        finally:
            procs.close()
            admin.close()


@pytest.mark.server
def test_password_in_url_env_is_redacted_from_logs(tmp_path: Path) -> None:
    pw = "pw-" + secrets.token_hex(12)
    with EmbeddedRedis(tmp_path / "pw-redis", password=pw) as server:
        s = Settings(redis_url=server.url, consumer="f")
        admin = redis.Redis.from_url(server.url, protocol=2, socket_timeout=5)
        ledger = Ledger(tmp_path / "ledger")
        producer = Producer(admin, s, ledger.directory)
        procs = Procs(tmp_path, server.url, ledger.directory)
        env = {"STAGEDOOR_REDIS_URL": server.url, "STAGEDOOR_LOG_LEVEL": "debug"}
        try:
            w = procs.worker(0, url=False, env=env)  # type: ignore[arg-type]
            producer.enqueue("ledger", range(1, 11))
            wait_for(lambda: ledger.done() >= set(range(1, 11)), what="jobs")
            server.restart()
            admin.close()
            w.wait_log("read failed")
            assert pw not in _cmdlines([w.pid])
            w.signal(signal.SIGTERM)
            assert w.wait(15) == 0
            assert pw not in w.text()
            # A settings error that prints the URL prints it redacted.
            bad = procs.worker(1, url=False, ready=False,  # type: ignore[arg-type]
                               env={"STAGEDOOR_REDIS_URL": f"http://:{pw}@127.0.0.1:1/0"})
            assert bad.wait(15) == 78
            assert "redis_url='http://:***@127.0.0.1:1/0'" in bad.text()
            assert pw not in bad.text()
            # So does a boot failure against a Redis that is not there.
            gone = procs.worker(2, {"boot_timeout": 0.5}, url=False, ready=False,  # type: ignore[arg-type]
                                env={"STAGEDOOR_REDIS_URL": f"redis://:{pw}@127.0.0.1:1/0"})
            assert gone.wait(15) == 69
            assert "not reachable" in gone.text() and pw not in gone.text()
        finally:
            procs.close()
            admin.close()


# -- payload caps -----------------------------------------------------------------------------

def test_oversized_fields_and_hundreds_of_fields_are_dead_lettered_and_worker_goes_on(
        tmp_path: Path, own_redis: EmbeddedRedis) -> None:
    s = Settings(redis_url=own_redis.url, consumer="f")
    client = redis.Redis.from_url(own_redis.url, protocol=2, socket_timeout=5)
    ledger = Ledger(tmp_path / "ledger")
    producer = Producer(client, s, ledger.directory)
    procs = Procs(tmp_path, own_redis.url, ledger.directory)

    def job(**over: str) -> list[str]:
        fields = {"kind": "ledger", "order_id": "1", "outbox_id": "1", "request_id": "r",
                  "trace": "t", **over}
        return [x for kv in fields.items() for x in kv]

    many = [x for i in range(300) for x in (f"f{i}", "v")]
    cases = {
        producer.enqueue_raw(job(order_id="1" * 300), None): "field order_id is 300 bytes",
        producer.enqueue_raw(job(trace="t" * 100), None): "field trace is 100 bytes, limit 64",
        producer.enqueue_raw(job(request_id="r" * 100_000), None): "is 100000 bytes",
        producer.enqueue_raw(many, None): "unknown field",
        producer.enqueue_raw(["kind", "ledger"] * 300, None): "duplicate field kind",
    }
    try:
        w = procs.worker(0, {"max_field_bytes": 64})
        producer.enqueue("ledger", range(1, 21))
        wait_for(lambda: client.xlen(s.dead_stream) >= len(cases), what="dead letters")
        wait_for(lambda: ledger.done() >= set(range(1, 21)), what="good jobs")
        check_all(client, s, ledger, poison=cases)
        for _i, fields in dead_entries(client, s):
            assert dead_meta(fields)["error"].startswith("malformed: ")
        assert w.alive()
        producer.enqueue("ledger", range(21, 31))
        wait_for(lambda: ledger.done() >= set(range(21, 31)), what="the worker goes on")
        wait_drained(client, s)
        assert raw_client(client).xlen(s.stream) >= 30
    finally:
        procs.close()
        client.close()


# -- PDF text ---------------------------------------------------------------------------------

LATIN = "ÄÖÜäöüßéèêçñÑØøÆæÅåŠšŽžŒœ€ÿ"
NAME = st.text(alphabet=st.sampled_from(
    list("()\\") + [chr(c) for c in range(0, 32)] + ["\x7f"] + list(LATIN)
    + list("abcXYZ019 .,'-&/<>[]{}%#")), min_size=1, max_size=60).filter(
        lambda t: any(c.isalnum() for c in t))


def _expected(text: str) -> str:
    shown = "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in text)
    return " ".join(shown.split())


def _ticket(buyer: str, event: str, code: str = "SD-00000001-01-ABCDEF") -> Order:
    t = Ticket(event=event, venue="Staatsoper", starts_at="2026-12-19 19:30", section="Loge",
               row="1", seat="2", buyer=buyer, price="EUR 49.00", order_id=1,
               admission_code=code, small_print="")
    return Order(order_id=1, tickets=(t,))


def _page_text(pdf: bytes) -> str:
    import io

    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(pdf), strict=True)
    assert len(reader.pages) == 1
    return " ".join(reader.pages[0].extract_text().split())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buyer=NAME, event=NAME)
def test_pdf_escaping_fuzzed_names_extract_intact(buyer: str, event: str) -> None:
    from stagedoor.render import renderer
    from stagedoor.render.reference import render_order

    order = _ticket(buyer, event)
    native = renderer()(order)
    assert native == render_order(order), "native and reference renderers differ"
    text = _page_text(native)
    assert _expected(buyer) in text, (buyer, text)
    assert _expected(event) in text, (event, text)


def test_qpdf_check_passes_on_hostile_names(tmp_path: Path) -> None:
    from stagedoor.render import renderer

    names = ["((((", "))))", "\\", "\\)", "a\\(b", "(\\\\)", ")\\", "\x00\x01\r\n\t\x7f",
             "x) Tj ET BT /F1 99 Tf (y", "%PDF-1.4 endstream endobj", "Zoë (Ødegaard) \\ Šimic"]
    for i, name in enumerate(names):
        path = tmp_path / f"t{i}.pdf"
        path.write_bytes(renderer()(_ticket(name, name[::-1] or "x")))
        result = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, (name, result.stdout, result.stderr)
        assert "No syntax or stream encoding errors" in result.stdout
        if name.strip("\x00\x01\r\n\t\x7f"):
            assert _expected(name) in _page_text(path.read_bytes())


def test_password_file_unreadable_is_a_config_error_not_a_leak(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    env["PYTHONPATH"] = f"{SRC}{os.pathsep}{REPO}"
    start = time.monotonic()
    result = subprocess.run(
        [os.sys.executable, "-m", "stagedoor.cli", "work", "--burst", "--redis-url",
         "redis://127.0.0.1:1/0", "--redis-password-file", str(tmp_path / "missing")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=30)
    assert result.returncode == 78, result.stderr
    assert "redis_password_file=" in result.stderr and "No such file" in result.stderr
    assert time.monotonic() - start < 20
