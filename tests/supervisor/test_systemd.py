"""sd_notify by hand, and the unit file checked by systemd's own tools."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stagedoor import config
from stagedoor.supervisor.systemd import Notifier, socket_address, watchdog_interval
from tests.support.paths import PACKAGE
from tests.support.supervisor import REPO, supervisor, wait_for

SHIPPED = PACKAGE / "data" / "systemd"
UNIT = SHIPPED / "stagedoor.service"
TEMPLATE = SHIPPED / "stagedoor@.service"


def unit_directives(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key, []).append(value)
    return out


def verify(tmp_path: Path, text: str, name: str = "stagedoor.service") -> str:
    """systemd-analyze verify on a copy whose ExecStart exists; returns its complaints."""
    exe = tmp_path / "stagedoor-supervise"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; from stagedoor.cli.supervise "
                   f"import main; sys.exit(main())' \"$@\"\n")
    exe.chmod(0o755)
    unit = tmp_path / name
    unit.write_text(text.replace("/usr/local/bin/stagedoor-supervise", str(exe)))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                       text=True, timeout=60)
    complaints = [line for line in (r.stdout + r.stderr).splitlines()
                  if name in line or "Unknown key" in line or "Failed to parse" in line]
    if r.returncode != 0:
        complaints.append(f"exit {r.returncode}: {r.stderr.strip()}")
    return "\n".join(complaints)


def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    assert shutil.which("systemd-analyze"), "systemd-analyze is needed for this test"
    text = UNIT.read_text()
    assert verify(tmp_path, text) == ""
    # The check can fail: a misspelt directive and a bad value are reported.
    broken = text.replace("OOMPolicy=continue", "OOMPolicy=sometimes").replace(
        "NoNewPrivileges=yes", "NoNewPrivilege=yes")
    complaints = verify(tmp_path, broken)
    assert "OOM policy" in complaints and "NoNewPrivilege" in complaints, complaints


def exposure(tmp_path: Path, text: str, name: str) -> float:
    """systemd-analyze security --offline's overall exposure of a unit file."""
    tmp_path.mkdir(exist_ok=True)
    unit = tmp_path / name
    unit.write_text(text)
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", str(unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(rf"Overall exposure level for {re.escape(name)}: ([0-9.]+)", r.stdout)
    assert m, r.stdout[-2000:] + r.stderr
    print(f"\n[systemd-analyze security] {name} exposure {m[1]}")
    return float(m[1])


def test_unit_security_exposure_is_low(tmp_path: Path) -> None:
    assert exposure(tmp_path, UNIT.read_text(), "stagedoor.service") <= 2.5


def test_unit_directives() -> None:
    d = unit_directives(UNIT.read_text())
    want = {
        "Type": "notify", "NotifyAccess": "main", "ExecStart": "/usr/local/bin/stagedoor-supervise",
        "ExecReload": "/bin/kill -HUP $MAINPID", "KillMode": "mixed",
        "Restart": "on-failure", "RestartPreventExitStatus": "78", "OOMPolicy": "continue",
        "DynamicUser": "yes", "StateDirectory": "stagedoor", "CacheDirectory": "stagedoor",
        "EnvironmentFile": "-/etc/stagedoor/stagedoor.env",
        "LoadCredential": "redis-password:/etc/stagedoor/redis-password",
        "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
        "PrivateDevices": "yes", "NoNewPrivileges": "yes", "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes", "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes", "ProtectClock": "yes", "ProtectHostname": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6", "RestrictNamespaces": "yes",
        "RestrictRealtime": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes",
        "MemoryDenyWriteExecute": "yes", "SystemCallFilter": "@system-service",
        "SystemCallArchitectures": "native", "CapabilityBoundingSet": "", "UMask": "0027",
    }
    for key, value in want.items():
        assert d.get(key) == [value], (key, d.get(key))
    env = dict(v.split("=", 1) for v in d["Environment"])
    assert env["STAGEDOOR_TICKETS_DIR"] == "%S/stagedoor/tickets"
    assert env["STAGEDOOR_REDIS_PASSWORD_FILE"] == "%d/redis-password"
    # every STAGEDOOR_ variable the unit sets is a real setting
    assert config.from_env({k: "1" if k.endswith(("WORKERS", "TIMEOUT")) else "json"
                            for k in env if k.startswith("STAGEDOOR_") and
                            k not in ("STAGEDOOR_TICKETS_DIR", "STAGEDOOR_STATE_DIR",
                                      "STAGEDOOR_REDIS_PASSWORD_FILE")})
    stop = float(d["TimeoutStopSec"][0])
    graceful = float(env["STAGEDOOR_GRACEFUL_TIMEOUT"])
    assert stop >= graceful + 5  # graceful + the supervisor's SIGKILL margin + reaping
    assert float(d["WatchdogSec"][0]) > 0


def test_template_passes_verify_and_security(tmp_path: Path) -> None:
    assert verify(tmp_path, TEMPLATE.read_text(), "stagedoor@jobs.service") == ""
    assert exposure(tmp_path / "sec", TEMPLATE.read_text(), "stagedoor@jobs.service") <= 2.5


