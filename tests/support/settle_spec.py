"""worker/settle.py's arithmetic in Python: the executable specification of
_entries.tally (worker/_native/tally.pxi), which is what the worker runs;
tests/worker/test_settle.py runs both on the same batches of outcomes."""

from __future__ import annotations

from typing import Any

from stagedoor.telemetry.metrics import WorkerStats


def tally(records: list[Any], stats: WorkerStats, acks: list[bytes]) -> None:
    """Each outcome (entry id, kind, settle.Event, wait, duration): its wait and its
    duration into the histograms, its event's counter by kind, its id into `acks` if
    the event queues the ack."""
    if len(records) % 5:
        raise ValueError("an outcome is five items")
    it = iter(records)
    for entry_id, kind, event, wait, took in zip(it, it, it, it, it, strict=True):
        if wait is not None:
            stats.observe_wait(kind, wait)
        if took is not None:
            stats.observe(kind, took)
        if event.counter is not None:
            stats.inc(event.counter, kind)
        if event.ack:
            acks.append(entry_id)
