"""Where a job's outcome is written down: `Settle.settle`, the one step every outcome
of a job passes through, the only caller of the ack queue and the only writer of the
job stats (the counters by kind, the duration and wait histograms).

    FastDispatch (C, a reply's jobs that never waited, in one batch) --+
                                                                       +--> settle()
    Dispatcher (Python: every other job, as run_with_policy decides) --+
        -> the job stats: handled, retried, failed, dead_lettered, deleted, the
           histograms of each attempt's duration and of the wait before the start
        -> the ack queue (acks.py) for what is acked by an XACK of its own

An outcome is a record of five: the entry id, the job's kind (the metrics label), the
event (below), the wait in seconds from the entry's id to the handler's start (None:
not this record's to count) and an attempt's duration in seconds (None: none ran).
The C dispatch appends these to a list, five items a job; the Python path settles a
record at a time.  What an event counts is said here (Event); the adding up is
entries.tally's, in C, for speed (tests/support/settle_spec.py is its Python spec).

Where an XACK goes onto the wire, for the ids queued here: with the next read, in the
same write (reader.py's consume read, or the read-ahead's Streak.fill in C), else the
acker's own flush after ack_flush_ms (acks.py).  Two outcomes are acked elsewhere, and
settled here with `ack` False: a dead letter's ack is inside the dead-letter script
(stream/queue.py), and a redelivered entry's goes with the DEL of its start count in
one write (dispatch.py, _ack_and_forget; if that write fails, an ACK record queues it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..telemetry.metrics import WorkerStats
from .acks import Acker
from .entries import tally


class Event(NamedTuple):
    """What an outcome counts (a counter of the stats, or None) and whether its ack is
    queued here."""

    counter: str | None
    ack: bool


DONE = Event("handled", True)  # the handler returned: acked
DONE_ACKED = Event("handled", False)  # a redelivery that returned: acked with its keys
STARTED = Event(None, False)  # a handler started (its wait), its end settled later
RETRIED = Event("retried", False)  # an attempt failed and is tried again
FAILED = Event("failed", False)  # retries spent: left pending, for a redelivery
DEAD = Event("dead_lettered", False)  # dead-lettered: acked by the dead-letter script
ENDED = Event(None, False)  # an attempt whose outcome is counted by a later record
DELETED = Event("deleted", True)  # trimmed while pending: acked, nothing to run
DELETED_ACKED = Event("deleted", False)  # the same, redelivered: acked with its keys
ACK = Event(None, True)  # only the ack (the write with the keys failed)


class Settle:
    """The job stats and the ack queue, written in one place (see the module)."""

    __slots__ = ("acker", "stats")

    def __init__(self, stats: WorkerStats, acker: Acker) -> None:
        self.stats = stats
        self.acker = acker

    def settle(self, records: list[Any]) -> None:
        """Write down the outcomes in `records` (flat: five items an outcome): their
        waits, durations and counters into the stats (tally: the arithmetic in C,
        _native/tally.pxi), then the ids their events ack into the ack queue."""
        acks: list[bytes] = []
        tally(records, self.stats, acks)
        if acks:
            self.acker.add(acks)
