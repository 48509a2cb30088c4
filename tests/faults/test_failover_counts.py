"""Issue 24 item 1: the backlog, the lag and the trimmed-unread audit after failovers.

Redis 7.0 copies a group's entries-read to a replica only on a full resync
(tests/stream/test_entries_read_replication.py), so a promoted replica's counter is too low
for good: entries-added - entries-read said "backlog 99000" on an empty queue, the
producer refused every job, `status --check` was CRITICAL, and a trim of handled
entries was counted as jobs lost.  These tests make it happen on real Sentinel and
Cluster failovers (kill -9) and check both directions: no refusal or "lost" for jobs
that were all handled, and jobs really trimmed unread after the failover counted
exactly.  They pass on every server of the matrix (on Valkey and Redis 8 the counter
is replicated, so the failovers leave nothing to repair there).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from stagedoor.config import Settings
from stagedoor.stream import connection
from stagedoor.stream.backlog import AUDIT_LUA, AUDIT_SCAN_CAP
from stagedoor.stream.job import make_job
from stagedoor.stream.keys import trimmed_key
from stagedoor.stream.queue import enqueue_sync
from stagedoor.telemetry.inspect import queue_status
from tests.support.aclmode import ACL_MODE, worker_url
from tests.support.cli import cli
from tests.support.faults.harness import Procs
from tests.support.topology import SERVICE, ClusterSet, Sentinel, SentinelSet
from tests.support.worker import poll

pytestmark = [pytest.mark.server, pytest.mark.faults]

MAXLEN = 3000  # the producer refuses above 2850, warns from 2400
ROUND = 2000   # jobs per enqueue-and-drain round: two rounds pass the refusal level


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, env={"STAGEDOOR_REDIS_URL": url, "STAGEDOOR_MAXLEN": str(MAXLEN)})


def _drain(client: redis.Redis, s: Settings) -> int:
    """Read and ack everything, as workers would (XREADGROUP + XACK on the master)."""
    n = 0
    while True:
        got = client.xreadgroup(s.group, "drainer", {s.stream: ">"}, count=500)
        if not got:
            return n
        ids = [eid for eid, _ in got[0][1]]
        client.xack(s.stream, s.group, *ids)
        n += len(ids)


def _round(s: Settings, master: redis.Redis, first: int) -> None:
    client = connection.sync_client(s)
    try:
        enqueue_sync(client, s, [make_job("refund", i, i, f"r{i}", "t")
                                 for i in range(first, first + ROUND)])
    finally:
        client.close()
    assert _drain(master, s) == ROUND


def _counters(client: redis.Redis, s: Settings) -> tuple[int, int | None]:
    added = int(client.xinfo_stream(s.stream)["entries-added"])
    read = client.xinfo_groups(s.stream)[0]["entries-read"]
    return added, None if read is None else int(read)


def _trimmed(s: Settings) -> dict[str, object]:
    """status's trimmed_backlog, read as the product reads it (its own client)."""
    client = connection.sync_client(s)
    try:
        trimmed: dict[str, object] = queue_status(client, s)["trimmed_backlog"]
        return trimmed
    finally:
        client.close()


def _audit(client: redis.Redis, s: Settings) -> list[int]:
    reply = client.register_script(AUDIT_LUA)(
        keys=[s.stream], args=[s.group, trimmed_key(s), 0, AUDIT_SCAN_CAP])
    return [int(x) for x in reply]


