"""The read-ahead: while the stream has a backlog, '>' reads handled as their replies
arrive, inside the connection's data_received.

    reply parsed (hiredis) -> its entries dispatched -> the next read written, carrying
    the acks of the jobs that just finished -> back to the event loop

The reader's first read of a streak may BLOCK for seconds and is awaited as usual
(reader.py).  When its reply comes back full, the streak begins: up to read_ahead reads
on the wire, each for at most concurrency / read_ahead entries and never more than the
free slots it reserved, so Redis serves the next read while this one's jobs run.

Why here and not in the consume task: a read awaited by a task costs a future per reply,
a task step to wake it, and a choice between sleeping in epoll until the reply comes
(a sleep and a wake-up, costly on a VM) and polling for it with event-loop turns (each
an epoll_wait; it spins when Redis answers late: on a loaded second core, under a CPU
quota, pinned to the worker's core).  Handled in data_received, a reply costs no future
and no task step, and the loop waits for the next one in epoll only when it has not
come yet: it adapts to the reply time instead of assuming one (docs/benchmarks.md,
"The read path").

What a reply does is the streak's (`ReadAhead.core`): worker/_entries.pyx's Streak and
ReplyWait in C when the extension is built, PyStreak and PyReplyWait here otherwise
(the same rules; they are the spec, and tests run both).  In C because a read's Python
calls are a large share of a short job's CPU (docs/benchmarks.md, "Why the code is the way it is").

The streak ends (no new read is sent) when a reply comes back short (the backlog is
gone), when something else must come next (a stop, a pause, an outage, a reclaim pass,
a re-read of the own pending list), when no slot is free, or on an error; every read
already sent is still collected and its entries dispatched.  Then `run` returns to the
consume loop.  Cancelled (a hard stop), the reads still on the wire are abandoned: their
slots are given back, their acks queued again, and their replies dropped if they come
(the entries stay pending, read again from the own pending list).
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any, Protocol

from ..config import Settings
from ..stream.resp import FastConnection
from ..stream.wire import Hook
from .acks import Acker
from .dispatch import Dispatcher
from .entries import CReplyWait, Streak
from .slots import Slots


class Streaming(Protocol):
    """What the read-ahead uses of the reader (reader.py), whose consume loop runs it."""

    settings: Settings
    conn: FastConnection
    slots: Slots
    acker: Acker
    dispatcher: Dispatcher
    reading: int  # '>' reads on the wire
    blocking: bool  # the one on the wire may BLOCK

    def must_pause(self) -> bool: ...

    def read_command(self, n: int, *, block: bool) -> bytes: ...


class _Acks(Hook):
    """Where the reply of an XACK sent with the reads ahead goes: the acks are settled."""

    __slots__ = ("acker", "ids")

    def __init__(self, acker: Acker, ids: list[bytes]) -> None:
        self.acker = acker
        self.ids = ids
        self._done = False

    def set_result(self, reply: Any) -> None:
        self._done = True
        self.acker.settle(self.ids, reply if isinstance(reply, BaseException) else None)


class _OnWire(Hook):
    """One read ahead on the wire: its reserved slots, the acks written with it (the
    first read of a write carries them), and the hook its reply is handed to inside
    data_received (one object a read, not a Hook and its closure besides)."""

    __slots__ = ("acks", "ahead", "n")

    def __init__(self, ahead: PyStreak, n: int) -> None:
        self.ahead = ahead
        self.n = n
        self.acks: _Acks | None = None
        self._done = False

    def set_result(self, reply: Any) -> None:
        self._done = True
        self.ahead._arrived(reply)


class PyReplyWait:
    """How to wait for a reply that is due: keep the event loop turning, up to 16 turns
    (each an epoll_wait that returns at once), or let it sleep in epoll until the reply
    wakes it.  On a VM a sleep and its wake-up cost more than the turns when Redis
    answers within them; when it answers later the turns are spent for nothing.  So it
    turns while the turns pay, and sleeps for a while (64 replies, doubling up to 4,096
    while the tries keep failing), then tries again, when either

    - three in four of the recent waits ran out of turns (Redis answers late: a loaded
      second core, a CPU quota), or
    - of the last WINDOW (128) waits that turned, fewer than NEAR_MIN (2) had their
      reply come during the turns: the rest were in already (epoll would not have slept
      either, so each turn was a wasted callback) or came late.  This is Redis and the
      worker on one core: Redis runs only when the worker sleeps, so a reply never
      comes while it turns.

    Plain waiting but for the turns of those tries.  The turn budget is fixed, not
    learned from the replies' own count, and the give-up rule is three misses in four,
    not one in two (the measurements behind each:
    docs/benchmarks.md, "Why the code is the way it is").
    The n_* counters say how the waits ended (bench/slowdown.py reply-stats).
    """

    __slots__ = ("_loop", "_queued", "_turn_cb", "backoff", "budget", "cooldown", "fixed",
                 "missed", "n_late", "n_near", "n_present", "n_slept", "near", "spinning",
                 "turns", "window")

    MOST, LIMIT, COOL, COOL_MOST, WINDOW, NEAR_MIN = 16, 0.75, 64, 4096, 128, 2

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._turn_cb = self._turn
        self.budget = self.MOST  # turns to wait for the next reply: MOST, or 0 (sleep)
        self.missed = 0.0  # the share of recent waits that ran out of turns (EWMA, 1/8)
        self.cooldown = 0  # replies to sleep for before trying to turn again
        self.backoff = self.COOL  # the next cooldown
        self.spinning = False
        self.turns = 0
        self._queued = False  # a turn is scheduled (one chain of them at a time)
        self.fixed = -1  # >= 0: always this many turns, not learned (bench/slowdown.py)
        self.window = self.near = 0  # waits that turned, and how many the turns saved
        self.n_present = self.n_near = self.n_late = self.n_slept = 0

    def due(self) -> None:
        """A reply is due and none is here: turn the loop for it, if that pays."""
        if not self.spinning and self.budget:
            self.spinning, self.turns = True, 0
            if not self._queued:
                self._queued = True
                self._loop.call_soon(self._turn_cb)

    def arrived(self) -> None:
        """A reply came (in data_received)."""
        if self.spinning:  # within its turns
            self.spinning = False
            if self.turns <= 1:  # it was in already: epoll would not have slept
                self.n_present += 1
            else:  # the turns saved a sleep
                self.n_near += 1
                self.near += 1
            if self.fixed < 0:
                self.missed -= self.missed / 8
                self._waited()
        elif self.fixed >= 0 or not self.budget:
            self.n_slept += 1
            if self.fixed < 0:
                self.cooldown -= 1
                if self.cooldown <= 0:  # try turning again
                    self.budget, self.missed = self.MOST, self.LIMIT / 2
                    self.window = self.near = 0
        if self.fixed >= 0:
            self.budget = self.fixed

    def _waited(self) -> None:
        """A wait that turned has ended: every WINDOW of them, did the turns pay?"""
        self.window += 1
        if self.window < self.WINDOW:
            return
        if self.near < self.NEAR_MIN:  # in already or late: turning saved nothing
            self._sleep()
        else:
            if self.missed < self.LIMIT / 2:
                self.backoff = self.COOL
            self.window = self.near = 0

    def _sleep(self) -> None:
        self.budget, self.cooldown = 0, self.backoff
        self.backoff = min(self.COOL_MOST, 2 * self.backoff)
        self.window = self.near = 0

    def _turn(self) -> None:
        if not self.spinning:
            self._queued = False
            return
        self.turns += 1
        if self.turns < self.budget:
            self._loop.call_soon(self._turn_cb)
            return
        self._queued = self.spinning = False  # ran out of turns: the loop sleeps in epoll
        self.n_late += 1
        if self.fixed >= 0:
            return
        self.missed += (1 - self.missed) / 8
        if self.missed > self.LIMIT:
            self._sleep()
        else:
            self._waited()


# The wait the read-ahead uses: in C when the extension is built (_entries.ReplyWait,
# the same rules), else PyReplyWait.  bench/slowdown.py replaces it to fix the turns.
ReplyWait: Any = PyReplyWait if CReplyWait is None else CReplyWait


class PyStreak:
    """The state of one streak of reads ahead and what each reply does, in Python: the
    spec of _entries.Streak (the same in C, what runs when the extension is built) and
    what a checkout without the extension runs."""

    def __init__(self, reader: Streaming, ahead: int, cap: int) -> None:
        self.reader = reader
        self.wire: collections.deque[_OnWire] = collections.deque()
        self.ending = False
        self.dry = False
        self.error: BaseException | None = None
        self.done: asyncio.Future[None] | None = None
        self.wait: PyReplyWait | None = None
        self._ahead = ahead
        self._cap = cap

    # -- inside data_received ------------------------------------------------------------
    def fill(self) -> None:
        """Send reads until read_ahead are on the wire or no slot is free: in one write,
        with the acks queued."""
        reader = self.reader
        wire = self.wire
        room = self._ahead - len(wire)
        slots, cap = reader.slots, self._cap
        reads: list[_OnWire] = []
        while room > 0:
            k = slots.try_reserve(cap)
            if not k:
                break
            reads.append(_OnWire(self, k))
            room -= 1
        if not reads:
            return
        conn = reader.conn
        if not conn.connected:
            slots.unreserve(sum(r.n for r in reads))
            return
        acker = reader.acker
        ids = acker.take()
        datas = [reader.read_command(r.n, block=False) for r in reads]
        hooks: list[Any] = reads
        if ids:
            acks = reads[0].acks = _Acks(acker, ids)  # cancelled with the first read
            datas.insert(0, acker.xack(ids))
            hooks = [acks, *reads]
        try:
            conn.write_hooked(datas, hooks)
        except BaseException as e:
            slots.unreserve(sum(r.n for r in reads))
            if ids:
                acker.settle(ids, e)
            raise
        wire.extend(reads)
        reader.reading += len(reads)
        reader.blocking = False

    def _arrived(self, reply: Any) -> None:
        """A read's reply (or its failure), in data_received: dispatch its entries and
        send the next read.  Never raises: an error ends the streak and `run` raises it."""
        read = self.wire.popleft()
        reader = self.reader
        reader.reading -= 1
        wait = self.wait
        if wait is not None:
            wait.arrived()
        try:
            if isinstance(reply, BaseException):
                reader.slots.unreserve(read.n)
                self._end(reply)
            else:
                # hiredis' [[stream, [[id, fields], ...]]] as it is (no copy a read)
                entries = reply[0][1] if reply else []
                # in data_received: no task is current (no asyncio.current_task to ask)
                reader.dispatcher.dispatch(entries, read.n, None, None, False)
                if self.ending:
                    pass
                elif len(entries) < read.n or reader.must_pause():
                    self.ending, self.dry = True, not entries
                else:  # Redis serves the next read while the jobs of this one run
                    self.fill()
                    if not self.wire:  # no slot free: the consume loop waits for one
                        self.ending = True
        except BaseException as e:  # data_received must not raise: run() raises it
            self._end(e)
        self._settled()

    def _settled(self) -> None:
        """Ended, and every read sent is collected: `run` returns.  Else a reply is due:
        wait for it (ReplyWait)."""
        if self.wire:
            # the next reply is due, unless it came with this one (handled next)
            if self.wait is not None and not self.reader.conn.more_replies():
                self.wait.due()
            return
        done = self.done
        if self.ending and done is not None and not done.done():
            done.set_result(None)

    def _end(self, error: BaseException) -> None:
        self.ending = True
        if self.error is None:
            self.error = error


class ReadAhead:
    """One streak of reads ahead at a time; `await run()` until it has ended.  The
    per-reply work is the streak's (`core`): _entries.Streak in C when the extension is
    built, else PyStreak."""

    def __init__(self, reader: Streaming) -> None:
        self.reader = reader
        s = reader.settings
        self._ahead = s.read_ahead
        # each read for at most concurrency / read_ahead entries, and COUNT
        self._cap = min(s.count, max(1, s.concurrency // s.read_ahead))
        self.core: Any
        self.wait_type: Any
        if Streak is None:
            self.use_python()
        else:
            self.core = Streak(reader, self._ahead, self._cap)
            self.wait_type = ReplyWait

    def use_python(self) -> None:
        """Run the streak and its wait in Python (tests: both behave the same)."""
        self.core = PyStreak(self.reader, self._ahead, self._cap)
        self.wait_type = PyReplyWait

    async def run(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Read ahead until the streak ends; returns whether the reply that ended it was
        empty (the stream had nothing new).  Raises the first error of the streak."""
        core = self.core
        core.ending, core.dry, core.error = False, False, None
        acker = self.reader.acker
        # While reads go out as replies come, they carry the acks: the acker's own flush
        # (a task step and a timer every ack_flush_ms) waits until the streak ends.
        acker.carried = True
        try:
            core.fill()
            if not core.wire:  # every slot busy: the consume loop waits for one
                return False
            if core.wait is None:
                core.wait = self.wait_type(loop)
            core.wait.due()
            done = core.done = loop.create_future()
            try:
                await done
            except asyncio.CancelledError:
                self._abandon()
                raise
            finally:
                core.done = None
        finally:
            acker.carried = False
            acker.kick()
        error = core.error
        if error is not None:
            core.error = None
            raise error
        return bool(core.dry)

    # -- a hard stop -----------------------------------------------------------------------
    def _abandon(self) -> None:
        """Cancelled: give back the slots of the reads still on the wire and queue their
        acks again; a reply that comes is dropped, its entries stay pending."""
        reader = self.reader
        core = self.core
        core.ending = True
        for read in core.wire:
            read.cancel()
            reader.slots.unreserve(read.n)
            acks = read.acks
            if acks is not None and not acks.done():
                acks.cancel()
                reader.acker.settle(acks.ids, asyncio.CancelledError())
        reader.reading -= len(core.wire)
        core.wire.clear()
