"""Real processes for the fault suite: `stagedoor work` and `stagedoor-supervise`
subprocesses with their stderr in files, the ledger directory, and the enqueue side.

Every process started here is killed when the test ends, with what it started (a
supervisor's workers, a worker's render process) and after a SIGCONT in case a test
stopped it, so a failing test leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import redis

from stagedoor.config import Settings
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import enqueue_sync
from tests.support.aclmode import worker_url
from tests.support.handlers.ledger import ENV_DIR, append_line
from tests.support.paths import SRC
from tests.support.worker import gone, kill_all_of, poll

REPO = Path(__file__).resolve().parents[3]
HANDLERS = "tests.support.handlers.ledger:registry"

# Short thresholds: a read waits 200 ms, a reclaim pass is due every 100 ms, an entry
# idle for 1.5 s is taken over.  job_timeout must stay below claim_idle_ms.
FAST: dict[str, Any] = {"block_ms": 200, "reclaim_interval": 0.1, "claim_idle_ms": 1500,
                        "job_timeout": 1.0, "retry_backoff": 0.01, "retry_backoff_max": 0.05,
                        "heartbeat_interval": 0.2, "heartbeat_timeout": 5,
                        "graceful_timeout": 5, "boot_timeout": 10}


def flags(options: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name, value in options.items():
        if isinstance(value, list):
            for v in value:
                out += ["--" + name.replace("_", "-"), str(v)]
        else:
            out += ["--" + name.replace("_", "-"), str(value)]
    return out


def wait_for(predicate: Callable[[], Any], timeout: float = 20, what: str = "condition",
             every: float = 0.01) -> Any:
    """Poll a condition (never a bare sleep as synchronisation); faults wait longer."""
    return poll(predicate, timeout, what, interval=every)


class Proc:
    """One subprocess with its stderr in a file."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], log_path: Path,
                 name: str) -> None:
        self.name = name
        self.log_path = log_path
        self.argv = list(argv)
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        self.popen = subprocess.Popen(self.argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL,
                                      stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.popen.pid

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.text().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    out.append(orjson.loads(line))
        return out

    def wait_log(self, needle: str, timeout: float = 30, count: int = 1) -> None:
        def seen() -> bool:
            if self.popen.poll() is not None and self.text().count(needle) < count:
                raise AssertionError(f"{self.name} exited with {self.popen.returncode} "
                                     f"before logging {needle!r}:\n{self.text()[-3000:]}")
            return self.text().count(needle) >= count
        wait_for(seen, timeout, f"{self.name} to log {needle!r}")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def wait(self, timeout: float = 15) -> int:
        return self.popen.wait(timeout)

    def close(self) -> None:
        """Kill it and what it started (a supervisor's workers, a worker's render
        process): killing a supervisor alone leaves its workers draining on as orphans
        (tests/support/test_harness_teardown.py)."""
        import psutil

        procs = []
        if self.alive():
            with contextlib.suppress(psutil.Error):
                me = psutil.Process(self.pid)
                procs = [me, *me.children(recursive=True)]
        kill_all_of(procs)
        self.popen.wait(10)
        self._log.close()


class Procs:
    """Starts workers and supervisors against one Redis URL; cleans them up."""

    def __init__(self, tmp_path: Path, url: str, ledger_dir: Path) -> None:
        self.tmp_path = tmp_path
        self.url = url
        self.ledger_dir = ledger_dir
        self.started: list[Proc] = []
        self._n = 0

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
        env.pop("NOTIFY_SOCKET", None)
        env["PYTHONPATH"] = f"{SRC}{os.pathsep}{REPO}"
        env[ENV_DIR] = str(self.ledger_dir)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra or {})
        return env

    def common(self, options: dict[str, Any] | None, url: str | None) -> list[str]:
        opts: dict[str, Any] = {"log_format": "json", "consumer": "f", "handlers": [HANDLERS],
                                "tickets_dir": str(self.tmp_path / "tickets"),
                                "state_dir": str(self.tmp_path / "state"), **FAST}
        if url is not False:
            opts["redis_url"] = worker_url(url) if url else self.url
        opts.update(options or {})
        return flags({k: v for k, v in opts.items() if v is not None})

    def worker(self, slot: int = 0, options: dict[str, Any] | None = None, *,
               url: str | None = None, env: dict[str, str] | None = None,
               burst: bool = False, ready: bool = True) -> Proc:
        argv = [sys.executable, "-m", "stagedoor.cli", "work", "--slot", str(slot),
                *(["--burst"] if burst else []), *self.common(options, url)]
        proc = self._start(argv, env, f"worker{slot}")
        if ready:
            proc.wait_log(f"worker f-{slot:02d} ready")
        return proc

    def supervisor(self, workers: int, options: dict[str, Any] | None = None, *,
                   url: str | None = None, env: dict[str, str] | None = None,
                   extra: Sequence[str] = ()) -> Proc:
        argv = [sys.executable, "-c",
                "import sys; from stagedoor.cli.supervise import main as supervise_main; "
                "sys.exit(supervise_main())",
                "--workers", str(workers), *self.common(options, url), *extra]
        return self._start(argv, env, "supervisor")

    def _start(self, argv: Sequence[str], env: dict[str, str] | None, name: str) -> Proc:
        self._n += 1
        proc = Proc(argv, self.env(env), self.tmp_path / f"{name}-{self._n}.log", name)
        self.started.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.started:
            proc.close()


class Producer:
    """The enqueue side: every enqueued outbox_id (and its entry id) goes to a file."""

    def __init__(self, client: redis.Redis, settings: Settings, ledger_dir: Path) -> None:
        self.client = client
        self.settings = settings
        self.path = ledger_dir / "enqueued.jsonl"

    def enqueue(self, kind: str, ids: Iterable[int], outbox_offset: int = 0) -> list[str]:
        """Jobs for orders `ids`, outbox id = order id + outbox_offset.  The outbox id is
        the job's identity (its done mark): a second kind of job for an order already
        enqueued needs an offset, or the worker rightly skips it as already handled."""
        ids = list(ids)
        outbox_ids = [i + outbox_offset for i in ids]
        jobs = [make_job(kind, i, o, f"req{o}", f"tr{o}")
                for i, o in zip(ids, outbox_ids, strict=True)]
        entry_ids = enqueue_sync(self.client, self.settings, jobs)
        for outbox_id, entry_id in zip(outbox_ids, entry_ids, strict=True):
            append_line(self.path, {"outbox_id": outbox_id, "entry_id": entry_id,
                                    "kind": kind, "t": time.time()})
        return entry_ids

    def enqueue_raw(self, fields: Sequence[bytes | str], outbox_id: int | None) -> str:
        """A hand-made entry (malformed payloads); outbox_id None if it has none."""
        from stagedoor.stream.queue import ensure_group_sync

        ensure_group_sync(self.client, self.settings)
        entry_id = self.client.execute_command("XADD", self.settings.stream, "*", *fields)
        entry_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        append_line(self.path, {"outbox_id": outbox_id, "entry_id": entry_id, "kind": "raw",
                                "t": time.time()})
        return entry_id

    def gate(self, *ids: int) -> None:
        for i in ids:
            (self.path.parent / "gates" / str(i)).touch()


def wait_orphans_gone(pids: Sequence[int], timeout: float) -> None:
    """Wait for orphaned workers to exit (zombies count as gone); kill any left behind,
    pass or fail, so a failing case never leaves a worker at PPID 1."""
    import psutil

    try:
        wait_for(lambda: gone(pids), timeout, what="the orphaned workers to exit")
    finally:
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()

