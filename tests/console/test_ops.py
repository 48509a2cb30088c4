"""The console's operations (stagedoor.console.jobs / pending / deadletters) and their CLI
twins, on the suite's real Redis with real workers (issue 26).

Each test builds the state it looks at with the product itself (enqueue, a worker
running handlers that succeed, fail for a while, fail for good or hold), then asks
the operations layer, and the CLI with --json, what an operator would ask.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import redis
import redis.asyncio as aioredis

from stagedoor.config import Settings
from stagedoor.console import deadletters as dl
from stagedoor.console import jobs, jobscan, pending
from stagedoor.console.client import console_client
from stagedoor.handlers import Context, PermanentError, Registry, TransientError
from stagedoor.stream.job import Job
from stagedoor.stream.queue import dead_letter_fields
from tests.support.cli import cli
from tests.support.worker import add_jobs, eventually, running

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.asyncio


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    c = console_client(settings)
    yield c
    await c.aclose()


def registry(release: asyncio.Event) -> Registry:
    reg = Registry()

    @reg.register("render_tickets")
    async def ok(job: Job, ctx: Context) -> None:
        if await ctx.already_done(job):
            return
        await ctx.mark_done(job)

    @reg.register("refund")
    async def flaky(job: Job, ctx: Context) -> None:
        raise TransientError("payment gateway answered 503 <script>x</script>")

    @reg.register("mail")
    async def fatal(job: Job, ctx: Context) -> None:
        raise PermanentError("card declined")

    @reg.register("hold")
    async def hold(job: Job, ctx: Context) -> None:
        await release.wait()

    return reg


async def test_job_lookup_in_every_state(settings: Settings, client: aioredis.Redis,
                                         sync_redis: redis.Redis, redis_url: str) -> None:
    s = settings.replace(retries=0, claim_idle_ms=600_000, max_deliveries=5)
    (lost,) = add_jobs(s, "render_tickets", [4470])
    sync_redis.xdel(s.stream, lost)  # gone before any worker read it: a trim
    (queued,) = add_jobs(s, "render_tickets", [4471])
    story = await jobs.lookup(client, s, order_id=4471)
    assert [(e.entry_id, e.state) for e in story.entries] == [(queued, "queued")]
    assert story.searched and story.entries[0].kind == "render_tickets"
    # Trimmed before any worker read it: no copy left to find by its order; by its id,
    # nothing in Redis names it, so no state, but what it was if it existed.
    assert (await jobs.lookup(client, s, order_id=4470)).entries == []
    story = await jobs.lookup(client, s, entry_id=lost)
    assert story.entries == [] and story.absent is not None
    assert "trimmed or deleted before any worker read it" in story.absent
    assert (await jobs.lookup(client, s, order_id=999_999)).entries == []

    release = asyncio.Event()
    async with running(s, registry(release)) as w:
        add_jobs(s, "refund", [4472])
        add_jobs(s, "mail", [4473])
        (held,) = add_jobs(s, "hold", [4474])
        await eventually(lambda: w.stats.total("handled") >= 1 and
                         w.stats.total("dead_lettered") >= 1 and
                         w.stats.total("failed") >= 1 and len(w.slots.running) == 1,
                         20, "every job settled but the held one")
        done = (await jobs.lookup(client, s, order_id=4471)).entries[0]
        assert (done.state, done.done_mark, done.consumer) == ("done", "render_tickets", None)
        assert done.ticket is not None and not done.ticket.exists
        assert done.ticket.path.endswith("order-4471.pdf")

        retrying = (await jobs.lookup(client, s, outbox_id=4472)).entries[0]
        assert retrying.state == "retrying"
        assert retrying.consumer == w.consumer and retrying.deliveries == 1
        assert retrying.last_error is not None and "payment gateway answered 503" in \
            retrying.last_error

        dead = (await jobs.lookup(client, s, order_id=4473)).entries[0]
        assert dead.state == "dead" and dead.dead is not None
        assert dead.dead.error is not None and "card declined" in dead.dead.error
        assert dead.dead.source_id == dead.entry_id

        pend = (await jobs.lookup(client, s, entry_id=held)).entries[0]
        assert (pend.state, pend.consumer, pend.kind) == ("pending", w.consumer, "hold")
        assert pend.lease is None  # the test handler takes no lease
        release.set()
        await eventually(lambda: not w.slots.running, 10, "the held job finished")

        async def acked() -> bool:
            e = (await jobs.lookup(client, s, entry_id=held)).entries[0]
            return (e.state, e.done_mark, e.consumer) == ("acked", None, None)
        await eventually(acked, 10, "the held job acked (its handler keeps no done mark)")

    # Acked and then trimmed: nothing on either stream names its order any more, nor
    # anything else its entry id: not found, and if it existed it was read first.
    sync_redis.xdel(s.stream, done.entry_id)
    assert (await jobs.lookup(client, s, order_id=4471)).entries == []
    gone = await jobs.lookup(client, s, entry_id=done.entry_id)
    assert gone.entries == [] and gone.absent is not None
    assert "after a worker read it" in gone.absent

    # The CLI twin, --json and text (hostile text escaped on the terminal).
    proc = cli("job", "4472", "--json", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    doc = orjson.loads(proc.stdout)
    assert doc["entries"][0]["state"] == "retrying"
    assert "503" in doc["entries"][0]["last_error"]
    proc = cli("job", "--outbox-id", "4473", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert "DEAD" in proc.stdout and "card declined" in proc.stdout
    proc = cli("job", "4471", "--entry-id", held, "--redis-url", redis_url)
    assert proc.returncode == 2 and "error:" in proc.stderr
    proc = cli("job", "424242", "--redis-url", redis_url)
    assert proc.returncode == 1 and "not found" in proc.stdout


async def test_replayed_job_is_found_by_its_entry_id(settings: Settings,
                                                     client: aioredis.Redis,
                                                     sync_redis: redis.Redis) -> None:
    # (Replay writes no job index any more: the index is going away, issue 36.)
    fields = Job(kind="render_tickets", order_id=5001, outbox_id=95001, request_id="r",
                 trace="t").fields()
    dead_id = sync_redis.execute_command(
        "XADD", settings.dead_stream, "*",
        *dead_letter_fields(fields, error="e", source_id="1-0", deliveries=6,
                            consumer="c")).decode()
    (outcome,) = (await dl.replay(client, settings, [dead_id])).outcomes
    assert outcome.status == "ok"
    assert (outcome.kind, outcome.order_id) == ("render_tickets", "5001")
    story = await jobs.lookup(client, settings, entry_id=outcome.new_id)
    assert [e.entry_id for e in story.entries] == [outcome.new_id]
    assert story.entries[0].state == "queued"



async def test_a_job_added_by_a_bare_xadd_is_found(settings: Settings, client: aioredis.Redis,
                                                    sync_redis: redis.Redis) -> None:
    """The seed's relay adds with a bare XADD of five fields: nothing of stagedoor's ran,
    and the job is found by its order and outbox id all the same; so is a dead letter of
    a job trimmed since, by its source's ids, and linked to its entry id."""
    s = settings
    sync_redis.execute_command("XGROUP", "CREATE", s.stream, s.group, "$", "MKSTREAM")
    relay = sync_redis.execute_command(
        "XADD", s.stream, "MAXLEN", "~", 100000, "*", "kind", "render_tickets",
        "order_id", "4471", "outbox_id", "88210", "request_id", "7f3a9c2e",
        "trace", "4bf92f35").decode()
    for order in range(1, 3000):  # other jobs around it, more than one slice of them
        sync_redis.execute_command("XADD", s.stream, "*", "kind", "render_tickets",
                                   "order_id", str(10_000 + order), "outbox_id", str(order),
                                   "request_id", "r", "trace", "t")
    by_order = await jobs.lookup(client, s, order_id=4471)
    by_outbox = await jobs.lookup(client, s, outbox_id=88210)
    assert [e.entry_id for e in by_order.entries] == [relay] == \
        [e.entry_id for e in by_outbox.entries]
    assert (by_order.entries[0].state, by_order.entries[0].outbox_id) == ("queued", "88210")
    # 4471 is not 14471: a field matches whole, never as a substring
    assert (await jobs.lookup(client, s, order_id=447)).entries == []

    fields = Job(kind="mail", order_id=5150, outbox_id=95150, request_id="r",
                 trace="t").fields()
    dead_id = sync_redis.execute_command(
        "XADD", s.dead_stream, "*", *dead_letter_fields(
            fields, error="card declined", source_id="1700000000000-3", deliveries=1,
            consumer="c")).decode()
    for story in (await jobs.lookup(client, s, order_id=5150),
                  await jobs.lookup(client, s, outbox_id=95150),
                  await jobs.lookup(client, s, entry_id="1700000000000-3")):
        (entry,) = story.entries
        assert (entry.entry_id, entry.state, entry.dead_id) == \
            ("1700000000000-3", "dead", dead_id)
        assert (entry.order_id, entry.outbox_id, entry.kind) == ("5150", "95150", "mail")

