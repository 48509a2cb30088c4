"""The reclaim pass: XAUTOCLAIM of entries idle past claim_idle_ms, following the cursor.

    XAUTOCLAIM jobs workers <me> claim_idle_ms <cursor> COUNT n   n = free slots

- A pass runs between reads, not beside them (the consume loop runs it when `due`):
  the blocking read holds every free slot while it waits, so a pass is late by at most
  one BLOCK.  The timer marks one due every reclaim_interval; the reader marks one due
  after a read that found nothing new (idle), at most once per block_ms.
- A pass follows the cursor while it has free slots; one that runs out of slots before
  the cursor is back at 0-0 is due again as soon as a slot frees, so a pending set left
  by an outage (a full disk, a dependency away) comes back at the rate the fleet runs
  jobs, not a few slots' worth per reclaim_interval.  claim_idle_ms is the only gate on
  what is taken: an entry a live worker runs is never claimed before it
  (job_timeout < claim_idle_ms, config.py).
- Ids that are running here or finished and waiting for their ack are skipped, or they
  would run twice.  Entries trimmed while pending are counted (`deleted`) and logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import redis.asyncio as aioredis

from ..config import Settings
from ..telemetry.metrics import WorkerStats
from .redelivery import Redelivery
from .slots import Slots

log = logging.getLogger("stagedoor.worker")


class Reclaimer:
    """The reclaim timer and passes; `due` tells the consume loop a pass comes next."""

    def __init__(self, settings: Settings, cmd: aioredis.Redis, *, consumer: str,
                 slots: Slots, redelivery: Redelivery, stats: WorkerStats,
                 busy: Callable[[bytes], bool]) -> None:
        self.settings = settings
        self.cmd = cmd
        self.consumer = consumer
        self.slots = slots
        self.redelivery = redelivery
        self.stats = stats
        self.busy = busy  # running here, or finished and waiting for its ack
        self.due = False
        self.cursor = b"0-0"
        # When the last pass began (monotonic): an idle worker's passes are block_ms apart.
        self.began_at = 0.0

    def idle(self) -> None:
        """A read found nothing new: a pass is due, unless one began within block_ms."""
        if time.monotonic() - self.began_at >= self.settings.block_ms / 1000:
            self.due = True

    async def timer(self) -> None:
        """Mark a pass due every reclaim_interval; the consume loop runs it."""
        while True:
            await asyncio.sleep(self.settings.reclaim_interval)
            self.due = True

    async def once(self) -> int:
        """One pass of XAUTOCLAIM following the cursor; returns how many entries it took.

        Out of slots with the cursor not back at 0-0: more may wait, so the next pass
        is due at once (the consume loop runs it when a slot frees)."""
        s = self.settings
        taken = 0
        self.due = False
        self.began_at = time.monotonic()
        while True:
            n = self.slots.try_reserve(s.reclaim_count)
            if n == 0:
                if taken and self.cursor != b"0-0":
                    self.due = True
                return taken
            try:
                cursor, entries, deleted = await self.cmd.execute_command(
                    "XAUTOCLAIM", s.stream, s.group, self.consumer, s.claim_idle_ms,
                    self.cursor, "COUNT", n)
            except BaseException:
                self.slots.unreserve(n)
                raise
            self.cursor = cursor
            if deleted:
                self.stats.inc("deleted", n=len(deleted))
                log.warning("%d pending entries were trimmed before they were handled: %s",
                            len(deleted), b", ".join(deleted[:10]).decode())
            mine = [(e[0], e[1]) for e in entries if not self.busy(e[0])]
            try:
                counts = await self.redelivery.delivery_counts([e[0] for e in mine])
            except BaseException:
                self.slots.unreserve(n)
                raise
            self.stats.inc("reclaimed", n=len(mine))
            await self.redelivery.dispatch(mine, n, counts)
            taken += len(mine)
            if cursor == b"0-0":
                return taken
