"""Sentinel: every client stagedoor opens talks to the current master, before and after
a failover (real master, replica and three sentinels on loopback; tests/topology.py).

The failover under `stagedoor-supervise` with a kill -9 of the master mid-drain, and
what WAIT saves, are in tests/faults/test_failover.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis
from tests.aclmode import server_args
from tests.clikit import cli
from tests.servers import SuiteRedis, require_tls
from tests.tlscerts import make_certs
from tests.topology import SentinelSet
from tests.workerkit import poll

from stagedoor.config import ConfigError, Settings
from stagedoor.stream import connection
from stagedoor.stream.errors import master_changed
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import EnqueueError, enqueue_sync
from stagedoor.stream.resp import FastConnection, MasterChanged
from stagedoor.worker.dispatch import is_redis_trouble

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.server


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    topo = SentinelSet(tmp_path / "sentinel")
    try:
        yield topo
    finally:
        topo.stop()


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
