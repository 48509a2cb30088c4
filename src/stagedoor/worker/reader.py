"""The reader: what the worker takes from the stream, and when.

    recover   XREADGROUP ... STREAMS jobs <cursor>    own pending first, paged
    consume   XREADGROUP COUNT n BLOCK 5000 ... >      n = min(COUNT, free slots)
    reclaim   XAUTOCLAIM ... 60000 <cursor> COUNT n    every 30 s, and after a read that
                                                       found nothing new; cursor followed
                                                       as long as slots free up

- Slots are reserved before a read (slots.py), so the consume and reclaim paths
  together never hold more entries than there are free slots.
- The '>' read goes over the lean hot-path connection (stream/resp.py) and carries the
  queued acks in the same write; the other reads use the 100 ms redis-py client.
- After any timeout or connection error on a read the reply may have been lost with
  entries in it, so the next read is of our own pending list again, not '>'.
- Ids that are running here or finished and waiting for their ack are skipped when
  our own pending list or XAUTOCLAIM hands them back, or they would run twice.
- While the replies come back full (a backlog), reads go ahead of the jobs and are
  handled as their replies arrive (readahead.py); reclaim passes (reclaim.py) run
  between reads, not beside them.
- A job left pending because Redis failed it (a stall, a reset, OOM) asks for a
  re-read of the own pending list (`recover_soon`): it runs again after the next read,
  not after claim_idle_ms.  While Redis refuses writes (outage.py) nothing is read,
  nor while the fleet is paused (presence.py: the flag is read at the heartbeat, the
  read path only looks at an attribute).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, NamedTuple

import redis
import redis.asyncio as aioredis

from ..backoff import Backoff
from ..config import Settings
from ..stream import connection
from ..stream.errors import first_line, is_oom
from ..stream.queue import ensure_group, is_nogroup
from ..stream.resp import Exchange, FastConnection
from ..telemetry.metrics import WorkerStats
from .acks import Acker
from .dispatch import Dispatcher, Entry
from .outage import Outage
from .presence import Pause
from .readahead import ReadAhead
from .reclaim import Reclaimer
from .redelivery import Redelivery
from .slots import Slots

log = logging.getLogger("stagedoor.worker")


class _Read(NamedTuple):
    """A '>' read on the wire: the slots reserved for it, the acks it carries."""
    n: int
    acks: list[bytes]
    exchange: Exchange


def stream_entries(reply: Any) -> list[Entry]:
    """RESP2 XREADGROUP reply -> [(id, fields or None)]; nil (BLOCK timed out) -> []."""
    if not reply:
        return []
    return [(e[0], e[1]) for e in reply[0][1]]


class Reader:
    """The consume loop: own-pending recovery, '>' reads (ahead while there is a
    backlog: readahead.py) and reclaim passes (reclaim.py) between them."""

    def __init__(self, settings: Settings, cmd: aioredis.Redis, conn: FastConnection, *,
                 consumer: str, slots: Slots, acker: Acker, dispatcher: Dispatcher,
                 redelivery: Redelivery, stats: WorkerStats, stop: asyncio.Event,
                 outage: Outage, pause: Pause, burst: bool = False) -> None:
        self.settings = settings
        self.cmd = cmd
        self.conn = conn
        self.consumer = consumer
        self.slots = slots
        self.acker = acker
        self.dispatcher = dispatcher
        self.redelivery = redelivery
        self.stats = stats
        self.stop = stop
        self.outage = outage
        self.pause = pause
        self.burst = burst
        self.reading = 0  # '>' reads on the wire (stop_reading waits for their replies)
        self.blocking = False  # the one on the wire may BLOCK (the acker then flushes alone)
        self._recover = True
        self._recover_cursor = b"0"
        self._recover_again = False
        self._reads: dict[tuple[int, bool], bytes] = {}  # XREADGROUP '>' packed, by (n, block)
        self.ahead = ReadAhead(self)
        self.reclaimer = Reclaimer(settings, cmd, consumer=consumer, slots=slots,
                                   redelivery=redelivery, stats=stats, busy=self._busy)

    def recover_soon(self) -> None:
        """Re-read the own pending list from the start before the next '>' read."""
        if self._recover:
            self._recover_again = True  # a pass is under way: start over when it ends
        else:
            self._recover, self._recover_cursor = True, b"0"

    # -- reading '>' -----------------------------------------------------------------
    async def read_new(self, n: int) -> bool:
        """Read new entries into the n slots reserved for them and dispatch them; while
        the replies come back full (a backlog), read ahead (readahead.py).  Returns
        whether the last reply was empty (the stream had nothing new).

        The first read is alone on the wire and may BLOCK; reads ahead never block, so
        an ack queued meanwhile is not held behind them and CLIENT UNBLOCK ends the only
        read that can wait.  Every read sent is collected and its entries dispatched
        before this returns, also on stop and on errors: a served read is never
        abandoned.
        """
        try:
            if not self.conn.connected:
                await self.conn.connect()
            read = self._send(n, block=not self.burst)
        except BaseException:
            self.slots.unreserve(n)
            raise
        last = read.exchange[-1]
        if not last.done():
            try:
                await last
            except asyncio.CancelledError:
                self._abandon(read)
                raise
            except Exception:
                pass  # _take() raises it, or hands on a ResponseError
        got = self._take(read)
        if len(got) < read.n or self.must_pause():
            return not got
        return await self.ahead.run(self.conn.loop)

    def must_pause(self) -> bool:
        """Something other than '>' reads comes next: stop reading ahead."""
        return (self.stop.is_set() or self.outage.active or self.pause.active
                or self.reclaimer.due
                or self._recover or self.settings.read_ahead < 2)

    def read_command(self, n: int, *, block: bool) -> bytes:
        """XREADGROUP '>' for n entries, packed once (this read and the reads ahead)."""
        read = self._reads.get((n, block))
        if read is None:
            s = self.settings
            read = self._reads[n, block] = self.conn.packed(
                "XREADGROUP", "GROUP", s.group, self.consumer, "COUNT", n,
                *(("BLOCK", s.block_ms) if block else ()), "STREAMS", s.stream, ">")
        return read

    def _send(self, n: int, *, block: bool) -> _Read:
        """Write one XREADGROUP '>' for n entries (and the queued acks) without waiting;
        the caller gives the n slots back if this raises."""
        read = self.read_command(n, block=block)
        acks = self.acker.take()
        try:
            exchange = self.conn.write_many([self.acker.xack(acks), read] if acks else [read])
        except BaseException as e:
            if acks:
                self.acker.settle(acks, e)
            raise
        self.reading += 1
        self.blocking = block
        return _Read(n, acks, exchange)

    def _give_back(self, read: _Read, error: BaseException) -> None:
        """A read that failed or was abandoned: its slots, and its acks to the queue."""
        self.slots.unreserve(read.n)
        if read.acks:
            self.acker.settle(read.acks, error)

    def _take(self, read: _Read) -> list[Entry]:
        """A read whose replies are in (or failed): settle its acks, dispatch its
        entries; a failure gives its slots back and raises."""
        self.reading -= 1
        self.blocking = False
        try:
            replies = FastConnection.taken(read.exchange)
        except BaseException as e:
            FastConnection.retrieved(read.exchange)
            self._give_back(read, e)
            raise
        reply = replies[-1]
        if read.acks:
            ack_reply = replies[0]
            self.acker.settle(read.acks, ack_reply if isinstance(ack_reply, BaseException)
                              else None)
        if isinstance(reply, BaseException):
            self.slots.unreserve(read.n)
            raise reply
        # hiredis' [[stream, [[id, fields], ...]]] as it is: each entry is a 2-list,
        # unpacked like the (id, fields) of stream_entries, without a copy a read
        entries: list[Entry] = reply[0][1] if reply else []
        self.dispatcher.dispatch(entries, read.n, None)
        return entries

    def _abandon(self, read: _Read) -> None:
        """Cancelled (a hard stop): give back the read's slots and queue its acks again;
        a reply that comes is dropped, its entries stay pending."""
        FastConnection.retrieved(read.exchange)  # no "never retrieved" warning
        for fut in read.exchange:
            fut.cancel()
        self.reading -= 1
        self.blocking = False
        self._give_back(read, asyncio.CancelledError())

    def _busy(self, entry_id: bytes) -> bool:
        return entry_id in self.slots.running or entry_id in self.acker

    async def consume(self) -> None:
        s = self.settings
        backoff = Backoff()
        group, stream, me = s.group, s.stream, self.consumer
        while True:
            if self.outage.active:
                # Reads work under OOM, the handlers' writes do not: take nothing new.
                await self.outage.wait_clear()
                self._recover, self._recover_cursor = True, b"0"
            if self.pause.active:
                # The fleet is paused (presence.py): the held jobs finish, nothing new
                # is read or reclaimed until the flag is gone.
                await self.pause.wait_clear()
            n = await self.slots.reserve(s.count)
            if self.outage.active or self.pause.active:  # began while we waited for a slot
                self.slots.unreserve(n)
                continue
            try:
                if self.reclaimer.due:
                    self.slots.unreserve(n)
                    n = 0
                    await self.reclaimer.once()
                elif self._recover:
                    entries = stream_entries(await self.cmd.execute_command(
                        "XREADGROUP", "GROUP", group, me, "COUNT", n,
                        "STREAMS", stream, self._recover_cursor))
                    if not entries:
                        self._recover, self._recover_cursor = self._recover_again, b"0"
                        self._recover_again = False
                        self.slots.unreserve(n)
                        n = 0
                        continue
                    self._recover_cursor = entries[-1][0]
                    fresh = [e for e in entries if not self._busy(e[0])]
                    self.stats.inc("recovered", n=len(fresh))
                    counts = await self.redelivery.delivery_counts([e[0] for e in fresh])
                    held, n = n, 0
                    await self.redelivery.dispatch(fresh, held, counts)
                else:
                    held, n = n, 0
                    dry = await self.read_new(held)
                    if self.stop.is_set():
                        return
                    if dry and self.burst:
                        await self._burst_check()
                    elif dry:
                        self.reclaimer.idle()  # take back what waits pending
                backoff.reset()
            except asyncio.CancelledError:
                self.slots.unreserve(n)
                raise
            except connection.TRANSIENT_ERRORS as e:
                self.slots.unreserve(n)
                # The reply may have been lost with entries in it: read our own PEL next.
                self._recover, self._recover_cursor = True, b"0"
                delay = backoff.next()
                log.warning("read failed (%s: %s); re-reading own pending in %.2fs",
                            type(e).__name__, e, delay)
                await asyncio.sleep(delay)
            except redis.ResponseError as e:
                self.slots.unreserve(n)
                if is_oom(e):  # a start count (redelivery.py) refused for memory
                    self.outage.enter(e)
                    continue
                if not is_nogroup(e):
                    raise
                log.warning("stream %s or its group %s is gone (deleted, flushed, or Redis "
                            "restarted empty); recreating it (%s)", stream, group,
                            first_line(e))
                await self._ensure_group_quietly()
                self._recover, self._recover_cursor = True, b"0"

    async def _burst_check(self) -> None:
        await self.slots.wait_idle()
        await self.acker.drain()
        if self._recover:
            return
        self.stop.set()
        await asyncio.Event().wait()  # the run() loop cancels us

    async def _ensure_group_quietly(self) -> None:
        with contextlib.suppress(*connection.TRANSIENT_ERRORS):
            await ensure_group(self.cmd, self.settings)
