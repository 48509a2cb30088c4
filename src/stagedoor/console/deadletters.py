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
and deletes the dead entry, REPLAY_BATCH entries to one Lua script (REPLAY_LUA), which
is the enqueue script's backlog check (stream/backlog.py's account(), the same refusal
level: queue.backlog_limits) in front of the replay:

    count the group's backlog (and a loss of unread jobs) as enqueue does
    ensure the group (as enqueue does: ENTRIESREAD, so its counter is exact)
    for each id: stop if the backlog is at the refusal level
                 XADD jobs MAXLEN ~ <maxlen> * <original fields>; backlog + 1
                 XDEL jobs:dead <id>     -- only reached if the XADD succeeded

Enqueue refuses before MAXLEN ~ could trim a job no worker has read; a replay that
skipped the check trimmed them (issue 36: 10,009 dead letters replayed onto 95,000
waiting jobs of a paused fleet lost 4,987 unread jobs).  So a replay stops at the
level, and the entries it did not reach stay dead letters, untouched (status `full`):
run it again when the workers caught up.  `room()` is the same count for a dry run
and the confirm page: how many fit now.

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
from ..errors import StagedoorError
from ..stream.backlog import ACCOUNT_LUA
from ..stream.keys import dead_gone_key, dead_trimmed_key, trimmed_key
from ..stream.queue import DEAD_FIELD_PREFIX, WARN_SCAN, backlog_limits
from ..telemetry.inspect import MAX_ID_MS, BadEntryId, check_id, parse_id
from ..telemetry.records import Record, field, field_pairs, pipeline, text

PAGE = 500
SCAN_LIMIT = 5_000  # entries one listing call reads at most (the web page's per request)
ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
_DIGITS = re.compile(r"[0-9]{1,19}")

REPLAY_BATCH = 100  # dead letters one replay script takes (one backlog count each)

# KEYS[1] the job stream, KEYS[2] the dead-letter stream, KEYS[3] the removed dead
# letters (keys.dead_gone_key).  ARGV: the group, maxlen, the refusal level (refuse
# above), the trimmed-unread hash (in ARGV: see backlog.AUDIT_LUA), the warning level,
# the scan cap, dead_maxlen, then the dead-letter ids.
# -> {backlog before, lost now counted, {status, new id, kind, order id} per id
# looked at}: it stops at the first id that would pass the level (`full`, untouched)
# and says nothing of the ids after it.
_REPLAY_LUA = """
local stream, dead, group, maxlen = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local limit, counter = tonumber(ARGV[3]), ARGV[4]
local n = #ARGV - 7
local r = account(stream, group, counter, tonumber(ARGV[5]) - n, tonumber(ARGV[6]),
                  limit - n, 'replay')
local backlog, lost = 0, 0
if r == nil then
  -- No stream or no group: created as the enqueue script does (ENTRIESREAD: the
  -- group's counter is exact from its first moment).
  local added, info = 0, redis.pcall('XINFO', 'STREAM', stream)
  if not info.err then added = fields(info)['entries-added'] end
  redis.call('XGROUP', 'CREATE', stream, group, '$', 'MKSTREAM', 'ENTRIESREAD', added)
else
  backlog, lost = r[1], r[2]
end
local out = {backlog, lost}
for k = 8, #ARGV do
  -- -1: the backlog is unknown (no counter at all); enqueue adds then, and so do we.
  if backlog >= 0 and backlog >= limit then
    out[#out + 1] = {'full', ''}
    break
  end
  local e = redis.call('XRANGE', dead, ARGV[k], ARGV[k])
  if #e == 0 then
    out[#out + 1] = {'missing', ''}
  else
    local f = e[1][2]
    local args = {'XADD', stream, 'MAXLEN', '~', maxlen, '*'}
    local kind, order, source = '', '', ''
    for i = 1, #f - 1, 2 do
      if f[i] == 'dead:source_id' and source == '' then source = f[i + 1] end
      if string.sub(f[i], 1, 5) ~= 'dead:' then
        args[#args + 1] = f[i]
        args[#args + 1] = f[i + 1]
        if f[i] == 'kind' and kind == '' then kind = f[i + 1] end
        if f[i] == 'order_id' and order == '' then order = f[i + 1] end
      end
    end
    if #args == 6 then
      out[#out + 1] = {'empty', '', kind, order}
    else
      local id = redis.call(unpack(args))
      redis.call('XDEL', dead, ARGV[k])
      remember(KEYS[3], ARGV[7], source, ARGV[k], 'replayed', id)
      if backlog >= 0 then backlog = backlog + 1 end
      out[#out + 1] = {'ok', id, kind, order}
    end
  end
end
return out
"""
# What a removed dead letter leaves: its job's entry id, so the job is still told DEAD
# (console/jobs.py) after its dead letter went.  pcall: a record that cannot be written
# (out of memory) never keeps an operator from removing dead letters, which frees it.
_REMEMBER_LUA = """
local function remember(gone, cap, source, dead_id, how, new_id)
  if source == '' then return end
  redis.pcall('XADD', gone, 'MAXLEN', '~', cap, '*', 'source_id', source,
              'dead_id', dead_id, 'how', how, 'new_id', new_id)
end
"""
REPLAY_LUA = ACCOUNT_LUA + _REMEMBER_LUA + _REPLAY_LUA

