"""One consumer name, one reading process, whoever started the processes (issue 37, 1).

A supervisor keeps its own processes of one name apart; these are the cases it cannot
see, each over a ledger of idempotency-guarded effects:

    restart at once   kill -9 of the supervisor mid-drain, then at once a new one with
                      the same --consumer (docker's restart policy, runit, a hand
                      restart): its workers wait for the orphans of their names to
                      finish and exit, then read; every job starts once
    side by side      two supervisors with one --consumer prefix: the second's workers
                      wait for the names the first's hold; every job starts once
    takeover          a kill -9'd worker's successor takes its name at once (the holder
                      is dead on this machine): its jobs run again within seconds
"""

from __future__ import annotations

import signal
import time

import pytest
import redis

from stagedoor.config import Settings

from .harness import Procs, Producer, wait_for, wait_orphans_gone
from .invariants import Ledger, check_all

pytestmark = pytest.mark.faults

WAITS = "waits for its consumer name"


def twice(ledger: Ledger) -> tuple[list[int], list[int]]:
    """(outbox ids started more than once, outbox ids whose effect was tried twice)."""
    starts = ledger.starts()
    again = [e["outbox_id"] for e in ledger.events() if e["event"] == "effect_exists"]
    return sorted(k for k, n in starts.items() if n > 1), sorted(again)


def test_a_supervisor_restarted_at_once_waits_for_its_orphans(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """Before: the new slot's worker re-read its pending list at once while the orphan
    of its name still ran those jobs: 16 of 16 started twice, 16 effects twice."""
    opts = {"graceful_timeout": 15, "job_timeout": 10, "claim_idle_ms": 60_000}
    env = {"FAULTS_SLOW_S": "1.5"}
    first = procs.supervisor(2, opts, env=env)
    first.wait_log("worker f-01 ready")
    first.wait_log("worker f-00 ready")
    producer.enqueue("slow", range(1, 17))
    wait_for(lambda: len(ledger.starts()) == 16, what="16 slow jobs in flight")
    orphans = sorted({e["pid"] for e in ledger.events()})
    first.signal(signal.SIGKILL)
    first.wait(10)
    second = procs.supervisor(2, opts, env=env)  # at once, as a restart policy does
    try:
        wait_for(lambda: ledger.done() >= set(range(1, 17)), 30, what="every job done")
        wait_orphans_gone(orphans, 30)
        producer.enqueue("ledger", range(17, 21))  # and the new pool reads
        wait_for(lambda: ledger.done() >= set(range(1, 21)), 30, what="new jobs done")
        again, effects = twice(ledger)
        print(f"\nRESTART AT ONCE: {len(again)} of 16 started twice, {len(effects)} "
              f"effects twice")
        assert not again and not effects, (again, effects)
        assert WAITS in second.text(), second.text()[-3000:]
        second.signal(signal.SIGTERM)
        assert second.wait(30) == 0, second.text()[-3000:]
        check_all(client, fsettings, ledger)
    finally:
        wait_orphans_gone(orphans, 1)


def test_two_supervisors_with_one_prefix_run_every_job_once(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """Before: both pools read under f-00 and f-01 and re-ran each other's pending
    entries (200 of 200 twice in the issue's run)."""
    opts = {"graceful_timeout": 10, "job_timeout": 10, "claim_idle_ms": 60_000,
            "reclaim_interval": 1}
    env = {"FAULTS_SLEEP_MS": "400"}
    one = procs.supervisor(2, opts, env=env)
    one.wait_log("worker f-00 ready")
    one.wait_log("worker f-01 ready")
    producer.enqueue("ledger", range(1, 101))
    wait_for(lambda: len(ledger.starts()) >= 10, what="jobs in flight in the first pool")
    other = procs.supervisor(2, opts, env=env)
    other.wait_log("worker f-00 ready")
    other.wait_log("worker f-01 ready")
    wait_for(lambda: ledger.done() >= set(range(1, 101)), 60, what="every job done")
    again, effects = twice(ledger)
    print(f"\nSIDE BY SIDE: {len(again)} of 100 started twice, {len(effects)} effects twice")
    assert not again and not effects, (again, effects)
    assert other.text().count(WAITS) == 2, other.text()[-3000:]
    ran = {e["pid"] for e in ledger.events()}
    assert len(ran) == 2, f"{len(ran)} processes ran jobs under two names"
    for sup in (one, other):
        sup.signal(signal.SIGTERM)
    for sup in (one, other):
        assert sup.wait(30) == 0, sup.text()[-3000:]
    check_all(client, fsettings, ledger)


def test_a_killed_workers_successor_takes_its_name_at_once(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """The claim of a worker that died on this machine is not waited out (its TTL):
    the respawned worker sees the holder's pid gone and takes the name."""
    sup = procs.supervisor(1, {"claim_idle_ms": 60_000, "job_timeout": 30})
    sup.wait_log("worker f-00 ready")
    producer.enqueue("hold_pre", [1])
    wait_for(lambda: ledger.starts()[1] == 1, what="job 1 running")
    [pid] = {e["pid"] for e in ledger.events()}
    producer.gate(1)  # the next run of it finishes
    t0 = time.monotonic()
    import os
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: 1 in ledger.done(), 10, what="job 1 run again by the successor")
    took = time.monotonic() - t0
    sup.wait_log("took over its consumer name from pid")
    assert WAITS not in sup.text()
    print(f"\nTAKEOVER: job 1 done {took:.2f}s after the kill -9")
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    check_all(client, fsettings, ledger, duplicates_allowed={1})
