"""Enqueue -> handler start latency at a fixed offered rate (open loop).

The producer (this process) sends on a fixed timetable, i/rate after the start,
whatever the replies do: an open-loop producer.  It writes the library's own XADD
(`stagedoor.stream.queue.xadd_args`: MAXLEN ~ 100000 *) on a plain socket and a second
thread reads the replies, so a slow reply never delays the next send (a closed-loop
`enqueue` call per job costs ~1 ms here and could not hold 1,000/s on this box).
Each job's `trace` field carries the producer's `time.time_ns()` taken just before the
send; the worker's `latency` handler (bench/noop_handlers.py) records its own
`time.time_ns()` at start to a file.  Both clocks are the same host clock.

The worker is a real `stagedoor work` process (not --burst) sitting in its BLOCK read
with seed defaults, which is how a live queue sees a new job.  When the producer is
behind its timetable (at 10,000 jobs/s it often is, by a fraction of a millisecond)
every job already due goes out in one write, each with its own send time.  The first `warmup_s`
are dropped.  `send_lag` says how late the producer was against its timetable.
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import hiredis

from stagedoor.stream.queue import xadd_args

from . import measure_common as mc


def _wait_blocked(c: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while int(c.info("clients")["blocked_clients"]) < 1:
        if time.monotonic() > deadline:
            raise RuntimeError("worker never reached its blocking read")
        time.sleep(0.02)


def pack(args: Sequence[Any]) -> bytes:
    """One command in RESP."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class OpenLoopSender:
    """Writes commands on one socket; a thread reads (and checks) the replies."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.replies = 0
        self.errors: list[Any] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        reader = hiredis.Reader()
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            reader.feed(data)
            while (reply := reader.gets()) is not False:
                self.replies += 1
                if isinstance(reply, Exception):
                    self.errors.append(reply)

    def send(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def close(self, expected: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.replies < expected and time.monotonic() < deadline:
            time.sleep(0.005)
        self.sock.close()
        if self.errors or self.replies < expected:
            raise RuntimeError(f"producer: {self.replies}/{expected} replies, errors "
                               f"{self.errors[:3]}")


def latency(url: str, *, rate: float = 1000.0, seconds: float = 10.0,
            warmup_s: float = 1.0, consumer: str = "stagedoor",
            inject: Sequence[str] = ()) -> dict[str, Any]:
    """consumer "stagedoor": a `stagedoor work` process; "raw": the floor of this box,
    a bare XREADGROUP BLOCK loop (bench.measure_drain rawblock) timed the same way."""
    c = mc.client(url)
    c.flushall()
    s = mc.settings(url)
    with tempfile.TemporaryDirectory(prefix="sd-lat-") as tmp:
        out = Path(tmp) / "latency.txt"
        cmd = (mc.worker_cmd(url, burst=False, inject=inject) if consumer == "stagedoor" else
               [mc.PY, "-m", "bench.measure_drain", "rawblock", url, "rawblock"])
        proc = mc.spawn(cmd, {"SD_BENCH_LATENCY_FILE": str(out)})
        try:
            _wait_blocked(c)  # booted: group ensured, sitting in XREADGROUP BLOCK
            sender = OpenLoopSender(url)
            total = int(rate * (seconds + warmup_s))
            # Packed beforehand up to the send time (the last value, 19 digits), so that
            # the producer costs ~1 us a job and can hold 10,000/s on a busy box.
            heads = [pack(xadd_args(s, mc.job(k, "latency", "0" * 19).fields()))[:-21]
                     for k in range(total)]
            lags: list[float] = []
            t0 = time.perf_counter()
            last = t0
            i = 0
            while i < total:
                due = t0 + i / rate
                while True:
                    left = due - time.perf_counter()
                    if left <= 0:
                        break
                    if left > 0.0005:
                        time.sleep(left - 0.0004)
                now = time.perf_counter()
                # Everything due by now goes in one write (at 10,000/s a send per job
                # would be the producer's bottleneck, not the worker's); each job still
                # carries its own send time.
                upto = max(i + 1, min(total, int((now - t0) * rate) + 1))
                chunk = []
                for k in range(i, upto):
                    lags.append(now - (t0 + k / rate))
                    chunk.append(heads[k])
                    chunk.append(b"%d\r\n" % time.time_ns())
                sender.send(b"".join(chunk))
                i = upto
                if now - last > 3:
                    last = now
                    mc.progress(f"latency {consumer} @{rate:,.0f}/s: sent {i}/{total}")
            elapsed = time.perf_counter() - t0
            sender.close(total)
            deadline = time.monotonic() + 30
            while True:
                info = mc.group_info(c)
                if info["entries_read"] >= total and info["pending"] == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"latency: worker did not finish: {info}")
                time.sleep(0.01)
        finally:
            if proc.poll() is None and consumer == "stagedoor":
                os.kill(proc.pid, signal.SIGTERM)
            err = mc.stop(proc, timeout=30)  # the raw loop exits 3 s after the last job
            c.close()
        rows = [tuple(map(int, line.split())) for line in out.read_text().split("\n") if line]
    if len(rows) != total:
        raise RuntimeError(f"latency: {len(rows)} of {total} recorded; stderr: {err[-500:]}")
    rows.sort()
    skip = int(rate * warmup_s)
    lat_ms = sorted((start - sent) / 1e6 for sent, start in rows[skip:])
    lags.sort()
    return {"consumer": consumer, "rate": rate, "seconds": seconds, "n": len(lat_ms),
            "offered_rate": total / elapsed,
            "p50_ms": mc.percentile(lat_ms, 50), "p95_ms": mc.percentile(lat_ms, 95),
            "p99_ms": mc.percentile(lat_ms, 99), "max_ms": lat_ms[-1],
            "send_lag_p99_ms": mc.percentile(lags, 99) * 1e3,
            "samples_ms": lat_ms}


if __name__ == "__main__":
    with mc.redis_server() as server:
        for consumer in ("stagedoor", "raw"):
            r = latency(server.url, seconds=3, consumer=consumer)
            r.pop("samples_ms")
            print(r)
