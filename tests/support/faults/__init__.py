"""The fault tests' harness (tests/faults/ and the server tests that inject faults):

- harness.py     real supervisors, workers and producers as subprocesses (`Procs`,
                 `Producer`), polling waits
- invariants.py  what must hold after a fault: the ledger of effects, nothing lost,
                 nothing acked early, the queue idle
- proxy.py       a TCP proxy between a worker and Redis that drops, delays or cuts
                 (`FaultProxy`)

and here, what the fault tests read from the workers' logs (`faulted`); the handlers
that write the ledger are tests/support/handlers/ledger.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.faults.harness import Proc
    from tests.support.faults.invariants import Ledger


def faulted(procs: list[Proc], ledger: Ledger) -> set[int]:
    """Outbox ids of the jobs a worker logged a retry or a Redis failure for."""
    by_entry = {r["entry_id"]: r["outbox_id"] for r in ledger.enqueued()}
    out: set[int] = set()
    for proc in procs:
        for line in proc.log_lines():
            msg = line.get("msg", "")
            if "retrying in" in msg or "left pending" in msg or "Redis failed" in msg:
                if "outbox_id" in line:
                    out.add(int(line["outbox_id"]))
                elif line.get("entry_id") in by_entry:
                    out.add(by_entry[line["entry_id"]])
    return out
