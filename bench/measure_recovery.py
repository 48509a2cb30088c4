"""kill -9 of a worker with jobs in flight -> those jobs handled again.

Eight `hold` jobs (the handler waits while a marker file exists) are put on the
stream and taken by worker slot 0, so all eight are on its pending list, running.
Then SIGKILL; the marker is removed; and the worker comes back under the same name:

  supervisor   `stagedoor-supervise --workers 1` respawns the slot by itself (used
               when src/stagedoor/supervisor/ exists and mode="auto"/"supervisor")
  restart      no supervisor: this benchmark starts `stagedoor work --slot 0` again
               right after the kill (labelled "manual restart" in the report)

The new process reads its own pending list (id 0) first, so the eight come back
without waiting for XAUTOCLAIM's 60 s.  `recovery_s` = last of the eight handled
(handler finished) - the kill; `first_s` = first handler start - the kill.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from stagedoor.stream.queue import enqueue_sync

from . import measure_common as mc

HOLD_JOBS = 8


def supervisor_available() -> bool:
    return importlib.util.find_spec("stagedoor.supervisor.loop") is not None


def _wait(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(f"recovery: timed out waiting for {what}")
        time.sleep(0.002)


def _lines(path: Path) -> list[list[int]]:
    if not path.exists():
        return []
    return [list(map(int, ln.split())) for ln in path.read_text().splitlines() if ln.strip()]


def _worker_child(sup: psutil.Process) -> psutil.Process | None:
    kids = [k for k in sup.children(recursive=True) if k.is_running()]
    return kids[0] if kids else None


def recovery_once(url: str, *, mode: str = "auto") -> dict[str, Any]:
    if mode == "auto":
        mode = "supervisor" if supervisor_available() else "restart"
    c = mc.client(url)
    c.flushall()
    s = mc.settings(url)
    with tempfile.TemporaryDirectory(prefix="sd-rec-") as tmp:
        marker, handled = Path(tmp) / "hold", Path(tmp) / "handled"
        marker.touch()
        extra = {"SD_BENCH_HOLD": str(marker), "SD_BENCH_HANDLED_FILE": str(handled)}
        procs = []
        try:
            if mode == "supervisor":
                sup = mc.spawn(mc.supervise_cmd(url, 1), extra)
                procs.append(sup)
                sp = psutil.Process(sup.pid)
                _wait(lambda: _worker_child(sp) is not None, 20, "the supervisor's worker")
                victim_pid = _worker_child(sp).pid  # type: ignore[union-attr]
            else:
                first = mc.spawn(mc.worker_cmd(url, burst=False), extra)
                procs.append(first)
                victim_pid = first.pid
            _wait(lambda: int(c.info("clients")["blocked_clients"]) >= 1, 30, "worker boot")
            enqueue_sync(c, s, [mc.job(i, "hold") for i in range(HOLD_JOBS)])
            _wait(lambda: mc.group_info(c)["pending"] == HOLD_JOBS, 10, "8 jobs in flight")
            time.sleep(0.2)
            t_kill = time.time_ns()
            os.kill(victim_pid, signal.SIGKILL)
            marker.unlink()
            if mode == "restart":
                procs[0].wait(5)
                procs.append(mc.spawn(mc.worker_cmd(url, burst=False), extra))
            _wait(lambda: len(_lines(handled)) >= HOLD_JOBS, 30, "the jobs handled again")
            rows = _lines(handled)
            _wait(lambda: mc.group_info(c)["pending"] == 0, 10, "the acks")
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p.pid, signal.SIGTERM)
                mc.stop(p, timeout=15)
            c.close()
    return {"mode": mode, "jobs": len(rows), "first_s": (min(r[1] for r in rows) - t_kill) / 1e9,
            "recovery_s": (max(r[2] for r in rows) - t_kill) / 1e9}


def recovery(url: str, *, repeats: int = 3, mode: str = "auto") -> dict[str, Any]:
    runs = []
    for i in range(repeats):
        runs.append(recovery_once(url, mode=mode))
        mc.progress(f"kill -9 recovery {i + 1}/{repeats}: {runs[-1]['recovery_s']:.3f} s "
                    f"({runs[-1]['mode']})")
    values = sorted(r["recovery_s"] for r in runs)
    return {"mode": runs[0]["mode"], "repeats": repeats, "recovery_s_median": mc.median(values),
            "recovery_s_max": values[-1], "first_s_median":
            mc.median([r["first_s"] for r in runs]), "runs": values}


if __name__ == "__main__":
    with mc.redis_server() as server:
        print(recovery(server.url, repeats=2))
