"""What the supervisor tells the world: systemd's STATUS= line, the periodic resource
log line, the --status-file JSON, and the Prometheus metrics aggregated over workers.

Reads the supervisor's state, changes none of it (except its own rate limits).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import psutil

from ..telemetry.endpoint import Probe
from ..telemetry.exporter import build_labels, empty_totals, render_metrics, retire

if TYPE_CHECKING:
    from ..config import Settings
    from .pool import Pool
    from .state import Handle, Options
    from .systemd import Notifier

log = logging.getLogger("stagedoor.supervisor")

STATUS_EVERY = 1.0      # most often a changed STATUS= goes to systemd
LOG_EVERY = 60.0        # the periodic resource log line
METRICS_WAIT = 0.5      # a scrape waits at most this for fresh queue numbers
READY_QUEUE_AGE = 15.0  # /readyz: queue numbers older than this mean Redis is away


def total(snap: dict[str, Any], counter: str) -> int:
    return int(sum((snap.get("counters") or {}).get(counter, {}).values()))


def redis_oom(handles: Iterable[Handle]) -> bool:
    """A worker reports Redis refusing writes for memory (its redis_oom gauge)."""
    return any((h.stats.get("gauges") or {}).get("redis_oom") for h in handles)


def paused(handles: Iterable[Handle]) -> bool:
    """A worker saw the fleet-wide pause flag at its last heartbeat (its paused gauge;
    worker/presence.py): the fleet reads nothing new until `stagedoor resume`."""
    return any((h.stats.get("gauges") or {}).get("paused") for h in handles)


def cpu_percent(h: Handle) -> float:
    """Percent of one CPU the worker and its render process used since the last look
    (over 100 when both, or several threads, ran at once)."""
    assert h.family is not None
    now, secs = time.monotonic(), h.family.cpu_seconds()
    then, before = h.cpu_seen
    h.cpu_seen = (now, secs)
    return 100.0 * (secs - before) / (now - then) if now > then else 0.0


class Reported(Protocol):
    """What the reporter reads of the supervisor (loop.py's Supervisor is one): the
    reporter sits below the loop that drives it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def options(self) -> Options: ...

    @property
    def pool(self) -> Pool: ...

    @property
    def notifier(self) -> Notifier: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def reloading(self) -> bool: ...

    @property
    def exit_code(self) -> int | None: ...


class Reporter:
    def __init__(self, sup: Reported, now: float) -> None:
        self.sup = sup
        self.next_status = 0.0
        self.last_status = ""
        self.next_log = now + LOG_EVERY
        self.last_status_file = b""
        self.queue_asked = -math.inf  # monotonic time a scrape last asked for queue numbers
        self.build: dict[str, str] | None = None

    def summary(self) -> str:
        sup = self.sup
        pool = sup.pool
        ready = sum(1 for s in pool.slots.values() if s.current is not None and s.current.ready)
        live = list(pool.handles.values())
        handled = total(pool.retired, "handled") + sum(total(h.stats, "handled") for h in live)
        rss = [h.rss for h in live if h.rss]
        text = f"workers {ready}/{len(pool.slots)} ready, handled {handled}, " \
               f"restarts {pool.restarts}"
        if rss:
            text += f", rss {sum(rss) / 2**20:.1f} MB (max {max(rss) / 2**20:.1f})"
        cpu = sum(h.cpu for h in live)
        if live:
            text += f", cpu {cpu:.0f}%"
        if redis_oom(live):
            text = "Redis out of memory (writes refused), waiting: " + text
        if paused(live):
            text = "paused (stagedoor resume to read again): " + text
        return text

    def report(self, now: float) -> None:
        sup = self.sup
        pool = sup.pool
        if now >= self.next_status:
            for h in pool.handles.values():
                if h.family is not None:
                    with contextlib.suppress(psutil.Error):
                        h.cpu = cpu_percent(h)
            text = self.summary()
            if sup.stopping:
                text = "stopping: " + text
            if text != self.last_status:
                sup.notifier.status(text)
                self.last_status = text
            self.next_status = now + STATUS_EVERY
        if now >= self.next_log:
            self.next_log = now + LOG_EVERY
            per = ", ".join(f"{h.slot}:{h.pid} {h.rss / 2**20:.1f}MB {h.cpu:.0f}%"
                            for h in sorted(pool.handles.values(), key=lambda x: x.slot))
            log.info("%s; per worker: %s", self.summary(), per)
        self.write_status_file()

    def status(self) -> dict[str, Any]:
        """Who is running, for --status-file (monitoring scripts and the tests)."""
        sup = self.sup
        pool = sup.pool
        return {
            "pid": os.getpid(),
            "ready": pool.ever_ready,
            "stopping": sup.stopping,
            "reloading": sup.reloading,
            "restarts": pool.restarts,
            "recycled": pool.recycled,
            "redis_oom": redis_oom(pool.handles.values()),
            "paused": paused(pool.handles.values()),
            "handled": total(pool.retired, "handled")
            + sum(total(h.stats, "handled") for h in pool.handles.values()),
            "slots": {str(k): {"pid": s.current.pid if s.current else None,
                               "ready": bool(s.current and s.current.ready),
                               "consumer": sup.settings.consumer_name(k),
                               "replacement": s.replacement.pid if s.replacement else None}
                      for k, s in sorted(pool.slots.items())},
            "processes": sorted(({"pid": h.pid, "slot": h.slot, "role": h.role,
                                  "ready": h.ready, "rss": h.rss, "held": h.held}
                                 for h in pool.handles.values()), key=lambda d: d["pid"]),
        }

    def write_status_file(self, final: bool = False) -> None:
        path = self.sup.options.status_file
        if not path:
            return
        status = self.status()
        if final:
            status["exit_code"] = self.sup.exit_code
        data = orjson.dumps(status)
        if data == self.last_status_file:
            return
        self.last_status_file = data
        tmp = f"{path}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as e:
            log.warning("cannot write status file %s: %s", path, e)

    def render_metrics(self) -> bytes:
        sup = self.sup
        pool = sup.pool
        workers = {h.slot: h.stats for h in pool.handles.values() if h.role != "retiring"}
        # A copy all the way down: pool.retired must only grow when a worker exits.
        retired = retire(empty_totals(), pool.retired)
        for h in pool.handles.values():  # a retiring worker's counters still count
            if h.role == "retiring":
                retire(retired, h.stats)
        extra = {"workers_ready": float(self.ready_count()),
                 "workers_wanted": float(len(pool.slots)),
                 "worker_rss_bytes": float(sum(h.rss for h in pool.handles.values()))}
        processes: dict[int, dict[str, float]] = {}
        for slot in pool.slots.values():
            cur = slot.current
            if cur is None:
                continue
            row = processes[slot.index] = {"rss_bytes": float(cur.rss)}
            if cur.family is not None:
                with contextlib.suppress(psutil.Error):
                    row["cpu_seconds"] = cur.family.cpu_seconds()
        if self.build is None:
            self.build = build_labels()
        s = sup.settings
        out: bytes = render_metrics(workers, retired, pool.queue, pool.restarts,
                                    extra_gauges=extra, stream=s.stream, maxlen=s.maxlen,
                                    processes=processes, build=self.build)
        return out

    def ready_count(self) -> int:
        return sum(1 for s in self.sup.pool.slots.values()
                   if s.current is not None and s.current.ready)

    # -- fresh queue numbers for a scrape, and /readyz ---------------------------------------
    def fresh(self) -> bool:
        """The queue numbers arrived after the last time a scrape asked for them."""
        return self.sup.pool.queue_at >= self.queue_asked

    def ask_for_queue(self) -> bool:
        """A scrape wants fresh queue numbers: ask slot 0's worker (it reads them), one
        byte down its lifeline.  True when the answer is worth waiting for (asked now,
        or a question is already on its way: one answers every scrape parked on it)."""
        now = time.monotonic()
        pool = self.sup.pool
        if self.queue_asked > pool.queue_at and now - self.queue_asked < METRICS_WAIT:
            return True
        slot = pool.slots.get(0)
        h = slot.current if slot is not None else None
        if h is None or not h.ready or not h.proc.ask(b"q"):
            return False
        self.queue_asked = now
        return True

    def probe(self) -> Probe:
        """/readyz: every wanted worker ready, and Redis answered the last question."""
        sup = self.sup
        ready, wanted = self.ready_count(), len(sup.pool.slots)
        if sup.stopping:
            return Probe(False, "stopping")
        if ready < wanted:
            return Probe(False, f"workers {ready}/{wanted} ready")
        if paused(sup.pool.handles.values()):
            # Alive and well, but taking no work by the operator's word: not ready.
            return Probe(False, f"paused: workers {ready}/{wanted} ready, reading nothing "
                                "new until `stagedoor resume`")
        if not self.fresh() or time.monotonic() - sup.pool.queue_at > READY_QUEUE_AGE:
            return Probe(False, f"workers {ready}/{wanted} ready, but Redis did not answer "
                                "the queue status in time")
        return Probe(True, f"workers {ready}/{wanted} ready, Redis answered")