# Delete (and purge) by id: KEYS[1] the dead-letter stream, KEYS[2] the removed dead
# letters; ARGV: how (deleted | purged), dead_maxlen, the ids.  -> 1 (deleted) or 0
# (missing) per id.
REMOVE_LUA = _REMEMBER_LUA + """
local out = {}
for k = 3, #ARGV do
  local e = redis.call('XRANGE', KEYS[1], ARGV[k], ARGV[k])
  if #e == 0 then
    out[#out + 1] = 0
  else
    local f, source = e[1][2], ''
    for i = 1, #f - 1, 2 do
      if f[i] == 'dead:source_id' then source = f[i + 1] break end
    end
    redis.call('XDEL', KEYS[1], ARGV[k])
    remember(KEYS[2], ARGV[2], source, ARGV[k], ARGV[1], '')
    out[#out + 1] = 1
  end
end
return out
"""

# The same count alone, for a dry run and the confirm page.  -> {backlog, lost}.
ROOM_LUA = ACCOUNT_LUA + """
local r = account(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]),
                  tonumber(ARGV[5]), 'replay')
if r == nil then return {0, 0} end
return {r[1], r[2]}
"""


def replay_args(settings: Settings, ids: list[str]) -> tuple[list[str], list[Any]]:
    """(KEYS, ARGV) of REPLAY_LUA for these ids; the levels are enqueue's."""
    s = settings
    warn, limit = backlog_limits(s)
    return [s.stream, s.dead_stream, dead_gone_key(s)], [
        s.group, s.maxlen, limit, trimmed_key(s), warn, WARN_SCAN, s.dead_maxlen, *ids]


class BadBound(StagedoorError, ValueError):
    """A --since/--until that is neither an entry id nor a time (one line)."""


