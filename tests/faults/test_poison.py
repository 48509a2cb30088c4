"""Poison jobs that kill their worker, under a real supervisor (issue 24, item 2).

A job that aborts its process (os.abort(): SIGABRT, as a renderer's failed assertion
does) costs a bounded number of crashes: the fresh delivery, one redelivery among
its batch-mates, and one run alone, after which the next worker of the slot
dead-letters it with the signal as its reason.  Batch-mates are never blamed, the
supervisor does not count a stream of poison jobs among working jobs as flapping, and
its status file counts what the crashed workers handled before they died.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from stagedoor.config import Settings
from tests.support.faults.harness import Procs, Producer, wait_for
from tests.support.faults.invariants import Ledger, check_all, dead_entries, dead_meta, pending_ids

pytestmark = pytest.mark.faults

CRASHES_PER_POISON = 3  # fresh delivery, first redelivery (with others), alone


def read_status(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return {}
    return data


def test_poison_jobs_among_many_cost_bounded_crashes_and_never_the_host(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings, tmp_path: Path) -> None:
    """8 aborting jobs among 400, 2 workers, the default flap limit (20 restarts in
    60 s) and max_deliveries (5): the issue saw the supervisor exit 70 after 21
    crashes with 241 handled and a status file saying handled 0."""
    poison_ids = [23, 71, 118, 160, 205, 251, 300, 377]
    status_path = tmp_path / "status.json"
    sup = procs.supervisor(2, {"max_deliveries": 5},
                           env={"FAULTS_ABORT": ",".join(map(str, poison_ids))},
                           extra=["--status-file", str(status_path)])
    sup.wait_log("worker f-00 ready")
    sup.wait_log("worker f-01 ready")
    entries = producer.enqueue("abort_on", range(1, 401))
    poison = {entries[i - 1]: i for i in poison_ids}
    good = set(range(1, 401)) - set(poison_ids)

    def settled() -> bool:
        assert sup.alive(), f"supervisor exited {sup.popen.returncode}:\n{sup.text()[-3000:]}"
        return ledger.done() >= good and not set(poison) & set(pending_ids(client, fsettings))
    wait_for(settled, 120, what="every good job done and every poison job settled")

    dead = {str(dead_meta(f).get("source_id")): dead_meta(f) for _i, f in
            dead_entries(client, fsettings)}
    assert set(dead) == set(poison), f"dead: {sorted(dead)}, poison {sorted(poison)}"
    for eid, meta in dead.items():
        assert "killed its worker: SIGABRT" in meta["error"], (poison[eid], meta["error"])
    check_all(client, fsettings, ledger, duplicates_allowed=len(good),
              effect_exists_allowed=len(good),
              poison={eid: "SIGABRT" for eid in poison})
    crashes = [ln for ln in sup.log_lines() if ln.get("logger") == "stagedoor.supervisor"
               and "died (signal SIGABRT)" in ln.get("msg", "")]
    assert len(crashes) <= CRASHES_PER_POISON * len(poison_ids), len(crashes)
    # each poison job started at most 3 times
    starts = ledger.starts()
    assert max(starts[i] for i in poison_ids) <= CRASHES_PER_POISON, \
        {i: starts[i] for i in poison_ids}
    assert sup.alive()
    # What the workers really handled, the crashed ones included: every done line.
    really = ledger.count("done")
    wait_for(lambda: read_status(status_path).get("handled") == really, 15,
             what=f"status file handled == {really} "
                  f"(is {read_status(status_path).get('handled')})")
