"""The dead-letter stream as the console reads and acts on it (CLI and web page alike).

A dead-letter entry is the job's original fields (as a flat list, duplicates kept)
followed by dead:error, dead:source_id, dead:deliveries, dead:consumer, dead:time
(stream/queue.py).

Filters (DeadFilter): --kind (exact), --error (substring of dead:error), --since /
--until (an entry id, or a time: the entry ids of the dead-letter stream are the
times the jobs were dead-lettered, so a time range is an id range and costs no scan
outside it).  Listing reads newest first, one XREVRANGE page at a time, at most
`scan_limit` entries per call, and says where to go on (`next_before`); bulk actions
(`select`) walk the range oldest first in pages of PAGE, up to the newest entry present
when they started, so a job dead-lettered meanwhile is not touched.

Replay puts the original fields (all but dead:*) back on the job stream with a new id
and deletes the dead entry, in one Lua script (REPLAY_LUA):

    ensure the group (XGROUP CREATE ... $ MKSTREAM, BUSYGROUP is fine)
    XADD jobs MAXLEN ~ <maxlen> * <original fields>
    XDEL jobs:dead <id>                 -- only reached if the XADD succeeded

A script is atomic, so an entry is either replayed and gone or untouched: a replay
interrupted half way (Ctrl-C, a lost connection) has replayed a prefix of the selection
and left the rest in place; running it again replays the rest.  An entry replayed twice
(two operators, a retry after a lost reply) is found missing the second time and not
replayed again: one job back on the stream, never two.  A replayed job that fails again
is a new dead letter with a new id; its handler dedupes on outbox_id either way.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import JOB_INDEX_TTL_S, dead_trimmed_key, job_index_prefix
from ..stream.queue import DEAD_FIELD_PREFIX
from .records import Record, field, field_pairs, pipeline, text

PAGE = 500
SCAN_LIMIT = 5_000  # entries one listing call reads at most (the web page's per request)
ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
_DIGITS = re.compile(r"[0-9]{1,19}")

REPLAY_LUA = """
local e = redis.call('XRANGE', KEYS[2], ARGV[3], ARGV[3])
if #e == 0 then return {'missing', ''} end
local f = e[1][2]
local args = {'XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*'}
for i = 1, #f - 1, 2 do
  if string.sub(f[i], 1, 5) ~= 'dead:' then
    args[#args + 1] = f[i]
    args[#args + 1] = f[i + 1]
  end
end
if #args == 6 then return {'empty', ''} end
local g = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$', 'MKSTREAM')
if type(g) == 'table' and g.err and string.sub(g.err, 1, 9) ~= 'BUSYGROUP' then
  return redis.error_reply(g.err)
end
local id = redis.call(unpack(args))
redis.call('XDEL', KEYS[2], ARGV[3])
-- The job index (ops/jobs.py), as the enqueue script writes it: the replayed job is
-- found by its order and outbox id too.  pcall: never costs the replay.
if ARGV[4] and ARGV[4] ~= '' then
  local key = ARGV[4] .. math.floor(tonumber(string.match(id, '^%d+')) / 3600000)
  local order, outbox
  for i = 7, #args - 1, 2 do
    if args[i] == 'order_id' then order = args[i + 1] end
    if args[i] == 'outbox_id' then outbox = args[i + 1] end
  end
  if order then
    local prev = redis.pcall('HGET', key, 'o:' .. order)
    if type(prev) ~= 'string' then prev = nil end
    redis.pcall('HSET', key, 'o:' .. order,
      (prev and (prev .. ' ') or '') .. id .. '=' .. (outbox or ''))
  end
  if outbox then redis.pcall('HSET', key, 'b:' .. outbox, id .. '=' .. (order or '')) end
  redis.pcall('EXPIRE', key, ARGV[5])
end
return {'ok', id}
"""


class BadBound(ValueError):
    """A --since/--until that is neither an entry id nor a time (one line)."""


def parse_bound(value: str, *, end: bool = False) -> str:
    """An entry id, epoch milliseconds, or an ISO 8601 time (UTC unless it says
    otherwise) -> the stream id that bounds a range (inclusive)."""
    v = value.strip()
    if ENTRY_ID.fullmatch(v):
        return v
    if _DIGITS.fullmatch(v):
        ms = int(v)
    else:
        try:
            when = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise BadBound(f"{value!r} is neither an entry id (1758200000000-0), epoch "
                           "milliseconds nor an ISO 8601 time (2026-12-05T20:00:00Z)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        ms = int(when.timestamp() * 1000)
    return f"{ms}-{2**64 - 1}" if end else f"{ms}-0"


@dataclasses.dataclass
class DeadFilter(Record):
    kind: str | None = None
    error: str | None = None  # substring of dead:error
    since: str | None = None  # an entry id (parse_bound turns a time into one)
    until: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.kind or self.error or self.since or self.until)

    def matches(self, fields: list[bytes]) -> bool:
        if self.kind is not None and field(fields, b"kind") != self.kind:
            return False
        if self.error:
            return self.error in (field(fields, DEAD_FIELD_PREFIX + b"error") or "")
        return True


@dataclasses.dataclass
class DeadEntry(Record):
    id: str
    time: str  # when it was dead-lettered (dead:time), ISO 8601 UTC
    error: str | None
    source_id: str | None  # its id on the job stream
    kind: str | None
    order_id: int | None  # null when the value is not an integer (order_id_raw has it)
    order_id_raw: str | None
    outbox_id: int | None
    deliveries: int | None
    consumer: str | None
    fields: list[tuple[str, str]]  # every field in order, duplicates kept


@dataclasses.dataclass
class DeadPage(Record):
    total: int  # XLEN of the dead-letter stream
    trimmed: int  # dead letters the cap dropped, ever (stagedoor:dead-trimmed:<stream>)
    entries: list[DeadEntry]  # newest first
    scanned: int
    next_before: str | None  # pass as `before` for the next (older) page; None: the end


@dataclasses.dataclass
class Selection(Record):
    """What a bulk action touches: matching ids oldest first, up to `newest`."""
    ids: list[str]
    scanned: int
    newest: str | None


@dataclasses.dataclass
class Outcome(Record):
    """Per id: replayed (new id on the job stream), deleted, missing or empty."""
    id: str
    status: str  # ok | missing | empty
    new_id: str | None = None
    kind: str | None = None
    order_id: str | None = None


def _when(raw: str | None) -> str:
    try:
        stamp = float(raw or "")
    except ValueError:
        return raw or "-"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(value: str | None) -> int | None:
    return int(value) if value is not None and _DIGITS.fullmatch(value) else None


def dead_entry(entry_id: Any, fields: Any) -> DeadEntry:
    f = list(fields or [])
    order = field(f, b"order_id")
    return DeadEntry(
        id=text(entry_id), time=_when(field(f, DEAD_FIELD_PREFIX + b"time")),
        error=field(f, DEAD_FIELD_PREFIX + b"error"),
        source_id=field(f, DEAD_FIELD_PREFIX + b"source_id"), kind=field(f, b"kind"),
        order_id=_number(order), order_id_raw=order if _number(order) is None else None,
        outbox_id=_number(field(f, b"outbox_id")),
        deliveries=_number(field(f, DEAD_FIELD_PREFIX + b"deliveries")),
        consumer=field(f, DEAD_FIELD_PREFIX + b"consumer"), fields=field_pairs(f))


def _before(entry_id: str) -> str:
    return "(" + entry_id


async def list_dead(client: aioredis.Redis, settings: Settings,
                    flt: DeadFilter | None = None, *, limit: int = 50,
                    before: str | None = None, scan_limit: int = SCAN_LIMIT) -> DeadPage:
    """Matching entries newest first, at most `limit`, reading at most `scan_limit`."""
    s, flt = settings, flt or DeadFilter()
    total, trimmed = await pipeline(client, [("XLEN", s.dead_stream),
                                             ("GET", dead_trimmed_key(s))])
    hi = _before(before) if before else (flt.until or "+")
    lo = flt.since or "-"
    out: list[DeadEntry] = []
    scanned = 0
    last: str | None = None
    exhausted = False
    filtered = flt.kind is not None or bool(flt.error)
    while len(out) < limit and scanned < scan_limit:
        # Unfiltered, every entry read is shown: read no more than the page needs.
        count = min(PAGE if filtered else limit - len(out), scan_limit - scanned)
        (page,) = await pipeline(client, [("XREVRANGE", s.dead_stream, hi, lo, "COUNT", count)])
        page = [] if isinstance(page, Exception) else list(page or [])
        full = False
        for eid, fields in page:
            scanned += 1
            last = text(eid)
            if flt.matches(list(fields or [])):
                out.append(dead_entry(eid, fields))
                if len(out) >= limit:
                    full = True
                    break
        if full:
            break
        if len(page) < count or last is None:
            exhausted = True
            break
        hi = _before(last)
    more = last is not None and not exhausted
    return DeadPage(total=int(total) if not isinstance(total, Exception) else 0,
                    trimmed=int(trimmed) if trimmed and not isinstance(trimmed, Exception)
                    else 0, entries=out, scanned=scanned,
                    next_before=last if more else None)


async def show_dead(client: aioredis.Redis, settings: Settings, entry_id: str
                    ) -> DeadEntry | None:
    (reply,) = await pipeline(client, [("XRANGE", settings.dead_stream, entry_id, entry_id)])
    if not reply or isinstance(reply, Exception):
        return None
    return dead_entry(reply[0][0], reply[0][1])


async def extent(client: aioredis.Redis, settings: Settings) -> tuple[int, str | None]:
    """(XLEN, the newest id): what an unfiltered purge counts, without reading entries."""
    n, newest = await pipeline(client, [("XLEN", settings.dead_stream),
                                        ("XREVRANGE", settings.dead_stream, "+", "-",
                                         "COUNT", 1)])
    if isinstance(n, Exception) or not newest or isinstance(newest, Exception):
        return 0, None
    return int(n), text(newest[0][0])


async def select(client: aioredis.Redis, settings: Settings, flt: DeadFilter) -> Selection:
    """Every matching id, oldest first, up to the newest entry present now (paged)."""
    s = settings
    (newest,) = await pipeline(client, [("XREVRANGE", s.dead_stream, flt.until or "+",
                                         flt.since or "-", "COUNT", 1)])
    if not newest or isinstance(newest, Exception):
        return Selection(ids=[], scanned=0, newest=None)
    end = text(newest[0][0])
    start, ids, scanned = flt.since or "-", [], 0
    while True:
        (page,) = await pipeline(client, [("XRANGE", s.dead_stream, start, end, "COUNT", PAGE)])
        page = [] if isinstance(page, Exception) else list(page or [])
        for eid, fields in page:
            scanned += 1
            if flt.matches(list(fields or [])):
                ids.append(text(eid))
        if len(page) < PAGE:
            return Selection(ids=ids, scanned=scanned, newest=end)
        start = "(" + text(page[-1][0])


async def replay(client: aioredis.Redis, settings: Settings, ids: list[str]) -> list[Outcome]:
    """Replay each id (one script each, oldest first as given); see the module doc."""
    s = settings
    script = client.register_script(REPLAY_LUA)
    out: list[Outcome] = []
    for dead_id in dict.fromkeys(ids):
        entry = await show_dead(client, s, dead_id)
        status, new_id = await script(keys=[s.stream, s.dead_stream],
                                      args=[s.group, s.maxlen, dead_id, job_index_prefix(s),
                                            JOB_INDEX_TTL_S])
        out.append(Outcome(id=dead_id, status=text(status), new_id=text(new_id) or None,
                           kind=entry.kind if entry else None,
                           order_id=(entry.order_id_raw if entry and entry.order_id is None
                                     else str(entry.order_id) if entry else None)))
    return out


async def delete(client: aioredis.Redis, settings: Settings, ids: list[str]) -> list[Outcome]:
    """XDEL each id: ok (deleted) or missing."""
    unique = list(dict.fromkeys(ids))
    replies = await pipeline(client, [("XDEL", settings.dead_stream, i) for i in unique])
    return [Outcome(id=i, status="ok" if not isinstance(r, Exception) and int(r) else "missing")
            for i, r in zip(unique, replies, strict=True)]


async def purge(client: aioredis.Redis, settings: Settings, flt: DeadFilter | None = None,
                *, upto: str | None = None) -> int:
    """Delete the matching entries; returns how many went.

    No filter: XTRIM MINID just past `upto` (the newest entry the operator counted; by
    default the newest now), so a job dead-lettered during a prompt survives.  With a
    filter: the selection, deleted by id (XDEL, pages of PAGE)."""
    s = settings
    if flt is None or flt.empty:
        if upto is None:
            (newest,) = await pipeline(client, [("XREVRANGE", s.dead_stream, "+", "-",
                                                 "COUNT", 1)])
            if not newest or isinstance(newest, Exception):
                return 0
            upto = text(newest[0][0])
        ms, _, seq = upto.partition("-")
        threshold = (f"{ms}-{int(seq) + 1}" if int(seq) < 2**64 - 1
                     else f"{int(ms) + 1}-0")
        (removed,) = await pipeline(client, [("XTRIM", s.dead_stream, "MINID", threshold)])
        return int(removed)
    ids = (await select(client, s, flt)).ids
    removed = 0
    for i in range(0, len(ids), PAGE):
        (n,) = await pipeline(client, [("XDEL", s.dead_stream, *ids[i:i + PAGE])])
        removed += int(n)
    return removed
