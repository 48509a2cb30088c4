"""One job's whole story, from what Redis still holds: `stagedoor job` and the page.

Finding the entries.  By entry id: directly.  By order id or outbox id: a bounded scan
of the job stream and of the dead-letter stream for entries with that field
(console/jobscan.py: XREVRANGE in slices of 500 entries, filtered here), newest first,
stopping at MAX_ENTRIES.  Nothing is written for it: a job added
by a bare XADD (the seed's relay) is found like one enqueue added, and stagedoor keeps
no index whose memory grows with the jobs queued.  A dead letter carries its job's
fields, so a job dead-lettered is found by its order or outbox id through its dead
letter too, and linked to its source entry by dead:source_id; by entry id, the dead
letter is found by a scan of the dead-letter stream for dead:source_id.

Then, per entry found (at most MAX_ENTRIES, newest first), one round trip:
XRANGE <stream> <id> <id>, XPENDING <stream> <group> <id> <id> 1, GET starts, settled
and lasterr of the id; and one more: HGET its done mark (keys.marks_key), GET its lease
and GET the done mark as a key of its own (marks written before issue 36).
Plus TIME, XINFO GROUPS (the group's last-delivered id: delivered or still queued),
XINFO STREAM (last-generated-id, max-deleted-entry-id), the length of the removed dead
letters (keys.dead_gone_key), the count of dead letters the cap trimmed and the oldest
dead letter's id.

Only what Redis holds is a state.  An entry id is told a state only when something
names it: the stream, the group's pending list, its start count or last error, a dead
letter, or the record of a removed dead letter.  Otherwise it is not found (`absent`
says why, and the CLI exits 1), and what can be known is said:

  - above the stream's last-generated-id: never added (Redis has not generated it);
  - the stream never dropped an entry (entries-added = length): never added;
  - above the first entry and above max-deleted-entry-id: never added.  A trim
    (MAXLEN, MINID) drops only entries below the first one left, and XDEL records the
    highest id it deleted (max-deleted-entry-id; a trim does not move it), so every
    entry added above both is still there;
  - otherwise it may have been trimmed (below the first entry) or deleted (at most
    max-deleted-entry-id), and Redis keeps no record of which ids it dropped: if it
    existed, it went unread (above the group's last-delivered id) or after a worker read
    it.  Whether 1-0 ever existed on a stream that has trimmed cannot be known.

Dead stays dead.  A job whose dead letter was replayed, deleted or purged by the console
or the CLI is still DEAD, with "dead letter removed" and how: those actions record the
job's entry id in a capped stream (keys.dead_gone_key, MAXLEN ~ dead_maxlen: the last
dead_maxlen removals), which the lookup scans (in slices, like the streams) for the
entries that would otherwise read `acked`.  Dead letters the cap itself trimmed are
dropped by the worker's dead-letter script with no record of their jobs: an acked
entry old enough to have been one of them says so (`note`).

What it cannot know, beyond that: a job trimmed from the stream (MAXLEN ~) with no dead
letter is found by entry id only; a job acked without a done mark (a handler that does
not mark) shows as `acked`, done or not; the ticket file is looked for on this
machine's tickets_dir (the page's host, not necessarily the worker's).
"""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..errors import StagedoorError
from ..stream.keys import (
    dead_gone_key,
    dead_trimmed_key,
    done_key,
    lasterr_key,
    lease_key,
    marks_key,
    settled_key,
    starts_key,
)
from ..stream.queue import DEAD_FIELD_PREFIX
from ..telemetry.inspect import MAX_ID_MS, BadEntryId, check_id, id_ms, parse_id, valid_id
from ..telemetry.records import Command, Record, field, field_pairs, now_ms, pairs, pipeline, text
from .deadletters import DeadEntry, dead_entry
from .jobscan import ScanCost, find

MAX_ENTRIES = 20


class LookupError_(StagedoorError, ValueError):
    """A lookup that cannot be made (one line)."""


@dataclasses.dataclass
class Ticket(Record):
    path: str
    exists: bool
    size: int | None


