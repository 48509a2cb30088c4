"""Redis Cluster under load: a drain of thousands of jobs under `stagedoor-supervise`
through a migration of the queue's slot to another master (ASK, then MOVED) and a
kill -9 of the slot's master with its replica promoted (3 masters + 3 replicas, node
timeout 1 s, on loopback; tests/support/topology.py).  Timings are printed, not asserted.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream import connection
from tests.stream.test_cluster import _hand_over, _masters, _migrate
from tests.support.aclmode import worker_url
from tests.support.faults.harness import Procs, Producer, wait_for, wait_orphans_gone
from tests.support.faults.invariants import Ledger
from tests.support.topology import ClusterSet

pytestmark = [pytest.mark.server, pytest.mark.faults]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterSet]:
    c = ClusterSet(tmp_path / "cluster", masters=3, replicas=1)
    try:
        yield c
    finally:
        c.stop()


def test_drain_through_a_slot_migration_and_a_kill9_of_the_slot_s_master(
        tmp_path: Path, cluster: ClusterSet) -> None:
    ledger = Ledger(tmp_path / "ledger")
    s = Settings(redis_url=cluster.url, consumer="f")
    client = connection.sync_client(s)
    n = 4000
    try:
        Producer(client, s, ledger.directory).enqueue("ledger", range(1, n + 1))
    finally:
        client.close()
    procs = Procs(tmp_path, worker_url(cluster.url), ledger.directory)
    try:
        sup = procs.supervisor(2, {"claim_idle_ms": 3000, "job_timeout": 1.0,
                                   "boot_timeout": 20}, env={"FAULTS_SLEEP_MS": "4"})
        for slot in (0, 1):
            sup.wait_log(f"worker f-{slot:02d} ready")
        wait_for(lambda: len(ledger.done()) >= n // 5, 60, what="a fifth of the drain")
        # The queue's slot moves to another master mid-drain: ASK while it migrates,
        # MOVED for every connection still on the old owner afterwards.
        _source, target = _migrate(cluster, s.stream, finish=False)
        time.sleep(0.5)
        _hand_over(s.stream, _masters(target), target)
        done_at_move = len(ledger.done())
        wait_for(lambda: len(ledger.done()) >= done_at_move + n // 5, 60,
                 what="the drain going on after the migration")
        # Then the slot's master dies; its replica takes over.
        owner = cluster.owner(s.stream)
        done_at_kill = len(ledger.done())
        cluster.kill(owner)
        t_kill = time.time()

        def promoted() -> bool:
            try:
                return cluster.owner(s.stream) != owner
            except (redis.ConnectionError, redis.TimeoutError):
                return False
        wait_for(promoted, 30, what="the replica promoted")
        t_promoted = time.time()
        assert done_at_kill < n, "the drain was over before the kill: enqueue more"
        wait_for(lambda: ledger.done() >= set(range(1, n + 1)), 120,
                 what="every job handled after the failover")
        t_first = min(e["t"] for e in ledger.events()
                      if e["event"] == "start" and e["t"] > t_promoted)
        node = cluster.client_for(s.stream)
        try:
            wait_for(lambda: node.xpending(s.stream, s.group)["pending"] == 0, 30,
                     what="nothing left pending")
        finally:
            node.close()
        text = sup.text()
        for slot in (0, 1):
            assert text.count(f"worker f-{slot:02d} ready") == 1, "a worker was restarted"
        assert "ASK" in text or "MOVED" in text, "the redirections reached the workers"
        print(f"\nCLUSTER migration at {done_at_move}/{n} done; kill -9 of the slot's master "
              f"at {done_at_kill}/{n}: replica promoted {t_promoted - t_kill:.2f}s after, "
              f"first job started {t_first - t_promoted:.2f}s after the promotion "
              f"({t_first - t_kill:.2f}s after the kill)")
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        procs.close()


@pytest.mark.parametrize("first", ["supervisor-first", "cluster-first"])
def test_orphaned_workers_exit_when_the_supervisor_and_the_cluster_die(
        tmp_path: Path, cluster: ClusterSet, first: str) -> None:
    """The supervisor kill -9'd, then every cluster node stopped: its workers have
    nobody to enforce graceful_timeout and no server to finish on, and must still exit
    (two did not, once: idle at PPID 1 for 70 minutes after a failed run of the test
    above).  tests/faults/test_supervisor.py has the standalone cases."""
    import psutil

    ledger = Ledger(tmp_path / "ledger")
    s = Settings(redis_url=cluster.url, consumer="f")
    client = connection.sync_client(s)
    producer = Producer(client, s, ledger.directory)
    procs = Procs(tmp_path, worker_url(cluster.url), ledger.directory)
    try:
        sup = procs.supervisor(2, {"graceful_timeout": 2, "boot_timeout": 20},
                               env={"FAULTS_SLOW_S": "30"})
        for slot in (0, 1):
            sup.wait_log(f"worker f-{slot:02d} ready")
        pids = [c.pid for c in psutil.Process(sup.pid).children()]
        producer.enqueue("slow", range(1, 5))
        wait_for(lambda: len(ledger.starts()) == 4, 20, what="4 slow jobs in flight")
        t0 = time.monotonic()
        if first == "cluster-first":
            cluster.stop()
        sup.signal(signal.SIGKILL)
        sup.wait(10)
        cluster.stop()

        wait_orphans_gone(pids, 20)
        print(f"\nORPHANS (cluster, {first}): workers gone {time.monotonic() - t0:.1f}s "
              "after the first kill")
    finally:
        client.close()
        procs.close()
