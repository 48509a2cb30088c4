"""Prometheus metrics for the supervisor: render text from the workers' snapshots.

The supervisor forks workers at any moment, so it must never own a thread, an event
loop or a Redis connection.  That rules out prometheus_client.start_http_server (a
thread).  Instead:

* Workers count (stagedoor.telemetry.metrics.WorkerStats) and send `snapshot()` with every
  heartbeat.  Worker slot 0 also sends the last `stagedoor.telemetry.inspect.aqueue_status`
  dict, taken every few seconds.  The supervisor keeps the last of each.
* `render_metrics(...)` sums them into Prometheus text exposition.  It is a pure
  function of plain dicts: no I/O, no global registry, nothing started.
* `MetricsEndpoint` (endpoint.py) is a non-blocking listening socket for the
  supervisor's own `selectors` loop: /metrics, /healthz, /readyz, each request bounded
  by a short timeout; a scrape may wait (bounded) for fresh queue numbers.

Every series carries a `stream` label (the job stream's name), so two queues scraped
by one Prometheus never collide.

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

import importlib.util
import math
import platform
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

from ..version import __version__
from .inspect import queue_gauges
from .metrics import COUNTERS, DURATION_BUCKETS, WAIT_BUCKETS

__all__ = ["CONTENT_TYPE", "build_labels", "empty_totals", "render_metrics", "retire",
           "sum_snapshots"]


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_ROW = len(DURATION_BUCKETS) + 2  # per-bucket counts..., +Inf count, sum
_WAIT_ROW = len(WAIT_BUCKETS) + 2
_EMPTY: Mapping[str, float] = MappingProxyType({})
_BAD_NAME = re.compile(r"[^a-zA-Z0-9_:]")

_COUNTER_HELP = {
    "handled": "Jobs whose handler returned and that were acknowledged, by kind (jobs).",
    "failed": "Jobs whose handler failed for good and were dead-lettered by the policy, "
              "by kind (jobs).",
    "retried": "Retries of a transient handler failure inside one delivery, by kind "
               "(retries).",
    "dead_lettered": "Entries moved to the dead-letter stream (failed, malformed, poison), "
                     "by kind; 'invalid' when the kind is unknown (entries).",
    "reclaimed": "Entries taken over from idle consumers by XAUTOCLAIM (entries).",
    "deleted": "Pending entries found trimmed from the stream (no fields): acknowledged, "
               "never handled (entries).",
    "duplicates": "Jobs skipped because their outbox_id was already handled, by kind (jobs).",
    "recovered": "Entries re-read from a worker's own pending list after a restart or a "
                 "lost reply (entries).",
    "render_aborts": "render_tickets jobs whose render killed the worker's render process "
                     "while it ran alone; dead-lettered, by kind (jobs).",
    "render_hangs": "render_tickets jobs whose render had no result within render_timeout "
                    "while it ran alone in the render process, which was killed; "
                    "dead-lettered, by kind (jobs).",
    "render_deaths": "Deaths of the workers' render processes (a crash, a kill, or killed "
                     "for a hung render); the renders each had ran again, one at a time "
                     "(processes).",
}
_QUEUE_HELP = {
    "queue_age_seconds": "Age of the oldest undelivered entry, from its id, by Redis' clock; "
                         "0 when none waits, absent while its id is ahead of the clock "
                         "(seconds).",
    "stream_ids_ahead_seconds": "How far the stream's newest entry id is ahead of Redis' "
                                "clock: another producer's or a master's clock ran ahead, "
                                "and every later id keeps that time, so ids say nothing "
                                "of queue age until the clock catches up (seconds).",
    "pending": "Entries delivered to the group and not yet acknowledged, XPENDING (entries).",
    "lag": "Entries not yet delivered to the group, counted from the stream after its "
           "cursor (XINFO GROUPS' lag only where too many to count) (entries).",
    "dead_letter_length": "Entries in the dead-letter stream (entries).",
    "dead_letter_maxlen": "MAXLEN ~ of the dead-letter stream (dead_maxlen); beyond it the "
                          "oldest dead letters are trimmed (entries).",
    "stream_length": "Entries in the job stream, handled or not, XLEN (entries).",
    "trimmed_backlog": "1 while entries the group never delivered have been trimmed away, "
                       "else 0 (boolean).",
    "trimmed_undelivered_entries": "Never-delivered entries trimmed, from the group's "
                                   "counters (entries).",
    "oldest_pending_age_seconds": "Age, from its id, of the oldest delivered but "
                                  "unacknowledged entry (seconds).",
}
_SUPERVISOR_HELP = {
    "workers_ready": "Worker processes that reached Redis and take jobs (processes).",
    "workers_wanted": "Worker processes configured (--workers) (processes).",
    "worker_rss_bytes": "Resident memory of all live workers, each with its render "
                        "process, summed (bytes).",
}
_WORKER_GAUGE_HELP = {
    "redis_oom": "Live workers holding off because Redis refuses writes with OOM "
                 "(maxmemory reached) (processes).",
    "paused": "Live workers that see the fleet-wide pause flag and read nothing new "
              "(stagedoor pause / resume) (processes).",
    "pause_lost": "Live workers that stay paused because the pause flag disappeared "
                  "(lost with Redis's data, not resumed) (processes).",
    "name_held_elsewhere": "Live workers that read nothing because another process "
                           "holds their consumer name (processes).",
}


# -- summing snapshots ---------------------------------------------------------------------


def empty_totals() -> dict[str, Any]:
    """The shape of `retired`: counters and histograms, no gauges."""
    return {"counters": {}, "durations": {}, "waits": {}}


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


def _add_durations(into: dict[str, list[float]], durations: Any, width: int = _ROW) -> None:
    if not isinstance(durations, Mapping):
        return
    for kind, row in durations.items():
        # A row from a build with other buckets would mislabel counts: leave it out.
        if not isinstance(row, list | tuple) or len(row) != width:
            continue
        acc = into.setdefault(str(kind), [0.0] * width)
        for i, v in enumerate(row):
            acc[i] += float(v)


def retire(retired: dict[str, Any], snapshot: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fold an exited worker's last snapshot into `retired` (in place; also returned)."""
    retired.setdefault("counters", {})
    retired.setdefault("durations", {})
    retired.setdefault("waits", {})
    if snapshot:
        _add_counters(retired["counters"], snapshot.get("counters"))
        _add_durations(retired["durations"], snapshot.get("durations"))
        _add_durations(retired["waits"], snapshot.get("waits"), _WAIT_ROW)
    return retired