@dataclasses.dataclass
class JobEntry(Record):
    entry_id: str
    queued_at: str  # the id's time, ISO 8601 UTC
    state: str  # queued | pending | retrying | done | dead | acked | trimmed-unread
    in_stream: bool  # False: MAXLEN ~ trimmed it (or it was never there)
    delivered: bool  # the group read it (id <= last-delivered-id)
    kind: str | None
    order_id: str | None
    outbox_id: str | None
    fields: list[tuple[str, str]]
    consumer: str | None  # pending under
    idle_ms: int | None
    deliveries: int | None
    starts: int | None
    settled: int | None  # starts that ended in a reported failure (not a crash)
    last_error: str | None
    done_mark: str | None  # the done mark's value (the kind), None: not marked
    lease: str | None  # who runs it now: <consumer>/<entry id>
    dead_id: str | None
    dead: DeadEntry | None
    ticket: Ticket | None  # render_tickets only
    # its dead letter is gone: "replayed as <id>", "deleted" or "purged" (the console's
    # record of removed dead letters); None: a dead letter is there, or none was removed
    dead_removed: str | None = None
    # what the state cannot rule out (an acked entry whose dead letter may have been
    # trimmed at the cap)
    note: str | None = None


@dataclasses.dataclass
class JobStory(Record):
    query: dict[str, Any]
    entries: list[JobEntry]  # newest first
    searched: bool  # found by scanning the streams for the id (False: by entry id)
    scan_calls: int  # XREVRANGE calls (round trips) the scan took
    scan_entries: int  # stream entries the scan read in Redis
    time_ms: int
    # entries empty for an entry id: why it is not found, and what can be known of it
    absent: str | None = None


def _iso(ms: int) -> str:
    if not 0 <= ms <= MAX_ID_MS:  # an id someone added by hand: no date shows it
        return f"{ms} ms after 1970 (past the year 9999)"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _ticket(settings: Settings, kind: str | None, order_id: str | None) -> Ticket | None:
    if kind != "render_tickets" or not order_id or not order_id.isdigit():
        return None
    path = os.path.join(settings.tickets_dir, f"order-{int(order_id)}.pdf")
    try:
        size: int | None = os.stat(path).st_size
    except OSError:
        size = None
    return Ticket(path=path, exists=size is not None, size=size)


def _newest_dead(hits: list[tuple[str, list[bytes]]]) -> dict[str, DeadEntry]:
    """source entry id -> its newest dead letter (hits come newest first)."""
    out: dict[str, DeadEntry] = {}
    for dead_id, fields in hits:
        d = dead_entry(dead_id, fields)
        # a source id that is no entry id (anyone's text) links the dead letter to nothing
        if d.source_id and valid_id(d.source_id) and d.source_id not in out:
            out[d.source_id] = d
    return out


def _ok(reply: Any) -> Any:
    return None if isinstance(reply, Exception) else reply


def _state(pending: bool, deliveries: int | None, last_error: str | None, delivered: bool,
           in_stream: bool, done: bool, dead: bool) -> str:
    if dead:
        return "dead"
    if pending:
        return "retrying" if last_error or (deliveries or 0) > 1 else "pending"
    if not delivered:
        return "queued" if in_stream else "trimmed-unread"
    # Delivered and no longer pending: acked.  Its done mark says it did its work; a
    # handler that keeps none (or a mark expired) leaves only "acked".
    return "done" if done else "acked"


@dataclasses.dataclass
class _Facts:
    """What the first round trip says of the streams, for telling ids apart."""
    now: int
    last_delivered: str
    stream_exists: bool
    last_generated: str | None
    first_id: str | None  # the first entry left (None: the stream is empty)
    removed: int | None  # entries-added - length: entries ever trimmed or deleted
    max_deleted: str | None  # the highest id XDEL deleted (trims do not move it)
    gone_length: int  # removed dead letters remembered
    dead_trimmed: int  # dead letters the cap trimmed, ever
    oldest_dead: str | None


async def _facts(client: aioredis.Redis, s: Settings) -> _Facts:
    t, groups, info, gone, trimmed, oldest = await pipeline(client, [
        ("TIME",), ("XINFO", "GROUPS", s.stream), ("XINFO", "STREAM", s.stream),
        ("XLEN", dead_gone_key(s)), ("GET", dead_trimmed_key(s)),
        ("XRANGE", s.dead_stream, "-", "+", "COUNT", 1)])
    last_delivered = "0-0"
    for g in _ok(groups) or []:
        gp = pairs(g)
        if text(gp.get("name")) == s.group:
            last_delivered = text(gp.get("last-delivered-id")) or "0-0"
    si = pairs(info) if _ok(info) is not None else {}
    md, first, added = (si.get("max-deleted-entry-id"), si.get("first-entry"),
                        si.get("entries-added"))
    return _Facts(
        now=now_ms(t), last_delivered=last_delivered, stream_exists=bool(si),
        last_generated=text(si.get("last-generated-id")) or None,
        first_id=text(first[0]) if first else None,
        removed=(int(added) - int(si.get("length") or 0)) if added is not None else None,
        max_deleted=text(md) if md is not None else None,
        gone_length=int(_ok(gone) or 0), dead_trimmed=int(_ok(trimmed) or 0),
        oldest_dead=text(_ok(oldest)[0][0]) if _ok(oldest) else None)


