"""Prometheus metrics for the supervisor: render text from the workers' snapshots.

The supervisor forks workers at any moment, so it must never own a thread, an event
loop or a Redis connection.  That rules out prometheus_client.start_http_server (a
thread).  Instead:

* Workers count (stagedoor.ops.metrics.WorkerStats) and send `snapshot()` with every
  heartbeat.  Worker slot 0 also sends the last `stagedoor.ops.inspect.aqueue_status`
  dict, taken every few seconds.  The supervisor keeps the last of each.
* `render_metrics(...)` sums them into Prometheus text exposition.  It is a pure
  function of plain dicts: no I/O, no global registry, nothing started.
* `MetricsEndpoint` (endpoint.py) is a non-blocking listening socket for the
  supervisor's own `selectors` loop: when it is readable, `handle_readable(render)`
  accepts and answers a few tiny HTTP/1.0 requests inline, each bounded by a short
  timeout.

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

import math
import re
from collections.abc import Iterable, Mapping
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

__all__ = ["CONTENT_TYPE", "empty_totals",
           "render_metrics", "retire", "sum_snapshots"]


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