def sum_snapshots(workers: Iterable[Mapping[str, Any]], retired: Mapping[str, Any] | None
                  ) -> dict[str, Any]:
    """Live snapshots plus retired totals: {"counters", "durations", "waits", "gauges"}.

    Gauges are summed over live workers only (a dead worker has nothing in flight).
    """
    counters: dict[str, dict[str, float]] = {}
    durations: dict[str, list[float]] = {}
    waits: dict[str, list[float]] = {}
    gauges: dict[str, float] = {}
    if retired:
        _add_counters(counters, retired.get("counters"))
        _add_durations(durations, retired.get("durations"))
        _add_durations(waits, retired.get("waits"), _WAIT_ROW)
    for snap in workers:
        if not isinstance(snap, Mapping):
            continue
        _add_counters(counters, snap.get("counters"))
        _add_durations(durations, snap.get("durations"))
        _add_durations(waits, snap.get("waits"), _WAIT_ROW)
        for name, value in (snap.get("gauges") or {}).items():
            if isinstance(value, int | float) and math.isfinite(value):
                gauges[str(name)] = gauges.get(str(name), 0.0) + value
    return {"counters": counters, "durations": durations, "waits": waits, "gauges": gauges}


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


def _histogram(name: str, help_text: str, rows: Mapping[str, list[float]],
               bounds: tuple[float, ...]) -> Metric:
    hist = HistogramMetricFamily(name, help_text, labels=["kind"])
    for kind, row in sorted(rows.items()):
        buckets: list[tuple[str, float]] = []
        cumulative = 0.0
        for bound, n in zip(bounds, row, strict=False):
            cumulative += n
            buckets.append((_le(bound), cumulative))
        cumulative += row[len(bounds)]
        buckets.append(("+Inf", cumulative))
        hist.add_metric([kind], buckets, sum_value=row[-1])
    return hist


