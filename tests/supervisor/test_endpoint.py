"""The supervisor's loop never waits on a metrics client (issue 24, item 8).

With a client holding 200 silent connections open to the metrics port (it connects
and never sends a request, and opens a new one for each the server closes), /healthz
still answers, a kill -9'd worker is respawned and a SIGTERM stops the supervisor.
Before the endpoint was non-blocking, each silent connection cost the loop up to
0.2 s (8 per wake-up), so such a client held the loop for good: the first /healthz
probe timed out (2 s).  Bounds here are generous (behaviour, not speed: the figures
are bench/measure_endpoint.py's).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from stagedoor.demo.embedded_redis import free_port
from tests.support.supervisor import supervisor, wait_for

SILENT = 200


class Flood(threading.Thread):
    """A client holding `n` silent connections (never a byte sent) open to the port,
    opening a new one for each the server closes: the issue's hostile client.
    Non-blocking connects: a full accept backlog must not block the test itself."""

    def __init__(self, port: int, n: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.n = n
        self.stop = threading.Event()
        self.opened = 0

    def _open(self) -> socket.socket:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        self.opened += 1
        return s

    def run(self) -> None:
        held = [self._open() for _ in range(self.n)]
        try:
            while not self.stop.wait(0.1):
                for i, s in enumerate(held):
                    try:
                        closed = s.recv(1) == b""
                    except BlockingIOError:
                        closed = False
                    except OSError:
                        closed = True
                    if closed:
                        s.close()
                        held[i] = self._open()
        finally:
            for s in held:
                s.close()


@contextlib.contextmanager
def flood(port: int, n: int) -> Iterator[Flood]:
    f = Flood(port, n)
    f.start()
    try:
        wait_for(lambda: f.opened >= n, 20, what=f"{n} silent connections")
        time.sleep(0.5)  # the supervisor meets them (its loop turns meanwhile)
        yield f
    finally:
        f.stop.set()
        f.join(10)


def healthz(port: int, timeout: float) -> tuple[int, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as r:
        return r.status, r.read()


def test_silent_metrics_clients_do_not_hold_the_supervisor_loop(
        tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    with supervisor(tmp_path, redis_url, ["--workers", "2", "--metrics-port", str(port)]
                    ) as sup:
        pids = sup.wait_ready(2)
        with flood(port, SILENT):
            # /healthz: one loop turn, whatever the crowd (before: the probes waited
            # behind the silent connections, 0.2 s each, and timed out)
            for _ in range(5):
                assert healthz(port, timeout=2) == (200, b"ok\n")
            # a kill -9'd worker is seen and respawned
            os.kill(pids[0], signal.SIGKILL)
            wait_for(lambda: sup.ready_pids().get(0) not in (None, pids[0]), 10,
                     what="slot 0 respawned after kill -9")
            assert healthz(port, timeout=2) == (200, b"ok\n")
            # a SIGTERM is acted on: the workers drain and the supervisor exits 0
            sup.signal(signal.SIGTERM)
            assert sup.wait(10) == 0
