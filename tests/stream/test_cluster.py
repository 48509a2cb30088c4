"""Redis Cluster: the worker, the producer and the CLI against a real cluster on
loopback (three masters made with `redis-cli --cluster create`; tests/support/topology.py).

Every script of stagedoor runs on the cluster here: the dead-letter script, the
idempotency lease and done mark (begin, finish), the order store's mark-rendered and
refund, and `stagedoor dead replay`; the start counts go with the queue's tag.  The
lean hot-path connection follows MOVED and ASK; a drain through a slot migration and
a kill -9 of the slot's master is in tests/faults/test_cluster_failover.py.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from stagedoor.config import ConfigError, Settings
from stagedoor.demo.orders import demo_order
from stagedoor.stream import connection
from stagedoor.stream.cluster import Redirected
from stagedoor.stream.job import make_job
from stagedoor.stream.keys import done_key, marks_key, order_key, starts_key
from stagedoor.stream.queue import enqueue_sync
from stagedoor.stream.resp import FastConnection
from stagedoor.tickets.orders import put_orders_sync
from tests.support.aclmode import ACL_MODE, worker_url
from tests.support.cli import cli
from tests.support.faults.harness import Procs, Producer, wait_for
from tests.support.faults.invariants import Ledger
from tests.support.topology import ClusterSet

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.server


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterSet]:
    c = ClusterSet(tmp_path / "cluster", masters=3)
    try:
        yield c
    finally:
        c.stop()


def test_cluster_settings_tag_the_queue_and_refuse_split_slots() -> None:
    s = Settings(redis_url="redis+cluster://127.0.0.1:7000,127.0.0.1:7001")
    assert (s.stream, s.dead_stream) == ("{jobs}", "{jobs}:dead")
    assert starts_key(s, "1-0") == "stagedoor:starts:{jobs}:1-0"
    assert order_key(s, 7) == "stagedoor:order:{7}"
    assert done_key(s, 7, 99) == "stagedoor:done:{7}:99"
    assert marks_key(s, 7, 99) == "stagedoor:marks:{7}"
    flat = Settings(redis_url="redis://127.0.0.1/0")
    assert (flat.stream, order_key(flat, 7), done_key(flat, 7, 99)) == \
        ("jobs", "stagedoor:order:7", "stagedoor:done:99")
    assert marks_key(flat, 7, 99) == "stagedoor:marks:0"  # 99 // 128
    with pytest.raises(ConfigError, match="different cluster slots"):
        Settings(redis_url="redis+cluster://127.0.0.1:7000", stream="{a}", dead_stream="b")


def test_worker_producer_cli_and_every_script_on_a_cluster(tmp_path: Path,
                                                          cluster: ClusterSet) -> None:
    s = Settings(redis_url=cluster.url, consumer="f", tickets_dir=str(tmp_path / "tickets"))
    client = connection.sync_client(s)
    ledger = Ledger(tmp_path / "ledger")
    try:
        orders = [demo_order(i) for i in range(1, 13)]
        put_orders_sync(client, s, orders)
        # The orders spread over the masters (their keys carry their own tags).
        assert len({cluster.owner(order_key(s, o.order_id)) for o in orders}) >= 2
        producer = Producer(client, s, ledger.directory)
        # A consumer that took a job and died: reclaimed with XAUTOCLAIM, then its start
        # is counted under the queue's tag (a pipeline on the stream's slot).
        producer.enqueue("ledger", [100])
        client.execute_command("XREADGROUP", "GROUP", "workers", "ghost", "COUNT", 1,
                               "STREAMS", s.stream, ">")
        procs = Procs(tmp_path, worker_url(cluster.url), ledger.directory)
        try:
            # job_timeout 1 s, not 0.2: a render's time limit on a loaded box (its render
            # process starting) retried it, and the retries met its running mark
            # ("outbox_id 1 is running on ..."), seen in CI's ACL step.
            sup = procs.supervisor(2, {"claim_idle_ms": 1500, "job_timeout": 1.0})
            for slot in (0, 1):
                sup.wait_log(f"worker f-{slot:02d} ready")
            producer.enqueue("render_tickets", range(1, 13))
            producer.enqueue("ledger", range(1000, 1300))
            bad = producer.enqueue_raw(["kind", "ledger", "order_id", "x"], None)
            wait_for(lambda: ledger.done() >= {100, *range(1000, 1300)}, 60,
                     what="the drain on the cluster")
            wait_for(lambda: all((tmp_path / "tickets" / f"order-{i}.pdf").exists()
                                 for i in range(1, 13)), 60, what="a PDF per order")
            # Refunds carry their own outbox ids (the placements used 1 and 2).
            enqueue_sync(client, s, [make_job("refund", i, 5000 + i, "r", "t") for i in (1, 2)])
            wait_for(lambda: all(client.hget(order_key(s, i), "status") == b"refunded"
                                 for i in (1, 2)), 30, what="refunds (the refund script)")
            assert all(client.hget(order_key(s, i), "rendered") for i in range(3, 13)), \
                "mark-rendered script"
            # Each order's scripts went to its own slot's master at once: no render was
            # bounced by a MOVED (or ASK) and retried (the handlers' connection is not the
            # stream's).  Other retries (a time limit on a loaded box) are not bounces.
            retried = [ln["msg"] for ln in sup.log_lines()
                       if ln.get("kind") == "render_tickets" and "retrying" in ln["msg"]]
            bounced = [m for m in retried if re.search(r"\b(MOVED|ASK)\b", m)]
            assert not bounced, bounced[:3]
            assert client.hget(marks_key(s, 5, 5), "5"), "the done mark (finish script)"
            [(_dead_id, fields)] = client.xrange(s.dead_stream)
            assert dict(zip(fields[::2], fields[1::2], strict=True))[b"dead:source_id"] \
                == bad.encode()
            node = cluster.client_for(s.stream)
            try:
                # The reclaimed job's start was counted on the queue's node (INCRBY), and
                # the count deleted with its ack (issue 36: bounded by the pending list).
                stats = node.info("commandstats")
                assert stats.get("cmdstat_incrby", {}).get("calls", 0) >= 1, \
                    "start counts, queue's slot"
                assert not node.keys("stagedoor:starts:{jobs}:*"), "deleted with the ack"
            finally:
                node.close()
            out = cli("status", "--json", "--redis-url", cluster.url)
            assert out.returncode == 0, out.stderr
            st = orjson.loads(out.stdout)
            assert st["stream"]["name"] == "{jobs}" and st["dead"]["length"] == 1
            out = cli("dead", "replay", "--all", "--redis-url", cluster.url)
            assert out.returncode == 0, out.stderr  # the replay script, on the queue's slot
            out = cli("enqueue", "--kind", "ledger", "--order-id", "7", "--outbox-id", "2000",
                      "--handlers", "tests.support.handlers.ledger:registry",
                      "--redis-url", cluster.url)
            assert out.returncode == 0, out.stderr
            wait_for(lambda: 2000 in ledger.done(), 30, what="a job from the CLI")
            if ACL_MODE:  # the workers ran as docs/security.md's Cluster line: no denial
                for port in cluster.nodes:
                    node = redis.Redis(port=port, protocol=2)
                    try:
                        assert node.execute_command("ACL", "LOG") == [], port
                    finally:
                        node.close()
            # The replayed malformed entry is dead-lettered again: the script ran twice.
            wait_for(lambda: client.xlen(s.dead_stream) == 1
                     and client.xrange(s.dead_stream)[0][0] != _dead_id, 30,
                     what="the replayed entry dead-lettered again")
        finally:
            procs.close()
    finally:
        client.close()


def _masters(port: int) -> dict[int, str]:
    """port -> node id of every master, from CLUSTER NODES."""
    c = redis.Redis(port=port, protocol=2)
    try:
        lines = c.execute_command("CLUSTER", "NODES").decode().splitlines()
    finally:
        c.close()
    out = {}
    for line in lines:
        parts = line.split()
        if "master" in parts[2]:
            out[int(parts[1].split("@")[0].rsplit(":", 1)[1])] = parts[0]
    return out


def _migrate(cluster: ClusterSet, key: str, *, finish: bool) -> tuple[int, int]:
    """Move key's slot (and its keys) to another master; finish: hand the slot over on
    every node, else leave it half-way (MIGRATING/IMPORTING).  (source, target)."""
    source = cluster.owner(key)
    nodes = _masters(source)
    target = next(p for p in nodes if p != source)
    src = redis.Redis(port=source, protocol=2)
    dst = redis.Redis(port=target, protocol=2)
    try:
        slot = int(src.execute_command("CLUSTER", "KEYSLOT", key))
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", nodes[source])
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", nodes[target])
        for k in src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000):
            src.execute_command("MIGRATE", "127.0.0.1", target, k, 0, 5000)
    finally:
        src.close()
        dst.close()
    if finish:
        _hand_over(key, nodes, target)
    return source, target


def _hand_over(key: str, nodes: dict[int, str], target: int) -> None:
    for port in nodes:
        c = redis.Redis(port=port, protocol=2)
        try:
            slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
            c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", nodes[target])
        finally:
            c.close()


def test_lean_connection_follows_ask_and_moved(cluster: ClusterSet) -> None:
    """A migration in progress answers ASK (go there, with ASKING); a finished one
    answers MOVED (go there).  Both are Redirected (a ConnectionError: the worker's
    loop retries), and the next call lands on the node named."""
    s = Settings(redis_url=cluster.url, socket_timeout=2)

    async def port_of(conn: FastConnection) -> int:
        info = (await conn.call("INFO", "server")).decode()
        return int(info.split("tcp_port:")[1].split()[0])

    async def main() -> None:
        conn = FastConnection(s, timeout=2)
        try:
            await conn.call("XGROUP", "CREATE", s.stream, "workers", "$", "MKSTREAM")
            await conn.call("XADD", s.stream, "*", "k", "1")
            source, target = await asyncio.to_thread(_migrate, cluster, s.stream,
                                                     finish=False)
            assert await port_of(conn) == source
            with pytest.raises(Redirected, match="ASK") as ask:
                await conn.call("XADD", s.stream, "*", "k", "2")
            assert ask.value.address[1] == target
            await conn.call("XADD", s.stream, "*", "k", "3")  # on the target, ASKING first
            assert await port_of(conn) == target
            await asyncio.to_thread(_hand_over, s.stream, _masters(target), target)
            await conn.call("XADD", s.stream, "*", "k", "4")  # the target owns it now
            _, third = await asyncio.to_thread(_migrate, cluster, s.stream, finish=True)
            with pytest.raises(Redirected, match="MOVED"):
                await conn.call("XADD", s.stream, "*", "k", "5")
            await conn.call("XADD", s.stream, "*", "k", "6")
            assert await port_of(conn) == third
            entries = await conn.call("XRANGE", s.stream, "-", "+")
            assert [e[1][1] for e in entries] == [b"1", b"3", b"4", b"6"]
        finally:
            await conn.aclose()

    asyncio.run(main())