def _families(totals: Mapping[str, Any], queue: Mapping[str, Any] | None, restarts: int,
              alive: int, extra_gauges: Mapping[str, float], maxlen: int | None,
              processes: Mapping[int, Mapping[str, float]],
              build: Mapping[str, str] | None) -> list[Metric]:
    out: list[Metric] = []
    counters = dict(totals["counters"])
    # Not per job kind: jobs left pending because Redis refused writes (OOM).
    oom_jobs = sum(counters.pop("redis_oom", {}).values())
    for name in (*COUNTERS, *sorted(set(counters) - set(COUNTERS))):
        fam = CounterMetricFamily(f"stagedoor_jobs_{_BAD_NAME.sub('_', name)}",
                                  _COUNTER_HELP.get(name, f"Jobs counted as {name} (jobs)."),
                                  labels=["kind"])
        for kind, n in sorted(counters.get(name, {}).items()):
            fam.add_metric([kind], n)
        out.append(fam)

    out.append(_histogram("stagedoor_handler_duration_seconds",
                          "Handler run time of one attempt, by job kind (seconds).",
                          totals["durations"], DURATION_BUCKETS))
    out.append(_histogram("stagedoor_queue_wait_seconds",
                          "Time from a job's entry id (when Redis added it) to its handler's "
                          "start, by job kind (seconds).",
                          totals.get("waits") or {}, WAIT_BUCKETS))

    gauges = dict(totals["gauges"])
    out.append(GaugeMetricFamily("stagedoor_in_flight",
                                 "Jobs whose handler runs now, over live workers (jobs).",
                                 value=gauges.pop("in_flight", 0.0)))
    out.append(GaugeMetricFamily("stagedoor_redis_oom", _WORKER_GAUGE_HELP["redis_oom"],
                                 value=gauges.pop("redis_oom", 0.0)))
    out.append(CounterMetricFamily(
        "stagedoor_redis_oom_jobs", "Jobs a worker left pending because Redis refused writes "
        "for memory; they run again from its own pending list when it takes writes (jobs).",
        value=oom_jobs))
    renderers = {name: gauges.pop("renderer_" + name) for name in ("native", "reference")
                 if "renderer_" + name in gauges}
    if renderers:
        renderer = GaugeMetricFamily("stagedoor_workers_renderer",
                                "Live workers by the ticket renderer they run: native, or "
                                "reference (the pure-Python fallback, ~100x slower) "
                                "(processes).", labels=["renderer"])
        for name, value in sorted(renderers.items()):
            renderer.add_metric([name], value)
        out.append(renderer)
    for name, value in sorted(gauges.items()):
        out.append(GaugeMetricFamily(_metric_name("worker_" + name),
                                     _WORKER_GAUGE_HELP.get(
                                         name, f"Worker gauge {name}, summed over live "
                                         "workers."),
                                     value=value))

    out.append(GaugeMetricFamily("stagedoor_queue_status_available",
                                 "1 when a worker has reported the queue's numbers, else 0 "
                                 "(boolean).", value=1.0 if queue else 0.0))
    if maxlen is not None:
        out.append(GaugeMetricFamily("stagedoor_stream_maxlen",
                                     "MAXLEN ~ the producers trim the job stream to; "
                                     "undelivered entries beyond it are lost (entries).",
                                     value=float(maxlen)))
    if queue:
        stamp = queue.get("time_ms")
        if isinstance(stamp, int | float):
            out.append(GaugeMetricFamily("stagedoor_queue_status_timestamp_seconds",
                                         "Redis time when the queue gauges were read "
                                         "(Unix seconds); old when Redis is away.",
                                         value=stamp / 1000))
        for key, value in sorted(queue_gauges(queue).items()):
            out.append(GaugeMetricFamily(f"stagedoor_{key}",
                                         _QUEUE_HELP.get(key, key.replace("_", " ")),
                                         value=value))
        lost = (queue.get("trimmed_backlog") or {}).get("undelivered_trimmed")
        if isinstance(lost, int | float):
            out.append(CounterMetricFamily(
                "stagedoor_trimmed_unread", "Jobs trimmed from the stream before any worker "
                "read them (MAXLEN ~, XTRIM), counted in Redis: lost (jobs).", value=lost))
        dead_trimmed = (queue.get("dead") or {}).get("trimmed")
        if isinstance(dead_trimmed, int | float):
            out.append(CounterMetricFamily(
                "stagedoor_dead_letters_trimmed", "Dead letters trimmed from the dead-letter "
                "stream by MAXLEN ~ dead_maxlen, counted in Redis: gone (entries).",
                value=dead_trimmed))

    out.append(CounterMetricFamily("stagedoor_worker_restarts",
                                   "Workers respawned by the supervisor after a crash "
                                   "(restarts).", value=restarts))
    out.append(GaugeMetricFamily("stagedoor_workers_alive",
                                 "Worker processes alive, ready or not (processes).",
                                 value=alive))
    rss = GaugeMetricFamily("stagedoor_worker_resident_memory_bytes",
                            "Resident memory of the worker process in each slot, with "
                            "its render process's (bytes).",
                            labels=["slot"])
    cpu = CounterMetricFamily("stagedoor_worker_cpu_seconds",
                              "CPU time (user + system) of the worker process in each slot, "
                              "with its render process's; restarts at 0 with a new "
                              "worker process (seconds).", labels=["slot"])
    for slot, proc in sorted(processes.items()):
        if "rss_bytes" in proc:
            rss.add_metric([str(slot)], float(proc["rss_bytes"]))
        if "cpu_seconds" in proc:
            cpu.add_metric([str(slot)], float(proc["cpu_seconds"]))
    out += [rss, cpu]
    if build is not None:
        names = sorted(build)
        info = GaugeMetricFamily("stagedoor_build_info",
                                 "Always 1; the labels say which stagedoor, Python and "
                                 "renderer this supervisor runs.", labels=names)
        info.add_metric([str(build[k]) for k in names], 1.0)
        out.append(info)
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
            unique.append(GaugeMetricFamily(metric, _SUPERVISOR_HELP.get(
                name, f"Supervisor gauge {name}."), value=float(value)))
    return unique


