"""The same invariants under stagedoor-supervise: SIGTERM drains the whole pool, a
kill -9'd worker is respawned under its own name and its jobs run again within
seconds, and a job that kills every worker that runs it ends in jobs:dead once
while the pool keeps running."""

from __future__ import annotations

import signal
import time

import psutil
import pytest
import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis
from tests.support.faults.harness import Proc, Procs, Producer, wait_for, wait_orphans_gone
from tests.support.faults.invariants import (
    Ledger,
    assert_idle,
    check_all,
    check_no_early_ack,
    dead_entries,
    dead_meta,
    pending_ids,
)

pytestmark = pytest.mark.faults


def worker_pids(sup: Proc) -> dict[str, int]:
    """consumer name -> pid of the supervisor's live workers (from their command line)."""
    out = {}
    for child in psutil.Process(sup.pid).children():
        with_slot = [ln for ln in sup.log_lines() if ln.get("pid") == child.pid
                     and "ready" in ln.get("msg", "")]
        if with_slot:
            out[with_slot[-1]["consumer"]] = child.pid
    return out


def start_pool(procs: Procs, n: int, options: dict[str, object] | None = None,
               env: dict[str, str] | None = None) -> Proc:
    sup = procs.supervisor(n, options, env=env)
    for k in range(n):
        sup.wait_log(f"worker f-{k:02d} ready")
    return sup