def parse_bound(value: str, *, end: bool = False) -> str:
    """An entry id, epoch milliseconds, or an ISO 8601 time (UTC unless it says
    otherwise) -> the stream id that bounds a range (inclusive).  A time before 1970
    (no stream id is older) or past the year 9999 (inspect.MAX_ID_MS) is refused: as a
    bound Redis would refuse it, and a range that cannot hold an entry is a mistake,
    not an empty page."""
    v = value.strip()
    if ENTRY_ID.fullmatch(v):
        try:
            return check_id(v)
        except BadEntryId as e:
            raise BadBound(str(e)) from None
    if _DIGITS.fullmatch(v):
        ms = int(v)
    else:
        try:
            when = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise BadBound(f"{value[:60]!r} is neither an entry id (1758200000000-0), epoch "
                           "milliseconds nor an ISO 8601 time (2026-12-05T20:00:00Z)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:
            ms = int(when.timestamp() * 1000)
        except (OverflowError, ValueError):  # 9999-12-31T23:59-01:00 is past year 9999
            ms = MAX_ID_MS + 1
        if ms < 0:
            raise BadBound(f"{value[:60]!r} is before 1970-01-01T00:00:00Z, the oldest time "
                           "a stream id has")
    if ms > MAX_ID_MS:
        raise BadBound(f"{value[:60]!r} is past the year 9999 (epoch milliseconds at most "
                       f"{MAX_ID_MS})")
    return f"{ms}-{2**64 - 1}" if end else f"{ms}-0"


NO_ERROR = "(no dead:error)"  # the error group of dead letters without one (by_error)


@dataclasses.dataclass
class DeadFilter(Record):
    kind: str | None = None
    error: str | None = None  # substring of dead:error
    since: str | None = None  # an entry id (parse_bound turns a time into one)
    until: str | None = None
    error_is: str | None = None  # the whole dead:error: one group of by_error

    @property
    def empty(self) -> bool:
        return not (self.kind or self.error or self.since or self.until
                    or self.error_is is not None)

    def matches(self, fields: list[bytes]) -> bool:
        if self.kind is not None and field(fields, b"kind") != self.kind:
            return False
        error = field(fields, DEAD_FIELD_PREFIX + b"error")
        if self.error_is is not None and (error if error is not None else NO_ERROR) \
                != self.error_is:
            return False
        if self.error:
            return self.error in (error or "")
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
    """Per id: replayed (new id on the job stream), deleted, missing, empty, or full
    (not replayed, untouched: the job stream's backlog was at the refusal level)."""
    id: str
    status: str  # ok | missing | empty | full
    new_id: str | None = None
    kind: str | None = None
    order_id: str | None = None


@dataclasses.dataclass
class Room(Record):
    """How many more jobs the job stream takes before the backlog refusal level
    (enqueue's: backlog_refuse_fraction of maxlen), counted as enqueue counts."""
    backlog: int  # the group's backlog (undelivered + pending); -1: unknown
    refuse_above: int
    maxlen: int
    fits: int | None  # max(0, refuse_above - backlog); None when the backlog is unknown

    def short_of(self, wanted: int) -> int:
        """How many of `wanted` jobs would not go in now."""
        return 0 if self.fits is None else max(0, wanted - self.fits)

    def why(self, settings: Settings) -> str:
        """One line: the backlog against the level."""
        return (f"the backlog of {settings.stream} is {self.backlog} entries, the refusal "
                f"level {settings.backlog_refuse_fraction:.0%} of maxlen {self.maxlen} "
                f"({self.refuse_above}): adding more would trim jobs no worker has read")


@dataclasses.dataclass
class Replayed(Record):
    """What a replay did: every id's outcome (as given, deduplicated), and the backlog
    at the end (`room`); `stopped`: it stopped at the refusal level (`full` ids)."""
    outcomes: list[Outcome]
    room: Room
    lost: int = 0  # unread jobs found trimmed (by an earlier writer) and counted now

    @property
    def done(self) -> int:
        return sum(o.status == "ok" for o in self.outcomes)

    @property
    def stopped(self) -> int:
        return sum(o.status == "full" for o in self.outcomes)


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


def before_id(entry_id: str) -> str:
    return "(" + entry_id


async def list_dead(client: aioredis.Redis, settings: Settings,
                    flt: DeadFilter | None = None, *, limit: int = 50,
                    before: str | None = None, scan_limit: int = SCAN_LIMIT) -> DeadPage:
    """Matching entries newest first, at most `limit`, reading at most `scan_limit`."""
    s, flt = settings, flt or DeadFilter()
    total, trimmed = await pipeline(client, [("XLEN", s.dead_stream),
                                             ("GET", dead_trimmed_key(s))])
    hi = before_id(before) if before else (flt.until or "+")
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
        hi = before_id(last)
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


async def show_many(client: aioredis.Redis, settings: Settings, ids: list[str]
                    ) -> list[DeadEntry | None]:
    """Each id's dead letter (None: gone), in one round trip: what a confirm page shows."""
    replies = await pipeline(client, [("XRANGE", settings.dead_stream, i, i) for i in ids])
    return [dead_entry(r[0][0], r[0][1]) if r and not isinstance(r, Exception) else None
            for r in replies]


@dataclasses.dataclass
class ErrorGroup(Record):
    error: str  # the dead:error text, whole (the group's key)
    count: int
    first_id: str  # the oldest of the group read (its id's time: when it was dead-lettered)
    first_time: str
    last_id: str  # the newest
    last_time: str
    kinds: list[str]  # the job kinds among them, sorted


@dataclasses.dataclass
class ErrorGroups(Record):
    total: int  # XLEN of the dead-letter stream
    groups: list[ErrorGroup]  # most dead letters first
    scanned: int
    complete: bool  # every dead letter was read (else only the newest `scanned`)


def _id_time(entry_id: str) -> str:
    ms = parse_id(entry_id)[0]
    if ms > MAX_ID_MS:
        return f"{ms} ms"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def by_error(client: aioredis.Redis, settings: Settings, *,
                   scan_limit: int = SCAN_LIMIT) -> ErrorGroups:
    """The dead letters counted by their error text, with the first and last seen of each,
    reading newest first in slices of PAGE, at most scan_limit entries (the newest)."""
    s = settings
    (total,) = await pipeline(client, [("XLEN", s.dead_stream)])
    groups: dict[str, ErrorGroup] = {}
    hi, scanned, complete = "+", 0, False
    while scanned < scan_limit:
        count = min(PAGE, scan_limit - scanned)
        (page,) = await pipeline(client, [("XREVRANGE", s.dead_stream, hi, "-", "COUNT", count)])
        page = [] if isinstance(page, Exception) else list(page or [])
        for eid, fields in page:
            d = dead_entry(eid, fields)
            error = d.error if d.error is not None else NO_ERROR
            when = _id_time(d.id)  # Redis's clock, which orders the stream
            g = groups.get(error)
            if g is None:
                groups[error] = ErrorGroup(error=error, count=1, first_id=d.id,
                                           first_time=when, last_id=d.id, last_time=when,
                                           kinds=[d.kind or "-"])
            else:  # newest first: each later one read is older
                g.count += 1
                g.first_id, g.first_time = d.id, when
                if (d.kind or "-") not in g.kinds:
                    g.kinds.append(d.kind or "-")
        scanned += len(page)
        if len(page) < count:
            complete = True
            break
        hi = before_id(text(page[-1][0]))
    for g in groups.values():
        g.kinds.sort()
    complete = complete or (not isinstance(total, Exception) and scanned >= int(total))
    return ErrorGroups(total=int(total) if not isinstance(total, Exception) else 0,
                       groups=sorted(groups.values(), key=lambda g: (-g.count, g.error)),
                       scanned=scanned, complete=complete)


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


def _room(settings: Settings, backlog: int) -> Room:
    _, limit = backlog_limits(settings)
    return Room(backlog=backlog, refuse_above=limit, maxlen=settings.maxlen,
                fits=max(0, limit - backlog) if backlog >= 0 else None)


async def room(client: aioredis.Redis, settings: Settings, wanted: int = 1) -> Room:
    """The backlog against the refusal level, counted as the replay (and enqueue) counts
    it for `wanted` more jobs: exactly (the stream, not the counters) from the warning
    level on.  Like the worker's audit, it may count a loss or repair the group's
    counter (account() in stream/backlog.py); it adds nothing."""
    s = settings
    warn, limit = backlog_limits(s)
    script = client.register_script(ROOM_LUA)
    backlog, _lost = await script(keys=[s.stream], args=[
        s.group, trimmed_key(s), warn - wanted, WARN_SCAN, limit - wanted])
    return _room(s, int(backlog))


def _outcome(dead_id: str, reply: Any) -> Outcome:
    status, new_id, kind, order = ([text(x) for x in reply] + ["", "", ""])[:4]
    number = _number(order or None)
    return Outcome(id=dead_id, status=status, new_id=new_id or None, kind=kind or None,
                   order_id=str(number) if number is not None else order or None)


async def replay(client: aioredis.Redis, settings: Settings, ids: list[str]) -> Replayed:
    """Replay each id, oldest first as given, REPLAY_BATCH to a script, until the backlog
    reaches the refusal level; the rest are `full` and untouched.  See the module doc."""
    s = settings
    script = client.register_script(REPLAY_LUA)
    unique = list(dict.fromkeys(ids))
    if not unique:
        return Replayed(outcomes=[], room=await room(client, s))
    out: list[Outcome] = []
    backlog, lost = 0, 0
    for start in range(0, len(unique), REPLAY_BATCH):
        part = unique[start:start + REPLAY_BATCH]
        keys, args = replay_args(s, part)
        reply = await script(keys=keys, args=args)
        backlog, lost = int(reply[0]), lost + int(reply[1])
        out.extend(_outcome(i, r) for i, r in zip(part, reply[2:], strict=False))
        backlog += sum(o.status == "ok" for o in out[start:]) if backlog >= 0 else 0
        if len(out) < start + len(part) or out[-1].status == "full":
            break
    out.extend(Outcome(id=i, status="full") for i in unique[len(out):])
    return Replayed(outcomes=out, room=_room(s, backlog), lost=lost)


async def _remove(client: aioredis.Redis, settings: Settings, ids: list[str],
                  how: str) -> list[Outcome]:
    """XDEL each id, remembering its job (REMOVE_LUA), PAGE ids to a script."""
    s = settings
    script = client.register_script(REMOVE_LUA)
    out: list[Outcome] = []
    for i in range(0, len(ids), PAGE):
        part = ids[i:i + PAGE]
        replies = await script(keys=[s.dead_stream, dead_gone_key(s)],
                               args=[how, s.dead_maxlen, *part])
        out += [Outcome(id=d, status="ok" if int(r) else "missing")
                for d, r in zip(part, replies, strict=True)]
    return out


async def delete(client: aioredis.Redis, settings: Settings, ids: list[str]) -> list[Outcome]:
    """XDEL each id: ok (deleted) or missing.  Each job deleted is remembered
    (keys.dead_gone_key), so its lookup still says DEAD."""
    return await _remove(client, settings, list(dict.fromkeys(ids)), "deleted")


async def purge(client: aioredis.Redis, settings: Settings, flt: DeadFilter | None = None,
                *, upto: str | None = None) -> int:
    """Delete the matching entries up to `upto` (the newest entry the operator counted;
    by default the newest now), so a job dead-lettered during a prompt survives; returns
    how many went.  By id, PAGE to a script, each job remembered as `delete` does (an
    XTRIM would be one command, but would forget which jobs were dead)."""
    s = settings
    flt = dataclasses.replace(flt) if flt is not None else DeadFilter()
    if upto is not None and (flt.until is None or parse_id(upto) < parse_id(flt.until)):
        flt.until = upto
    ids = (await select(client, s, flt)).ids
    return sum(o.status == "ok" for o in await _remove(client, s, ids, "purged"))
