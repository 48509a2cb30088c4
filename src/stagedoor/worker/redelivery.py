"""Redelivered entries (own pending list, XAUTOCLAIM): delivery counts, starts, isolation.

The delivery count alone is a poor poison counter: a crash adds 1 to every entry the
dead worker held, so the innocent jobs that ran beside a worker-killing one would
reach max_deliveries with it.  Redelivered entries count their starts instead
(stagedoor:starts:<id>), and a start is counted when the handler starts (dispatch.py),
not when the entry is read: the batch-mates queued behind a job that kills the
process never start, so they are never counted as if they had.  An entry started
before after a redelivery, or whose next start would be its last allowed one, runs
alone, nothing else in flight, so a crash then is its own; an innocent one runs
alone at most once and succeeds.  A start that ended in a failure the worker lived to
report (left pending: a dependency away, a full disk) is settled (stagedoor:settled:<id>,
the starts recorded by then): it killed no one, so after a transient outage the
entries it left pending come back together, at the fleet's pace, not one at a time.
The poison verdict is on starts (dispatch.py
dead-letters an entry whose next start would pass max_deliveries); the first, fresh
delivery counts as one and is not recorded (the hot path pays nothing).

A crash while an entry runs alone is that entry's own, so one is enough: before it
starts, the worker tells its supervisor which entry it runs alone (`announce`, a line
on the heartbeat pipe, flushed before the handler starts; None again once it settled).
The supervisor sees the process die (waitpid: the signal or exit code) and hands both
to the next worker of the slot, which dead-letters the entry at boot, before it reads
anything, with the cause as its reason ("killed its worker: SIGABRT";
`dead_letter_killer`).  So a worker-killing job costs at most three crashes: its fresh
delivery (among its batch-mates), its first redelivery (run with the others, unless
max_deliveries <= 2), and its run alone.  Without a supervisor (`stagedoor work`),
nobody carries the cause across the crash, and the start count decides (above).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import settled_key, starts_key
from .acks import Acker
from .dispatch import Dispatcher, Entry, metric_kind
from .slots import Slots

log = logging.getLogger("stagedoor.worker")

# Tells the supervisor which entry runs alone now (None: none); awaited before it starts.
Announce = Callable[[bytes | None], Awaitable[None]]


async def _no_announce(entry_id: bytes | None) -> None:
    return None


class Redelivery:
    """Dispatches entries that were delivered before, isolating the suspicious ones."""

    def __init__(self, settings: Settings, cmd: aioredis.Redis, *, consumer: str,
                 slots: Slots, acker: Acker, dispatcher: Dispatcher) -> None:
        self.settings = settings
        self.cmd = cmd
        self.consumer = consumer
        self.slots = slots
        self.acker = acker
        self.dispatcher = dispatcher
        self.announce: Announce = _no_announce  # the heartbeat pipe's, under a supervisor

    async def delivery_counts(self, ids: Sequence[bytes]) -> dict[bytes, int]:
        """XPENDING's delivery count of each id (ids in stream order)."""
        if not ids:
            return {}
        s = self.settings
        reply = await self.cmd.execute_command(
            "XPENDING", s.stream, s.group, ids[0], ids[-1],
            len(ids) + len(self.slots.running) + len(self.acker) + 1, self.consumer)
        return {row[0]: int(row[3]) for row in reply}

    async def dispatch(self, entries: Sequence[Entry], reserved: int,
                       counts: dict[bytes, int]) -> None:
        """Read the entries' recorded starts; run them, the suspicious ones one at a time.

        `counts` is XPENDING's view, taken after the read: an entry missing from it was
        acked in between (it finished here while the read was on the wire), and
        running it again would be a second run for nothing."""
        entries = [e for e in entries if e[0] in counts]
        try:
            if entries:
                # The counters so far to the supervisor: a crash among redelivered
                # entries (after a crash, the likeliest moment for another) loses no
                # count from before it.
                await self.announce(None)
            starts, settled = await self.recorded_starts(
                [e[0] for e in entries if e[1] is not None])
        except BaseException:
            self.slots.unreserve(reserved)
            raise
        together, alone = isolate(entries, starts, self.settings.max_deliveries, settled)
        self.dispatcher.dispatch(together, reserved, counts, starts)
        if alone:
            log.warning("running %d redelivered entries one at a time: each was started "
                        "before and may be what killed a worker", len(alone))
        for entry in alone:
            # Nothing else running and every finished job acked: if this one kills the
            # process, it takes no one with it.
            await self.slots.wait_idle()
            await self.acker.drain()
            reserved_one = await self.slots.reserve(1)
            try:
                await self.announce(entry[0])
            except BaseException:
                self.slots.unreserve(reserved_one)
                raise
            try:
                self.dispatcher.dispatch([entry], reserved_one, counts, starts)
                await self.slots.wait_idle()
            finally:
                await self.announce(None)
            await self.acker.drain()

    async def dead_letter_killer(self, entry_id: str, cause: str) -> bool:
        """At boot: dead-letter the entry that killed this slot's previous worker while
        it ran alone (the supervisor saw the cause), if it is still pending in the group:
        True when it was dead-lettered.  Also when another worker reclaimed it in the
        meantime (XAUTOCLAIM after claim_idle_ms): the verdict is certain, and that
        worker running it alone again would only crash again."""
        s = self.settings
        rows = await self.cmd.execute_command(
            "XPENDING", s.stream, s.group, entry_id, entry_id, 1)
        found = await self.cmd.xrange(s.stream, entry_id, entry_id) if rows else []
        if not rows or not found:
            log.info("entry %s killed the previous worker of %s (%s) but is no longer "
                     "pending; nothing to dead-letter", entry_id, self.consumer, cause)
            return False
        raw: Any = found[0][1] or []
        flat = [x for pair in raw.items() for x in pair] if isinstance(raw, dict) else raw
        fields = [x if isinstance(x, bytes) else str(x).encode() for x in flat]
        deliveries = int(rows[0][3])
        # the lease the killed run left behind goes with it (else a replay of the dead
        # letter would wait job_timeout for it)
        await self.dispatcher.release_lease_of(entry_id.encode(), fields)
        await self.dispatcher.dead(entry_id.encode(), fields, deliveries,
                                   f"poison: {cause} while it ran alone (delivered "
                                   f"{deliveries} times)",
                                   metric_kind(fields, self.dispatcher.kinds))
        return True

    async def recorded_starts(self, ids: Sequence[bytes]
                              ) -> tuple[dict[bytes, int], dict[bytes, int]]:
        """(starts counted before, after redeliveries; how many of them are settled),
        one pipeline of two GETs per entry."""
        if not ids:
            return {}, {}
        pipe = self.cmd.pipeline(transaction=False)
        for entry_id in ids:
            pipe.get(starts_key(self.settings, entry_id.decode()))
            pipe.get(settled_key(self.settings, entry_id.decode()))
        replies = await pipe.execute()
        starts = {entry_id: int(r or 0) for entry_id, r in zip(ids, replies[::2], strict=True)}
        settled = {entry_id: int(r or 0) for entry_id, r in zip(ids, replies[1::2],
                                                                 strict=True)}
        return starts, settled


def isolate(entries: Sequence[Entry], starts: dict[bytes, int], limit: int,
            settled: dict[bytes, int] | None = None) -> tuple[list[Entry], list[Entry]]:
    """(entries that may run together, entries to run alone).

    Alone: a start recorded after a redelivery that did not settle (it may have killed
    its worker), or its next start (fresh one + recorded + this) would be its last
    allowed one."""
    together: list[Entry] = []
    alone: list[Entry] = []
    for entry in entries:
        recorded = starts.get(entry[0], 0)
        unsettled = recorded - (settled or {}).get(entry[0], 0)
        suspicious = entry[1] is not None and (unsettled >= 1 or recorded + 2 >= limit)
        (alone if suspicious else together).append(entry)
    return together, alone
