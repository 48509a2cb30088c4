"""The supervisor's metrics endpoint: a non-blocking HTTP/1.0 listener for its selectors
loop, answering `GET /metrics` with what exporter.render_metrics renders, `/healthz`
and `/readyz`.  A /metrics or /readyz request may be parked for a bounded time
(`wait_limit`, 0.5 s) while the supervisor asks worker slot 0 for fresh queue numbers;
`flush()` answers it once they arrived or the time is up, so the queue gauges are read
on scrape, never older than the scrape unless Redis is slow or away (then
`stagedoor_queue_status_timestamp_seconds` says how old).

No thread (prometheus_client.start_http_server would start one, and the supervisor
forks at any moment), no DNS (only an IP address or 'localhost'), each request
bounded by a short timeout.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import math
import socket
import time
from collections.abc import Callable

from .exporter import CONTENT_TYPE

log = logging.getLogger("stagedoor.exporter")

__all__ = ["MetricsBindError", "MetricsEndpoint", "Probe"]


class MetricsBindError(RuntimeError):
    """The metrics endpoint cannot listen on the address; the message is one line."""



_STATUS_TEXT = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                500: "Internal Server Error", 503: "Service Unavailable"}


def _numeric_host(host: str) -> str:
    """No DNS in the supervisor: only an IP address (or 'localhost') is accepted."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise MetricsBindError(f"metrics host {host!r}: expected an IP address such as "
                               "127.0.0.1") from None


class Probe:
    """What /readyz answers: ready or not, and one line saying why."""

    __slots__ = ("ok", "reason")

    def __init__(self, ok: bool, reason: str) -> None:
        self.ok = ok
        self.reason = reason


class _Parked:
    __slots__ = ("conn", "deadline", "head_only", "path")

    def __init__(self, conn: socket.socket, path: bytes, head_only: bool,
                 deadline: float) -> None:
        self.conn = conn
        self.path = path
        self.head_only = head_only
        self.deadline = deadline


