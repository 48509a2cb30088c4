"""The supervisor's metrics endpoint: a non-blocking HTTP/1.0 server inside its one
selectors loop, answering `GET /metrics` with what exporter.render_metrics renders,
`/healthz` and `/readyz`.  A /metrics or /readyz request may be parked for a bounded
time (`wait_limit`, 0.5 s) while the supervisor asks worker slot 0 for fresh queue
numbers; `tick()` answers it once they arrived or the time is up, so the queue gauges
are read on scrape, never older than the scrape unless Redis is slow or away (then
`stagedoor_queue_status_timestamp_seconds` says how old).

Design: non-blocking sockets in the supervisor's own selector, no thread.  The
supervisor has a no-threads rule (it forks at any moment, and a fork copies only the
calling thread: prometheus_client.start_http_server would start one), so the endpoint
cannot be "off the loop"; instead nothing it does can wait.  The listening socket and
every accepted connection are non-blocking and registered with the loop's selector;
each connection has its own input buffer (the request head, at most 8 KiB), output
buffer (the answer, sent as the socket takes it, EVENT_WRITE while it does not) and
a deadline (`timeout`, 10 s, from accept to the last byte out), after which it is
closed.  At most `max_connections` (256) are open at once; one more evicts the
oldest connection that has not sent its request yet, so a crowd of silent clients
can delay no one: /healthz answers in one loop turn, signals and dead workers are
seen at once (docs/benchmarks.md, "Why the code is the way it is").  No DNS: only an IP address
or 'localhost'.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import math
import selectors
import socket
import time
from collections.abc import Callable

from ..errors import StagedoorError
from .exporter import CONTENT_TYPE

log = logging.getLogger("stagedoor.exporter")

__all__ = ["MetricsBindError", "MetricsEndpoint", "Probe"]


class MetricsBindError(StagedoorError, RuntimeError):
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


class _Conn:
    """One client connection: its buffers, its deadline and where it is in its life."""

    __slots__ = ("deadline", "head_only", "inbuf", "opened", "out", "path", "sock", "state")

    def __init__(self, sock: socket.socket, now: float, deadline: float) -> None:
        self.sock = sock
        self.opened = now
        self.deadline = deadline
        self.inbuf = b""
        self.out = b""
        self.state = "reading"   # reading -> (parked ->) writing -> closed
        self.path = b""
        self.head_only = False


MAX_HEAD = 8192


class MetricsEndpoint:
    """A non-blocking HTTP/1.0 server in a selectors loop: /metrics, /healthz, /readyz.

    Wiring it into the supervisor (no thread, no event loop):

        endpoint = MetricsEndpoint(settings.metrics_host, settings.metrics_port)
        endpoint.attach(sel)            # registers its sockets as ("metrics", ...)
        ...
        for key, mask in sel.select(min(tick, endpoint.wait_time())):
            kind, what = key.data
            if kind == "metrics":
                endpoint.on_event(what, mask, render, ready=probe, refresh=ask_slot_0)
        endpoint.tick(render, ready=probe, fresh=numbers_arrived)
        ...
        endpoint.close()

    In a forked worker, call `endpoint.close()` first thing: the child inherits the
    listening fd and the open connections, and if it outlives the supervisor the port
    stays taken.

    /healthz answers 200 "ok" at once: the process is up and its loop turns.  /metrics
    and /readyz are answered at once, unless `refresh()` returns True (it asked for
    fresh queue numbers): then the request is parked until `tick(..., fresh=True)` or
    `wait_limit` seconds (default 0.5 s), whichever comes first; at most `max_parked`
    are parked, others are answered at once.  /readyz is 200 when `ready()` says so,
    else 503 with its reason.  Paths other than these get 404, methods other than
    GET/HEAD 405, a head that is not HTTP 400, a render that raises 500 (logged).  It
    never raises for a client's misbehaviour.

    Raises MetricsBindError (one line) if the address cannot be bound.  Port 0 binds
    a free port; see `port`.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 10.0,
                 max_connections: int = 256, max_per_wakeup: int = 64, backlog: int = 128,
                 wait_limit: float = 0.5, max_parked: int = 32) -> None:
        self.timeout = timeout
        self.max_connections = max_connections
        self.max_per_wakeup = max_per_wakeup
        self.wait_limit = wait_limit
        self.max_parked = max_parked
        self._conns: dict[int, _Conn] = {}
        self._selector: selectors.BaseSelector | None = None
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

    def fileno(self) -> int:
        if self._sock is None:
            raise ValueError("metrics endpoint is closed")
        return self._sock.fileno()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def attach(self, selector: selectors.BaseSelector) -> None:
        """Register the listening socket (and later each connection) with `selector`;
        its events carry ("metrics", None) for the listener, ("metrics", conn) else."""
        self._selector = selector
        selector.register(self.fileno(), selectors.EVENT_READ, ("metrics", None))

    def close(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn)
        if self._sock is not None:
            if self._selector is not None:
                with contextlib.suppress(KeyError, ValueError, RuntimeError, OSError):
                    self._selector.unregister(self._sock.fileno())
            self._sock.close()
            self._sock = None

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def parked(self) -> int:
        return sum(1 for c in self._conns.values() if c.state == "parked")

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def wait_time(self, now: float | None = None) -> float:
        """Seconds until a connection is due (a parked answer, a deadline); inf if none."""
        if not self._conns:
            return math.inf
        now = time.monotonic() if now is None else now
        return max(0.0, min(c.deadline for c in self._conns.values()) - now)

    # -- events ---------------------------------------------------------------------------
    def on_event(self, conn: _Conn | None, mask: int, render: Callable[[], bytes], *,
                 ready: Callable[[], Probe] | None = None,
                 refresh: Callable[[], bool] | None = None) -> None:
        """The selector says the listener (conn None) or a connection is ready."""
        if conn is None:
            self._accept()
        elif conn.state == "reading" and mask & selectors.EVENT_READ:
            self._read(conn, render, ready, refresh)
        elif conn.state == "writing" and mask & selectors.EVENT_WRITE:
            self._send(conn)

    def tick(self, render: Callable[[], bytes], *, ready: Callable[[], Probe] | None = None,
             fresh: bool = False, now: float | None = None) -> None:
        """Every loop turn: answer parked requests (all when `fresh`, else those past
        their wait), close connections past their deadline."""
        if not self._conns:
            return
        now = time.monotonic() if now is None else now
        response: tuple[int, bytes] | None = None
        for conn in list(self._conns.values()):
            if conn.state == "parked" and (fresh or conn.deadline <= now):
                conn.deadline = now + self.timeout
                if conn.path == b"/metrics":  # one render for every scrape parked on it
                    response = response or self._respond(conn.path, render, ready)
                    self._answer(conn, response)
                else:
                    self._answer(conn, self._respond(conn.path, render, ready))
            elif conn.state != "parked" and conn.deadline <= now:
                self._close(conn)  # too slow to ask or to take the answer

    # -- the parts ------------------------------------------------------------------------
    def _accept(self) -> None:
        if self._sock is None:
            return
        for _ in range(self.max_per_wakeup):
            try:
                sock, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # EMFILE, ECONNABORTED...: try again on the next wakeup
                log.warning("metrics endpoint: accept failed: %s", e)
                return
            sock.setblocking(False)
            if len(self._conns) >= self.max_connections and not self._evict():
                sock.close()
                continue
            now = time.monotonic()
            conn = _Conn(sock, now, now + self.timeout)
            try:
                if self._selector is not None:
                    self._selector.register(sock, selectors.EVENT_READ, ("metrics", conn))
            except (OSError, ValueError):
                sock.close()
                continue
            self._conns[sock.fileno()] = conn

    def _evict(self) -> bool:
        """Close the oldest connection that has not sent its request: room for a new one."""
        silent = [c for c in self._conns.values() if c.state == "reading"]
        if not silent:
            return False
        self._close(min(silent, key=lambda c: c.opened))
        return True

    def _read(self, conn: _Conn, render: Callable[[], bytes],
              ready: Callable[[], Probe] | None, refresh: Callable[[], bool] | None) -> None:
        try:
            chunk = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.inbuf += chunk
        head_done = b"\r\n\r\n" in conn.inbuf or b"\n\n" in conn.inbuf
        if not chunk and not conn.inbuf:
            self._close(conn)  # connected and left without a word
            return
        if not (head_done or not chunk or len(conn.inbuf) >= MAX_HEAD):
            return  # more to come
        request = self._parse(conn)
        if request is None:
            return
        path, head_only = request
        conn.path, conn.head_only = path, head_only
        if (path in (b"/metrics", b"/readyz") and refresh is not None
                and self.parked < self.max_parked and refresh()):
            conn.state = "parked"
            conn.deadline = time.monotonic() + self.wait_limit
            self._unwatch(conn)  # level-triggered: a parked socket must not spin the loop
            return
        self._answer(conn, self._respond(path, render, ready))

    def _parse(self, conn: _Conn) -> tuple[bytes, bool] | None:
        """(path, head only) of a GET/HEAD, or None after answering anything else."""
        line = conn.inbuf.split(b"\r\n", 1)[0].split(b"\n", 1)[0]
        parts = line.split()
        if len(parts) < 2:
            self._answer(conn, (400, b"bad request\n"))
            return None
        method, target = parts[0], parts[1]
        if method not in (b"GET", b"HEAD"):
            self._answer(conn, (405, b"method not allowed\n"))
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

    def _answer(self, conn: _Conn, response: tuple[int, bytes]) -> None:
        status, body = response
        ctype = CONTENT_TYPE if status == 200 and conn.path == b"/metrics" else "text/plain"
        headers = (f"HTTP/1.0 {status} {_STATUS_TEXT[status]}\r\n"
                   f"Content-Type: {ctype}\r\n"
                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        conn.out = headers if conn.head_only else headers + body
        conn.state = "writing"
        self._send(conn)
        if conn.state == "writing":  # the socket took part of it: the rest when writable
            self._watch(conn, selectors.EVENT_WRITE)

    def _send(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            self._close(conn)

    def _watch(self, conn: _Conn, events: int) -> None:
        if self._selector is None:
            return
        try:
            self._selector.modify(conn.sock, events, ("metrics", conn))
        except KeyError:
            self._selector.register(conn.sock, events, ("metrics", conn))

    def _unwatch(self, conn: _Conn) -> None:
        if self._selector is not None:
            with contextlib.suppress(KeyError, ValueError, RuntimeError, OSError):
                self._selector.unregister(conn.sock)

    def _close(self, conn: _Conn) -> None:
        if conn.state == "closed":
            return
        self._unwatch(conn)
        self._conns.pop(conn.sock.fileno(), None)
        conn.state = "closed"
        conn.sock.close()