def _absent(s: Settings, f: _Facts, eid: str) -> str:
    """Why an entry id nothing names is not found, and what can be known of it."""
    if not f.stream_exists or f.last_generated is None:
        return f"{s.stream} does not exist: no entry of it can be found"
    if parse_id(eid) > parse_id(f.last_generated):
        return (f"never added: it is after the newest id {s.stream} ever generated "
                f"({f.last_generated})")
    if f.removed == 0:
        return (f"never added: {s.stream} has never trimmed or deleted an entry, so an "
                "entry of this id would still be there")
    above_first = f.first_id is not None and parse_id(eid) > parse_id(f.first_id)
    if above_first and f.max_deleted is not None and parse_id(eid) > parse_id(f.max_deleted):
        return (f"never added: it is after {s.stream}'s first entry ({f.first_id}), where "
                f"no trim reaches, and after the last id deleted ({f.max_deleted}), so an "
                "entry of this id would still be there")
    upto = (f" ({f.removed} entries were, the first left is {f.first_id or 'none'})"
            if f.removed else "")
    if parse_id(eid) > parse_id(f.last_delivered):
        then = (f"trimmed or deleted before any worker read it (it is after the group's "
                f"last-delivered id {f.last_delivered})")
    else:
        then = ("trimmed or deleted after a worker read it (acked, done or not, unless "
                "its dead letter was trimmed too)")
    return (f"not on {s.stream}, and nothing names it; Redis keeps no record of the ids it "
            f"trimmed or deleted{upto}, so whether it existed cannot be known. If it did, "
            f"it was {then}")


def _gone(hits: list[tuple[str, list[bytes]]]) -> dict[str, str]:
    """source entry id -> how its newest removed dead letter went (hits newest first)."""
    out: dict[str, str] = {}
    for _, fields in hits:
        source = field(fields, b"source_id")
        if source and source not in out:
            how, new_id = field(fields, b"how") or "removed", field(fields, b"new_id")
            if how == "trimmed":    # by the dead-letter stream's cap (stream/queue.py)
                how = "trimmed at the cap, dead_maxlen"
            out[source] = f"{how} as {new_id}" if how == "replayed" and new_id else how
    return out