def test_template_is_the_unit_per_queue() -> None:
    """stagedoor@<queue>: the queue in the names, everything else as stagedoor.service."""
    base, tmpl = unit_directives(UNIT.read_text()), unit_directives(TEMPLATE.read_text())
    per_queue = {
        "Description": ["Stagedoor ticket job workers for queue %i (Redis stream consumer "
                        "group)"],
        "EnvironmentFile": ["-/etc/stagedoor/%i.env"],
        "StateDirectory": ["stagedoor/%i"],
        "CacheDirectory": ["stagedoor/%i"],
        "WorkingDirectory": ["%S/stagedoor/%i"],
        "LoadCredential": ["redis-password:/etc/stagedoor/%i.redis-password"],
    }
    for key, value in per_queue.items():
        assert tmpl[key] == value, key
    env = dict(v.split("=", 1) for v in tmpl["Environment"])
    assert env["STAGEDOOR_STREAM"] == "%i" and env["STAGEDOOR_DEAD_STREAM"] == "%i:dead"
    assert env["STAGEDOOR_STATE_DIR"] == "%S/stagedoor/%i"
    assert env["STAGEDOOR_TICKETS_DIR"] == "%S/stagedoor/%i/tickets"
    base_env = dict(v.split("=", 1) for v in base["Environment"])
    assert {k: v for k, v in env.items() if "%i" not in v} == {
        k: v for k, v in base_env.items() if not k.endswith("_DIR")}
    # no drift: every other directive (hardening, limits, restart policy) is the same
    assert {k: v for k, v in tmpl.items() if k not in (*per_queue, "Environment")} == {
        k: v for k, v in base.items() if k not in (*per_queue, "Environment")}
    # the instance's settings are valid ones (a queue name is a stream name)
    config.load(environ={"STAGEDOOR_STREAM": "mail", "STAGEDOOR_DEAD_STREAM": "mail:dead"})


def test_units_limit_files_and_document_where_the_docs_are() -> None:
    for path in (UNIT, TEMPLATE):
        d = unit_directives(path.read_text())
        assert d["LimitNOFILE"] == ["16384"]
        [doc] = d["Documentation"]
        # the documented venv (docs/supervisor.md) plus the prefix setup.py installs to
        assert doc == "file:///opt/stagedoor/venv/share/doc/stagedoor/supervisor.md"
    assert "sudo python3 -m venv /opt/stagedoor/venv" in (REPO / "docs" / "supervisor.md"
                                                          ).read_text()


def test_example_files_are_valid_settings() -> None:
    settings = config.load(config_file=str(SHIPPED / "stagedoor.toml.example"),
                           environ={})
    assert settings.workers == 4 and settings.redis_url.startswith("redis://")
    env: dict[str, str] = {}
    commented: dict[str, str] = {}
    for line in (SHIPPED / "stagedoor.env.example").read_text().splitlines():
        body = line.lstrip("#")
        if re.match(r"^STAGEDOOR_[A-Z_]+=", body):
            key, value = body.split("=", 1)
            (commented if line.startswith("#") else env)[key] = value
    assert config.load(environ=env).workers == 4
    config.load(environ={**env, **commented, "STAGEDOOR_CONFIG": str(
        SHIPPED / "stagedoor.toml.example")})


# -- sd_notify -------------------------------------------------------------------------------

def test_socket_address() -> None:
    assert socket_address("@stagedoor/notify") == b"\0stagedoor/notify"
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    with pytest.raises(ValueError):
        socket_address("relative/path")


def test_watchdog_interval() -> None:
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}) == 1
    assert watchdog_interval({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "soon"}) is None


def test_notifier_path_socket_and_unset(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(2)
        environ = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "1000000", "OTHER": "x"}
        notifier, interval = Notifier.from_environ(environ)
        assert interval == 0.5
        assert environ == {"OTHER": "x"}  # nothing forked later inherits them
        assert notifier.ready("workers 1/1 ready")
        assert server.recv(4096) == b"READY=1\nSTATUS=workers 1/1 ready"
        assert notifier.status("two\nlines")
        assert server.recv(4096) == b"STATUS=two lines"  # one message, one line
        notifier.watchdog()
        assert server.recv(4096) == b"WATCHDOG=1"
        notifier.reloading()
        assert server.recv(4096).startswith(b"RELOADING=1\nMONOTONIC_USEC=")
        notifier.stopping()
        assert server.recv(4096) == b"STOPPING=1"
        notifier.close()


def test_notifier_abstract_socket_and_missing_socket(tmp_path: Path) -> None:
    name = f"stagedoor-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(b"\0" + name.encode())
        server.settimeout(2)
        n = Notifier("@" + name)
        assert n.ready()
        assert server.recv(4096) == b"READY=1"
        n.close()
    gone = Notifier(str(tmp_path / "nobody-listens"))
    assert gone.send("READY=1") is False  # never raises: notifications are advisory
    gone.close()
    assert Notifier(None).send("READY=1") is False


def test_supervisor_notifies_an_abstract_socket(tmp_path: Path, redis_url: str) -> None:
    name = f"stagedoor-sup-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(b"\0" + name.encode())
        server.setblocking(False)
        got: list[bytes] = []

        def received(prefix: bytes) -> bool:
            while True:
                try:
                    got.append(server.recv(65536))
                except BlockingIOError:
                    break
            return any(m.startswith(prefix) for m in got)

        with supervisor(tmp_path, redis_url, ["--workers", "1"],
                        env={"NOTIFY_SOCKET": "@" + name}) as sup:
            wait_for(lambda: received(b"READY=1"), 15, what="READY=1 on @socket")
            sup.signal(signal.SIGTERM)
            assert sup.wait() == 0
            assert received(b"STOPPING=1")
