"""Sentinel: every client stagedoor opens talks to the current master, before and after
a failover (real master, replica and three sentinels on loopback; tests/support/topology.py).

The failover under `stagedoor-supervise` with a kill -9 of the master mid-drain, and
what WAIT saves, are in tests/faults/test_failover.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import ConfigError, Settings
from stagedoor.stream import connection
from stagedoor.stream.errors import master_changed
from stagedoor.stream.job import Job, make_job
from stagedoor.stream.queue import (
    MASTER_TRIES,
    EnqueueError,
    NotReplicated,
    enqueue_many,
    enqueue_sync,
)
from stagedoor.stream.resp import FastConnection, MasterChanged
from stagedoor.worker.dispatch import is_redis_trouble
from tests.support.aclmode import server_args
from tests.support.cli import cli
from tests.support.faults.proxy import FaultProxy
from tests.support.servers import SuiteRedis, require_tls
from tests.support.tlscerts import make_certs
from tests.support.topology import SERVICE, SentinelSet
from tests.support.worker import poll

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.server


def test_sentinel_urls_are_validated_with_one_line() -> None:
    for url, why in [("redis+sentinel://127.0.0.1:1/", "/<master-name>"),
                     ("redis+sentinel://127.0.0.1/m", "host:port"),
                     ("redis+sentinel://127.0.0.1:1/m/x", "/<master-name>")]:
        with pytest.raises(ConfigError, match=why):
            Settings(redis_url=url)
    s = Settings(redis_url="redis+sentinel://a:1,b:2/m/3")
    assert s.replicas_to_wait == 1 and Settings(redis_url="redis://a/0").replicas_to_wait == 0


def test_lean_connection_follows_a_failover(sentinels: SentinelSet) -> None:
    """The hot-path connection finds the master through the sentinels; after a failover
    (the sentinels close the demoted master's clients) its calls fail as connection
    errors, and the next call reaches the promoted replica."""
    s = Settings(redis_url=sentinels.url, socket_timeout=2)
    old = sentinels.master_port()

    async def main() -> None:
        blocked = FastConnection(s, timeout=30)
        writer = FastConnection(s, timeout=2)
        try:
            await writer.call("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
            assert f"tcp_port:{old}".encode() in await writer.call("INFO", "server")
            read = asyncio.ensure_future(blocked.call(
                "XREADGROUP", "GROUP", "workers", "c", "BLOCK", 0, "STREAMS", "jobs", ">"))
            await asyncio.sleep(0.2)
            assert not read.done()
            new = await asyncio.to_thread(sentinels.failover)
            assert new != old
            with pytest.raises(redis.ConnectionError):
                await read
            with contextlib.suppress(redis.ConnectionError):  # if not closed yet: READONLY
                await writer.call("XADD", "jobs", "*", "k", "v")
            # Both reconnect to the promoted replica through the sentinels.
            await writer.call("XADD", "jobs", "*", "k", "v")
            reply = await blocked.call("XREADGROUP", "GROUP", "workers", "c", "COUNT", 1,
                                       "STREAMS", "jobs", ">")
            assert reply[0][1][0][1] == [b"k", b"v"]
            assert f"tcp_port:{new}".encode() in await writer.call("INFO", "server")
        finally:
            await blocked.aclose()
            await writer.aclose()

    asyncio.run(main())


def test_a_demoted_master_means_find_the_master_again(tmp_path: Path) -> None:
    """A master turned replica by REPLICAOF keeps its clients: a blocked XREADGROUP gets
    "UNBLOCKED ... (master -> replica?)", a write gets READONLY.  Both are MasterChanged
    (a ConnectionError: the loop retries and reconnects), not errors of the command."""
    with SuiteRedis(tmp_path / "a", extra_args=server_args()) as a, \
            SuiteRedis(tmp_path / "b", extra_args=server_args()) as b:
        s = Settings(redis_url=a.url, socket_timeout=2)

        async def main() -> None:
            blocked = FastConnection(s, timeout=30)
            writer = FastConnection(s, timeout=2)
            try:
                await writer.call("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
                read = asyncio.ensure_future(blocked.call(
                    "XREADGROUP", "GROUP", "workers", "c", "BLOCK", 0, "STREAMS", "jobs", ">"))
                await asyncio.sleep(0.2)
                await writer.call("REPLICAOF", "127.0.0.1", b.port)
                with pytest.raises(MasterChanged, match="UNBLOCKED"):
                    await read
                with pytest.raises(MasterChanged, match="READONLY"):
                    await writer.call("XADD", "jobs", "*", "k", "v")
                assert not writer.connected and not blocked.connected
            finally:
                await blocked.aclose()
                await writer.aclose()

        asyncio.run(main())


def test_every_reply_of_a_replica_means_find_the_master_again(tmp_path: Path) -> None:
    """The other wordings a replica answers with, on the lean connection too: WAIT on a
    replica ("WAIT cannot be used with replica instances"), and MASTERDOWN from any
    command while a demoted master has no link to its new one (replica-serve-stale-data
    no).  Each is MasterChanged, not an error of the command.  The same replies through
    redis-py (ReadOnlyError, MasterDownError, a ResponseError) are recognised by the
    same helper, errors.master_changed, which the producer and the worker use."""
    with SuiteRedis(tmp_path / "a", extra_args=server_args()) as a, \
            SuiteRedis(tmp_path / "b", extra_args=server_args()) as b:
        s = Settings(redis_url=a.url, socket_timeout=2)
        direct = redis.Redis(port=a.port, protocol=2, socket_timeout=5)
        dead = b.port
        b.stop()  # a master that is gone: the replica's link stays down

        async def main() -> None:
            conn = FastConnection(s, timeout=2)
            try:
                await conn.call("XADD", "jobs", "*", "k", "v")
                direct.execute_command("REPLICAOF", "127.0.0.1", dead)
                with pytest.raises(MasterChanged, match="WAIT cannot be used with replica"):
                    await conn.call("WAIT", 1, 100)
                assert not conn.connected
                with pytest.raises(MasterChanged, match="READONLY"):
                    await conn.call("XADD", "jobs", "*", "k", "v")
                direct.config_set("replica-serve-stale-data", "no")
                with pytest.raises(MasterChanged, match="MASTERDOWN"):
                    await conn.call("XRANGE", "jobs", "-", "+")
            finally:
                await conn.aclose()

        try:
            asyncio.run(main())
            for command in (("WAIT", 1, 100), ("XADD", "jobs", "*", "k", "v"),
                            ("EVAL", "return redis.call('XLEN', KEYS[1])", 1, "jobs")):
                with pytest.raises(redis.ResponseError) as caught:
                    direct.execute_command(*command)
                assert master_changed(caught.value), (command, caught.value)
                assert is_redis_trouble(caught.value)  # the worker: left pending, recover
            direct.config_set("replica-serve-stale-data", "yes")
            with pytest.raises(redis.ResponseError) as caught:
                direct.execute_command("WAIT", 1, 100)
            assert "WAIT cannot be used with replica instances" in str(caught.value)
            assert master_changed(caught.value)
            with pytest.raises(redis.ResponseError) as caught:
                direct.execute_command("XINFO", "STREAM", "nostream")
            assert not master_changed(caught.value)  # a replica's other errors are not
            assert not is_redis_trouble(caught.value)
        finally:
            direct.close()


def _jobs(first: int, n: int) -> list[Job]:
    return [make_job("noop", i, i, f"r{i}", "t") for i in range(first, first + n)]


async def _aclose(aclient: aioredis.Redis) -> None:
    """Close an async client and, for a Sentinel one, its connections to the sentinels
    (the master client's aclose() leaves those to the garbage collector)."""
    await aclient.aclose()
    manager = getattr(aclient.connection_pool, "sentinel_manager", None)
    for s in getattr(manager, "sentinels", []):
        await s.aclose()


def _enqueue(api: str, s: Settings, jobs: list[Job]) -> list[str]:
    """enqueue_sync on connection.sync_client, or enqueue_many on async_client(producer)."""
    if api == "sync":
        client = connection.sync_client(s)
        try:
            return enqueue_sync(client, s, jobs)
        finally:
            client.close()

    async def main() -> list[str]:
        aclient = connection.async_client(s, producer=True)
        try:
            return await enqueue_many(aclient, s, jobs)
        finally:
            await _aclose(aclient)
    return asyncio.run(main())


def _demote_when(direct: redis.Redis, ready: Callable[[], bool], new_master: int,
                 failures: list[BaseException]) -> Callable[[], None]:
    """A hook that waits for `ready`, then makes `direct`'s server a replica of another
    (REPLICAOF: its clients stay connected, as under a Sentinel that has not yet closed
    them); a failure is kept for the test to see."""
    def demote() -> None:
        try:
            poll(ready, 10, "the producer's script to run")
            direct.execute_command("REPLICAOF", "127.0.0.1", new_master)
        except BaseException as e:
            failures.append(e)
    return demote


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_wait_answered_by_a_demoted_master_reports_the_jobs_unconfirmed(
        tmp_path: Path, api: str) -> None:
    """CI's race (Redis 8.2, test_failover_counts): the producer's script ran on the
    master, the master was demoted, and then its WAIT came in: "WAIT cannot be used with
    replica instances".  Made certain by a proxy that holds the WAIT back until the
    XADDs are in and the master is a replica of another server.  The jobs went in, on a
    server that is now a replica: NotReplicated with their ids (enqueue them again),
    not a raw ResponseError and not "0 of 3 jobs went in".  Then the same server
    refuses the script (READONLY): retried MASTER_TRIES times, finding the master again
    each time, then one clear EnqueueError, nothing written anywhere."""
    with SuiteRedis(tmp_path / "a", extra_args=server_args()) as a, \
            SuiteRedis(tmp_path / "b", extra_args=server_args()) as b, \
            FaultProxy(a.port) as proxy:
        s = Settings(redis_url=proxy.url, wait_replicas=1, wait_timeout_ms=1000)
        direct = redis.Redis(port=a.port, protocol=2, socket_timeout=5)
        failures: list[BaseException] = []
        written: list[str] = []

        def ready() -> bool:
            written[:] = [eid.decode() for eid, _ in direct.xrange("jobs")]
            return len(written) == 3
        proxy.before(b"WAIT", _demote_when(direct, ready, b.port, failures))
        try:
            with pytest.raises(NotReplicated) as caught:
                _enqueue(api, s, _jobs(1, 3))
            assert not failures, failures
            e = caught.value
            assert e.ids == written and e.total == 3, (e.ids, written)
            assert e.acked == 0
            text = str(e)
            assert "WAIT cannot be used with replica instances" in text, text
            assert "the master changed" in text and "enqueue them again" in text, text
            assert "3 of 3 jobs went in unconfirmed" in text, text

            # Now the script itself is refused: nothing went in, so it is retried (a new
            # connection, which under Sentinel asks for the master again), a bounded
            # number of times; here the URL names the replica, so it fails, clearly.
            before = proxy.accepted
            t0 = time.monotonic()
            with pytest.raises(EnqueueError) as refused:
                _enqueue(api, s, _jobs(4, 2))
            assert time.monotonic() - t0 < 5
            assert not isinstance(refused.value, NotReplicated)
            assert refused.value.ids == []
            text = str(refused.value)
            assert f"answered as a replica {MASTER_TRIES} times" in text, text
            assert "0 of 2 jobs went in" in text, text
            assert proxy.accepted - before >= MASTER_TRIES  # a new connection each time
            on_b = redis.Redis(port=b.port, protocol=2, socket_timeout=5)
            try:
                assert on_b.xlen("jobs") == 0
            finally:
                on_b.close()
        finally:
            direct.close()


@pytest.mark.parametrize("via", ["plain", "sentinel"])
def test_a_blocked_wait_unblocked_by_the_demotion_reports_the_jobs_unconfirmed(
        tmp_path: Path, via: str) -> None:
    """The master is demoted while the producer's WAIT waits for a replica: Redis
    answers the WAIT "UNBLOCKED ... (master -> replica?)".  The XADDs had gone in:
    NotReplicated.  Through a plain URL its ids are known; redis-py's Sentinel
    connection turns that reply into a ConnectionError without the script's reply, so
    there the error says the last jobs may be in, unconfirmed, and its ids stop before
    them (the caller sends those again)."""
    topo = SentinelSet(tmp_path / "sentinel") if via == "sentinel" else None
    try:
        with contextlib.ExitStack() as stack:
            if topo is None:
                a = stack.enter_context(SuiteRedis(tmp_path / "a", extra_args=server_args()))
                port, url, wanted = a.port, a.url, 1  # no replica: WAIT 1 blocks
            else:
                port, url, wanted = topo.master.port, topo.url, 2  # one replica of two
            b = stack.enter_context(SuiteRedis(tmp_path / "b", extra_args=server_args()))
            direct = redis.Redis(port=port, protocol=2, socket_timeout=5)
            stack.callback(direct.close)
            s = Settings(redis_url=url, wait_replicas=wanted, wait_timeout_ms=20_000)
            failures: list[BaseException] = []
            demoter = threading.Thread(target=_demote_when(
                direct, lambda: int(direct.info("clients")["blocked_clients"]) == 1,
                b.port, failures))
            demoter.start()
            t0 = time.monotonic()
            try:
                with pytest.raises(NotReplicated) as caught:
                    _enqueue("sync", s, _jobs(1, 2))
            finally:
                demoter.join(15)
            assert not failures, failures
            assert time.monotonic() - t0 < 15  # the WAIT was cut short, not timed out
            e = caught.value
            text = str(e)
            assert "the master changed" in text and "enqueue them again" in text, text
            if topo is None:
                assert "UNBLOCKED" in text, text
                assert len(e.ids) == 2 and "2 of 2 jobs went in unconfirmed" in text, text
            else:
                assert e.ids == [], e.ids
                assert "the last 2 jobs may have gone in" in text, text
    finally:
        if topo is not None:
            topo.stop()


def _switch_master(topo: SentinelSet) -> tuple[int, int]:
    """The replica made master and the master its replica, by hand (REPLICAOF, which
    leaves the old master's clients connected, unlike a Sentinel failover, which closes
    them), and the sentinels told (SENTINEL REMOVE / MONITOR): (old, new) ports."""
    old, new = topo.master.port, topo.replica.port
    for sen in topo.sentinels:
        c = sen.client()
        try:
            c.execute_command("SENTINEL", "REMOVE", SERVICE)
        finally:
            c.close()
    n, o = topo.client(new), topo.client(old)
    try:
        n.execute_command("REPLICAOF", "NO", "ONE")
        o.execute_command("REPLICAOF", "127.0.0.1", new)
        for sen in topo.sentinels:
            c = sen.client()
            try:
                c.execute_command("SENTINEL", "MONITOR", SERVICE, "127.0.0.1", new, 2)
            finally:
                c.close()
        poll(lambda: o.info("replication").get("master_link_status") == "up", 30,
             "the old master in sync as the new one's replica")
        poll(lambda: all(sen.master_port() == new for sen in topo.sentinels), 30,
             "every sentinel naming the new master")
    finally:
        n.close()
        o.close()
    return old, new


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_producer_on_a_demoted_master_finds_the_new_one(
        sentinels: SentinelSet, api: str) -> None:
    """The producer's pooled connection is to a master that became a replica while the
    sentinels name another: its script is refused (READONLY, which redis-py's Sentinel
    connection raises as a ConnectionError).  Nothing went in, so enqueue asks for the
    master again and the jobs go in there, confirmed by WAIT: it returns their ids."""
    s = Settings(redis_url=sentinels.url, wait_replicas=1)

    def first_then_switch(enqueue: Callable[[list[Job]], list[str]]) -> list[str]:
        assert len(enqueue(_jobs(1, 1))) == 1  # the pool now holds a connection to it
        _switch_master(sentinels)
        return enqueue(_jobs(2, 3))

    if api == "sync":
        client = connection.sync_client(s)
        try:
            ids = first_then_switch(lambda jobs: enqueue_sync(client, s, jobs))
        finally:
            client.close()
    else:
        async def main() -> list[str]:
            aclient = connection.async_client(s, producer=True)
            try:
                first = await enqueue_many(aclient, s, _jobs(1, 1))
                assert len(first) == 1
                await asyncio.to_thread(_switch_master, sentinels)
                return await enqueue_many(aclient, s, _jobs(2, 3))
            finally:
                await _aclose(aclient)
        ids = asyncio.run(main())
    new = sentinels.client(sentinels.replica.port)
    try:
        assert len(ids) == 3
        on_new = [eid.decode() for eid, _ in new.xrange("jobs")]
        assert ids == on_new[-3:], (ids, on_new)
        assert int(new.execute_command("WAIT", 1, 5000)) == 1
    finally:
        new.close()


def test_producer_and_cli_follow_the_master(sentinels: SentinelSet, tmp_path: Path) -> None:
    s = Settings(redis_url=sentinels.url, wait_replicas=1)
    client = connection.sync_client(s)
    try:
        ids = enqueue_sync(client, s, [make_job("noop", i, i, f"r{i}", "t") for i in (1, 2)])
        assert len(ids) == 2
        new = sentinels.failover()
        # The demoted master's connections are closed (a ConnectionError), and until the
        # old master is back as the new one's replica WAIT 1 cannot be met: NotReplicated
        # (a ConnectionError too, the entry is on the new master).  Enqueue again (the
        # outbox id dedupes) until it is confirmed.
        errors: list[str] = []

        def confirmed() -> bool:
            try:
                ids.extend(enqueue_sync(client, s, [make_job("noop", 3, 3, "r3", "t")]))
                return True
            except (EnqueueError, redis.ConnectionError) as e:  # NotReplicated is both
                errors.append(type(e).__name__)
                return False
        poll(confirmed, 30, "an enqueue confirmed by a replica of the new master")
        assert len(ids) == 3
        assert set(errors) <= {"ConnectionError", "EnqueueError", "NotReplicated"}, errors
        # Every enqueue that returned is on the new master.  (A NotReplicated one may
        # have gone to the old master before the sentinels demoted it: not confirmed.)
        new_client = sentinels.client(new)
        assert set(ids) <= {e[0].decode() for e in new_client.xrange("jobs")}
        length = new_client.xlen("jobs")
        new_client.close()
    finally:
        client.close()
    out = cli("status", "--json", "--redis-url", sentinels.url)
    assert out.returncode == 0, out.stderr
    assert orjson.loads(out.stdout)["stream"]["length"] == length
    out = cli("enqueue", "--kind", "render_tickets", "--order-id", "4", "--outbox-id", "4",
              "--redis-url", sentinels.url)
    assert out.returncode == 0, out.stderr
    out = cli("dead", "list", "--redis-url", sentinels.url)
    assert out.returncode == 0, out.stderr
    assert sentinels.client(new).xlen("jobs") == length + 1


def cli_producer_and_lean_connection_reach_the_master(url: str, env: dict[str, str],
                                                      s: Settings) -> None:
    """Through sentinels set up by `env` (the CLI) and `s` (the API): an enqueue and
    the status from the CLI, an enqueue from the producer, a read on the lean
    connection."""
    out = cli("enqueue", "--kind", "render_tickets", "--order-id", "5", "--outbox-id", "5",
              "--redis-url", url, env=env)
    assert out.returncode == 0, out.stderr
    out = cli("status", "--json", "--redis-url", url, env=env)
    assert out.returncode == 0, out.stderr
    assert orjson.loads(out.stdout)["stream"]["length"] == 1
    client = connection.sync_client(s)
    try:
        enqueue_sync(client, s, [make_job("noop", 6, 6, "r6", "t")])
    finally:
        client.close()

    async def lean_read() -> list[object]:
        conn = FastConnection(s, timeout=2)
        try:
            return list(await conn.call("XRANGE", "jobs", "-", "+"))
        finally:
            await conn.aclose()

    assert len(asyncio.run(lean_read())) == 2


def test_sentinels_with_their_own_password(tmp_path: Path) -> None:
    """Sentinels that require a password of their own (not the master's, which has
    none here): given through sentinel_password_file, the CLI, the producer and the lean
    connection find the master; without it, or with a wrong one, one line and exit 69."""
    topo = SentinelSet(tmp_path / "sentinel", sentinel_password="s3ntinel-only")
    try:
        good = tmp_path / "sentinel.pw"
        good.write_text("s3ntinel-only\n")
        bad = tmp_path / "wrong.pw"
        bad.write_text("not-it\n")
        for env in ({}, {"STAGEDOOR_SENTINEL_PASSWORD_FILE": str(bad)}):
            out = cli("status", "--json", "--redis-url", topo.url, env=env)
            assert out.returncode == 69, (env, out.stdout, out.stderr)
            assert len(out.stderr.strip().splitlines()) == 1, out.stderr
            assert "Traceback" not in out.stderr
            # which sentinel said what, and what to check; not redis-py's client reprs
            assert "sentinel_password_file" in out.stderr, out.stderr
            assert "ConnectionPool" not in out.stderr and len(out.stderr) < 800, out.stderr
        env = {"STAGEDOOR_SENTINEL_PASSWORD_FILE": str(good)}
        out = cli("status", "--redis-url", topo.url.replace("/mymaster/", "/nosuch/"),
                  env=env)
        assert out.returncode == 69, out.stderr
        assert "monitor no master of that name" in out.stderr, out.stderr
        cli_producer_and_lean_connection_reach_the_master(
            topo.url, env, Settings(redis_url=topo.url, sentinel_password_file=str(good)))
        assert topo.client(topo.master.port).xlen("jobs") == 2
    finally:
        topo.stop()


@pytest.mark.tls
def test_sentinels_over_tls_apart_from_the_master(tmp_path: Path) -> None:
    """Sentinels that take clients over TLS while the master is plain text: with
    sentinel_tls_ca_file the CLI, the producer and the lean connection find the master
    through them; without it, one line and exit 69."""
    require_tls()
    certs = make_certs(tmp_path / "certs")
    topo = SentinelSet(tmp_path / "sentinel", sentinel_tls=certs)
    try:
        out = cli("status", "--json", "--redis-url", topo.tls_url)
        assert out.returncode == 69, (out.stdout, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr) < 800, out.stderr
        assert "sentinel_tls_ca_file" in out.stderr, out.stderr

        env = {"STAGEDOOR_SENTINEL_TLS_CA_FILE": str(certs["ca"])}
        cli_producer_and_lean_connection_reach_the_master(
            topo.tls_url, env,
            Settings(redis_url=topo.tls_url, sentinel_tls_ca_file=str(certs["ca"])))
    finally:
        topo.stop()
