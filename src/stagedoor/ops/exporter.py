"""Prometheus metrics for the supervisor: render text from snapshots, serve it inline.

The supervisor forks workers at any moment, so it must never own a thread, an event
loop or a Redis connection.  That rules out prometheus_client.start_http_server (a
thread).  Instead:

* Workers count (stagedoor.metrics.WorkerStats) and send `snapshot()` with every
  heartbeat.  Worker slot 0 also sends the last `stagedoor.inspect.aqueue_status`
  dict, taken every few seconds.  The supervisor keeps the last of each.
* `render_metrics(...)` sums them into Prometheus text exposition.  It is a pure
  function of plain dicts: no I/O, no global registry, nothing started.
* `MetricsEndpoint` is a non-blocking listening socket for the supervisor's own
  `selectors` loop: when it is readable, `handle_readable(render)` accepts and
  answers a few tiny HTTP/1.0 requests inline, each bounded by a short timeout.

Counters never go backwards when a worker is replaced: when a worker exits, fold its
last snapshot into `retired` with `retire(retired, snapshot)` and drop it from
`workers`.  Counts made after its last heartbeat (at most one interval) are lost,
which only makes the counter rise a little less; it never falls.  To count workers
that are still running but no longer in `workers` (retiring during a rolling
restart), merge into a COPY, never into the kept totals (that would add them again
on every scrape):

    totals = retire(empty_totals(), retired)        # a deep copy
    for snap in retiring_snapshots:
        retire(totals, snap)
    render_metrics(live, totals, queue, restarts)
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import math
import re
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from .inspect import queue_gauges
from .metrics import COUNTERS, DURATION_BUCKETS

__all__ = ["CONTENT_TYPE", "MetricsBindError", "MetricsEndpoint", "empty_totals",
           "render_metrics", "retire", "sum_snapshots"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_ROW = len(DURATION_BUCKETS) + 2  # per-bucket counts..., +Inf count, sum
_EMPTY: Mapping[str, float] = MappingProxyType({})
_BAD_NAME = re.compile(r"[^a-zA-Z0-9_:]")

_COUNTER_HELP = {
    "handled": "Jobs whose handler returned (acked).",
    "failed": "Jobs whose handler failed for good (dead-lettered after the policy).",
    "retried": "Retries of a transient failure inside one delivery.",
    "dead_lettered": "Entries moved to the dead-letter stream (failed, malformed, poison).",
    "reclaimed": "Entries taken over from idle consumers by XAUTOCLAIM.",
    "deleted": "Pending entries found trimmed (no fields): acked, never handled.",
    "duplicates": "Jobs skipped because their outbox_id was already done.",
    "recovered": "Entries re-read from this consumer's own pending list at start.",
}
_QUEUE_HELP = {
    "queue_age_seconds": "Age of the oldest undelivered entry, from its id (0: none waiting).",
    "pending": "Entries delivered and not yet acknowledged (XPENDING).",
    "lag": "Entries not yet delivered to the group, as Redis counts them (XINFO GROUPS).",
    "dead_letter_length": "Entries in the dead-letter stream.",
    "stream_length": "Entries in the job stream.",
    "trimmed_backlog": "1 when entries the group never delivered were trimmed away.",
    "trimmed_undelivered_entries": "Never-delivered entries trimmed, per the group's counters.",
    "oldest_pending_age_seconds": "Age, from its id, of the oldest pending entry.",
}


class MetricsBindError(RuntimeError):
    """The metrics endpoint cannot listen on the address; the message is one line."""


# -- summing snapshots ---------------------------------------------------------------------


def empty_totals() -> dict[str, Any]:
    """The shape of `retired`: counters and durations, no gauges."""
    return {"counters": {}, "durations": {}}


def _add_counters(into: dict[str, dict[str, float]], counters: Any) -> None:
    if not isinstance(counters, Mapping):
        return
    for name, by_kind in counters.items():
        if not isinstance(by_kind, Mapping):
            continue
        row = into.setdefault(str(name), {})
        for kind, n in by_kind.items():
            if isinstance(n, int | float) and math.isfinite(n):
                row[str(kind)] = row.get(str(kind), 0) + n


def _add_durations(into: dict[str, list[float]], durations: Any) -> None:
    if not isinstance(durations, Mapping):
        return
    for kind, row in durations.items():
        # A row from a build with other buckets would mislabel counts: leave it out.
        if not isinstance(row, list | tuple) or len(row) != _ROW:
            continue
        acc = into.setdefault(str(kind), [0.0] * _ROW)
        for i, v in enumerate(row):
            acc[i] += float(v)


def retire(retired: dict[str, Any], snapshot: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fold an exited worker's last snapshot into `retired` (in place; also returned)."""
    retired.setdefault("counters", {})
    retired.setdefault("durations", {})
    if snapshot:
        _add_counters(retired["counters"], snapshot.get("counters"))
        _add_durations(retired["durations"], snapshot.get("durations"))
    return retired


def sum_snapshots(workers: Iterable[Mapping[str, Any]], retired: Mapping[str, Any] | None
                  ) -> dict[str, Any]:
    """Live snapshots plus retired totals: {"counters", "durations", "gauges"}.

    Gauges are summed over live workers only (a dead worker has nothing in flight).
    """
    counters: dict[str, dict[str, float]] = {}
    durations: dict[str, list[float]] = {}
    gauges: dict[str, float] = {}
    if retired:
        _add_counters(counters, retired.get("counters"))
        _add_durations(durations, retired.get("durations"))
    for snap in workers:
        if not isinstance(snap, Mapping):
            continue
        _add_counters(counters, snap.get("counters"))
        _add_durations(durations, snap.get("durations"))
        for name, value in (snap.get("gauges") or {}).items():
            if isinstance(value, int | float) and math.isfinite(value):
                gauges[str(name)] = gauges.get(str(name), 0.0) + value
    return {"counters": counters, "durations": durations, "gauges": gauges}