async def lookup(client: aioredis.Redis, settings: Settings, *, order_id: int | None = None,
                 outbox_id: int | None = None, entry_id: str | None = None) -> JobStory:
    """Exactly one of order_id, outbox_id, entry_id."""
    s = settings
    given = [x for x in (order_id, outbox_id, entry_id) if x is not None]
    if len(given) != 1:
        raise LookupError_("give one of an order id, an outbox id or an entry id")
    if entry_id is not None:
        try:
            check_id(entry_id)
        except BadEntryId as e:
            raise LookupError_(str(e)) from None
    facts = await _facts(client, s)
    cost = ScanCost()
    if entry_id is not None:
        ids, searched = [entry_id], False
        dead_by_source = _newest_dead(await find(
            client, s.dead_stream, [(DEAD_FIELD_PREFIX.decode() + "source_id", entry_id)],
            limit=1, cost=cost))
    else:
        match = ([("order_id", str(order_id))] if order_id is not None
                 else [("outbox_id", str(outbox_id))])
        stream_hits = await find(client, s.stream, match, limit=MAX_ENTRIES, cost=cost)
        dead_by_source = _newest_dead(await find(client, s.dead_stream, match,
                                                 limit=MAX_ENTRIES, cost=cost))
        found = {eid for eid, _ in stream_hits if valid_id(eid)} | set(dead_by_source)
        ids = sorted(found, key=parse_id, reverse=True)[:MAX_ENTRIES]
        searched = True
    first: list[Command] = []
    for eid in ids:
        first += [("XRANGE", s.stream, eid, eid),
                  ("XPENDING", s.stream, s.group, eid, eid, 1),
                  ("GET", starts_key(s, eid)), ("GET", settled_key(s, eid)),
                  ("GET", lasterr_key(s, eid))]
    r1 = await pipeline(client, first)
    rows = [r1[i:i + 5] for i in range(0, len(r1), 5)]
    second: list[Command] = []
    plans = []
    for eid, (xr, xp, starts, settled, lasterr) in zip(ids, rows, strict=True):
        entry_fields = list(_ok(xr)[0][1] or []) if _ok(xr) else None
        dead = dead_by_source.get(eid)
        order = outbox = None
        if entry_fields is not None:
            order, outbox = field(entry_fields, b"order_id"), field(entry_fields, b"outbox_id")
        elif dead is not None:  # trimmed from the stream: its dead letter's copy says
            order = dead.order_id_raw or (None if dead.order_id is None else str(dead.order_id))
            outbox = None if dead.outbox_id is None else str(dead.outbox_id)
        n = len(second)
        marks = bool(order and outbox and order.isdigit() and outbox.isdigit())
        if marks:
            o, b = int(str(order)), int(str(outbox))
            second += [("HGET", marks_key(s, o, b), b), ("GET", lease_key(s, o, b)),
                       ("GET", done_key(s, o, b))]
        plans.append((eid, entry_fields, order, outbox, xp, starts, settled, lasterr,
                      dead, n, marks))
    r2 = await pipeline(client, second)
    # The entries that would read acked (or nothing): did a removed dead letter name them?
    unsure = [p[0] for p in plans if p[8] is None and not _ok(p[4])]
    gone = _gone(await find(client, dead_gone_key(s), [("source_id", e) for e in unsure],
                            limit=len(unsure), cost=cost)) if unsure and facts.gone_length else {}
    entries = []
    absent = None
    for (eid, entry_fields, order, outbox, xp, starts, settled, lasterr, dead, n,
         marks) in plans:
        done = lease = None
        if marks:
            # the mark in its hash, else as the key of its own it was before issue 36
            done, lease = _ok(r2[n]) or _ok(r2[n + 2]), _ok(r2[n + 1])
        p = _ok(xp)
        pending = bool(p)
        consumer, idle, deliveries = ((text(p[0][1]), int(p[0][2]), int(p[0][3]))
                                      if pending else (None, None, None))
        err = text(lasterr) if _ok(lasterr) is not None else None
        named = (entry_fields is not None or pending or dead is not None or eid in gone
                 or err is not None or _ok(starts) is not None or _ok(settled) is not None)
        if not named:  # an entry id nothing in Redis names: no state (module docstring)
            absent = _absent(s, facts, eid)
            continue
        kind = field(entry_fields, b"kind") if entry_fields else (dead.kind if dead else None)
        delivered = parse_id(eid) <= parse_id(facts.last_delivered)
        state = _state(pending, deliveries, err, delivered, entry_fields is not None,
                       done is not None, dead is not None or eid in gone)
        note = None
        if (state == "acked" and facts.dead_trimmed and (
                facts.oldest_dead is None or id_ms(eid) <= id_ms(facts.oldest_dead))):
            note = (f"or dead: {facts.dead_trimmed} dead letters were trimmed at the cap "
                    f"(dead_maxlen {s.dead_maxlen}) with no record of their jobs, and this "
                    "entry is older than the oldest dead letter left")
        entries.append(JobEntry(
            entry_id=eid, queued_at=_iso(id_ms(eid)), state=state,
            in_stream=entry_fields is not None, delivered=delivered, kind=kind,
            order_id=order, outbox_id=outbox, fields=field_pairs(entry_fields),
            consumer=consumer, idle_ms=idle, deliveries=deliveries,
            starts=_count(starts), settled=_count(settled),
            last_error=err, done_mark=text(done) if done is not None else None,
            lease=text(lease) if lease is not None else None,
            dead_id=dead.id if dead else None, dead=dead,
            ticket=_ticket(s, kind, order),
            dead_removed=gone.get(eid) if dead is None else None, note=note))
    query = {"order_id": order_id, "outbox_id": outbox_id, "entry_id": entry_id}
    return JobStory(query=query, entries=entries, searched=searched, scan_calls=cost.calls,
                    scan_entries=cost.entries, time_ms=facts.now, absent=absent)


def _count(reply: Any) -> int | None:
    """A start or settle count; a value that is not a number (anyone's key) is none."""
    value = _ok(reply)
    try:
        return None if value is None else int(value)
    except ValueError:
        return None
