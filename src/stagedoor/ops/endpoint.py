"""The supervisor's metrics endpoint: a non-blocking HTTP/1.0 listener for its selectors
loop, answering `GET /metrics` inline with what exporter.render_metrics renders.

No thread (prometheus_client.start_http_server would start one, and the supervisor
forks at any moment), no DNS (only an IP address or 'localhost'), each request
bounded by a short timeout.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import time
from collections.abc import Callable

from .exporter import CONTENT_TYPE

log = logging.getLogger("stagedoor.exporter")

__all__ = ["MetricsBindError", "MetricsEndpoint"]


class MetricsBindError(RuntimeError):
    """The metrics endpoint cannot listen on the address; the message is one line."""


_STATUS_TEXT = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                500: "Internal Server Error"}


def _numeric_host(host: str) -> str:
    """No DNS in the supervisor: only an IP address (or 'localhost') is accepted."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise MetricsBindError(f"metrics host {host!r}: expected an IP address such as "
                               "127.0.0.1") from None


class MetricsEndpoint:
    """A non-blocking HTTP/1.0 `GET /metrics` listener for a selectors loop.

    Wiring it into the supervisor (no thread, no event loop):

        endpoint = MetricsEndpoint(settings.metrics_host, settings.metrics_port)
        sel.register(endpoint, selectors.EVENT_READ, "metrics")   # has fileno()
        ...
        for key, _ in sel.select(timeout):
            if key.data == "metrics":
                endpoint.handle_readable(lambda: render_metrics(
                    workers, retired, queue, restarts))
        ...
        sel.unregister(endpoint); endpoint.close()

    In a forked worker, call `endpoint.close()` first thing: the child inherits the
    listening fd, and if it outlives the supervisor the port stays taken.

    `handle_readable` accepts at most `max_per_wakeup` waiting connections and serves
    each inline: the request head is read and the response written with
    `timeout` seconds for each connection as a whole (default 0.2 s), so a slow or
    silent client costs the loop at most that.  Paths other than /metrics get 404,
    methods other than GET/HEAD 405, a render that raises 500 (logged).  It never
    raises for a client's misbehaviour.

    Raises MetricsBindError (one line) if the address cannot be bound.  Port 0 binds
    a free port; see `port`.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 0.2,
                 max_per_wakeup: int = 8, backlog: int = 16) -> None:
        self.timeout = timeout
        self.max_per_wakeup = max_per_wakeup
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
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def handle_readable(self, render: Callable[[], bytes]) -> int:
        """Accept and answer the connections waiting now; returns how many were served."""
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
            # A client that went away or was too slow: nothing to do but close.
            with conn, contextlib.suppress(OSError):
                self._serve(conn, render)
            served += 1
        return served

    def _serve(self, conn: socket.socket, render: Callable[[], bytes]) -> None:
        deadline = time.monotonic() + self.timeout
        head = _read_head(conn, deadline)
        if head is None:
            return
        status, body, head_only = self._respond(head, render)
        headers = (f"HTTP/1.0 {status} {_STATUS_TEXT[status]}\r\n"
                   f"Content-Type: {CONTENT_TYPE if status == 200 else 'text/plain'}\r\n"
                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        conn.settimeout(max(0.001, deadline - time.monotonic()))
        conn.sendall(headers if head_only else headers + body)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_WR)

    def _respond(self, head: bytes, render: Callable[[], bytes]) -> tuple[int, bytes, bool]:
        line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0]
        parts = line.split()
        if len(parts) < 2:
            return 400, b"bad request\n", False
        method, target = parts[0], parts[1]
        path = target.split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return 405, b"method not allowed\n", False
        if path != b"/metrics":
            return 404, b"not found: try /metrics\n", method == b"HEAD"
        try:
            body = render()
        except Exception:
            log.exception("metrics endpoint: render failed")
            return 500, b"render failed\n", method == b"HEAD"
        return 200, body, method == b"HEAD"


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
