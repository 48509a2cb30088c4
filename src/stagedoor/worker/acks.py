"""Acks, coalesced: every id finished since the last XACK goes in the next one.

Only DONE (and trimmed) entries are acked here, and only after their handler
returned; DEAD ones are acked inside the dead-letter script.  A failed XACK is
retried with backoff, never given up: an unacked job runs again, an ack lost is a
duplicate, not a loss.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import redis

from ..backoff import Backoff
from ..config import Settings
from ..stream import connection
from ..stream.resp import FastConnection
from .entries import pack_xack

log = logging.getLogger("stagedoor.worker")

_ACK_FAILED: tuple[type[BaseException], ...] = (redis.ResponseError, *connection.TRANSIENT_ERRORS)


class Acker:
    """Coalesces acks: every id finished since the last XACK goes in the next one.

    Two ways out: the consume loop takes what is queued and sends it in the same
    write as its next XREADGROUP (one syscall per batch instead of two: on loopback
    the write is the costliest part of a round trip), and this task flushes
    whatever is still queued after ack_flush_ms, so an ack never waits for a 5 s
    BLOCK read.  Either way an id is sent only after its handler returned.
    """

    def __init__(self, conn: FastConnection, settings: Settings,
                 reader_blocked: Callable[[], bool] = lambda: True) -> None:
        self._conn = conn
        self._settings = settings
        self._reader_blocked = reader_blocked
        self.queued: list[bytes] = []
        self.flushing: set[bytes] = set()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._backoff = Backoff()
        self._stream, self._group = settings.stream.encode(), settings.group.encode()
        # A streak of reads ahead is on (readahead.py): every reply's reads carry what is
        # queued, so nothing wakes the flush task; kick() when the streak ends.
        self.carried = False

    @property
    def conn(self) -> FastConnection:
        """The ack connection: on the stream's server (its cluster node), like the reader's."""
        return self._conn

    def add(self, entry_ids: list[bytes]) -> None:
        """Queue these ids for the next XACK (settle.py is the one caller)."""
        self.queued.extend(entry_ids)
        self._idle.clear()
        if not self.carried:
            self._wake.set()

    def kick(self) -> None:
        """The reads that carried the acks stopped: flush what they left, as add() would."""
        if self.queued:
            self._wake.set()

    def __contains__(self, entry_id: bytes) -> bool:
        return entry_id in self.flushing or entry_id in self.queued

    def __len__(self) -> int:
        return len(self.queued) + len(self.flushing)

    def take(self) -> list[bytes]:
        """Everything queued, now counted as being sent; settle() it afterwards."""
        batch, self.queued = self.queued, []
        self.flushing.update(batch)
        return batch

    def settle(self, batch: list[bytes], error: BaseException | None) -> None:
        self.flushing.difference_update(batch)
        if error is None:
            if self._backoff.attempt:
                self._backoff.reset()
        else:
            log.warning("XACK of %d ids failed (%s); will retry", len(batch), error)
            self.queued[:0] = batch
            self._wake.set()
        if not self.queued and not self.flushing:
            self._idle.set()

    def xack(self, batch: list[bytes]) -> bytes:
        return pack_xack(self._stream, self._group, batch)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._reader_blocked():
                # The consume loop is between reads and will carry these with its next.
                await asyncio.sleep(self._settings.ack_flush_ms / 1000)
            batch = self.take()
            if not batch:
                continue  # the consume loop sent them with its read
            try:
                await self._conn.send(self.xack(batch))
            except _ACK_FAILED as e:  # MISCONF, READONLY, NOPERM too: retry, never give up
                self.settle(batch, e)
                await asyncio.sleep(self._backoff.next())
                continue
            self.settle(batch, None)

    async def drain(self) -> None:
        await self._idle.wait()

    async def connect(self) -> None:
        await self._conn.connect()

    async def aclose(self) -> None:
        await self._conn.aclose()
