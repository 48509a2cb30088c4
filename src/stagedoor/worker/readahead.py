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
ReplyWait, in C because a read's Python calls are a large share of a short job's CPU
(docs/benchmarks.md, "Why the code is the way it is").  Their executable specification
in Python is tests/support/readahead_spec.py (PyStreak, PyReplyWait: the same rules,
and the tests run both).

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
from typing import Any, Protocol

from ..config import Settings
from ..stream.resp import FastConnection
from .acks import Acker
from .dispatch import Dispatcher
from .entries import ReplyWait, Streak
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


class ReadAhead:
    """One streak of reads ahead at a time; `await run()` until it has ended.  The
    per-reply work is the streak's (`core`, _entries.Streak)."""

    def __init__(self, reader: Streaming) -> None:
        self.reader = reader
        s = reader.settings
        self.ahead = s.read_ahead
        # each read for at most concurrency / read_ahead entries, and COUNT
        self.cap = min(s.count, max(1, s.concurrency // s.read_ahead))
        self.core: Any = Streak(reader, self.ahead, self.cap)

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
                core.wait = ReplyWait(loop)
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