class MetricsEndpoint:
    """A non-blocking HTTP/1.0 listener for a selectors loop: /metrics, /healthz, /readyz.

    Wiring it into the supervisor (no thread, no event loop):

        endpoint = MetricsEndpoint(settings.metrics_host, settings.metrics_port)
        sel.register(endpoint, selectors.EVENT_READ, "metrics")   # has fileno()
        ...
        for key, _ in sel.select(min(tick, endpoint.wait_time())):
            if key.data == "metrics":
                endpoint.handle_readable(render, ready=probe, refresh=ask_slot_0)
        endpoint.flush(render, ready=probe, fresh=numbers_arrived)
        ...
        sel.unregister(endpoint); endpoint.close()

    In a forked worker, call `endpoint.close()` first thing: the child inherits the
    listening fd, and if it outlives the supervisor the port stays taken.

    `handle_readable` accepts at most `max_per_wakeup` waiting connections.  The request
    head is read with `timeout` seconds for each connection as a whole (default 0.2 s),
    so a slow or silent client costs the loop at most that.  /healthz answers 200 "ok"
    at once: the process is up and its loop turns.  /metrics and /readyz are answered
    at once, unless `refresh()` returns True (it asked for fresh queue numbers): then
    the connection is parked until `flush(..., fresh=True)` or `wait_limit` seconds
    (default 0.5 s), whichever comes first.  /readyz is 200 when `ready()` says so, else
    503 with its reason.  Paths other than these get 404, methods other than GET/HEAD
    405, a render that raises 500 (logged).  It never raises for a client's misbehaviour.

    Raises MetricsBindError (one line) if the address cannot be bound.  Port 0 binds
    a free port; see `port`.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 0.2,
                 max_per_wakeup: int = 8, backlog: int = 16, wait_limit: float = 0.5,
                 max_parked: int = 32) -> None:
        self.timeout = timeout
        self.max_per_wakeup = max_per_wakeup
        self.wait_limit = wait_limit
        self.max_parked = max_parked
        self._parked: list[_Parked] = []
        addr = _numeric_host(host)
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((addr, port))
            sock.listen(backlog)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            where = f"[{addr}]:{port}" if family == socket.AF_INET6 else f"{addr}:{port}"
            raise MetricsBindError(f"cannot listen for metrics on {where}: "
                                   f"{e.strerror or e}") from None
        self._sock: socket.socket | None = sock
        self.host = addr
        self.port = int(sock.getsockname()[1])

    # selectors wants fileno(); it must stay valid while registered.
    def fileno(self) -> int:
        if self._sock is None:
            raise ValueError("metrics endpoint is closed")
        return self._sock.fileno()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        for parked in self._parked:
            parked.conn.close()
        self._parked.clear()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_time(self, now: float | None = None) -> float:
        """Seconds until a parked request is due (inf when none is parked)."""
        if not self._parked:
            return math.inf
        now = time.monotonic() if now is None else now
        return max(0.0, min(p.deadline for p in self._parked) - now)

    @property
    def parked(self) -> int:
        return len(self._parked)

    def handle_readable(self, render: Callable[[], bytes], *,
                        ready: Callable[[], Probe] | None = None,
                        refresh: Callable[[], bool] | None = None) -> int:
        """Accept and answer (or park) the connections waiting now; returns how many."""
        if self._sock is None:
            return 0
        served = 0
        for _ in range(self.max_per_wakeup):
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:  # EMFILE, ECONNABORTED...: try again on the next wakeup
                log.warning("metrics endpoint: accept failed: %s", e)
                break
            served += 1
            try:
                request = self._request(conn)
                if request is None:
                    conn.close()
                    continue
                path, head_only = request
                if (path in (b"/metrics", b"/readyz") and refresh is not None
                        and len(self._parked) < self.max_parked and refresh()):
                    self._parked.append(_Parked(conn, path, head_only,
                                                time.monotonic() + self.wait_limit))
                    continue
                self._answer(conn, self._respond(path, render, ready), head_only, path)
            except OSError:  # a client that went away or was too slow: nothing to do
                conn.close()
        return served

    def flush(self, render: Callable[[], bytes], *, ready: Callable[[], Probe] | None = None,
              fresh: bool = False) -> int:
        """Answer parked requests: all of them when `fresh`, else those past their time."""
        if not self._parked:
            return 0
        now = time.monotonic()
        due = [p for p in self._parked if fresh or p.deadline <= now]
        self._parked = [p for p in self._parked if p not in due]
        response: tuple[int, bytes] | None = None
        for p in due:
            try:
                if p.path == b"/metrics":  # one render for every scrape parked on it
                    response = response or self._respond(p.path, render, ready)
                    self._answer(p.conn, response, p.head_only, p.path)
                else:
                    self._answer(p.conn, self._respond(p.path, render, ready), p.head_only,
                                 p.path)
            except OSError:
                p.conn.close()
        return len(due)

    def _request(self, conn: socket.socket) -> tuple[bytes, bool] | None:
        """(path, head only) of a GET/HEAD, or None after answering anything else."""
        deadline = time.monotonic() + self.timeout
        head = _read_head(conn, deadline)
        if head is None:
            return None
        line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0]
        parts = line.split()
        if len(parts) < 2:
            self._answer(conn, (400, b"bad request\n"), False)
            return None
        method, target = parts[0], parts[1]
        if method not in (b"GET", b"HEAD"):
            self._answer(conn, (405, b"method not allowed\n"), False)
            return None
        return target.split(b"?", 1)[0], method == b"HEAD"

    @staticmethod
    def _respond(path: bytes, render: Callable[[], bytes],
                 ready: Callable[[], Probe] | None) -> tuple[int, bytes]:
        if path == b"/healthz":
            return 200, b"ok\n"
        if path == b"/readyz":
            if ready is None:
                return 404, b"not found: this endpoint has no readiness check\n"
            probe = ready()
            return (200 if probe.ok else 503), probe.reason.encode() + b"\n"
        if path != b"/metrics":
            return 404, b"not found: try /metrics, /healthz or /readyz\n"
        try:
            return 200, render()
        except Exception:
            log.exception("metrics endpoint: render failed")
            return 500, b"render failed\n"

    def _answer(self, conn: socket.socket, response: tuple[int, bytes], head_only: bool,
                path: bytes = b"") -> None:
        status, body = response
        ctype = CONTENT_TYPE if status == 200 and path == b"/metrics" else "text/plain"
        headers = (f"HTTP/1.0 {status} {_STATUS_TEXT[status]}\r\n"
                   f"Content-Type: {ctype}\r\n"
                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        with conn:
            conn.settimeout(self.timeout)
            conn.sendall(headers if head_only else headers + body)
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)


def _read_head(conn: socket.socket, deadline: float, limit: int = 8192) -> bytes | None:
    """The request head (up to the blank line), or None if the client is too slow."""
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data and len(data) < limit:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        conn.settimeout(remaining)
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            return None
        if not chunk:
            break
        data += chunk
    return data or None
