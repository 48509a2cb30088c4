"""Redis refusing writes (OOM): stop taking work, say so once in a while, resume at once.

Under maxmemory with noeviction Redis still serves XREADGROUP and XACK but refuses
every write a handler makes (the idempotency lease, the order store, the dead-letter
XADD).  A worker that kept reading would take entries it cannot finish and strand
them on its pending list, to come back only through the 30 s reclaim; a worker that
logged every failure would write megabytes of tracebacks.  So:

- `enter()` (a handler's outcome, the dead-letter script, a start count or the boot's
  XGROUP CREATE answered OOM): the gauge redis_oom goes to 1, one warning line; each
  job left pending for memory counts (stagedoor_redis_oom_jobs_total).
- the reader calls `wait_clear()` before it reads again: a tiny write (SET with a
  short expiry on a key of our own) every backoff step up to 2 s, one line per
  `outage_log_interval` while it is refused, no traceback.
- once a write goes through, the reader re-reads its own pending list at once: the
  jobs that failed for memory run again now, not after claim_idle_ms.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

import redis
import redis.asyncio as aioredis

from ..backoff import Backoff, reconnect
from ..config import Settings
from ..stream import connection
from ..stream.errors import OOM_ADVICE, first_line, is_oom
from ..stream.keys import probe_key
from ..telemetry.metrics import WorkerStats

log = logging.getLogger("stagedoor.worker")

PROBE_TTL_MS = 10_000


class Outage:
    """Whether Redis refuses our writes now, and the wait until it takes them again."""

    def __init__(self, settings: Settings, cmd: aioredis.Redis, stats: WorkerStats,
                 consumer: str) -> None:
        self.settings = settings
        self.cmd = cmd
        self.stats = stats
        self.consumer = consumer
        self.since: float | None = None
        self.stranded = 0  # jobs left pending for memory in this episode
        self._next_log = 0.0
        self.stats.gauges["redis_oom"] = 0
        self.stats.counters.setdefault("redis_oom", Counter())  # jobs left, for the exporter

    @property
    def active(self) -> bool:
        return self.since is not None

    def enter(self, exc: BaseException | None = None, *, job_left: bool = False) -> None:
        if job_left:
            self.stranded += 1
            self.stats.inc("redis_oom")  # jobs left pending for memory (the exporter's)
        if self.since is not None:
            return
        self.since = time.monotonic()
        self._next_log = self.since + self.settings.outage_log_interval
        self.stats.gauges["redis_oom"] = 1
        detail = f" ({first_line(exc)})" if exc is not None else ""
        log.warning("%s%s: not taking new entries; the jobs it refused stay pending and run "
                    "again as soon as it takes writes", OOM_ADVICE, detail,
                    extra={"consumer": self.consumer})

    async def wait_clear(self) -> float:
        """Probe with a tiny write until Redis takes it; returns how long the outage was."""
        backoff = Backoff(reconnect(0.1, 2.0))
        probe = probe_key(self.settings, self.consumer)
        while True:
            try:
                await self.cmd.set(probe, b"1", px=PROBE_TTL_MS)
                break
            except redis.ResponseError as e:
                if not is_oom(e):
                    raise
            except connection.TRANSIENT_ERRORS:
                pass  # away as well: the same wait
            now = time.monotonic()
            if now >= self._next_log:
                self._next_log = now + self.settings.outage_log_interval
                log.warning("Redis is still out of memory after %.0fs: not taking new "
                            "entries, %d jobs waiting to run again",
                            now - (self.since or now), self.stranded,
                            extra={"consumer": self.consumer})
            await asyncio.sleep(backoff.next())
        took = time.monotonic() - (self.since or time.monotonic())
        log.warning("Redis takes writes again after %.1fs of being out of memory: running the "
                    "%d jobs it refused from the own pending list now", took, self.stranded,
                    extra={"consumer": self.consumer})
        self.since = None
        self.stranded = 0
        self.stats.gauges["redis_oom"] = 0
        return took
