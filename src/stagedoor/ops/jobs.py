"""One job's whole story, from what Redis still holds: `stagedoor job` and the page.

Finding the entries.  By entry id: directly.  By order id or outbox id: a bounded scan
of the job stream and of the dead-letter stream for entries with that field
(ops/jobscan.py: XREVRANGE in slices of 500 entries, filtered here), newest first,
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
Plus TIME and XINFO GROUPS (the group's last-delivered id: delivered or still queued).

What it cannot know: a job trimmed from the stream (MAXLEN ~) with no dead letter is
found by entry id only; a job acked without a done mark (a handler that does not mark)
shows as `acked`, done or not; the ticket file is looked for on this machine's
tickets_dir (the page's host, not necessarily the worker's).
"""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import done_key, lease_key, marks_key, settled_key, starts_key
from ..stream.queue import DEAD_FIELD_PREFIX
from .deadletters import DeadEntry, dead_entry
from .inspect import id_ms, parse_id
from .jobscan import ScanCost, find
from .records import Command, Record, field, field_pairs, now_ms, pairs, pipeline, text

MAX_ENTRIES = 20


class LookupError_(ValueError):
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


@dataclasses.dataclass
class JobStory(Record):
    query: dict[str, Any]
    entries: list[JobEntry]  # newest first
    searched: bool  # found by scanning the streams for the id (False: by entry id)
    scan_calls: int  # XREVRANGE calls (round trips) the scan took
    scan_entries: int  # stream entries the scan read in Redis
    time_ms: int


def _iso(ms: int) -> str:
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
        if d.source_id and d.source_id not in out:
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


async def lookup(client: aioredis.Redis, settings: Settings, *, order_id: int | None = None,
                 outbox_id: int | None = None, entry_id: str | None = None) -> JobStory:
    """Exactly one of order_id, outbox_id, entry_id."""
    s = settings
    given = [x for x in (order_id, outbox_id, entry_id) if x is not None]
    if len(given) != 1:
        raise LookupError_("give one of an order id, an outbox id or an entry id")
    t, groups = await pipeline(client, [("TIME",), ("XINFO", "GROUPS", s.stream)])
    now = now_ms(t)
    last_delivered = "0-0"
    for g in _ok(groups) or []:
        gp = pairs(g)
        if text(gp.get("name")) == s.group:
            last_delivered = text(gp.get("last-delivered-id")) or "0-0"
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
        found = {eid for eid, _ in stream_hits} | set(dead_by_source)
        ids = sorted(found, key=parse_id, reverse=True)[:MAX_ENTRIES]
        searched = True
    first: list[Command] = []
    for eid in ids:
        first += [("XRANGE", s.stream, eid, eid),
                  ("XPENDING", s.stream, s.group, eid, eid, 1),
                  ("GET", starts_key(s, eid)), ("GET", settled_key(s, eid)),
                  ("GET", s.key("lasterr", eid))]
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
    entries = []
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
        kind = field(entry_fields, b"kind") if entry_fields else (dead.kind if dead else None)
        delivered = parse_id(eid) <= parse_id(last_delivered)
        entries.append(JobEntry(
            entry_id=eid, queued_at=_iso(id_ms(eid)),
            state=_state(pending, deliveries, err, delivered, entry_fields is not None,
                         done is not None, dead is not None),
            in_stream=entry_fields is not None, delivered=delivered, kind=kind,
            order_id=order, outbox_id=outbox, fields=field_pairs(entry_fields),
            consumer=consumer, idle_ms=idle, deliveries=deliveries,
            starts=int(starts) if _ok(starts) is not None else None,
            settled=int(settled) if _ok(settled) is not None else None,
            last_error=err, done_mark=text(done) if done is not None else None,
            lease=text(lease) if lease is not None else None,
            dead_id=dead.id if dead else None, dead=dead,
            ticket=_ticket(s, kind, order)))
    query = {"order_id": order_id, "outbox_id": outbox_id, "entry_id": entry_id}
    return JobStory(query=query, entries=entries, searched=searched, scan_calls=cost.calls,
                    scan_entries=cost.entries, time_ms=now)
