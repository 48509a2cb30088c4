"""Per-kind figures of the last hour, for the console's Metrics tab: a fixed ring in Redis.

What is counted is what the exporter already counts (telemetry/metrics.WorkerStats): jobs
handled, failed, retried and dead-lettered by kind, and the handler-duration and
queue-wait histograms by kind, with the exporter's buckets.  The exporter's totals live
in each supervisor's memory and say nothing of "the last hour" across hosts; so each
worker also adds what it counted since its last beat into one of SLOTS per-minute
hashes in Redis:

    stagedoor:kinds:<stream>:<minute % 60>     hash: m -> the minute (epoch minutes),
                                               <kind>|h, |f, |r, |x -> jobs handled,
                                               failed, retried, dead-lettered,
                                               <kind>|d<i>, |w<i> -> bucket i's count,
                                               <kind>|ds, |ws -> sums in microseconds

at its presence beat (worker/presence.py: once a second at most), with one EVALSHA
and only when it counted something.  The script clears a slot that holds an older
minute before adding to it, so the ring is SLOTS keys whatever the traffic: bounded
by count (issue 36), never by time or volume.  The console reads the 60 hashes and
Redis TIME in one round trip, keeps the minutes of the last hour and sums them.

Percentiles come from bucket counts as Prometheus's histogram_quantile computes them
(linear interpolation inside the bucket holding the rank): an estimate whose error is
at most the width of that bucket, as in any Prometheus dashboard.

A worker that dies loses what it counted since its last beat (at most a second),
as the heartbeat does; a worker whose clock is off puts its counts in its own minute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import kinds_key
from .metrics import DURATION_BUCKETS, WAIT_BUCKETS, WorkerStats
from .records import Record, now_ms, pairs, pipeline, text

SLOTS = 60  # minutes kept: the last hour
# WorkerStats counter -> field code
COUNTS = {"handled": "h", "failed": "f", "retried": "r", "dead_lettered": "x"}
QUANTILES = (0.5, 0.95, 0.99)

# KEYS[1]: the minute's slot.  ARGV[1]: the minute; ARGV[2..]: field, increment, ...
ADD_LUA = """
local m = tonumber(ARGV[1])
local held = tonumber(redis.call('HGET', KEYS[1], 'm') or '-1')
if held > m then
  return 0