def test_supervisor_sigterm_drains_every_worker_and_exits_0(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    sup = start_pool(procs, 2, env={"FAULTS_SLOW_S": "1.0"})
    children = psutil.Process(sup.pid).children()
    assert len(children) == 2
    slow = producer.enqueue("slow", range(1, 9))
    wait_for(lambda: len(ledger.starts()) == 8, what="8 slow jobs in flight")
    t0 = time.monotonic()
    sup.signal(signal.SIGTERM)
    assert sup.wait(15) == 0
    assert time.monotonic() - t0 < 1.0 + 4
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert ledger.done() == set(range(1, 9)), "in-flight jobs finished during the drain"
    assert not set(slow) & set(pending_ids(client, fsettings)), "and were acked"
    check_no_early_ack(client, fsettings, ledger)
    later = producer.enqueue("ledger", range(9, 30))
    assert not set(ledger.starts()) & set(range(9, 30))
    sup2 = start_pool(procs, 2, env={"FAULTS_SLOW_S": "0.05"})
    wait_for(lambda: ledger.done() >= set(range(1, 30)), what="the rest, by the next pool")
    check_all(client, fsettings, ledger)
    assert len(later) == 21
    assert_idle(client, [sup2.pid], block_ms=200)


def test_supervised_worker_kill9_respawned_same_name_jobs_run_again_quickly(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    sup = start_pool(procs, 2)
    held = producer.enqueue("hold_pre", range(1, 5))
    wait_for(lambda: set(ledger.starts()) == {1, 2, 3, 4}, what="held jobs started")
    owners = {c for c, _n in pending_ids(client, fsettings).values()}
    victim_name = sorted(owners)[0]
    victim = worker_pids(sup)[victim_name]
    victim_jobs = {e for e, (c, _n) in pending_ids(client, fsettings).items()
                   if c == victim_name}
    producer.gate(1, 2, 3, 4)  # the survivor's jobs finish; the victim's die with it
    t0 = time.monotonic()
    psutil.Process(victim).kill()
    ids_by_entry = {e: i for e, i in zip(held, range(1, 5), strict=True)}
    again = {ids_by_entry[e] for e in victim_jobs}
    wait_for(lambda: ledger.done() >= {1, 2, 3, 4}, 10, what="the victim's jobs again")
    took = time.monotonic() - t0
    print(f"kill -9 -> {len(victim_jobs)} pending jobs handled again in {took:.2f}s")
    assert took < 3.0, "respawned under the same name, it reads its own pending first"
    assert sup.alive()
    assert worker_pids(sup).get(victim_name) not in (None, victim)
    check_all(client, fsettings, ledger, duplicates_allowed=again)


def test_job_that_kills_its_worker_is_dead_lettered_once_and_pool_keeps_running(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    sup = start_pool(procs, 2, {"max_deliveries": 3})
    warm = producer.enqueue("ledger", range(10, 40))
    wait_for(lambda: ledger.done() >= set(range(10, 40)), what="the pool works")
    # ... and acked: a job handled but not yet acked by the worker the crash kills runs
    # again (at-least-once; RELIABILITY.md), a duplicate this case does not inject.
    wait_for(lambda: not set(warm) & set(pending_ids(client, fsettings)),
             what="the first jobs acked")
    # Alone in its batch: batch-mates are the next test's case.
    [bad] = producer.enqueue("crash", [1])
    wait_for(lambda: bad not in pending_ids(client, fsettings)
             and client.xlen(fsettings.dead_stream) >= 1, 30,
             what="the crashing job to be dead-lettered")
    producer.enqueue("ledger", range(40, 80))
    wait_for(lambda: ledger.done() >= set(range(40, 80)), 20, what="jobs after it")
    # 3 deliveries crashed a worker each (fresh, first redelivery, alone); the crash
    # while it ran alone is its own, and the slot's next worker dead-letters it at
    # boot with the signal its supervisor saw, without running it again.
    assert ledger.starts()[1] == 3
    summary = check_all(client, fsettings, ledger,
                        poison={bad: "killed its worker: SIGKILL while it ran alone"})
    assert summary.dead == 1
    died = [ln for ln in sup.log_lines() if ln.get("logger") == "stagedoor.supervisor"
            and "died (signal SIGKILL)" in ln.get("msg", "")]
    assert len(died) == 3, [ln["msg"] for ln in sup.log_lines()][-20:]
    assert sup.alive()
    wait_for(lambda: len(worker_pids(sup)) == 2, 10, what="the pool back to 2 workers")
    producer.enqueue("ledger", range(80, 90))
    wait_for(lambda: ledger.done() >= set(range(80, 90)), what="the pool keeps going")
    assert_idle(client, [sup.pid], block_ms=200)


def test_jobs_read_with_a_worker_killing_job_are_not_dead_lettered_as_poison(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    """A crash adds 1 to the delivery count of every entry the dead worker held, so the
    innocent jobs read in one batch with a worker-killing job used to reach
    max_deliveries with it and be dead-lettered as poison (all 9 here); then, with
    suspects isolated, the one that ran just before the killer lost its unflushed ack
    to it.  (Both found by this suite; fixed in worker.py: starts are counted,
    suspects run alone and flush their acks before the next one starts.)"""
    sup = procs.supervisor(1, {"max_deliveries": 3})
    sup.wait_log("worker f-00 ready")
    entries = producer.enqueue("ledger", range(10, 19))  # one batch (COUNT 10) ...
    [bad] = producer.enqueue("crash", [1])             # ... with the killer in it
    wait_for(lambda: ledger.starts()[1] >= 1, what="the killer ran")
    wait_for(lambda: bad not in pending_ids(client, fsettings), 30, what="the killer settled")
    wait_for(lambda: not pending_ids(client, fsettings), 30, what="the rest settled")
    sources = [dead_meta(f).get("source_id") for _i, f in dead_entries(client, fsettings)]
    innocent = [e for e in entries if e in sources]
    assert sources.count(bad) == 1
    assert not innocent, f"{len(innocent)} jobs that never failed were dead-lettered"
    assert ledger.done() >= set(range(10, 19))
    check_all(client, fsettings, ledger, duplicates_allowed=set(range(10, 19)),
              effect_exists_allowed=9, poison={bad: "killed its worker: SIGKILL"})


@pytest.mark.parametrize("redis_state,kind", [("redis-up", "slow"), ("redis-killed", "slow"),
                                              ("redis-up", "stubborn")])
def test_orphaned_workers_exit_even_when_redis_is_gone_too(
        procs: Procs, producer: Producer, ledger: Ledger, server: EmbeddedRedis,
        redis_state: str, kind: str) -> None:
    """A host going down takes the supervisor and Redis with it in any order.  Workers
    whose supervisor was kill -9'd have nobody left to enforce graceful_timeout: they
    must enforce it themselves, also when Redis is gone and every command they would
    send to finish (CLIENT UNBLOCK, acks) can only wait for an outage to end, and when a
    handler will not end on cancel (stubborn: a thread stuck on a disk, a swallowed
    cancel).  Two workers of a cluster test sat at PPID 1 for 70 minutes once."""
    sup = start_pool(procs, 2, {"graceful_timeout": 2}, env={"FAULTS_SLOW_S": "30"})
    pids = list(worker_pids(sup).values())
    assert len(pids) == 2
    producer.enqueue(kind, range(1, 5))
    wait_for(lambda: len(ledger.starts()) == 4, what=f"4 {kind} jobs in flight")
    if redis_state == "redis-killed":
        server.stop(signal.SIGKILL)
    t0 = time.monotonic()
    sup.signal(signal.SIGKILL)
    sup.wait(10)

    # graceful_timeout 2 s for the jobs, at most as long again for the acks, 1 s of
    # margin, then out, whatever is still running.
    wait_orphans_gone(pids, 15)
    print(f"\nORPHANS ({redis_state}, {kind}): workers gone {time.monotonic() - t0:.1f}s after the "
          "supervisor's kill -9")
    assert not ledger.done() & set(range(1, 5)), "30 s jobs cannot have finished"
