"""No secret in any output, however the password is passed (issue 24, item 9).

The password is given three ways: in the URL's userinfo (percent-encoded, as it must
be), in the URL's query (?password=, which redis-py accepts) and in a password file;
it holds characters that need encoding in a URL (/ # ? @ & : space ' ().  Every output
path is run: the CLI errors of status (text, --json, --check), enqueue, dead list,
work, stagedoor-supervise; config errors (exit 78); the logs of a worker that works
against a real server and then loses it.  A password written unencoded into the URL
is a config error that names the cause and shows none of it.
"""

from __future__ import annotations

import secrets
import signal
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from stagedoor.demo.embedded_redis import free_port
from stagedoor.redaction import redact, remember
from tests.support.cli import SUPERVISE, cli
from tests.support.cli import module as entry_of
from tests.support.faults.harness import Procs, wait_for
from tests.support.servers import SuiteRedis as EmbeddedRedis


class Secret:
    """A password whose parts are distinct tokens, so a partial leak is caught too."""

    def __init__(self) -> None:
        self.parts = [secrets.token_hex(6) for _ in range(4)]
        a, b, c, d = self.parts
        self.text = f"{a}/{b}#{c}?{d}@x&y: z'(q"

    def leaked_in(self, text: str) -> list[str]:
        return [p for p in self.parts if p in text]


def ways(secret: Secret, tmp_path: Path, host_port: str, scheme: str = "redis",
         path: str = "/0") -> dict[str, list[str]]:
    """The connection arguments of each way to pass the password."""
    enc = quote(secret.text, safe="")
    pw_file = tmp_path / "pw"
    pw_file.write_text(secret.text + "\n")
    return {
        "userinfo": ["--redis-url", f"{scheme}://default:{enc}@{host_port}{path}"],
        "query": ["--redis-url", f"{scheme}://{host_port}{path}?password={enc}"],
        "file": ["--redis-url", f"{scheme}://{host_port}{path}",
                 "--redis-password-file", str(pw_file)],
    }


COMMANDS = [
    ("status",),
    ("status", "--json"),
    ("status", "--check"),
    ("enqueue", "--kind", "render_tickets", "--order-id", "1", "--outbox-id", "1"),
    ("dead", "list"),
    ("work", "--burst", "--boot-timeout", "0.5"),
]


def test_redact_masks_every_form() -> None:
    s = Secret()
    enc = quote(s.text, safe="")
    for text in (f"redis://ops:{enc}@h:1/0", f"redis://h:1/0?password={enc}&db=0",
                 f"x rediss://h:1/0?ssl_password={enc} y", f"redis://:{s.text}@h:1/0"):
        assert not s.leaked_in(redact(text)), redact(text)
    remember(s.text)
    assert not s.leaked_in(redact(f"AUTH failed for {s.text!r} / {enc}"))
    assert redact("redis://ops:pw@h:1/0?db=0") == "redis://ops:***@h:1/0?db=0"


@pytest.mark.parametrize("scheme,path", [("redis", "/0"), ("redis+sentinel", "/mymaster"),
                                         ("redis+cluster", "")])
def test_unreachable_errors_of_every_command_show_no_secret(
        tmp_path: Path, scheme: str, path: str) -> None:
    s = Secret()
    host_port = f"127.0.0.1:{free_port()}"
    for way, conn in ways(s, tmp_path, host_port, scheme, path).items():
        for command in COMMANDS:
            proc = cli(*command, *conn)
            out = proc.stdout + proc.stderr
            assert proc.returncode in (3, 69), (way, command, out)
            assert not s.leaked_in(out), (way, command, out)
            assert "Traceback" not in out, (way, command, out)
        sup = cli(*conn, "--workers", "1", "--boot-timeout", "0.5", "--boot-retries", "1",
                  "--log-format", "text", entry=SUPERVISE)
        assert sup.returncode != 0 and not s.leaked_in(sup.stdout + sup.stderr), sup.stderr


def test_config_errors_exit_78_and_show_no_secret(tmp_path: Path) -> None:
    s = Secret()
    enc = quote(s.text, safe="")
    host_port = f"127.0.0.1:{free_port()}"
    bad = [  # a bad option beside the password; the password unencoded
        f"redis://ops:{enc}@{host_port}/0?socket_timeout=x",
        f"redis://{host_port}/0?password={enc}&socket_timeout=x",
        f"redis://ops:{s.text}@{host_port}/0",
        f"redis://:{s.text}@{host_port}/0",
        f"redis+sentinel://:{s.text}@{host_port}/mymaster",
        f"redis+cluster://:{s.text}@{host_port}",
    ]
    for url in bad:
        for command in [c for c in COMMANDS] + [("--workers", "1")]:
            module = "stagedoor.cli.supervise" if command[0] == "--workers" else "stagedoor.cli"
            proc = cli(*command, "--redis-url", url, entry=entry_of(module))
            out = proc.stdout + proc.stderr
            # --check speaks the monitoring plugins' codes: UNKNOWN, on stdout.
            assert proc.returncode == (3 if "--check" in command else 78), (url, command, out)
            assert not s.leaked_in(out), (url, command, out)
            assert len(out.strip().splitlines()) == 1, out
        # The same URL from the environment, and --help with it set.
        proc = cli("status", env={"STAGEDOOR_REDIS_URL": url})
        assert proc.returncode == 78 and not s.leaked_in(proc.stderr), proc.stderr
        assert not s.leaked_in(cli("status", "--help",
                                   env={"STAGEDOOR_REDIS_URL": url}).stdout)
    unencoded = cli("status", "--redis-url", bad[3])
    assert "must be percent-encoded" in unencoded.stderr, unencoded.stderr


@pytest.mark.server
def test_logs_and_auth_errors_show_no_secret(tmp_path: Path) -> None:
    s = Secret()
    with EmbeddedRedis(tmp_path / "pw-redis", password=s.text) as server:
        host_port = f"127.0.0.1:{server.port}"
        for way, conn in ways(s, tmp_path, host_port).items():
            # Works, with debug logs, against the real server.
            proc = cli("enqueue", "--kind", "render_tickets", "--order-id", "1",
                       "--outbox-id", "1", *conn)
            assert proc.returncode == 0, (way, proc.stderr)
            for command in COMMANDS[:5]:
                proc = cli(*command, *conn)
                assert proc.returncode in (0, 1, 2), (way, command, proc.stderr)
                assert not s.leaked_in(proc.stdout + proc.stderr), (way, command)
            # A wrong password is refused in one line that shows neither.
            wrong = Secret()
            (tmp_path / way).mkdir()
            for bad in ways(wrong, tmp_path / way, host_port).values():
                proc = cli("status", *bad)
                assert proc.returncode in (69, 78), proc.stderr
                assert not wrong.leaked_in(proc.stdout + proc.stderr), proc.stderr
        # A worker's logs while Redis goes away and comes back, password in the query.
        url = f"redis://{host_port}/0?password={quote(s.text, safe='')}"
        procs = Procs(tmp_path, url, tmp_path / "ledger")
        try:
            w = procs.worker(0, {"log_level": "debug"}, url=False,  # type: ignore[arg-type]
                             env={"STAGEDOOR_REDIS_URL": url})
            server.restart()
            w.wait_log("read failed")
            w.signal(signal.SIGTERM)
            assert w.wait(15) == 0
            assert not s.leaked_in(w.text()), w.text()
        finally:
            procs.close()
        admin = redis.Redis(host="127.0.0.1", port=server.port, password=s.text, protocol=2)
        wait_for(lambda: admin.ping(), what="server back")
        admin.close()