async def test_an_id_nothing_names_is_not_found_never_a_state(
        settings: Settings, client: aioredis.Redis, sync_redis: redis.Redis,
        redis_url: str) -> None:
    """Issue 38 item 5: an id Redis never generated was TRIMMED-UNREAD or ACKED (exit 0);
    an id past the year 9999 was a traceback.  Now: not found (exit 1) with what can be
    known, or one line and exit 2."""
    s = settings
    a, b, c = add_jobs(s, "mail", [1, 2, 3])
    sync_redis.execute_command("XREADGROUP", "GROUP", s.group, "w", "COUNT", 2,
                               "STREAMS", s.stream, ">")
    sync_redis.xack(s.stream, s.group, a, b)
    url = ("--redis-url", redis_url)

    async def absent(eid: str) -> str:
        story = await jobs.lookup(client, s, entry_id=eid)
        assert story.entries == [] and story.absent is not None, story
        return story.absent

    assert (await absent("99999999999999-0")).startswith("never added: it is after the newest")
    # Nothing was ever trimmed or deleted: an id that is not there never was.
    assert (await absent("1-0")).startswith("never added: jobs has never trimmed or deleted")
    assert (await absent(c.split("-")[0] + "-9")).startswith("never added")
    for eid in ("99999999999999-0", "1-0"):
        proc = cli("job", "--entry-id", eid, *url)
        assert proc.returncode == 1 and "not found: never added" in proc.stdout, proc.stdout
    # A trim (MAXLEN, as enqueue's) drops the oldest: below the first entry left an id
    # may have been one, and Redis cannot say which; above it, never (a trim does not
    # move max-deleted-entry-id: only XDEL does).
    sync_redis.xtrim(s.stream, maxlen=2, approximate=False)  # a and b went (read, acked)
    assert "after a worker read it" in await absent(a)
    assert "whether it existed cannot be known" in await absent("1-0")
    assert "after a worker read it" in await absent("1-0")
    (d,) = add_jobs(s, "mail", [4])
    await asyncio.sleep(0.01)  # e in a later millisecond: an id between d and e is free
    add_jobs(s, "mail", [5])
    sync_redis.xdel(s.stream, c)  # c unread, deleted: at most max-deleted-entry-id
    assert "before any worker read it" in await absent(c)
    ms, seq = d.split("-")
    assert (await absent(f"{ms}-{int(seq) + 1}")).startswith(
        "never added: it is after jobs's first entry")
    proc = cli("job", "--entry-id", "1-0", "--json", *url)
    assert proc.returncode == 1 and orjson.loads(proc.stdout)["entries"] == []
    # What does exist is still told: acked (delivered, gone from the pending list).
    sync_redis.execute_command("XREADGROUP", "GROUP", s.group, "w", "COUNT", 1,
                               "STREAMS", s.stream, ">")
    sync_redis.xack(s.stream, s.group, d)
    assert (await jobs.lookup(client, s, entry_id=d)).entries[0].state == "acked"

    # Out of range: one line, exit 2, no traceback (the CLI) and a 400 (the pages' parser).
    for args in (("job", "--entry-id", "253402300800000-0"),
                 ("job", "--entry-id", "1-18446744073709551616"),
                 ("dead", "show", "99999999999999999999-0"),
                 ("dead", "list", "--since", "0001-01-01"),
                 ("dead", "list", "--until", "99999999999999999")):
        proc = cli(*args, *url)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") <= 3, proc.stderr
        assert "year 9999" in proc.stderr or "1970" in proc.stderr or "sequence" in \
            proc.stderr, proc.stderr
    with pytest.raises(dl.BadBound, match="before 1970"):
        dl.parse_bound("0001-01-01")
    with pytest.raises(jobs.LookupError_, match="year 9999"):
        await jobs.lookup(client, s, entry_id="253402300800000-0")


