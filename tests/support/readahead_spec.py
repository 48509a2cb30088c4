"""The read-ahead's per-reply work in Python: the executable specification of
worker/_entries.pyx's Streak and ReplyWait (worker/_native/streak.pxi), which is what the
worker runs.  Tests run both against the same cases (tests/worker/test_reply_wait.py,
tests/worker/test_fast_dispatch.py, tests/worker/test_worker.py); `use_python(monkeypatch)` switches
the read-ahead of the workers a test makes to these.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from stagedoor.stream.wire import Hook
from stagedoor.worker import readahead
from stagedoor.worker.acks import Acker
from stagedoor.worker.readahead import Streaming


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
            proto = self.reader.conn._proto  # has more of what Redis sent come in?
            if self.wait is not None and (proto is None or not proto.reader.has_data()):
                self.wait.due()
            return
        done = self.done
        if self.ending and done is not None and not done.done():
            done.set_result(None)

    def _end(self, error: BaseException) -> None:
        self.ending = True
        if self.error is None:
            self.error = error




def use_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-ahead of the workers made from now on runs its streak and its reply wait
    in Python (this spec) instead of _entries.Streak and ReplyWait."""
    monkeypatch.setattr(readahead, "Streak", PyStreak)
    monkeypatch.setattr(readahead, "ReplyWait", PyReplyWait)
