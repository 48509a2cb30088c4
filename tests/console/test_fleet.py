"""The fleet-wide pause and the fleet registry, with the real supervisor and its real
workers (issue 26), and the same keys on a Redis Cluster.

Pause: the workers finish what they hold, read nothing new (a blocking read that waits
is ended: --block-ms 5000 here, so a read left waiting would take the jobs), keep
heartbeating, and read again on resume; the supervisor stays up and its status file
and /readyz say paused.  Registry: every live worker is listed with what it runs; a
host killed outright disappears after the record's expiry, and the consumer it left
holding pending entries is flagged.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from redis.crc import key_slot

from stagedoor.config import Settings
from stagedoor.console import fleet, jobs
from stagedoor.console.client import console_client
from stagedoor.demo.embedded_redis import free_port
from stagedoor.stream.keys import fleet_key, owner_key, paused_key, presence_key
from tests.support.cli import cli
from tests.support.paths import SRC
from tests.support.supervisor import enqueue, marks, supervisor, wait_for
from tests.support.worker import read_fleet

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.server


def readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def delivered(client: redis.Redis, settings: Settings) -> str:
    groups = client.execute_command("XINFO", "GROUPS", settings.stream)
    g = groups[0]
    info = g if isinstance(g, dict) else dict(zip(g[::2], g[1::2], strict=True))
    value: Any = info.get(b"last-delivered-id", info.get("last-delivered-id"))
    return value.decode() if isinstance(value, bytes) else str(value)


def test_pause_stops_reading_within_a_heartbeat_and_resume_restarts(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    s = Settings(redis_url=redis_url)
    port = free_port()
    with supervisor(tmp_path, redis_url, ["--workers", "2", "--block-ms", "5000",
                                          "--metrics-port", str(port)],
                    env={"SUP_TEST_SLOW": "1.5"}) as sup:
        pids = sup.wait_ready(2)
        wait_for(lambda: len(read_fleet(s).workers) == 2, 10, what="two workers registered")
        enqueue(redis_url, "slow", [1])
        wait_for(lambda: marks(sup, 1), what="the slow job started")

        proc = cli("pause", "--reason", "db failover", "--json", "--redis-url", redis_url)
        assert proc.returncode == 0, proc.stderr
        state = orjson.loads(proc.stdout)
        assert state["paused"] and state["reason"] == "db failover"
        # Every worker saw the flag at a heartbeat (0.1 s here); both keep heartbeating.
        wait_for(lambda: all(w.paused for w in read_fleet(s).workers), 10,
                 what="every worker paused")
        paused_at = delivered(sync_redis, s)
        ids = enqueue(redis_url, "noop", [10, 11, 12])
        # The job it held finishes while paused.
        wait_for(lambda: [m[0] for m in marks(sup, 1)] == ["start", "done"], 10,
                 what="the held job finished")
        wait_for(lambda: sup.status().get("paused") is True, 10, what="status file: paused")
        code, body = readyz(port)
        assert code == 503 and "paused" in body
        before = {w.consumer: w.seen_ms for w in read_fleet(s).workers}
        wait_for(lambda: all(w.seen_ms > before[w.consumer]
                             for w in read_fleet(s).workers), 10, what="heartbeats go on")
        # Nothing new was read: ten heartbeats after the flag, the group's cursor has
        # not moved past the new jobs and none of them ran.
        time.sleep(1.0)
        assert delivered(sync_redis, s) == paused_at
        assert all(marks(sup, i) == [] for i in (10, 11, 12))
        assert sup.ready_pids() == pids  # the processes stayed up
        st = orjson.loads(cli("status", "--json", "--redis-url", redis_url).stdout)
        assert st["fleet"]["paused"]["paused"] is True
        text = cli("status", "--redis-url", redis_url).stdout
        assert "PAUSED" in text and "db failover" in text

        proc = cli("resume", "--redis-url", redis_url)
        assert proc.returncode == 0 and proc.stdout.startswith("resumed"), proc.stderr
        wait_for(lambda: all(marks(sup, i) for i in (10, 11, 12)), 10,
                 what="the jobs queued during the pause ran after resume")
        wait_for(lambda: sup.status().get("paused") is False, 10, what="status file: running")
        wait_for(lambda: readyz(port)[0] == 200, 10, what="/readyz ready again")
        # The record says what the worker saw at its previous heartbeat.
        wait_for(lambda: not any(w.paused for w in read_fleet(s).workers), 10,
                 what="the records say running")
        assert delivered(sync_redis, s) >= ids[-1]
        proc = cli("resume", "--redis-url", redis_url)
        assert proc.returncode == 0 and "was not paused" in proc.stdout
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0


def test_registry_lists_live_workers_and_drops_a_killed_host(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    s = Settings(redis_url=redis_url)
    with supervisor(tmp_path, redis_url, ["--workers", "2"],
                    env={"SUP_TEST_SLOW": "60"}) as sup:
        pids = sup.wait_ready(2)
        fl = wait_for(lambda: (f := read_fleet(s)) and len(f.workers) == 2 and f, 10,
                      what="two workers registered")
        assert sorted(w.pid for w in fl.workers) == sorted(pids.values())
        assert {w.consumer for w in fl.workers} == {"sup-00", "sup-01"}
        for w in fl.workers:
            assert w.host and w.version and w.rss_bytes > 0 and not w.paused
            assert w.renderer == "native"  # the built extension (render_fallback off)
            assert w.started <= time.time()
        enqueue(redis_url, "slow", [1])
        wait_for(lambda: marks(sup, 1), what="a job held")
        held = wait_for(lambda: next((w for w in read_fleet(s).workers if w.in_flight), None),
                        10, what="the worker holding it says so")
        assert not read_fleet(s).orphaned
        doc = orjson.loads(cli("status", "--json", "--redis-url", redis_url).stdout)
        assert len(doc["fleet"]["workers"]) == 2 and doc["fleet"]["orphaned"] == []
        text = cli("status", "--redis-url", redis_url).stdout
        row = next(ln for ln in text.splitlines() if ln.startswith(held.consumer + " "))
        assert row.endswith(f"pid {held.pid}")

        # The host dies outright: supervisor and workers, kill -9, nothing says goodbye.
        sup.remember(sup.children())
        for pid in [sup.pid, *sup.children()]:
            os.kill(pid, signal.SIGKILL)
        sup.wait()
        ttl = fleet.presence_ttl_ms(s) / 1000
        gone = wait_for(lambda: (f := read_fleet(s)) and not f.workers and f, ttl + 10,
                        what="the dead host's records expired")
        assert gone.orphaned == [held.consumer]
        row = next(c for c in gone.consumers if c.name == held.consumer)
        assert row.pending == 1 and not row.alive and row.orphaned
        text = cli("status", "--redis-url", redis_url).stdout
        assert f"ORPHANED  consumer {held.consumer} holds 1 pending" in text
        assert "workers   0 live" in text
        row = next(ln for ln in text.splitlines() if ln.startswith(held.consumer + " "))
        assert row.endswith("NONE (orphaned)")


def test_console_keys_share_the_queue_slot_on_a_cluster(tmp_path: Path) -> None:
    from stagedoor.handlers import Context, Registry
    from stagedoor.stream.job import Job
    from tests.support.topology import ClusterSet
    from tests.support.worker import add_jobs, eventually, running

    cluster = ClusterSet(tmp_path / "cluster", masters=3)
    try:
        s = Settings(redis_url=cluster.url, consumer="c", heartbeat_interval=0.1,
                     block_ms=5000, tickets_dir=str(tmp_path / "tickets"))
        slot = key_slot(s.stream.encode())
        for key in (paused_key(s), presence_key(s, "c-00"), fleet_key(s),
                    owner_key(s, "c-00")):
            assert key_slot(key.encode()) == slot, key
        reg = Registry()
        done: list[int] = []

        @reg.register("render_tickets")
        async def ok(job: Job, ctx: Context) -> None:
            done.append(job.order_id)

        async def scenario() -> None:
            c = console_client(s)
            try:
                async with running(s, reg) as w:
                    await eventually(lambda: fleet.fleet(c, s), 10)
                    fl = await eventually(
                        lambda: _one_worker(c, s), 10, "the worker registered")
                    assert fl.workers[0].consumer == w.consumer
                    await fleet.pause(c, s, by="test")
                    await eventually(lambda: w.pause.active, 10, "the worker paused")
                    add_jobs(s, "render_tickets", [7001])
                    await asyncio.sleep(0.5)
                    assert done == []
                    story = await jobs.lookup(c, s, order_id=7001)
                    assert [e.state for e in story.entries] == ["queued"]
                    await fleet.resume(c, s)
                    await eventually(lambda: done == [7001], 10, "handled after resume")
                    await eventually(lambda: _state(c, s, 7001), 10, "acked")
            finally:
                await c.aclose()

        asyncio.run(scenario())
    finally:
        cluster.stop()


async def _one_worker(c: Any, s: Settings) -> fleet.Fleet | None:
    fl = await fleet.fleet(c, s)
    return fl if len(fl.workers) == 1 else None


async def _state(c: Any, s: Settings, order_id: int) -> bool:
    story = await jobs.lookup(c, s, order_id=order_id)
    return [e.state for e in story.entries] == ["acked"]


def test_console_follows_the_sentinel_master(tmp_path: Path) -> None:
    """pause, job lookup and status through a Sentinel URL, before and after a failover:
    the flag and the streams the lookup scans are on the master, replicated with it."""
    from stagedoor.stream import connection
    from stagedoor.stream.job import make_job
    from stagedoor.stream.queue import enqueue_sync
    from tests.support.topology import SentinelSet
    from tests.support.worker import poll

    topo = SentinelSet(tmp_path / "sentinel")
    try:
        url = topo.url
        s = Settings(redis_url=url, wait_replicas=1)
        client = connection.sync_client(s)
        (entry,) = enqueue_sync(client, s, [make_job("noop", 8101, 98101, "r", "t")])
        client.close()
        assert cli("pause", "--reason", "failover drill", "--redis-url", url).returncode == 0

        def looked_up() -> dict[str, Any] | None:
            out = cli("job", "8101", "--json", "--redis-url", url)
            return orjson.loads(out.stdout) if out.returncode == 0 else None
        assert [e["entry_id"] for e in poll(looked_up, 10, "lookup")["entries"]] == [entry]
        topo.failover()

        def after() -> dict[str, Any] | None:
            out = cli("status", "--json", "--redis-url", url)
            return orjson.loads(out.stdout) if out.returncode == 0 else None
        st = poll(after, 30, "status on the new master")
        assert st["fleet"]["paused"]["paused"] is True
        assert st["fleet"]["paused"]["reason"] == "failover drill"
        story = poll(looked_up, 30, "lookup on the new master")
        assert [(e["entry_id"], e["state"]) for e in story["entries"]] == [(entry, "queued")]
        out = cli("resume", "--json", "--redis-url", url)
        assert out.returncode == 0 and orjson.loads(out.stdout)["paused"] is True
        assert orjson.loads(cli("status", "--json", "--redis-url", url).stdout)[
            "fleet"]["paused"]["paused"] is False
    finally:
        topo.stop()


def test_bulk_replay_killed_half_way_loses_nothing_and_duplicates_nothing(
        tmp_path: Path, redis_url: str, sync_redis: redis.Redis) -> None:
    """kill -9 of `dead replay --all` in the middle, then the same command again: every
    dead letter is on the job stream exactly once, and none is left behind."""
    from stagedoor.stream.job import make_job
    from stagedoor.stream.queue import dead_letter_fields

    s = Settings(redis_url=redis_url)
    n = 3000
    pipe = sync_redis.pipeline(transaction=False)
    for i in range(1, n + 1):
        pipe.execute_command("XADD", s.dead_stream, "*", *dead_letter_fields(
            make_job("render_tickets", i, i, "r", "t").fields(), error="e", source_id="1-0",
            deliveries=6, consumer="c"))
    pipe.execute()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    env["PYTHONPATH"] = str(SRC)
    proc = subprocess.Popen([sys.executable, "-m", "stagedoor.cli", "dead", "replay", "--all",
                             "--yes", "--redis-url", redis_url], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: sync_redis.xlen(s.stream) >= 50, 30, 0.001, "replay under way")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    half = sync_redis.xlen(s.stream)
    assert 0 < half < n, "the kill landed in the middle"
    assert half + sync_redis.xlen(s.dead_stream) == n  # each entry in one place only
    out = cli("dead", "replay", "--all", "--yes", "--redis-url", redis_url)
    assert out.returncode == 0, out.stderr
    orders = [int(f[b"order_id"]) for _, f in sync_redis.xrange(s.stream)]
    assert sorted(orders) == list(range(1, n + 1))  # every one, once
    assert sync_redis.xlen(s.dead_stream) == 0
