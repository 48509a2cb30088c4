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
    lost claim        the claim vanishes (taken back at the next beat), or another
                      process holds it (nothing read until it is free again)
"""

from __future__ import annotations

import collections
import os
import signal
import time

import orjson
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream.keys import owner_key
from tests.support.faults.harness import Procs, Producer, wait_for, wait_orphans_gone
from tests.support.faults.invariants import Ledger, check_all

pytestmark = pytest.mark.faults

WAITS = "waits for its consumer name"


def twice(ledger: Ledger) -> tuple[list[int], list[int]]:
    """(outbox ids delivered more than once, outbox ids whose effect was tried twice).
    A start after a failure in the same process (its own Redis call timed out on a
    loaded box) is the retry policy's, not a second delivery (invariants.py)."""
    starts = collections.Counter(e["outbox_id"] for e in ledger.events()
                                 if e["event"] == "start" and not e.get("after_failure"))
    again = [e["outbox_id"] for e in ledger.events() if e["event"] == "effect_exists"]
    return sorted(k for k, n in starts.items() if n > 1), sorted(again)


def test_a_supervisor_restarted_at_once_waits_for_its_orphans(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """Before: the new slot's worker re-read its pending list at once while the orphan
    of its name still ran those jobs: 16 of 16 started twice, 16 effects twice."""
    opts = {"graceful_timeout": 15, "job_timeout": 10, "claim_idle_ms": 60_000}
    env = {"FAULTS_SLOW_S": "4"}  # still running when the new pool has booted
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
    env = {"FAULTS_SLOW_S": "2.5"}
    one = procs.supervisor(2, opts, env=env)
    one.wait_log("worker f-00 ready")
    one.wait_log("worker f-01 ready")
    producer.enqueue("slow", range(1, 33))
    wait_for(lambda: len(ledger.starts()) >= 16, what="16 jobs in flight in the first pool")
    other = procs.supervisor(2, opts, env=env)
    other.wait_log("worker f-00 ready")
    other.wait_log("worker f-01 ready")
    producer.enqueue("ledger", range(33, 81))
    wait_for(lambda: ledger.done() >= set(range(1, 81)), 60, what="every job done")
    again, effects = twice(ledger)
    print(f"\nSIDE BY SIDE: {len(again)} of 80 started twice, {len(effects)} effects twice")
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
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: 1 in ledger.done(), 10, what="job 1 run again by the successor")
    took = time.monotonic() - t0
    sup.wait_log("took over its consumer name from pid")
    assert WAITS not in sup.text()
    print(f"\nTAKEOVER: job 1 done {took:.2f}s after the kill -9")
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    check_all(client, fsettings, ledger, duplicates_allowed={1})


def test_a_worker_that_loses_its_name_reads_nothing_until_it_has_it_back(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    w = procs.worker(0, {"claim_idle_ms": 60_000})
    key = owner_key(fsettings, "f-00")
    mine = client.get(key)
    assert mine and orjson.loads(mine)["pid"] == w.pid
    client.delete(key)  # as FLUSHDB, an empty restart or an eviction would
    w.wait_log("had vanished from Redis")
    wait_for(lambda: client.get(key) == mine, what="the claim taken back")
    # Another process holds the name (one on another host): this one stops reading.
    other = {"token": "f" * 32, "host": "elsewhere", "pid": 1, "machine": "another",
             "start": 1, "since": 0}
    client.set(key, orjson.dumps(other), px=60_000)
    w.wait_log("lost its consumer name to pid 1 on elsewhere")
    time.sleep(0.3)  # its blocking read is ended right after that line
    producer.enqueue("ledger", [1, 2])
    time.sleep(1.5)  # absence: more than a presence beat, and nothing may be read
    assert not ledger.starts(), "a worker read while another process held its name"
    client.delete(key)  # the other one exited
    w.wait_log("has its consumer name back: reading again")
    wait_for(lambda: {1, 2} <= ledger.done(), what="jobs handled once the name is back")
    w.signal(signal.SIGTERM)
    assert w.wait(20) == 0
    assert client.get(key) is None, "the claim outlived a clean exit"
    check_all(client, fsettings, ledger)


def test_work_with_a_supervisor_slots_name_waits_for_it(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """`stagedoor work --slot 0` beside a supervisor: before, it re-read f-00's pending
    list at once and ran the job the supervisor's worker was running."""
    sup = procs.supervisor(1, {"claim_idle_ms": 60_000, "job_timeout": 30})
    sup.wait_log("worker f-00 ready")
    producer.enqueue("hold_pre", [1])
    wait_for(lambda: ledger.starts()[1] == 1, what="job 1 running in f-00")
    work = procs.worker(0, {"claim_idle_ms": 60_000})  # READY, then waits
    work.wait_log(f"{WAITS}: pid ")
    producer.gate(1)
    producer.enqueue("ledger", [2, 3])
    wait_for(lambda: {1, 2, 3} <= ledger.done(), what="jobs handled by the supervisor's")
    assert {e["pid"] for e in ledger.events()}.isdisjoint({work.pid})
    work.signal(signal.SIGTERM)  # a stop while it waits for the name
    assert work.wait(20) == 0, work.text()[-2000:]
    sup.signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    check_all(client, fsettings, ledger)


def test_a_vanished_claim_is_not_a_free_name(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """A runs job 1; B, the same name (an orphan's successor, a second supervisor),
    waits for A's claim.  The claim vanishes (an eviction, a failover that lost it): it
    is absent until A's next beat renews it.  Before, B took the absent key at once and
    re-read the name's pending list: job 1 started twice, while A ran it."""
    # A's renewal comes late (a beat every 3 s), and job 1 runs until its gate opens
    opts = {"claim_idle_ms": 60_000, "heartbeat_interval": 3, "job_timeout": 30}
    a = procs.worker(0, opts)
    producer.enqueue("hold_pre", [1])
    wait_for(lambda: ledger.starts()[1] == 1, what="job 1 running in A")
    b = procs.worker(0, opts)
    b.wait_log(f"{WAITS}: pid ")
    client.delete(owner_key(fsettings, "f-00"))     # as an eviction would
    wait_for(lambda: "had vanished from Redis" in a.text() or ledger.starts()[1] > 1,
             what="A's beat to take its claim back")
    assert ledger.starts()[1] == 1, "B took the absent claim and ran A's job"
    b.wait_log(f"{WAITS}: its claim is absent")     # it found the name vacant, not free
    b.wait_log(f"{WAITS}: pid {a.pid}", count=2)    # and B waits for A again
    producer.gate(1)
    producer.enqueue("ledger", [2, 3])
    wait_for(lambda: {1, 2, 3} <= ledger.done(), what="jobs handled by A")
    assert twice(ledger) == ([], []), "a second process of the name ran A's job"
    assert {e["pid"] for e in ledger.events()} == {a.pid}
    a.signal(signal.SIGTERM)    # a clean exit: the name is released, B takes it at once
    assert a.wait(20) == 0
    producer.enqueue("ledger", [4])
    wait_for(lambda: 4 in ledger.done(), what="job 4 handled by B", timeout=10)
    assert {e["pid"] for e in ledger.events() if e["outbox_id"] == 4} == {b.pid}
    b.signal(signal.SIGTERM)
    assert b.wait(20) == 0
    check_all(client, fsettings, ledger)