async def test_a_dead_job_stays_dead_after_its_dead_letter_goes(
        settings: Settings, client: aioredis.Redis, sync_redis: redis.Redis,
        redis_url: str) -> None:
    """Issue 38 item 5: a dead-lettered job read ACKED once its dead letter was deleted,
    replayed or purged.  The worker's own dead-letter script moves three jobs; the CLI
    and the console layer remove their dead letters; each job is still DEAD, and says how."""
    from stagedoor.stream.queue import DeadLetter

    s = settings
    ids = add_jobs(s, "mail", [7001, 7002, 7003, 7004])
    sync_redis.execute_command("XREADGROUP", "GROUP", s.group, "w", "COUNT", 4,
                               "STREAMS", s.stream, ">")
    move = DeadLetter(client, s)
    dead = {}
    for eid in ids[:3]:
        (entry,) = sync_redis.xrange(s.stream, eid, eid)
        fields = [x for kv in entry[1].items() for x in kv]
        dead[eid] = (await move(eid, fields, error="card declined", deliveries=1,
                                consumer="w")).decode()
    sync_redis.xack(s.stream, s.group, ids[3])  # the fourth: acked, never dead
    assert [(await jobs.lookup(client, s, entry_id=e)).entries[0].state for e in ids] == \
        ["dead", "dead", "dead", "acked"]
    url = ("--redis-url", redis_url)
    assert cli("dead", "delete", dead[ids[0]], *url).returncode == 0
    (replayed,) = (await dl.replay(client, s, [dead[ids[1]]])).outcomes
    assert cli("dead", "purge", "--yes", *url).returncode == 0
    assert sync_redis.xlen(s.dead_stream) == 0

    for eid, how in ((ids[0], "deleted"), (ids[1], f"replayed as {replayed.new_id}"),
                     (ids[2], "purged")):
        (e,) = (await jobs.lookup(client, s, entry_id=eid)).entries
        assert (e.state, e.dead_removed, e.dead) == ("dead", how, None)
        proc = cli("job", "--entry-id", eid, *url)
        assert proc.returncode == 0 and "DEAD" in proc.stdout, proc.stdout
        assert f"dead letter removed ({how})" in proc.stdout, proc.stdout
    # By order id too (the entry is still on the stream), and trimmed from the stream.
    assert (await jobs.lookup(client, s, order_id=7001)).entries[0].state == "dead"
    sync_redis.xdel(s.stream, ids[0])
    assert (await jobs.lookup(client, s, entry_id=ids[0])).entries[0].state == "dead"
    assert (await jobs.lookup(client, s, entry_id=ids[3])).entries[0].state == "acked"

    # The record is capped like the dead letters it outlives (MAXLEN ~ dead_maxlen).
    small = s.replace(dead_maxlen=100)
    assert (await dl.delete(client, small, ["1-1"]))[0].status == "missing"  # no record
    gone = small.key("dead-gone", small.stream)
    assert sync_redis.xlen(gone) == 3
    pipe = sync_redis.pipeline(transaction=False)
    for n in range(1000):
        pipe.execute_command("XADD", s.dead_stream, "*", *dead_letter_fields(
            Job(kind="mail", order_id=n + 1, outbox_id=n + 1, request_id="r",
                trace="t").fields(), error="e", source_id=f"1-{n}", deliveries=1,
            consumer="c"))
    pipe.execute()
    assert await dl.purge(client, small) == 1000
    assert sync_redis.xlen(gone) <= 200  # ~: whole nodes of 100 entries

    # Dead letters the cap trimmed leave no record: an acked entry old enough to have
    # been one says it cannot tell.
    sync_redis.set(small.key("dead-trimmed", small.stream), 5)
    (e,) = (await jobs.lookup(client, s, entry_id=ids[3])).entries
    assert e.state == "acked" and e.note is not None and "5 dead letters were trimmed" in e.note

