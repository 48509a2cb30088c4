"""The supervisor's loop against silent metrics clients: /healthz latency and the
respawn time after kill -9, with 200 silent connections held open against none.

Real `stagedoor-supervise --workers 2 --metrics-port P` on a private redis-server,
a fresh one per round (so a slot's respawn backoff starts at 0.1 s each time); rounds
alternate between the two phases.  Each round measures:

  healthz      PROBES sequential `GET /healthz` (connect, request, read to close),
               each timed; median and max
  respawn      kill -9 of slot 0's worker, then the time until the status file shows
               a new READY process in slot 0 (backoff 0.1 s + fork + boot + READY)

Phase "none": nothing else connects.  Phase "silent": a client holds SILENT
connections open to the metrics port that never send a byte (re-opening any the
server closed).  The report gives both and their ratios (silent / none): a loop that
never waits on a client keeps both near 1.  (Issue 24: with blocking reads of the
request head, 0.2 s per silent connection, /healthz took 2.5-3.4 s and a respawn 0.77
instead of 0.30 s.)

    .venv/bin/python -m bench.measure_endpoint [--silent 200] [--probes 40] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from stagedoor.demo.embedded_redis import free_port

from . import measure_common as mc


def status(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return {}
    return data


def slot0(path: Path) -> int | None:
    s = status(path).get("slots", {}).get("0") or {}
    return s.get("pid") if s.get("ready") else None


def wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.005)
    raise RuntimeError(f"timed out waiting for {what}")


def healthz_once(port: int) -> float:
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    if not data.startswith(b"HTTP/1.0 200"):
        raise RuntimeError(f"/healthz answered {data[:40]!r}")
    return time.perf_counter() - t0


class Silent(threading.Thread):
    """Holds n connections open that never send a byte; re-opens those closed."""

    def __init__(self, port: int, n: int) -> None:
        super().__init__(daemon=True)
        self.port, self.n = port, n
        self.stop = threading.Event()
        self.held: list[socket.socket] = []

    def _open(self) -> socket.socket:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        return s

    def run(self) -> None:
        self.held = [self._open() for _ in range(self.n)]
        while not self.stop.wait(0.2):
            for i, s in enumerate(self.held):
                try:
                    closed = s.recv(1) == b""
                except (BlockingIOError, OSError) as e:
                    closed = not isinstance(e, BlockingIOError)
                if closed:
                    s.close()
                    self.held[i] = self._open()
        for s in self.held:
            s.close()


def one_round(url: str, silent: int, probes: int) -> dict[str, float]:
    """A fresh supervisor (the slot's respawn backoff starts at 0.1 s), `silent`
    connections held open (0: none), PROBES /healthz, then one kill -9 of slot 0."""
    with tempfile.TemporaryDirectory(prefix="sd-ep-") as tmp:
        port = free_port()
        st = Path(tmp) / "status.json"
        cmd = [*mc.supervise_cmd(url, workers=2), "--metrics-port", str(port),
               "--status-file", str(st), "--heartbeat-interval", "0.1",
               "--state-dir", str(Path(tmp) / "state"), "--tickets-dir", str(Path(tmp) / "t")]
        with open(Path(tmp) / "sup.err", "wb") as err:
            proc = mc.spawn(cmd, stderr=err)
        crowd = Silent(port, silent)
        try:
            wait(lambda: status(st).get("ready"), 60, "2 workers ready")
            if silent:
                crowd.start()
                time.sleep(1.0)  # the supervisor meets the crowd
            lat = [healthz_once(port) for _ in range(probes)]
            old = wait(lambda: slot0(st), 30, "slot 0 ready")
            t0 = time.perf_counter()
            os.kill(old, signal.SIGKILL)
            wait(lambda: (slot0(st) or old) != old, 30, "slot 0 respawned")
            respawn = time.perf_counter() - t0
        finally:
            crowd.stop.set()
            if crowd.is_alive():
                crowd.join(10)
            proc.send_signal(signal.SIGTERM)
            mc.stop(proc, 20)
    return {"healthz_median_ms": statistics.median(lat) * 1000,
            "healthz_max_ms": max(lat) * 1000, "respawn_s": respawn}


def measure(silent: int, probes: int, rounds: int) -> dict[str, Any]:
    rows: dict[str, list[dict[str, float]]] = {"none": [], "silent": []}
    with mc.redis_server() as server:
        for r in range(rounds):  # interleaved: the box's load hits both alike
            for name, n in (("none", 0), ("silent", silent)):
                mc.progress(f"round {r + 1}/{rounds}: {name}")
                rows[name].append(one_round(server.url, n, probes))
    out = {name: {"healthz_median_ms": statistics.median(x["healthz_median_ms"] for x in v),
                  "healthz_max_ms": max(x["healthz_max_ms"] for x in v),
                  "respawn_median_s": statistics.median(x["respawn_s"] for x in v)}
           for name, v in rows.items()}
    ratios = {k: out["silent"][k] / out["none"][k] for k in out["none"] if out["none"][k] > 0}
    return {"silent_connections": silent, "probes_per_round": probes, "rounds": rounds,
            **out, "ratio_silent_over_none": ratios}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--silent", type=int, default=200)
    ap.add_argument("--probes", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    print(json.dumps(measure(a.silent, a.probes, a.rounds), indent=2))
