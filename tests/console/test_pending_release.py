"""Issue 38 item 8: "release to the fleet now" for a stuck pending entry (console/release.py,
`stagedoor pending release`, the console's POST /pending/release), on the suite's real
Redis with real workers.

A consumer that read an entry and died (XREADGROUP under a name no process has) leaves
it pending until claim_idle_ms (10 minutes here); released, a live worker runs it
within a reclaim pass.  A live owner still running it: the release is told so, and the
job's side effect happens once.  Not pending any more: one line and exit 1 (CLI), a 409
(page).  The viewer is refused.  Every release is audited (log line + audit stream).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from stagedoor.console import release
from stagedoor.console.client import console_client
from stagedoor.console.pending import show_pending
from stagedoor.handlers import Context, Registry
from stagedoor.stream.job import Job
from stagedoor.stream.keys import audit_key
from tests.support.cli import cli, one_line
from tests.support.web import console
from tests.support.worker import add_jobs, eventually, poll, running
from tests.web.test_web import Http

pytestmark = [pytest.mark.server, pytest.mark.timeout(120)]


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    c = console_client(settings)
    yield c
    await c.aclose()


def stuck(settings: Settings, sync_redis: redis.Redis, order: int, who: str = "ghost") -> str:
    """A job read by a consumer that then died: pending on `who`, nobody runs it."""
    (entry,) = add_jobs(settings, "render_tickets", [order])
    sync_redis.execute_command("XREADGROUP", "GROUP", settings.group, who, "COUNT", 1,
                               "STREAMS", settings.stream, ">")
    return entry


def audits(sync_redis: redis.Redis, s: Settings) -> list[dict[str, str]]:
    return [{k.decode(): v.decode() for k, v in f.items()}
            for _, f in sync_redis.xrange(audit_key(s))]


def counting(runs: list[str], gate: asyncio.Event | None = None) -> Registry:
    """render_tickets that counts its side effect per outbox id (already_done / mark_done
    around it, like the real handler); with a gate, its first run waits on it."""
    reg = Registry()

    @reg.register("render_tickets")
    async def effect(job: Job, ctx: Context) -> None:
        if await ctx.already_done(job):
            return
        if gate is not None and not runs:
            runs.append("started")
            await gate.wait()
            runs.remove("started")
        runs.append(f"{job.outbox_id} on {ctx.consumer}")
        await ctx.mark_done(job)

    return reg


async def test_a_dead_consumer_s_entry_released_from_the_cli_runs_on_a_live_worker(
        settings: Settings, client: aioredis.Redis, sync_redis: redis.Redis,
        redis_url: str) -> None:
    s = settings.replace(claim_idle_ms=600_000, block_ms=200, retries=0)
    entry = stuck(s, sync_redis, 3801)
    runs: list[str] = []
    async with running(s, counting(runs), consumer="live") as w:
        # the live worker reads and reclaims (every block_ms) but never takes it:
        # it has been idle a moment, not claim_idle_ms
        await asyncio.sleep(1.0)
        assert runs == []
        plan = await release.plan(client, s, entry)
        assert plan is not None and plan.owner.consumer == "ghost" and not plan.owner.alive
        # the dry run says which entry, who holds it, what will happen; touches nothing
        dry = await asyncio.to_thread(cli, "pending", "release", entry, "--dry-run",
                                      "--redis-url", redis_url)
        assert dry.returncode == 0, dry.stderr
        assert entry in dry.stdout and "ghost: no live worker under this name" in dry.stdout
        assert "next reclaim pass of any worker takes it" in dry.stdout
        assert audits(sync_redis, s) == []
        r = await asyncio.to_thread(cli, "pending", "release", entry, "--yes",
                                    "--redis-url", redis_url)
        assert r.returncode == 0, r.stderr
        assert f"released {entry} (pending on ghost)" in r.stdout
        await eventually(lambda: runs == [f"3801 on {w.consumer}"], 15,
                         "the live worker to run the released job")
        await eventually(lambda: sync_redis.xpending(s.stream, s.group)["pending"] == 0, 10,
                         "its ack")
    [a] = audits(sync_redis, s)
    assert (a["action"], a["via"], a["count"]) == ("release", "cli", "1")
    assert a["detail"] == f"{entry} from ghost"
    assert "audit: release 1 by " in r.stderr  # the structured line, on stderr
    # again: not pending any more, one line, exit 1, nothing audited
    again = await asyncio.to_thread(cli, "pending", "release", entry, "--yes",
                                    "--redis-url", redis_url)
    assert again.returncode == 1
    assert "is not pending any more" in one_line(again.stderr)
    assert len(audits(sync_redis, s)) == 1


async def test_release_keeps_the_entry_its_owner_and_its_deliveries(
        settings: Settings, client: aioredis.Redis, sync_redis: redis.Redis) -> None:
    """Only the idle time changes; another owner than the one shown is not released."""
    s = settings
    entry = stuck(s, sync_redis, 3802)
    moved = await release.release(client, s, entry, owner="someone-else")
    assert (moved.status, moved.consumer) == ("moved", "ghost")
    e = await show_pending(client, s, entry)
    assert e is not None and e.idle_ms < 60_000
    done = await release.release(client, s, entry, owner="ghost")
    assert (done.status, done.consumer) == ("released", "ghost")
    e = await show_pending(client, s, entry)
    assert e is not None and (e.consumer, e.deliveries) == ("ghost", 1)
    assert e.idle_ms >= release.RELEASE_IDLE_MS and not e.trimmed
    assert sync_redis.xlen(s.stream) == 1
    sync_redis.xack(s.stream, s.group, entry)
    gone = await release.release(client, s, entry, owner=None)
    assert gone.status == "not-pending"
    assert await release.plan(client, s, "1-1") is None  # never delivered


async def test_a_live_owner_running_it_is_told_and_the_effect_happens_once(
        settings: Settings, client: aioredis.Redis, sync_redis: redis.Redis) -> None:
    """The owner is alive and runs the job (held on a gate): the plan says it may be
    running it; released, another worker starts it, and the job's lease keeps the side
    effect to one run; the entry is acked in the end.  The owner has one slot, held by
    that job, so it reclaims nothing: the other worker is the one that takes it."""
    s = settings.replace(claim_idle_ms=600_000, block_ms=200, job_timeout=30,
                         heartbeat_interval=0.2)
    gate = asyncio.Event()
    runs: list[str] = []
    reg = counting(runs, gate)
    async with running(s.replace(concurrency=1), reg, consumer="owner") as a:
        (entry,) = add_jobs(s, "render_tickets", [3803])
        await eventually(lambda: runs == ["started"], 10, "the owner to start it")
        await eventually(lambda: sync_redis.exists(s.key("worker", s.stream, "owner")), 10,
                         "the owner's presence record")
        plan = await release.plan(client, s, entry)
        assert plan is not None and plan.owner.alive and plan.maybe_running
        assert plan.owner.in_flight is not None
        async with running(s, reg, consumer="other", slot=1) as b:
            await asyncio.sleep(0.5)  # its reclaim passes: nothing idle long enough
            assert b.stats.total("reclaimed") == 0
            done = await release.release(client, s, entry, owner="owner")
            assert done.status == "released"
            await eventually(lambda: b.stats.total("reclaimed") == 1, 10,
                             "the other worker to take the released entry")
            await eventually(lambda: sync_redis.get(s.key("lasterr", entry)), 10,
                             "its run to meet the lease")
            assert b"is running" in sync_redis.get(s.key("lasterr", entry))
            assert runs == ["started"]  # nobody applied it while the owner runs it
            gate.set()
            await eventually(lambda: len(runs) == 1 and runs[0].startswith("3803 on "), 15,
                             "the owner's run to finish")
            await eventually(lambda: sync_redis.xpending(s.stream, s.group)["pending"] == 0,
                             20, "the entry acked")
            await asyncio.sleep(0.5)
        assert runs == [f"3803 on {a.consumer}"]  # once


def csrf_of(page: bytes) -> str:
    token = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert token, page[:500]
    return token[1].decode()


def test_the_page_release_is_the_operator_s_confirmed_audited_and_409_when_gone(
        tmp_path: Path, redis_url: str, settings: Settings, sync_redis: redis.Redis) -> None:
    s = settings
    entry = stuck(s, sync_redis, 3804, who="host-a")
    with console(tmp_path, redis_url) as c:
        viewer = Http(c.url)
        viewer.log_in("viewer")
        status, _, page = viewer.request("GET", f"/pending/{entry}")
        assert status == 200 and b"host-a" in page and b"Release to the fleet now" not in page
        token = csrf_of(page)
        status, _, body = viewer.request("POST", "/pending/release",
                                         f"csrf={token}&id={entry}&owner=host-a&confirm=1")
        assert status == 403 and b"only the operator" in body
        e = poll(lambda: sync_redis.xpending_range(s.stream, s.group, entry, entry, 1))[0]
        assert e["time_since_delivered"] < 60_000  # untouched
        op = Http(c.url)
        op.log_in("operator")
        status, _, page = op.request("GET", f"/pending/{entry}")
        assert status == 200 and b"Release to the fleet now" in page
        status, _, story = op.request("GET", f"/job?entry_id={entry}")  # links to it
        assert status == 200 and f'href="/pending/{entry}"'.encode() in story
        token = csrf_of(page)
        # first step: the confirm page (who holds it, what will happen), nothing done
        status, _, page = op.request("POST", "/pending/release",
                                     f"csrf={token}&id={entry}&owner=host-a")
        assert status == 200 and b'id="confirm-release"' in page
        assert b"no live worker under this name" in page and b"stays pending on host-a" in page
        assert audits(sync_redis, s) == []
        status, headers, _ = op.request("POST", "/pending/release",
                                         f"csrf={token}&id={entry}&owner=host-a&confirm=1")
        assert status == 303 and headers["location"] == "/pending"
        e = sync_redis.xpending_range(s.stream, s.group, entry, entry, 1)[0]
        assert e["time_since_delivered"] >= release.RELEASE_IDLE_MS
        assert e["consumer"] == b"host-a" and e["times_delivered"] == 1
        [a] = audits(sync_redis, s)
        assert (a["action"], a["via"], a["who"]) == ("release", "web", "operator@127.0.0.1")
        assert "audit: release 1 by operator@127.0.0.1 via web" in c.stderr()
        sync_redis.xack(s.stream, s.group, entry)
        for body in (f"csrf={token}&id={entry}&owner=host-a",
                     f"csrf={token}&id={entry}&owner=host-a&confirm=1"):
            status, _, text = op.request("POST", "/pending/release", body)
            assert status == 409 and b"is not pending any more" in text, text
            assert b"Traceback" not in text
        assert op.request("GET", f"/pending/{entry}")[0] == 404
        assert op.request("GET", "/pending/not-an-id")[0] == 400
        assert len(audits(sync_redis, s)) == 1
