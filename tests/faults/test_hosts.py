"""Many hosts: two `stagedoor-supervise` with different host names (consumer prefixes)
against one Redis.  One host dies whole (SIGKILL of its supervisor and every worker at
once); the other takes its pending jobs over through the reclaim path (XAUTOCLAIM
after claim_idle_ms, shortened to 1.5 s here) and nothing is lost.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
import redis

from stagedoor.config import Settings
from tests.support.faults.harness import Procs, Producer, wait_for
from tests.support.faults.invariants import Ledger, check_all, pending_ids

pytestmark = [pytest.mark.server, pytest.mark.faults]


def test_a_dead_host_s_pending_jobs_are_reclaimed_by_the_other_host(
        procs: Procs, producer: Producer, ledger: Ledger, client: redis.Redis,
        fsettings: Settings) -> None:
    s = fsettings
    env = {"FAULTS_SLEEP_MS": "40"}
    a = procs.supervisor(2, {"consumer": "host-a"}, env=env)
    b = procs.supervisor(2, {"consumer": "host-b"}, env=env)
    for sup, host in ((a, "host-a"), (b, "host-b")):
        for slot in (0, 1):
            sup.wait_log(f"worker {host}-{slot:02d} ready")
    n = 600
    producer.enqueue("ledger", range(1, n + 1))

    def pending_of(prefix: str) -> dict[str, tuple[str, int]]:
        return {i: p for i, p in pending_ids(client, s).items() if p[0].startswith(prefix)}

    wait_for(lambda: len(ledger.done()) >= n // 5 and pending_of("host-a"), 30,
             what="both hosts draining, host-a holding jobs")
    # A dead host: the supervisor and its workers die at the same instant.
    victims = [a.pid, *(c.pid for c in psutil.Process(a.pid).children())]
    assert len(victims) == 3
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    t_kill = time.monotonic()
    orphaned = pending_of("host-a")
    assert orphaned, "host-a died holding no job: nothing to take over"
    wait_for(lambda: not pending_of("host-a"), 30, what="host-a's pending taken over")
    t_taken = time.monotonic() - t_kill
    wait_for(lambda: ledger.done() >= set(range(1, n + 1)), 60, what="every job handled")
    # A job killed between its side effect and mark_done finds the effect on its next
    # delivery (RELIABILITY.md, check-then-act): at most once per orphaned job.
    check_all(client, s, ledger, duplicates_allowed=len(orphaned),
              effect_exists_allowed=len(orphaned))
    b_pids = {c.pid for c in psutil.Process(b.pid).children()}
    by_b = {e["outbox_id"] for e in ledger.events() if e["event"] == "done"
            and e["pid"] in b_pids}
    orphan_jobs = {int(client.xrange(s.stream, i, i)[0][1][b"outbox_id"])
                   for i in orphaned if client.xrange(s.stream, i, i)}
    assert orphan_jobs <= by_b, "the dead host's jobs were finished by the other host"
    print(f"\nHOSTS: host-a killed holding {len(orphaned)} pending jobs; host-b took them "
          f"over {t_taken:.2f}s after the kill (claim_idle_ms 1500, reclaim every 0.1 s)")
    b.signal(signal.SIGTERM)
    assert b.wait(30) == 0