def _with_stream(families: list[Metric], stream: str) -> list[Metric]:
    """Every sample gets stream=<name> first: two queues on one Prometheus never collide."""
    for family in families:
        family.samples = [sample._replace(labels={"stream": stream, **sample.labels})
                          for sample in family.samples]
    return families


def build_labels() -> dict[str, str]:
    """stagedoor_build_info's labels: version, Python, and which renderer is installed."""
    native = importlib.util.find_spec("stagedoor._render") is not None  # found, not loaded
    return {"version": __version__, "python": platform.python_version(),
            "renderer": "native" if native else "python"}


def render_metrics(workers: Mapping[int, Mapping[str, Any]], retired: Mapping[str, Any] | None,
                   queue: Mapping[str, Any] | None, restarts: int,
                   extra_gauges: Mapping[str, float] = _EMPTY, *, stream: str = "jobs",
                   maxlen: int | None = None,
                   processes: Mapping[int, Mapping[str, float]] = MappingProxyType({}),
                   build: Mapping[str, str] | None = None) -> bytes:
    """Prometheus text exposition of everything the supervisor knows.

    workers: slot -> the last WorkerStats.snapshot() of each LIVE worker.
    retired: totals of workers that exited (see `retire`), or None/{}.
    queue: the last inspect.aqueue_status dict a worker sent, or None (then the queue
        gauges are left out and stagedoor_queue_status_available is 0).
    restarts: worker respawns so far (a counter: stagedoor_worker_restarts_total).
    extra_gauges: more supervisor gauges, name -> value ("stagedoor_" is prefixed).
    stream: the value of the `stream` label every sample carries.
    maxlen: the stream's MAXLEN (stagedoor_stream_maxlen), if known.
    processes: slot -> {"rss_bytes", "cpu_seconds"} of the live worker in that slot.
    build: the labels of stagedoor_build_info (see `build_labels`), or None.

    Output: stagedoor_jobs_<counter>_total{kind} for every metrics.COUNTERS name,
    stagedoor_handler_duration_seconds{kind} (metrics.DURATION_BUCKETS),
    stagedoor_queue_wait_seconds{kind} (metrics.WAIT_BUCKETS), stagedoor_in_flight,
    stagedoor_redis_oom, stagedoor_worker_<gauge> for other worker gauges,
    stagedoor_{queue_age_seconds, pending, lag, dead_letter_length, stream_length,
    trimmed_backlog, trimmed_undelivered_entries, oldest_pending_age_seconds},
    stagedoor_dead_letter_maxlen, stagedoor_dead_letters_trimmed_total,
    stagedoor_stream_maxlen, stagedoor_queue_status_{available,timestamp_seconds},
    stagedoor_worker_restarts_total, stagedoor_workers_alive,
    stagedoor_worker_resident_memory_bytes{slot}, stagedoor_worker_cpu_seconds_total{slot},
    stagedoor_build_info{version,python,renderer}; all with {stream}.
    """
    totals = sum_snapshots(workers.values(), retired)
    registry = CollectorRegistry(auto_describe=False)
    families = _families(totals, queue, restarts, len(workers), extra_gauges, maxlen,
                         processes, build)
    registry.register(_Snapshot(_with_stream(families, stream)))
    return bytes(generate_latest(registry))
