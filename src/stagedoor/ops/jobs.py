"""One job's whole story, from what Redis still holds: `stagedoor job` and the page.

Finding the entries.  By entry id: directly.  By order id or outbox id: the job index,
one hash per hour of entry ids on the stream's hash tag (keys.job_index_key), written
by the enqueue script (`o:<order id>` -> the entry ids, `b:<outbox id>` -> the entry id)
and by the dead-letter script (`d:<entry id>` -> the dead-letter id), each hash kept
INDEX_TTL_S after its hour.  A lookup reads the last INDEX_HOURS hashes with one HGET
each, in one round trip; never the stream or the dead-letter stream.

Then, per entry found (at most MAX_ENTRIES, newest first), one round trip:
XRANGE <stream> <id> <id>, XPENDING <stream> <group> <id> <id> 1, GET starts, settled
and lasterr of the id, HGET d:<id> of its hour; and one more: GET the done mark and
the lease of its outbox id, XRANGE of its dead letter.  Plus TIME and XINFO GROUPS
(the group's last-delivered id: delivered or still queued).

What it cannot know: a job written by something other than stagedoor's enqueue (a
bare XADD) is found by entry id only; an index hour older than INDEX_TTL_S is gone, so
an older job is found by entry id only; a job acked without a done mark (a handler
that does not mark) shows as `acked`, done or not; the ticket file is
looked for on this machine's tickets_dir (the page's host, not necessarily the worker's).
"""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import (
    JOB_INDEX_TTL_S,
    done_key,
    job_index_key,
    lease_key,
    settled_key,
    starts_key,
)
from .deadletters import ENTRY_ID, DeadEntry, dead_entry
from .inspect import id_ms, parse_id
from .records import Command, Record, field, field_pairs, now_ms, pairs, pipeline, text

HOUR_MS = 3_600_000
INDEX_TTL_S = JOB_INDEX_TTL_S
INDEX_HOURS = 26  # hours a lookup reads: every index hash that may still exist
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
    indexed: bool  # found through the job index (False: by entry id)
    time_ms: int


def _hour(entry_id: str) -> int:
    return id_ms(entry_id) // HOUR_MS


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


async def _find(client: aioredis.Redis, settings: Settings, field_name: str, now: int
                ) -> dict[str, str]:
    """entry id -> the other id (the outbox id of an o: field, the order id of a b:
    field), newest first: tokens `<entry id>=<other id>`, space-separated."""
    hours = [now // HOUR_MS - i for i in range(INDEX_HOURS)]
    replies = await pipeline(client, [("HGET", job_index_key(settings, h), field_name)
                                      for h in hours])
    found: dict[str, str] = {}
    for r in replies:
        if r is not None and not isinstance(r, Exception):
            for token in text(r).split():
                eid, _, other = token.partition("=")
                if ENTRY_ID.fullmatch(eid):
                    found[eid] = other
    newest = sorted(found, key=parse_id, reverse=True)[:MAX_ENTRIES]
    return {eid: found[eid] for eid in newest}


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
    # What the index knows of each entry: (order id, outbox id), for an entry trimmed
    # from the stream since (its done mark and lease are keyed by them).
    known: dict[str, tuple[str | None, str | None]] = {}
    if entry_id is not None:
        ids, indexed = [entry_id], False
    elif order_id is not None:
        found = await _find(client, s, f"o:{order_id}", now)
        known = {e: (str(order_id), o or None) for e, o in found.items()}
        ids, indexed = list(found), True
    else:
        found = await _find(client, s, f"b:{outbox_id}", now)
        known = {e: (o or None, str(outbox_id)) for e, o in found.items()}
        ids, indexed = list(found), True
    first: list[Command] = []
    for eid in ids:
        first += [("XRANGE", s.stream, eid, eid),
                  ("XPENDING", s.stream, s.group, eid, eid, 1),
                  ("GET", starts_key(s, eid)), ("GET", settled_key(s, eid)),
                  ("GET", s.key("lasterr", eid)),
                  ("HGET", job_index_key(s, _hour(eid)), f"d:{eid}")]
    r1 = await pipeline(client, first)
    rows = [r1[i:i + 6] for i in range(0, len(r1), 6)]
    second: list[Command] = []
    plans = []
    for eid, (xr, xp, starts, settled, lasterr, dead_id) in zip(ids, rows, strict=True):
        entry_fields = list(_ok(xr)[0][1] or []) if _ok(xr) else None
        order = field(entry_fields, b"order_id") if entry_fields else None
        outbox = field(entry_fields, b"outbox_id") if entry_fields else None
        if order is None:
            order = known.get(eid, (None, None))[0]
        if outbox is None:
            outbox = known.get(eid, (None, None))[1]
        n = len(second)
        marks = bool(order and outbox and order.isdigit() and outbox.isdigit())
        if marks:
            second += [("GET", done_key(s, int(str(order)), int(str(outbox)))),
                       ("GET", lease_key(s, int(str(order)), int(str(outbox))))]
        dead_text = text(dead_id) if _ok(dead_id) is not None else None
        if dead_text:
            second.append(("XRANGE", s.dead_stream, dead_text, dead_text))
        plans.append((eid, entry_fields, order, outbox, xp, starts, settled, lasterr,
                      dead_text, n, marks))
    r2 = await pipeline(client, second)
    entries = []
    for (eid, entry_fields, order, outbox, xp, starts, settled, lasterr, dead_text, n,
         marks) in plans:
        done = lease = None
        dead: DeadEntry | None = None
        if marks:
            done, lease = _ok(r2[n]), _ok(r2[n + 1])
            n += 2
        if dead_text:
            xr = _ok(r2[n])
            if xr:
                dead = dead_entry(xr[0][0], xr[0][1])
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
    return JobStory(query=query, entries=entries, indexed=indexed, time_ms=now)