end
if held < m then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'm', m)
end
for i = 2, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return 1
"""


def totals(stats: WorkerStats) -> dict[str, int]:
    """Every per-kind figure this worker counted since it started, as ring fields."""
    out: dict[str, int] = {}
    for name, code in COUNTS.items():
        for kind, n in stats.counters[name].items():
            if kind and n:
                out[f"{kind}|{code}"] = int(n)
    for code, rows in (("d", stats.durations), ("w", stats.waits)):
        for kind, row in rows.items():
            for i, c in enumerate(row[:-1]):
                if c:
                    out[f"{kind}|{code}{i}"] = int(c)
            if row[-1] > 0:
                out[f"{kind}|{code}s"] = int(row[-1] * 1_000_000)
    return out


class Flusher:
    """Adds what a worker counted since its last flush into the ring (one EVALSHA)."""

    def __init__(self, settings: Settings, stats: WorkerStats) -> None:
        self.settings = settings
        self.stats = stats
        self.sent: dict[str, int] = {}
        self._script: Any = None

    def deltas(self) -> tuple[dict[str, int], dict[str, int]]:
        current = totals(self.stats)
        return current, {f: v - self.sent.get(f, 0) for f, v in current.items()
                         if v != self.sent.get(f, 0)}

    async def flush(self, client: aioredis.Redis, now_s: float) -> bool:
        """Send the deltas under the minute of `now_s` (this host's clock); False when
        there was nothing to send.  A failure raises and keeps the deltas for the next."""
        current, deltas = self.deltas()
        if not deltas:
            return False
        if self._script is None:
            self._script = client.register_script(ADD_LUA)
        minute = int(now_s // 60)
        args: list[Any] = [minute]
        for f, v in deltas.items():
            args += [f, v]
        await self._script(keys=[kinds_key(self.settings, minute % SLOTS)], args=args)
        self.sent = current
        return True


# -- reading the ring --------------------------------------------------------------------
def histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[float]
                       ) -> float | None:
    """Prometheus's histogram_quantile over per-bucket (not cumulative) counts: bucket i
    holds values <= bounds[i] (and above bounds[i-1]), the last count is +Inf's.  The
    rank's bucket is interpolated linearly from its lower bound (0 for the first); a
    rank in +Inf gives the highest finite bound.  None for no observation."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    for i, n in enumerate(counts):
        if seen + n >= rank and n > 0:
            if i >= len(bounds):
                return bounds[-1]
            lower = bounds[i - 1] if i > 0 else 0.0
            return lower + (bounds[i] - lower) * (rank - seen) / n
        seen += n
    return bounds[-1]


@dataclasses.dataclass
class KindFigures(Record):
    """One kind over the window: counts, and seconds (None: nothing observed)."""
    kind: str
    handled: int = 0
    failed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    runs: int = 0  # handler runs timed (retries and failures included)
    run_mean_s: float | None = None
    run_p50_s: float | None = None
    run_p95_s: float | None = None
    run_p99_s: float | None = None
    waited: int = 0  # jobs whose queue wait was measured
    wait_mean_s: float | None = None
    wait_p50_s: float | None = None
    wait_p95_s: float | None = None
    wait_p99_s: float | None = None
    # per minute, oldest first (SLOTS values): jobs handled, failed, and P95 run time
    per_minute_handled: list[int] = dataclasses.field(default_factory=list)
    per_minute_failed: list[int] = dataclasses.field(default_factory=list)
    per_minute_run_p95_s: list[float | None] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class KindWindow(Record):
    time_ms: int  # Redis TIME at the read
    first_minute: int  # epoch minutes of the window's first (oldest) minute
    minutes: int  # SLOTS
    kinds: list[KindFigures]


class _Acc:
    """One kind's sums while reading: per minute and over the window."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(COUNTS.values(), 0)
        self.d = [0] * (len(DURATION_BUCKETS) + 1)
        self.w = [0] * (len(WAIT_BUCKETS) + 1)
        self.ds = 0
        self.ws = 0
        self.minute_h = [0] * SLOTS
        self.minute_f = [0] * SLOTS
        self.minute_d = [[0] * (len(DURATION_BUCKETS) + 1) for _ in range(SLOTS)]


def _add(acc: _Acc, at: int, code: str, n: int) -> None:
    if code in acc.counts:
        acc.counts[code] += n
        if code == "h":
            acc.minute_h[at] += n
        elif code == "f":
            acc.minute_f[at] += n
    elif code == "ds":
        acc.ds += n
    elif code == "ws":
        acc.ws += n
    elif code[:1] in ("d", "w") and code[1:].isdigit():
        i = int(code[1:])
        row = acc.d if code[0] == "d" else acc.w
        if i < len(row):
            row[i] += n
            if code[0] == "d":
                acc.minute_d[at][i] += n


def summarise(now: int, hashes: Sequence[Mapping[str, Any]]) -> KindWindow:
    """The window ending at `now` (ms) from the ring's hashes (field -> value).  A
    minute ahead of Redis's clock (a worker's clock a little fast) counts as the last."""
    last = now // 60_000
    first = last - SLOTS + 1
    accs: dict[str, _Acc] = {}
    for h in hashes:
        try:
            minute = int(h.get("m", b""))
        except ValueError:
            continue  # not the ring's: a hand-written key
        if minute < first:
            continue  # older than the hour: the slot was not written since
        at = min(minute, last) - first
        for name, raw in h.items():
            kind, bar, code = name.rpartition("|")
            if not bar:
                continue
            try:
                n = int(raw)
            except ValueError:
                continue
            acc = accs.get(kind)
            if acc is None:  # not setdefault: an _Acc is 60 rows of buckets to build
                acc = accs[kind] = _Acc()
            _add(acc, at, code, n)
    kinds = []
    for kind in sorted(accs):
        a = accs[kind]
        runs, waited = sum(a.d), sum(a.w)
        f = KindFigures(kind=kind, handled=a.counts["h"], failed=a.counts["f"],
                        retried=a.counts["r"], dead_lettered=a.counts["x"],
                        runs=runs, waited=waited,
                        run_mean_s=a.ds / 1e6 / runs if runs else None,
                        wait_mean_s=a.ws / 1e6 / waited if waited else None,
                        per_minute_handled=a.minute_h, per_minute_failed=a.minute_f,
                        per_minute_run_p95_s=[histogram_quantile(0.95, DURATION_BUCKETS, m)
                                              for m in a.minute_d])
        for q, tag in zip(QUANTILES, ("p50", "p95", "p99"), strict=True):
            setattr(f, f"run_{tag}_s", histogram_quantile(q, DURATION_BUCKETS, a.d))
            setattr(f, f"wait_{tag}_s", histogram_quantile(q, WAIT_BUCKETS, a.w))
        kinds.append(f)
    return KindWindow(time_ms=now, first_minute=first, minutes=SLOTS, kinds=kinds)


async def window(client: aioredis.Redis, settings: Settings) -> KindWindow:
    """The last hour by kind: one round trip (TIME and the SLOTS hashes)."""
    replies = await pipeline(client, [("TIME",)] + [
        ("HGETALL", kinds_key(settings, i)) for i in range(SLOTS)])
    hashes = [{k: text(v) for k, v in pairs(r).items()} for r in replies[1:]
              if not isinstance(r, Exception)]
    return summarise(now_ms(replies[0]), hashes)
