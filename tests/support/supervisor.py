"""Running the real supervisor as a subprocess, and looking at it from outside.

`Sup` starts `stagedoor-supervise` through its entry point (`stagedoor.cli.supervise.main`, via
`python -c`) with PYTHONPATH=src:<repo>, short intervals, a --status-file to learn
which pid serves which slot, and stderr in a file (the workers' stderr too: it is
inherited, as under systemd).  `NotifySocket` is a fake systemd: a datagram socket
bound in tmp_path whose path goes into NOTIFY_SOCKET.  `wait_for` polls a condition,
so no test sleeps to synchronise.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psutil
import redis

from stagedoor.config import Settings
from stagedoor.stream.job import Job
from stagedoor.stream.queue import enqueue_sync
from tests.support.aclmode import worker_url
from tests.support.paths import SRC
from tests.support.worker import kill_all_of, live_children, poll

REPO = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from stagedoor.cli.supervise import main; sys.exit(main())"
T = TypeVar("T")


def wait_for(predicate: Callable[[], T | None], timeout: float = 10.0,
             interval: float = 0.02, what: str = "condition") -> T:
    """Poll until predicate() is truthy; return its value or fail after `timeout` s."""
    value: T = poll(predicate, timeout, what, interval=interval)
    return value


def fast_flags() -> list[str]:
    return ["--heartbeat-interval", "0.1", "--heartbeat-timeout", "2", "--block-ms", "200",
            "--reclaim-interval", "0.5", "--graceful-timeout", "5", "--boot-timeout", "10",
            "--log-format", "json", "--consumer", "sup"]


class Sup:
    """One supervisor subprocess under test."""

    def __init__(self, tmp_path: Path, redis_url: str, args: Sequence[str] = (), *,
                 env: dict[str, str] | None = None, handlers: bool = True) -> None:
        self.tmp = tmp_path
        self.marks = tmp_path / "marks"
        self.marks.mkdir(exist_ok=True)
        self.status_path = tmp_path / "status.json"
        self.err_path = tmp_path / "supervisor.err"
        self.cmd = [sys.executable, "-c", ENTRY, "--redis-url", worker_url(redis_url),
                    *fast_flags(),
                    "--state-dir", str(tmp_path / "state"),
                    "--tickets-dir", str(tmp_path / "tickets"),
                    "--status-file", str(self.status_path)]
        if handlers:
            self.cmd += ["--handlers", "tests.support.handlers.basic:registry"]
        self.cmd += list(args)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("STAGEDOOR_") and k not in ("NOTIFY_SOCKET",
                                                                    "WATCHDOG_USEC")}
        self.env["PYTHONPATH"] = f"{SRC}{os.pathsep}{REPO}"
        self.env["SUP_TEST_MARKS"] = str(self.marks)
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        # every process this supervisor was seen to run, as psutil handles: a handle
        # knows its process's start time, so a recycled pid is never taken for it
        self.known: dict[int, psutil.Process] = {}

    def start(self) -> Sup:
        with open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(self.cmd, cwd=REPO, env=self.env,
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    # -- looking at it --------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.status_path.read_bytes())
        except (FileNotFoundError, ValueError):
            return {}
        self.remember(p["pid"] for p in data.get("processes", []))
        return data

    def remember(self, pids: Iterable[int]) -> None:
        """Note processes of this supervisor for kill_all: a pid counts only while the
        supervisor is its parent (a pid from an older status file may be reused)."""
        for pid in pids:
            if pid in self.known or self.proc is None:
                continue
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if p.ppid() == self.proc.pid:
                    self.known[pid] = p

    def ready_pids(self, st: dict[str, Any] | None = None) -> dict[int, int]:
        """slot -> pid of its current worker, for the slots whose worker is READY (of
        the status snapshot `st` when given, else of a fresh one)."""
        st = self.status() if st is None else st
        return {int(k): v["pid"] for k, v in st.get("slots", {}).items() if v["ready"]}

    def wait_ready(self, n: int, timeout: float = 15.0) -> dict[int, int]:
        def ok() -> dict[int, int] | None:
            self.assert_running()
            st = self.status()
            pids = self.ready_pids()
            if st.get("ready") and len(st.get("slots", {})) == n and len(pids) == n:
                return pids
            return None
        return wait_for(ok, timeout, what=f"{n} ready workers")

    def children(self) -> list[int]:
        return [c.pid for c in live_children(self.pid)]

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.stderr().splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out

    def assert_running(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"supervisor exited with {self.proc.returncode}:\n"
                                 f"{self.stderr()[-4000:]}")

    # -- acting on it ---------------------------------------------------------------------
    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"supervisor still running after {timeout:g}s:\n"
                                 f"{self.stderr()[-4000:]}") from None

    def kill_all(self) -> None:
        """Teardown: nothing the test started may outlive it.  Its workers are killed
        and waited for: one left draining as an orphan would take the next test's jobs
        from the suite's shared server (tests/support/test_harness_teardown.py).  They are known
        by the handles taken while the supervisor was their parent, not by their
        environment: setproctitle overwrites /proc/<pid>/environ in every worker."""
        if self.proc is not None:
            self.remember(self.children())
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        kill_all_of(self.known.values())


def marks(sup: Sup, outbox_id: int) -> list[tuple[str, int, float]]:
    """The (event, pid, time) lines the test handlers wrote for one job."""
    path = sup.marks / f"{outbox_id}.log"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split()
        out.append((parts[0], int(parts[1]), float(parts[2])))
    return out


def mark_text(sup: Sup, outbox_id: int) -> str:
    path = sup.marks / f"{outbox_id}.log"
    return path.read_text() if path.exists() else ""


def enqueue(redis_url: str, kind: str, outbox_ids: Sequence[int]) -> list[str]:
    settings = Settings(redis_url=redis_url)
    client = redis.Redis.from_url(redis_url, protocol=2)
    try:
        jobs = [Job(kind=kind, order_id=i, outbox_id=i, request_id=f"req{i}", trace=f"tr{i}")
                for i in outbox_ids]
        return enqueue_sync(client, settings, jobs)
    finally:
        client.close()


class NotifySocket:
    """A fake systemd notify socket: what the supervisor sends, as a list of dicts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.messages: list[dict[str, str]] = []
        self.times: list[float] = []

    def drain(self) -> list[dict[str, str]]:
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return self.messages
            msg = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.messages.append(msg)
            self.times.append(time.monotonic())

    def find(self, key: str, value: str | None = None) -> list[dict[str, str]]:
        return [m for m in self.drain() if key in m and (value is None or m[key] == value)]

    def close(self) -> None:
        self.sock.close()


def tcp_peers(pid: int) -> list[tuple[int, int]]:
    """(local port, remote port) of the TCP sockets process `pid` holds open."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = line.split()
                if cols[9] in inodes:
                    local, remote = cols[1], cols[2]
                    out.append((int(local.rsplit(":", 1)[1], 16),
                                int(remote.rsplit(":", 1)[1], 16)))
    return out


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@contextlib.contextmanager
def supervisor(tmp_path: Path, redis_url: str, args: Sequence[str] = (), **kw: Any
               ) -> Iterator[Sup]:
    sup = Sup(tmp_path, redis_url, args, **kw).start()
    try:
        yield sup
    finally:
        sup.kill_all()