# -- exposition ------------------------------------------------------------------------------


def _metric_name(name: str) -> str:
    name = _BAD_NAME.sub("_", name)
    if not name.startswith("stagedoor_"):
        name = "stagedoor_" + name
    return name


def _le(bound: float) -> str:
    return repr(float(bound))


class _Snapshot:
    """A one-shot Collector over precomputed families (for a private registry)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self._families)

    def describe(self) -> Iterable[Metric]:
        return iter(())


def _families(totals: Mapping[str, Any], queue: Mapping[str, Any] | None, restarts: int,
              alive: int, extra_gauges: Mapping[str, float]) -> list[Metric]:
    out: list[Metric] = []
    counters = totals["counters"]
    for name in (*COUNTERS, *sorted(set(counters) - set(COUNTERS))):
        fam = CounterMetricFamily(f"stagedoor_jobs_{_BAD_NAME.sub('_', name)}",
                                  _COUNTER_HELP.get(name, f"Jobs counted as {name}."),
                                  labels=["kind"])
        for kind, n in sorted(counters.get(name, {}).items()):
            fam.add_metric([kind], n)
        out.append(fam)

    hist = HistogramMetricFamily("stagedoor_handler_duration_seconds",
                                 "Handler run time by job kind.", labels=["kind"])
    for kind, row in sorted(totals["durations"].items()):
        buckets: list[tuple[str, float]] = []
        cumulative = 0.0
        for bound, n in zip(DURATION_BUCKETS, row, strict=False):
            cumulative += n
            buckets.append((_le(bound), cumulative))
        cumulative += row[len(DURATION_BUCKETS)]
        buckets.append(("+Inf", cumulative))
        hist.add_metric([kind], buckets, sum_value=row[-1])
    out.append(hist)

    gauges = dict(totals["gauges"])
    out.append(GaugeMetricFamily("stagedoor_in_flight", "Jobs running now, over live workers.",
                                 value=gauges.pop("in_flight", 0.0)))
    for name, value in sorted(gauges.items()):
        out.append(GaugeMetricFamily(_metric_name("worker_" + name),
                                     f"Worker gauge {name}, summed over live workers.",
                                     value=value))

    out.append(GaugeMetricFamily("stagedoor_queue_status_available",
                                 "1 when a worker has reported the queue's numbers.",
                                 value=1.0 if queue else 0.0))
    if queue:
        stamp = queue.get("time_ms")
        if isinstance(stamp, int | float):
            out.append(GaugeMetricFamily("stagedoor_queue_status_timestamp_seconds",
                                         "Redis time of the last queue status (staleness).",
                                         value=stamp / 1000))
        for key, value in sorted(queue_gauges(queue).items()):
            out.append(GaugeMetricFamily(f"stagedoor_{key}",
                                         _QUEUE_HELP.get(key, key.replace("_", " ")),
                                         value=value))

    out.append(CounterMetricFamily("stagedoor_worker_restarts",
                                   "Workers respawned by the supervisor.", value=restarts))
    out.append(GaugeMetricFamily("stagedoor_workers_alive", "Worker processes alive.",
                                 value=alive))
    taken: set[str] = set()
    unique: list[Metric] = []
    for family in out:  # a worker gauge may not shadow a metric of ours
        if family.name not in taken:
            taken.add(family.name)
            unique.append(family)
    for name, value in sorted(extra_gauges.items()):
        metric = _metric_name(name)
        if metric not in taken:
            taken.add(metric)
            unique.append(GaugeMetricFamily(metric, f"Supervisor gauge {name}.",
                                            value=float(value)))
    return unique


def render_metrics(workers: Mapping[int, Mapping[str, Any]], retired: Mapping[str, Any] | None,
                   queue: Mapping[str, Any] | None, restarts: int,
                   extra_gauges: Mapping[str, float] = _EMPTY) -> bytes:
    """Prometheus text exposition of everything the supervisor knows.

    workers: slot -> the last WorkerStats.snapshot() of each LIVE worker.
    retired: totals of workers that exited (see `retire`), or None/{}.
    queue: the last inspect.aqueue_status dict a worker sent, or None (then the queue
        gauges are left out and stagedoor_queue_status_available is 0).
    restarts: worker respawns so far (a counter: stagedoor_worker_restarts_total).
    extra_gauges: more supervisor gauges, name -> value ("stagedoor_" is prefixed).

    Output: stagedoor_jobs_<counter>_total{kind} for every metrics.COUNTERS name,
    stagedoor_handler_duration_seconds{kind} (metrics.DURATION_BUCKETS),
    stagedoor_in_flight, stagedoor_worker_<gauge> for other worker gauges,
    stagedoor_{queue_age_seconds, pending, lag, dead_letter_length, stream_length,
    trimmed_backlog, trimmed_undelivered_entries, oldest_pending_age_seconds},
    stagedoor_queue_status_{available,timestamp_seconds}, stagedoor_worker_restarts_total,
    stagedoor_workers_alive.
    """
    totals = sum_snapshots(workers.values(), retired)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(_families(totals, queue, restarts, len(workers),
                                          extra_gauges)))
    return bytes(generate_latest(registry))


# -- the endpoint -------------------------------------------------------------------------------


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
