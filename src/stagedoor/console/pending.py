"""Pending entries (delivered, not acked) as the console lists them.

`list_pending` reads, in at most three round trips:

    XPENDING <stream> <group> IDLE <min idle> - + <scan_limit> [<consumer>]
        (the server filters idle time and consumer; oldest ids first, at most scan_limit)
    XRANGE <stream> <id> <id>                       per candidate (its kind, order, outbox)
    GET stagedoor:lasterr:<id>, GET stagedoor:starts:<id>   per entry shown

`dead_letter` acts on one stuck entry (a job that crashes every worker that takes it,
or waits on something that will not come): it moves it to the dead-letter stream with
the worker's own script (stream/queue.DeadLetter: the XADD and the XACK at once, and
only if the entry is still pending), its last error kept in the dead letter's error,
and deletes its start count, settled starts and last error as a worker does.  From
there it is replayed, deleted or looked up like any dead letter.

Minimum deliveries and kind are filtered here; the result is sorted by idle time,
longest first.  What it cannot know: pending entries past the first `scan_limit` ids
(`truncated` says so: only the oldest scan_limit are read, and `matched` counts the
matches among them), and the last error of a delivery that failed without the worker
living to write it (a crash: its start count says how many starts there were).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import lasterr_key, settled_key, starts_key
from ..stream.queue import DeadLetter
from ..telemetry.inspect import id_ms
from ..telemetry.records import Command, Record, field, now_ms, pipeline, text

SCAN_LIMIT = 1_000


@dataclasses.dataclass
class PendingEntry(Record):
    id: str
    consumer: str
    idle_ms: int
    deliveries: int  # XPENDING's delivery count (reads and claims)
    starts: int | None  # handler starts recorded for a redelivered entry
    age_ms: int  # since it was queued (the id's time, against Redis TIME)
    kind: str | None
    order_id: str | None
    outbox_id: str | None
    trimmed: bool  # the entry is gone from the stream (MAXLEN ~), still pending
    last_error: str | None  # stagedoor:lasterr:<id>, the last failure a worker reported


@dataclasses.dataclass
class PendingPage(Record):
    total: int  # every pending entry of the group (XPENDING summary)
    entries: list[PendingEntry]  # longest idle first
    scanned: int  # pending entries read (the oldest ids that passed idle and consumer)
    truncated: bool  # scan_limit of them were read: more, after them, were not looked at
    matched: int = 0  # of those read, how many pass every filter (entries: the first limit)


async def _details(client: aioredis.Redis, settings: Settings,
                   rows: list[tuple[str, str, int, int]], fields: dict[str, Any], now: int
                   ) -> list[PendingEntry]:
    s = settings
    commands: list[Command] = []
    for eid, *_ in rows:
        commands += [("GET", lasterr_key(s, eid)), ("GET", starts_key(s, eid))]
    replies = await pipeline(client, commands)
    out = []
    for i, (eid, consumer, idle, deliveries) in enumerate(rows):
        err, starts = replies[2 * i], replies[2 * i + 1]
        f = fields.get(eid)
        out.append(PendingEntry(
            id=eid, consumer=consumer, idle_ms=idle, deliveries=deliveries,
            starts=int(starts) if starts is not None and not isinstance(starts, Exception)
            else None, age_ms=max(0, now - id_ms(eid)),
            kind=field(f, b"kind"), order_id=field(f, b"order_id"),
            outbox_id=field(f, b"outbox_id"), trimmed=not f,
            last_error=None if err is None or isinstance(err, Exception) else text(err)))
    return out


async def _fields(client: aioredis.Redis, settings: Settings, ids: list[str]) -> dict[str, Any]:
    replies = await pipeline(client, [("XRANGE", settings.stream, i, i) for i in ids])
    return {i: list(r[0][1] or []) for i, r in zip(ids, replies, strict=True)
            if r and not isinstance(r, Exception)}


async def list_pending(client: aioredis.Redis, settings: Settings, *, kind: str | None = None,
                       consumer: str | None = None, min_idle_ms: int = 0,
                       min_deliveries: int = 0, limit: int = 50,
                       scan_limit: int = SCAN_LIMIT) -> PendingPage:
    s = settings
    xp: Command = ("XPENDING", s.stream, s.group, "IDLE", min_idle_ms, "-", "+", scan_limit,
                   *((consumer,) if consumer else ()))
    t, summary, reply = await pipeline(client, [("TIME",), ("XPENDING", s.stream, s.group), xp])
    now = now_ms(t)
    if isinstance(reply, Exception) or isinstance(summary, Exception):
        return PendingPage(total=0, entries=[], scanned=0, truncated=False)  # no group yet
    raw = list(reply or [])
    rows = [(text(eid), text(c), int(idle), int(n)) for eid, c, idle, n in raw]
    rows = [r for r in rows if r[3] >= min_deliveries]
    fields: dict[str, Any] = {}
    if kind is not None:
        fields = await _fields(client, s, [r[0] for r in rows])
        rows = [r for r in rows if field(fields.get(r[0]), b"kind") == kind]
    rows.sort(key=lambda r: -r[2])
    matched = len(rows)
    rows = rows[:limit]
    if kind is None:
        fields = await _fields(client, s, [r[0] for r in rows])
    entries = await _details(client, s, rows, fields, now)
    return PendingPage(total=int(summary[0] or 0) if summary else 0, entries=entries,
                       scanned=len(raw), truncated=len(raw) >= scan_limit, matched=matched)


async def show_pending(client: aioredis.Redis, settings: Settings, entry_id: str
                       ) -> PendingEntry | None:
    """One pending entry (None: not pending in the group)."""
    s = settings
    t, reply = await pipeline(client, [("TIME",),
                                       ("XPENDING", s.stream, s.group, entry_id, entry_id, 1)])
    if not reply or isinstance(reply, Exception):
        return None
    eid, c, idle, n = reply[0]
    rows = [(text(eid), text(c), int(idle), int(n))]
    fields = await _fields(client, s, [rows[0][0]])
    return (await _details(client, s, rows, fields, now_ms(t)))[0]


async def dead_letter(client: aioredis.Redis, settings: Settings, entry_id: str, *,
                      who: str) -> str | None:
    """Move one pending entry to the dead-letter stream (the module docstring): the dead
    letter's id, or None when it was no longer pending (acked, or dead-lettered by a
    worker meanwhile: nothing is written then)."""
    s = settings
    entry = await show_pending(client, s, entry_id)
    if entry is None:
        return None
    (xr,) = await pipeline(client, [("XRANGE", s.stream, entry_id, entry_id)])
    fields = list(xr[0][1] or []) if xr and not isinstance(xr, Exception) else None
    why = (f"dead-lettered by {who} from the console: stuck pending on {entry.consumer}, "
           f"idle {entry.idle_ms} ms, {entry.deliveries} deliveries")
    error = f"{entry.last_error} [{why}]" if entry.last_error else why
    dead_id = await DeadLetter(client, s)(entry_id, fields, error=error,
                                          deliveries=entry.deliveries,
                                          consumer=entry.consumer, only_if_pending=True)
    if dead_id is None:
        return None
    await pipeline(client, [("DEL", starts_key(s, entry_id), settled_key(s, entry_id),
                             lasterr_key(s, entry_id))])
    return text(dead_id)