def _after_failover_all_handled(url: str, s: Settings, client: redis.Redis, *,
                                stale: str) -> None:
    """The promoted node: every job was handled.  enqueue takes a job, status says
    nothing waits, --check is OK, and a trim of handled entries is no loss."""
    added, read = _counters(client, s)
    print(f"\n{stale}: entries-added {added}, entries-read on the promoted node {read}")
    # (--wait-replicas 0: the killed master is not back as a replica)
    r = _cli(url, "enqueue", "--kind", "refund", "--order-id", "1", "--outbox-id", "999999",
             "--wait-replicas", "0")
    assert r.returncode == 0, r.stderr  # before: exit 75, "backlog of jobs is 4000"
    assert _drain(client, s) == 1
    r = _cli(url, "status", "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["undelivered"] == 0, st["group"]
    assert st["queue_age_ms"] == 0
    r = _cli(url, "status", "--check")
    assert r.returncode == 0, r.stdout + r.stderr  # before: CRITICAL (lag of MAXLEN)
    # A trim of handled entries (an operator's XTRIM) is not a loss.
    client.execute_command("XTRIM", s.stream, "MAXLEN", 100)
    assert _audit(client, s)[1] == 0
    assert int(client.hget(trimmed_key(s), "count") or 0) == 0
    assert _trimmed(s)["alarm"] is False


def _then_a_real_loss_is_counted(client: redis.Redis, s: Settings) -> None:
    """The reverse direction on the same promoted node: 500 jobs a foreign producer
    trims unread (XADD, then XTRIM MAXLEN 100) are counted as 400 lost, exactly."""
    pipe = client.pipeline(transaction=False)
    for i in range(500):
        pipe.execute_command("XADD", s.stream, "*", *make_job("refund", 5000 + i, 5000 + i,
                                                              "r", "t").fields())
    pipe.execute()
    client.execute_command("XTRIM", s.stream, "MAXLEN", 100)
    assert _audit(client, s)[1] == 400
    assert _audit(client, s)[1] == 0  # counted once
    assert int(client.hget(trimmed_key(s), "count") or 0) == 400
    trimmed = _trimmed(s)
    assert trimmed["alarm"] is True and trimmed["undelivered_trimmed"] == 400, trimmed
    # A producer still sees the backlog as it is: 100 unread, well under the limits.
    enqueue_sync(client, s.replace(wait_replicas=0), [make_job("refund", 9, 9, "r", "t")])


def _sees_replica(sentinel: Sentinel, port: int) -> bool:
    c = sentinel.client()
    try:
        replicas = c.execute_command("SENTINEL", "REPLICAS", SERVICE)
    except (redis.ConnectionError, redis.TimeoutError):
        return False
    finally:
        c.close()
    for raw in replicas:
        r = dict(zip(raw[::2], raw[1::2], strict=False))
        if int(r[b"port"]) == port:
            flags = r[b"flags"].decode()
            return "s_down" not in flags and "disconnected" not in flags
    return False


def _worker_repairs(tmp_path: Path, url: str, client: redis.Redis, s: Settings) -> None:
    """A worker started on the promoted node audits at boot: it repairs the stale
    counter (XGROUP SETID, same cursor) where its user may, and as the documented ACL
    user (SD_TEST_ACL=1) it may not, asks once and says nothing is lost either way."""
    added, read = _counters(client, s)
    stale_before = read != added  # Redis 7.0; Valkey and Redis 8 copy the counter
    procs = Procs(tmp_path, worker_url(url), tmp_path / "ledger")
    try:
        w = procs.worker(0, burst=True, ready=False)
        assert w.wait(60) == 0, w.text()[-2000:]
        text = w.text()
    finally:
        procs.close()
    assert "before any worker read them" not in text
    added, read = _counters(client, s)
    print(f"worker on the promoted node: entries-read {read} of {added} added")
    if ACL_MODE:
        assert (client.hget(trimmed_key(s), "setid_refused:audit") == b"1") == stale_before
    elif not stale_before:
        assert "entries-read counter of group" not in text
    else:
        assert "entries-read counter of group workers was" in text, text[-2000:]
        assert read == added and int(client.xinfo_groups(s.stream)[0]["lag"]) == 0


def test_sentinel_failovers_leave_no_false_backlog_and_count_a_real_loss(
        tmp_path: Path, sentinels: SentinelSet) -> None:
    """The issue's scenario: kill the master, it returns as a replica (a full resync),
    drain on the new master, kill that one; the first master is promoted again."""
    topo = sentinels
    s = Settings(redis_url=topo.url, maxlen=MAXLEN)  # WAIT 1: the replica has the jobs
    first = topo.master_port()
    assert first is not None
    m = topo.client(first)
    try:
        _round(s, m, 1)
    finally:
        m.close()
    old, _ = topo.kill_master()
    second = topo.wait_promoted(old)
    # It comes back as a replica of the new master (a full resync): started so, as an
    # operator would, rather than waiting for the sentinels to convert it (their INFO
    # round on a returning node is slow on a loaded box).
    back = topo.nodes[old]
    back.extra_args = [*back.extra_args, "--replicaof", "127.0.0.1", str(second)]
    back.start()
    c = topo.client(second)
    try:
        poll(lambda: c.info("replication").get("connected_slaves") == 1, 60,
             "the old master back as a replica")
        poll(lambda: int(c.execute_command("WAIT", 1, 1000)) == 1, 30, "the replica in sync")
        _round(s, c, 10_001)
        _round(s, c, 20_001)
        assert int(c.execute_command("WAIT", 1, 5000)) == 1  # every ack on the replica
    finally:
        c.close()
    poll(lambda: all(_sees_replica(sen, old) for sen in topo.sentinels), 60,
         "every sentinel to see the replica up, so it can promote it")
    old, _ = topo.kill_master()
    third = topo.wait_promoted(old)
    assert third == first
    c = topo.client(third)
    try:
        _worker_repairs(tmp_path, topo.url, c, s)
        _after_failover_all_handled(topo.url, s, c, stale="sentinel")
        _then_a_real_loss_is_counted(c, s)
    finally:
        c.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterSet]:
    c = ClusterSet(tmp_path / "cluster", masters=3, replicas=1)
    try:
        yield c
    finally:
        c.stop()


def test_cluster_failover_leaves_no_false_backlog_and_counts_a_real_loss(
        cluster: ClusterSet) -> None:
    """kill -9 of the queue slot's master after two rounds of jobs, all handled; its
    replica is promoted (the keys are hash-tagged: {jobs}, stagedoor:trimmed:{jobs})."""
    s = Settings(redis_url=cluster.url, maxlen=MAXLEN)
    owner = cluster.owner(s.stream)
    m = cluster.client_for(s.stream)
    try:
        _round(s, m, 1)
        _round(s, m, 10_001)
        assert int(m.execute_command("WAIT", 1, 5000)) == 1  # every ack on the replica
    finally:
        m.close()
    cluster.kill(owner)

    def promoted() -> bool:
        try:
            return cluster.owner(s.stream) != owner
        except (redis.ConnectionError, redis.TimeoutError):
            return False
    poll(promoted, 30, "the replica promoted")
    c = cluster.client_for(s.stream)
    try:
        _after_failover_all_handled(cluster.url, s, c, stale="cluster")
        _then_a_real_loss_is_counted(c, s)
    finally:
        c.close()