# -- pending ------------------------------------------------------------------------------------


async def test_pending_filters_sort_and_last_error(settings: Settings, client: aioredis.Redis,
                                                   sync_redis: redis.Redis,
                                                   redis_url: str) -> None:
    s = settings
    refunds = add_jobs(s, "refund", [1, 2, 3])
    mails = add_jobs(s, "mail", [4, 5])
    # Two consumers take them; then idle times and delivery counts are set with XCLAIM.
    sync_redis.execute_command("XREADGROUP", "GROUP", s.group, "host-a", "COUNT", 3,
                               "STREAMS", s.stream, ">")
    sync_redis.execute_command("XREADGROUP", "GROUP", s.group, "host-b", "COUNT", 2,
                               "STREAMS", s.stream, ">")
    for eid, consumer, idle, count in ((refunds[0], "host-a", 50_000, 4),
                                       (refunds[1], "host-a", 90_000, 1),
                                       (refunds[2], "host-a", 10_000, 2),
                                       (mails[0], "host-b", 70_000, 3),
                                       (mails[1], "host-b", 1_000, 1)):
        sync_redis.execute_command("XCLAIM", s.stream, s.group, consumer, 0, eid,
                                   "IDLE", idle, "RETRYCOUNT", count)
    sync_redis.set(s.key("lasterr", refunds[0]), "TransientError: gateway 503")

    page = await pending.list_pending(client, s)
    assert page.total == 5 and [e.id for e in page.entries] == [
        refunds[1], mails[0], refunds[0], refunds[2], mails[1]]  # longest idle first
    by_id = {e.id: e for e in page.entries}
    assert by_id[refunds[0]].last_error == "TransientError: gateway 503"
    assert by_id[refunds[0]].deliveries == 4 and by_id[refunds[0]].kind == "refund"
    assert by_id[mails[0]].consumer == "host-b" and by_id[mails[0]].order_id == "4"

    ids = lambda p: [e.id for e in p.entries]  # noqa: E731
    assert ids(await pending.list_pending(client, s, kind="mail")) == [mails[0], mails[1]]
    assert ids(await pending.list_pending(client, s, consumer="host-a")) == [
        refunds[1], refunds[0], refunds[2]]
    assert ids(await pending.list_pending(client, s, min_idle_ms=60_000)) == [
        refunds[1], mails[0]]
    assert ids(await pending.list_pending(client, s, min_deliveries=3)) == [
        mails[0], refunds[0]]
    assert ids(await pending.list_pending(client, s, kind="refund", min_deliveries=2,
                                          min_idle_ms=20_000)) == [refunds[0]]
    assert ids(await pending.list_pending(client, s, limit=2)) == [refunds[1], mails[0]]
    small = await pending.list_pending(client, s, scan_limit=2)
    assert small.truncated and small.scanned == 2

    shown = await pending.show_pending(client, s, refunds[0])
    assert shown is not None and shown.last_error == "TransientError: gateway 503"
    assert await pending.show_pending(client, s, "1-1") is None

    proc = cli("pending", "list", "--kind", "refund", "--min-deliveries", "2", "--json",
               "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert [e["id"] for e in orjson.loads(proc.stdout)["entries"]] == [refunds[0], refunds[2]]
    proc = cli("pending", "list", "--min-idle", "60", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert refunds[1] in proc.stdout and refunds[0] not in proc.stdout
    proc = cli("pending", "show", refunds[0], "--redis-url", redis_url)
    assert proc.returncode == 0 and "gateway 503" in proc.stdout
    proc = cli("pending", "show", "1-1", "--redis-url", redis_url)
    assert proc.returncode == 1 and "not pending" in proc.stderr


# -- dead letters -------------------------------------------------------------------------------

T0 = 1_765_000_000_000  # 2025-12-06T05:46:40Z: the dead-letter ids are times


def seed_dead(sync_redis: redis.Redis, settings: Settings) -> dict[str, str]:
    """Six dead letters at known times: name -> id."""
    out = {}
    rows = (("r1", 0, "render_tickets", "TimeoutError: render took 30s"),
            ("m1", 60_000, "mail", "SMTP 554"),
            ("r2", 120_000, "render_tickets", "MalformedJob: order_id"),
            ("r3", 180_000, "render_tickets", "TimeoutError: render took 31s"),
            ("m2", 240_000, "mail", "TimeoutError: smtp"),
            ("r4", 300_000, "render_tickets", "TimeoutError: render took 29s"))
    for n, (name, dt, kind, error) in enumerate(rows):
        fields = Job(kind=kind, order_id=100 + n, outbox_id=900 + n, request_id="r",
                     trace="t").fields()
        out[name] = sync_redis.execute_command(
            "XADD", settings.dead_stream, f"{T0 + dt}-0",
            *dead_letter_fields(fields, error=error, source_id="1-0", deliveries=6,
                                consumer="c")).decode()
    return out


async def test_dead_filters_list_and_select(settings: Settings, client: aioredis.Redis,
                                            sync_redis: redis.Redis) -> None:
    d = seed_dead(sync_redis, settings)
    names = {v: k for k, v in d.items()}

    async def listed(**kw: object) -> list[str]:
        page = await dl.list_dead(client, settings, dl.DeadFilter(**kw))  # type: ignore[arg-type]
        return [names[e.id] for e in page.entries]

    assert await listed() == ["r4", "m2", "r3", "r2", "m1", "r1"]
    assert await listed(kind="mail") == ["m2", "m1"]
    assert await listed(error="TimeoutError") == ["r4", "m2", "r3", "r1"]
    since = dl.parse_bound("2025-12-06T05:47:40Z")  # T0 + 60 s
    until = dl.parse_bound("2025-12-06T05:49:40Z", end=True)  # T0 + 180 s
    assert await listed(since=since, until=until) == ["r3", "r2", "m1"]
    assert await listed(kind="render_tickets", error="Timeout", since=since, until=until) \
        == ["r3"]
    assert await listed(since=d["r2"], until=d["r3"]) == ["r3", "r2"]
    page = await dl.list_dead(client, settings, limit=2)
    assert [names[e.id] for e in page.entries] == ["r4", "m2"] and page.next_before == d["m2"]
    page = await dl.list_dead(client, settings, limit=2, before=page.next_before)
    assert [names[e.id] for e in page.entries] == ["r3", "r2"]
    small = await dl.list_dead(client, settings, dl.DeadFilter(kind="mail"), scan_limit=3)
    assert [names[e.id] for e in small.entries] == ["m2"] and small.scanned == 3
    assert small.next_before == d["r3"]  # more to read, from there
    sel = await dl.select(client, settings, dl.DeadFilter(kind="render_tickets",
                                                          error="Timeout"))
    assert [names[i] for i in sel.ids] == ["r1", "r3", "r4"]  # oldest first
    with pytest.raises(dl.BadBound):
        dl.parse_bound("20:00 yesterday")


async def test_dead_replay_delete_purge_by_filter_cli(settings: Settings,
                                                      sync_redis: redis.Redis,
                                                      redis_url: str) -> None:
    d = seed_dead(sync_redis, settings)
    url = ("--redis-url", redis_url)
    window = ("--since", "2025-12-06T05:47:00Z", "--until", "2025-12-06T05:50:00Z")

    def dead_ids() -> set[str]:
        return {e[0].decode() for e in sync_redis.xrange(settings.dead_stream)}

    # Dry run: prints what would be replayed, touches nothing.
    proc = cli("dead", "replay", "--kind", "render_tickets", *window, "--dry-run", "--json", *url)
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["ids"] == [d["r2"], d["r3"]]
    assert len(dead_ids()) == 6 and sync_redis.exists(settings.stream) == 0

    # The render_tickets dead letters of the window, and only those, go back.
    proc = cli("dead", "replay", "--kind", "render_tickets", *window, *url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "replayed 2 of 2"
    assert dead_ids() == {d["r1"], d["m1"], d["m2"], d["r4"]}
    orders = sorted(int(f[b"order_id"]) for _, f in sync_redis.xrange(settings.stream))
    assert orders == [102, 103]
    # Replayed twice (a retry, a second operator): found missing, no second job.
    proc = cli("dead", "replay", d["r2"], *url)
    assert proc.returncode == 1 and f"not found  {d['r2']}" in proc.stdout
    assert sync_redis.xlen(settings.stream) == 2

    # One entry deleted by id; a missing one says so.
    proc = cli("dead", "delete", d["m1"], *url)
    assert proc.returncode == 0 and proc.stdout == f"deleted    {d['m1']}\n"
    proc = cli("dead", "delete", d["m1"], "--json", *url)
    assert proc.returncode == 1 and orjson.loads(proc.stdout)[0]["status"] == "missing"

    # Purge by filter: refused without --yes off a terminal, dry run counts, --yes deletes.
    proc = cli("dead", "purge", "--error", "render took", *url)
    assert proc.returncode == 2 and len(dead_ids()) == 3
    proc = cli("dead", "purge", "--error", "render took", "--dry-run", *url)
    assert proc.returncode == 0 and "2 of 3 entries in range would be deleted" in proc.stdout
    assert len(dead_ids()) == 3
    proc = cli("dead", "purge", "--error", "render took", "--yes", "--json", *url)
    assert proc.returncode == 0 and orjson.loads(proc.stdout) == {"purged": 2}
    assert dead_ids() == {d["m2"]}
    proc = cli("dead", "list", "--since", "not a time", *url)
    assert proc.returncode == 2 and "error:" in proc.stderr


async def test_an_order_with_several_jobs_lists_them_all(settings: Settings,
                                                         client: aioredis.Redis,
                                                         sync_redis: redis.Redis) -> None:
    from stagedoor.stream.queue import enqueue_sync

    c = redis.Redis.from_url(settings.redis_url, protocol=2)
    ids = enqueue_sync(c, settings, [
        Job(kind="render_tickets", order_id=6001, outbox_id=96001 + n, request_id="r",
            trace="t") for n in range(3)])
    c.close()
    story = await jobs.lookup(client, settings, order_id=6001)
    assert [e.entry_id for e in story.entries] == ids[::-1]  # newest first
    assert [e.outbox_id for e in story.entries] == ["96003", "96002", "96001"]
    sync_redis.xdel(settings.stream, ids[0])  # trimmed: the others are still found
    story = await jobs.lookup(client, settings, order_id=6001)
    assert [e.outbox_id for e in story.entries] == ["96003", "96002"]


def commandstats(r: redis.Redis) -> dict[str, int]:
    info = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}


async def test_lookups_do_bounded_work_on_a_big_queue(settings: Settings,
                                                      client: aioredis.Redis,
                                                      sync_redis: redis.Redis) -> None:
    """20,000 entries on the stream, 2,000 dead letters, 1,000 pending: a lookup by order
    id reads the streams in slices of jobscan.SLICE entries, one XREVRANGE each, so no
    one command reads more than a slice; a pending page and a dead-letter page send a
    fixed handful of commands (Redis's own command counters say so)."""
    s = settings.replace(maxlen=1_000_000)
    c = redis.Redis.from_url(s.redis_url, protocol=2)
    from stagedoor.stream.queue import enqueue_sync
    enqueue_sync(c, s, [Job(kind="render_tickets", order_id=i, outbox_id=i, request_id="r",
                            trace="t") for i in range(1, 20_001)], chunk=2000)
    c.execute_command("XREADGROUP", "GROUP", s.group, "host-a", "COUNT", 1000,
                      "STREAMS", s.stream, ">")
    pipe = c.pipeline(transaction=False)
    for i in range(2000):
        pipe.execute_command("XADD", s.dead_stream, "*", *dead_letter_fields(
            Job(kind="mail", order_id=i + 1, outbox_id=i + 1, request_id="r",
                trace="t").fields(), error="e", source_id="1-0", deliveries=6,
            consumer="c"))
    pipe.execute()

    def counted() -> dict[str, int]:
        return commandstats(sync_redis)

    sync_redis.config_resetstat()
    story = await jobs.lookup(client, s, order_id=15_000)
    stats = counted()
    assert [e.state for e in story.entries] == ["queued"]
    # Every entry of both streams read once, a slice a call, newest first, until a slice
    # comes back short (here the stream's start is past a full slice: one empty call
    # each); then 5 commands for the entry and 3 for its marks, TIME and XINFO GROUPS.
    slices = 20_000 // jobscan.SLICE + 1 + 2000 // jobscan.SLICE + 1
    assert (story.scan_calls, story.scan_entries) == (slices, 22_000)
    # XRANGE: the entry, and the oldest dead letter
    assert stats.get("xrevrange", 0) == slices and stats.get("xrange", 0) == 2
    others = {k: v for k, v in stats.items() if k not in (
        "config|resetstat", "client|setname", "xrevrange", "xrange")}
    assert others == {"time": 1, "xinfo|groups": 1, "xinfo|stream": 1, "xlen": 1,
                      "xpending": 1, "get": 6, "hget": 1}, others
    # GET starts, settled, lasterr, lease, the old done key, the dead letters trimmed;
    # HGET the mark; XINFO STREAM and XLEN of the removed dead letters: the ids' facts
    # By outbox id the same; the CLI says what it read when nothing matches.
    assert (await jobs.lookup(client, s, outbox_id=15_000)).entries[0].order_id == "15000"

    sync_redis.config_resetstat()
    page = await pending.list_pending(client, s, limit=50)
    stats = counted()
    assert page.total == 1000 and len(page.entries) == 50
    assert stats.get("xpending", 0) == 2 and stats.get("xrange", 0) == 50
    assert stats.get("get", 0) == 100

    sync_redis.config_resetstat()
    dead = await dl.list_dead(client, s, limit=50)
    stats = counted()
    assert dead.total == 2000 and len(dead.entries) == 50 and dead.scanned == 50
    assert stats.get("xrevrange", 0) == 1 and stats.get("xlen", 0) == 1
    c.close()


async def test_a_second_pause_says_the_first_one_stands(settings: Settings,
                                                        client: aioredis.Redis,
                                                        redis_url: str) -> None:
    """Issue 38 item 8: a second pause kept the first one's reason without a word."""
    from stagedoor.console import fleet

    first = await fleet.pause(client, settings, by="alice", reason="doors open late")
    assert first.paused and not first.kept_earlier
    proc = cli("pause", "--reason", "card gateway down", "--redis-url", redis_url)
    assert proc.returncode == 0, proc.stderr
    assert "was already paused since" in proc.stdout and "by alice: doors open late" in \
        proc.stdout and "that pause is kept" in proc.stdout, proc.stdout
    proc = cli("pause", "--reason", "again", "--json", "--redis-url", redis_url)
    doc = orjson.loads(proc.stdout)
    assert (doc["kept_earlier"], doc["reason"]) == (True, "doors open late")
    await fleet.resume(client, settings)
    assert not (await fleet.pause(client, settings, reason="now")).kept_earlier


async def test_a_stuck_pending_entry_is_dead_lettered_by_the_operator(
        settings: Settings, client: aioredis.Redis, sync_redis: redis.Redis) -> None:
    """Issue 38 item 8: a stuck pending entry could not be acted on.  It goes to the
    dead letters through the worker's own script, its last error kept."""
    s = settings
    (stuck,) = add_jobs(s, "render_tickets", [8801])
    sync_redis.execute_command("XREADGROUP", "GROUP", s.group, "host-a", "COUNT", 1,
                               "STREAMS", s.stream, ">")
    sync_redis.set(s.key("lasterr", stuck), "CrashLoop: renderer segfault")
    sync_redis.set(s.key("starts", stuck), 7)
    dead_id = await pending.dead_letter(client, s, stuck, who="operator@127.0.0.1")
    assert dead_id is not None
    (d,) = (await dl.list_dead(client, s)).entries
    assert (d.id, d.source_id, d.consumer, d.order_id) == (dead_id, stuck, "host-a", 8801)
    assert d.error is not None and d.error.startswith("CrashLoop: renderer segfault [")
    assert "dead-lettered by operator@127.0.0.1 from the console" in d.error
    assert sync_redis.xpending(s.stream, s.group)["pending"] == 0
    assert not sync_redis.exists(s.key("lasterr", stuck), s.key("starts", stuck))
    assert (await jobs.lookup(client, s, order_id=8801)).entries[0].state == "dead"
    # twice (two operators): the second finds it gone from the pending list, writes nothing
    assert await pending.dead_letter(client, s, stuck, who="x") is None
    assert sync_redis.xlen(s.dead_stream) == 1
