"""What one worker counts, in a form that crosses the heartbeat pipe.

Workers do not serve metrics themselves: a worker process is forked, recycled and
respawned, and a scrape target that moves is useless.  Each worker keeps these plain
counters and sends a snapshot with every heartbeat; the supervisor sums the
snapshots of its live workers (plus what dead ones had sent) and exports them.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from typing import Any

# Handler duration buckets in seconds: from a no-op (~50 us) to the seed's 4 s render.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                    1.0, 2.5, 5.0, 10.0, 30.0)
# Queue wait buckets in seconds (entry id -> handler start): from the seed's 2 ms target
# to an hour of backlog.
WAIT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
COUNTERS = ("handled", "failed", "retried", "dead_lettered", "reclaimed", "deleted",
            "duplicates", "recovered",
            # characters no configured font has, drawn as a replacement mark (render)
            "missing_glyphs",
            # orders printed with such marks (the log names the order and scripts)
            "missing_glyph_orders",
            # orders whose render killed the worker's render process (render_host.py),
            # orders whose render hung in it (killed after render_timeout), and deaths
            # of that process (each one's renders are run again, alone)
            "render_aborts", "render_hangs", "render_deaths")
# Counted per job kind; the others are per entry, before a kind is known (kind "").
KIND_COUNTERS = ("handled", "failed", "retried", "dead_lettered", "duplicates")
INVALID_KIND = "invalid"  # the label of entries whose kind is unknown or unparsable


class WorkerStats:
    """Counters by kind, duration and queue-wait histograms by kind, and gauges.

    `kinds`: the registered kinds, whose counters start at 0 so that every series
    exists from the first scrape (rate() and alerts need no first increment).
    """

    __slots__ = ("counters", "durations", "gauges", "waits")

    def __init__(self, kinds: Iterable[str] = ()) -> None:
        self.counters: dict[str, Counter[str]] = {name: Counter() for name in COUNTERS}
        # kind -> [bucket counts..., +Inf count, sum]
        self.durations: dict[str, list[float]] = {}
        self.waits: dict[str, list[float]] = {}
        # redis_oom: 1 while this worker holds off because Redis answers OOM (issue 12)
        self.gauges: dict[str, float] = {"in_flight": 0, "redis_oom": 0}
        self.declare(kinds)

    def declare(self, kinds: Iterable[str]) -> None:
        """Zero every counter of these kinds (and the per-entry ones) if not counted yet."""
        for name in KIND_COUNTERS:
            for kind in kinds:
                self.counters[name].setdefault(kind, 0)
        for name in set(COUNTERS) - set(KIND_COUNTERS):
            self.counters[name].setdefault("", 0)
        self.counters["dead_lettered"].setdefault(INVALID_KIND, 0)

    def inc(self, name: str, kind: str = "", n: int = 1) -> None:
        self.counters[name][kind] += n

    def observe(self, kind: str, seconds: float) -> None:
        row = self.durations.get(kind)
        if row is None:
            row = self.durations[kind] = [0.0] * (len(DURATION_BUCKETS) + 2)
        row[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        row[-1] += seconds

    def observe_wait(self, kind: str, seconds: float) -> None:
        """Time from the entry's id (when Redis added it) to its handler's start."""
        row = self.waits.get(kind)
        if row is None:
            row = self.waits[kind] = [0.0] * (len(WAIT_BUCKETS) + 2)
        if seconds < 0.0:
            seconds = 0.0
        row[bisect.bisect_left(WAIT_BUCKETS, seconds)] += 1
        row[-1] += seconds

    def total(self, name: str) -> int:
        return sum(self.counters[name].values())

    def snapshot(self) -> dict[str, Any]:
        return {"counters": {k: dict(v) for k, v in self.counters.items() if v},
                "durations": {k: list(v) for k, v in self.durations.items()},
                "waits": {k: list(v) for k, v in self.waits.items()},
                "gauges": dict(self.gauges)}
