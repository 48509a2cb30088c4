"""Redis Cluster: the keys one command or one decision joins share a slot.

A multi-key command (DEL a b c) or a script runs on a cluster only when its keys hash
to one slot; a single-key write meant to say "this node takes writes again" must land
on the node it speaks for.  A redelivered entry's keys (its start count, settled
starts and last error) are on the stream's hash tag, and so is the worker's
out-of-memory probe: on the queue's node, the one whose writes the worker waits for.

On the suite's real cluster (three masters, tests/support/topology.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from stagedoor.config import ConfigError, Settings
from stagedoor.console import pending
from stagedoor.console.client import console_client
from stagedoor.handlers import Context, Registry, TransientError
from stagedoor.stream import connection
from stagedoor.stream.job import Job
from stagedoor.stream.keys import lasterr_key, probe_key, settled_key, starts_key
from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.worker.outage import Outage
from tests.support.topology import ClusterSet
from tests.support.worker import add_jobs, eventually, running

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    c = ClusterSet(tmp_path_factory.mktemp("cluster"), masters=3)
    try:
        yield c
    finally:
        c.stop()


def test_a_pending_entry_s_keys_and_the_probe_are_on_the_stream_s_slot() -> None:
    tagged = Settings(redis_url="redis+cluster://127.0.0.1:7000")
    slot = key_slot(tagged.stream.encode())
    for key in (starts_key(tagged, "1-0"), settled_key(tagged, "1-0"),
                lasterr_key(tagged, "1-0"), probe_key(tagged, "host-00")):
        assert key_slot(key.encode()) == slot, key
    assert lasterr_key(tagged, "1-0") == "stagedoor:lasterr:{jobs}:1-0"
    assert probe_key(tagged, "host-00") == "stagedoor:probe:{jobs}:host-00"
    # Standalone and Sentinel (the flat layout) keep their names.
    flat = Settings(redis_url="redis://127.0.0.1/0")
    assert (lasterr_key(flat, "1-0"), probe_key(flat, "host-00")) == \
        ("stagedoor:lasterr:1-0", "stagedoor:probe:host-00")


def _keys_of(cluster: ClusterSet, entry_id: str) -> list[bytes | str]:
    """Every key on any master that names the entry (whatever its format)."""
    out: list[bytes | str] = []
    for port in cluster.nodes:
        node = redis.Redis(port=port, protocol=2)
        try:
            out += node.keys(f"*{entry_id}*")
        finally:
            node.close()
    return out


def test_console_dead_letter_removes_every_key_of_the_entry_on_a_cluster(
        tmp_path: Path, cluster: ClusterSet) -> None:
    """A job that failed under a real worker is pending with its last error; the
    console's dead-letter (console/pending.py) moves it and deletes its start count,
    settled starts and last error in one DEL.  With the last error off the stream's
    tag that DEL crossed slots: it failed, and the last error stayed (24 h)."""
    s = Settings(redis_url=cluster.url, consumer="slots", retries=0,
                 claim_idle_ms=600_000, tickets_dir=str(tmp_path / "tickets"))
    reg = Registry()

    @reg.register("mail")
    async def fails(job: Job, ctx: Context) -> None:
        raise TransientError("mail server answered 421")

    async def scenario() -> None:
        console = console_client(s)
        try:
            async with running(s, reg) as w:
                (entry,) = add_jobs(s, "mail", [8801])
                await eventually(lambda: w.stats.total("failed") >= 1, 20,
                                 "the job failed and was left pending")
            async def with_error() -> pending.PendingEntry | None:
                shown = await pending.show_pending(console, s, entry)
                return shown if shown is not None and shown.last_error else None

            shown = await eventually(with_error, 10, "the entry pending with its last error")
            assert shown.last_error is not None and "421" in shown.last_error
            assert _keys_of(cluster, entry), "the worker kept its last error"
            dead_id = await pending.dead_letter(console, s, entry, who="test")
            assert dead_id is not None
            assert await pending.show_pending(console, s, entry) is None
            assert _keys_of(cluster, entry) == [], "the entry's keys stayed behind"
        finally:
            await console.aclose()

    asyncio.run(scenario())


def _rejected_sets(node: redis.Redis) -> int:
    return int(node.info("commandstats").get("cmdstat_set", {}).get("rejected_calls", 0))


def test_the_out_of_memory_probe_asks_the_queue_s_node(cluster: ClusterSet) -> None:
    """The worker holds off while Redis refuses its writes for memory and resumes when
    a probe write goes through (worker/outage.py).  The node whose writes it waits for
    is the queue's (XACK, dead letters, start counts): with the stream's master full,
    a probe on another master (an untagged key there) went through at once, and the
    worker resumed taking work the full node refuses."""
    s = Settings(redis_url=cluster.url)
    queue_node = cluster.owner(s.stream)
    # A consumer name that, hashed alone, lands on another master than the stream.
    consumer = next(name for name in (f"host-{i:02d}" for i in range(100))
                    if cluster.owner(s.key("probe", name)) != queue_node)
    node = cluster.client_for(s.stream)

    async def scenario() -> None:
        cmd = connection.async_client(s)
        outage = Outage(s, cmd, WorkerStats(), consumer)
        before = _rejected_sets(node)
        node.config_set("maxmemory", 1)  # every write on the queue's node: OOM
        try:
            outage.enter()
            waiting = asyncio.create_task(outage.wait_clear())
            await eventually(lambda: waiting.done() or _rejected_sets(node) >= before + 2,
                             20, "two probes refused by the queue's node")
            assert not waiting.done(), "resumed while the queue's node refuses writes"
        finally:
            node.config_set("maxmemory", 0)
        try:
            await asyncio.wait_for(waiting, 20)  # the node takes writes: the wait ends
            assert not outage.active
        finally:
            await cmd.aclose()

    try:
        asyncio.run(scenario())
    finally:
        node.close()


def test_a_cluster_stream_without_a_hash_tag_is_refused() -> None:
    """The layout follows the stream's tag (stream/keys.py): an untagged stream on a
    cluster got the flat names, whose keys land all over the cluster.  Its dead-letter
    stream could still share its slot ('a', '{a}:dead' passed the slot check), and then
    the enqueue script wrote its counter on another node ("Script attempted to access
    a non local key in a cluster node", nothing enqueued) and every order script
    crossed slots."""
    with pytest.raises(ConfigError, match="hash tag"):
        Settings(redis_url="redis+cluster://127.0.0.1:7000", stream="a",
                 dead_stream="{a}:dead")
    # The defaults and any tagged name still load.
    assert Settings(redis_url="redis+cluster://127.0.0.1:7000").stream == "{jobs}"
    assert Settings(redis_url="redis+cluster://127.0.0.1:7000", stream="q{b}",
                    dead_stream="{b}:dead").stream == "q{b}"
