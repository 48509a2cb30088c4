"""Failover under Sentinel: kill -9 of the master in the middle of a drain under
`stagedoor-supervise`, and what the producer's WAIT saves (tests/support/topology.py: a
master, a replica and three sentinels, down-after 1 s, on loopback).

Figures (printed, not asserted: no test asserts wall-clock speed): kill -> the
sentinels name the promoted replica (their detection and failover), and promotion ->
the first job a worker starts on it (stagedoor's part; target < 5 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream import connection
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import EnqueueError, NotReplicated, enqueue_sync
from tests.support.aclmode import worker_url
from tests.support.faults.harness import Procs, Producer, wait_for
from tests.support.faults.invariants import Ledger
from tests.support.topology import SentinelSet

pytestmark = [pytest.mark.server, pytest.mark.faults]


def stream_outbox_ids(client: redis.Redis) -> set[int]:
    out = set()
    for _id, fields in client.xrange("jobs"):
        out.add(int(fields[b"outbox_id"]))
    return out


class LoopProducer(threading.Thread):
    """Enqueues one job at a time, like an outbox relay: an id counts as acknowledged
    only when enqueue returned; a failed one is sent again (deduped by outbox_id)."""

    def __init__(self, settings: Settings, first: int) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.next_id = first
        self.acked: list[int] = []
        self.refused: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        client = connection.sync_client(self.settings)
        try:
            while not self.stop.is_set():
                i = self.next_id
                try:
                    enqueue_sync(client, self.settings, [make_job("ledger", i, i, f"r{i}", "t")])
                except (EnqueueError, redis.ConnectionError, redis.TimeoutError) as e:
                    self.refused.append(type(e).__name__)
                    time.sleep(0.02)
                    continue
                self.acked.append(i)
                self.next_id += 1
                time.sleep(0.002)
        finally:
            client.close()


def test_kill9_of_the_master_mid_drain_workers_resume_on_the_promoted_replica(
        tmp_path: Path, sentinels: SentinelSet) -> None:
    ledger = Ledger(tmp_path / "ledger")
    s = Settings(redis_url=sentinels.url, consumer="f")  # producer side: WAIT 1 (the default)
    client = connection.sync_client(s)
    n = 4000
    try:
        Producer(client, s, ledger.directory).enqueue("ledger", range(1, n + 1))
    finally:
        client.close()
    procs = Procs(tmp_path, worker_url(sentinels.url), ledger.directory)
    try:
        sup = procs.supervisor(2, {"claim_idle_ms": 3000, "job_timeout": 1.0,
                                   "boot_timeout": 20}, env={"FAULTS_SLEEP_MS": "4"})
        for slot in (0, 1):
            sup.wait_log(f"worker f-{slot:02d} ready")
        wait_for(lambda: len(ledger.done()) >= n // 4, 60, what="a quarter of the drain")
        with_wait = LoopProducer(s.replace(wait_timeout_ms=200), 100_000)
        without = LoopProducer(s.replace(wait_replicas=0), 200_000)
        with_wait.start()
        without.start()
        time.sleep(0.3)
        done_at_kill = len(ledger.done())
        old_port, _ = sentinels.kill_master()
        t_kill = time.time()
        new_port = sentinels.wait_promoted(old_port)
        t_promoted = time.time()
        assert done_at_kill < n, "the drain was over before the kill: enqueue more"
        wait_for(lambda: any(e["event"] == "start" and e["t"] > t_promoted
                             for e in ledger.events()), 60, what="a job started on the new master")
        t_first = min(e["t"] for e in ledger.events()
                      if e["event"] == "start" and e["t"] > t_promoted)
        time.sleep(1.0)  # the producers keep going on the new master for a moment
        with_wait.stop.set()
        without.stop.set()
        with_wait.join(10)
        without.join(10)

        # Everything enqueued before the kill (with WAIT 1), and every enqueue with WAIT
        # that returned, is handled; no worker was restarted.
        new = sentinels.client(new_port)
        try:
            on_new = stream_outbox_ids(new)
        finally:
            new.close()
        expected = set(range(1, n + 1)) | set(with_wait.acked)
        wait_for(lambda: ledger.done() >= expected, 120, what="every confirmed job handled")
        lost_with_wait = set(with_wait.acked) - on_new
        assert not lost_with_wait
        # Without WAIT: an acknowledged enqueue the replica never got is gone: counted.
        lost_without = set(without.acked) - on_new
        wait_for(lambda: ledger.done() >= set(without.acked) - lost_without, 60,
                 what="the no-WAIT jobs that reached the replica handled")
        text = sup.text()
        for slot in (0, 1):
            assert text.count(f"worker f-{slot:02d} ready") == 1, "a worker was restarted"
        assert sup.alive()
        print(f"\nFAILOVER kill->promoted {t_promoted - t_kill:.2f}s, "
              f"promoted->first job started on the new master {t_first - t_promoted:.2f}s, "
              f"kill->first job {t_first - t_kill:.2f}s; done at kill {done_at_kill}/{n}; "
              f"with WAIT: {len(with_wait.acked)} acked, {len(with_wait.refused)} refused "
              f"({sorted(set(with_wait.refused))}), lost 0; without WAIT: "
              f"{len(without.acked)} acked, lost {len(lost_without)}")
        sup.signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        procs.close()


def test_without_wait_an_acknowledged_enqueue_is_lost_with_wait_it_is_refused(
        sentinels: SentinelSet) -> None:
    """The window WAIT closes, made certain: the replica is stopped (SIGSTOP) and its link
    cut while the master acknowledges enqueues, then the master is killed and the
    replica promoted.
    Without WAIT every one of those acknowledged enqueues is lost; with WAIT none of
    them returned: each raised NotReplicated, so the producer knows to send it again."""
    s = Settings(redis_url=sentinels.url, wait_timeout_ms=100)
    client = connection.sync_client(s)
    assert sentinels.replica.process is not None
    try:
        enqueue_sync(client, s, [make_job("ledger", 1, 1, "r1", "t")])  # replicated
        # Stop the replica and cut its link on the master's side: what the master
        # acknowledges now is in no socket buffer the replica reads after SIGCONT.
        os.kill(sentinels.replica.process.pid, signal.SIGSTOP)
        try:
            master = sentinels.client()
            try:
                assert master.client_kill_filter(_type="replica") == 1
            finally:
                master.close()
            no_wait = s.replace(wait_replicas=0)
            acked = [enqueue_sync(client, no_wait, [make_job("ledger", i, i, f"r{i}", "t")])
                     for i in range(2, 22)]
            refused = 0
            for i in range(22, 25):
                with contextlib.suppress(NotReplicated):
                    enqueue_sync(client, s, [make_job("ledger", i, i, f"r{i}", "t")])
                    raise AssertionError(f"enqueue {i} returned without a replica")
                refused += 1
            old_port, _ = sentinels.kill_master()
        finally:
            os.kill(sentinels.replica.process.pid, signal.SIGCONT)
        new_port = sentinels.wait_promoted(old_port)
    finally:
        client.close()
    new = sentinels.client(new_port)
    try:
        on_new = stream_outbox_ids(new)
    finally:
        new.close()
    lost = set(range(2, 22)) - on_new
    print(f"\nWAIT window: without WAIT {len(acked)} acknowledged, {len(lost)} lost; "
          f"with WAIT {refused} refused (NotReplicated), 0 acknowledged and lost")
    assert 1 in on_new
    assert lost == set(range(2, 22)), "the replica was stopped: none of them reached it"
    assert refused == 3
