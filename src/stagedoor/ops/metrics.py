"""What one worker counts, in a form that crosses the heartbeat pipe.

Workers do not serve metrics themselves: a worker process is forked, recycled and
respawned, and a scrape target that moves is useless.  Each worker keeps these plain
counters and sends a snapshot with every heartbeat; the supervisor sums the
snapshots of its live workers (plus what dead ones had sent) and exports them.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

# Handler duration buckets in seconds: from a no-op (~50 us) to the seed's 4 s render.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                    1.0, 2.5, 5.0, 10.0, 30.0)
COUNTERS = ("handled", "failed", "retried", "dead_lettered", "reclaimed", "deleted",
            "duplicates", "recovered",
            # characters no configured font has, drawn as a replacement mark (render)
            "missing_glyphs")


class WorkerStats:
    """Counters by kind, a duration histogram by kind, and gauges."""

    __slots__ = ("counters", "durations", "gauges")

    def __init__(self) -> None:
        self.counters: dict[str, Counter[str]] = {name: Counter() for name in COUNTERS}
        # kind -> [bucket counts..., +Inf count, sum]
        self.durations: dict[str, list[float]] = {}
        self.gauges: dict[str, float] = {"in_flight": 0}

    def inc(self, name: str, kind: str = "", n: int = 1) -> None:
        self.counters[name][kind] += n

    def observe(self, kind: str, seconds: float) -> None:
        row = self.durations.get(kind)
        if row is None:
            row = self.durations[kind] = [0.0] * (len(DURATION_BUCKETS) + 2)
        row[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        row[-1] += seconds

    def total(self, name: str) -> int:
        return sum(self.counters[name].values())

    def snapshot(self) -> dict[str, Any]:
        return {"counters": {k: dict(v) for k, v in self.counters.items() if v},
                "durations": {k: list(v) for k, v in self.durations.items()},
                "gauges": dict(self.gauges)}
