"""Jobs trimmed before any worker read them: counted once, in Redis, and kept.

MAXLEN ~ (and XTRIM) ignore the consumer group, so a backlog longer than maxlen loses
its oldest, never-delivered entries.  Redis's own numbers do not say so reliably:
a group created with `$ MKSTREAM` has no entries-read counter, and then XINFO's lag
is estimated from the stream's length (so it never exceeds it, and the loss is
invisible); Valkey may report a lag of 0 after a trim.  The counters that do tell it:

    lost = entries-added - entries-read - (entries after the group's last-delivered id)

and while the group is *behind* (the stream's first entry is newer than its cursor)
every entry left is after the cursor, so the last term is the stream's length.  A
group that never read anything (cursor 0-0) has read exactly 0, whatever Redis says.

`account()` (Lua, run inside the producer's enqueue script and by worker slot 0 every
few seconds) adds a loss it finds to the hash stagedoor:trimmed:<stream>: `count`
(the total ever), `last` (the latest loss), `gap_end` (the first entry after it) and
`skew`.  Redis never takes a loss out of a valid entries-read counter (it goes on
incrementing per delivered entry), so entries-added - entries-read keeps every past
loss; `skew` is the part of it already counted, and

    backlog = entries-added - entries-read - skew + pending

is what the producer checks before its XADD.  (Re-syncing the counter with XGROUP
SETID would be simpler, but SETID can also skip entries: the worker's ACL refuses
it on purpose.)  A loss found while the counter is unknown (a group that never read,
cursor 0-0) is not added to `skew` but to `unread_skew`, which only that case reads:
Redis estimates the counter from the stream's length at the group's first read, which
leaves the loss out by itself, and until then `unread_skew` keeps every later audit
and enqueue from counting the same loss again.

Known limit: a loss is counted exactly while the group is behind the gap, which
lasts as long as the group needs to read a whole stream's length.  A trim by another
producer that the group reads past before anyone looks (slot 0 looks every few
seconds, a producer at every enqueue) is counted at least in part, as the excess of
entries-added - entries-read over what the stream still holds.  Our own producers
cannot cause it: they refuse to add before a trim would reach unread entries.

`status()` is the read-only Python twin of account() for `stagedoor status` and the
exporter: counted total + what is lost and not yet counted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..config import Settings

log = logging.getLogger("stagedoor.worker")


def trimmed_key(settings: Settings) -> str:
    return settings.key("trimmed", settings.stream)


ACCOUNT_LUA = """
local function fields(t)
  local o = {}
  for i = 1, #t, 2 do o[t[i]] = t[i + 1] end
  return o
end
-- -> nil (no stream or no group), or {backlog (-1: unknown), lost now counted}
local function account(stream, group, counter)
  local groups = redis.pcall('XINFO', 'GROUPS', stream)  -- an error: no stream yet
  if groups.err then return nil end
  local g
  for _, row in ipairs(groups) do
    local t = fields(row)
    if t['name'] == group then g = t end
  end
  if not g then return nil end
  local s = fields(redis.call('XINFO', 'STREAM', stream))
  local cursor, read = g['last-delivered-id'], g['entries-read']
  local skew = 0
  local skew_field = 'skew'
  if read then
    skew = tonumber(redis.call('HGET', counter, 'skew') or '0')
  elseif cursor == '0-0' then
    read = 0  -- never delivered anything: has read nothing, whatever XINFO says
    -- What earlier looks already counted while the group had not read: without it
    -- every audit and every enqueue chunk would count the same loss again.
    skew_field = 'unread_skew'
    skew = tonumber(redis.call('HGET', counter, skew_field) or '0')
  else
    if g['lag'] then return {g['lag'] + g['pending'], 0} end
    return {-1, 0}
  end
  local first = s['first-entry']
  -- Exact while behind (every entry left is after the cursor); a lower bound after the
  -- group read past a gap nobody counted, since at most `length` entries are after it.
  local lost = math.max(0, s['entries-added'] - read - skew - s['length'])
  if lost > 0 then
    redis.call('HINCRBY', counter, 'count', lost)
    redis.call('HSET', counter, 'last', lost,
               'gap_end', first and first[1] or s['last-generated-id'])
    redis.call('HINCRBY', counter, skew_field, lost)
  end
  return {s['entries-added'] - read - skew - lost + g['pending'], lost}
end
"""

# The audit worker slot 0 runs: account() alone.  -> {backlog, lost} or false.
# KEYS[1] the stream; ARGV[1] the group, ARGV[2] the counter hash.  The hash is not
# declared in KEYS: an ACL selector must allow a command on *all* its declared keys,
# and the worker's (docs/security.md) allows the stream and stagedoor:* in separate
# selectors; the HINCRBY inside is checked against the stagedoor:* one all the same.
# (So this script, like the enqueue script, is not for Redis Cluster.)
AUDIT_LUA = ACCOUNT_LUA + """
return account(KEYS[1], ARGV[1], ARGV[2]) or false
"""


def _id(text: str | None) -> tuple[int, int]:
    ms, _, seq = (text or "0-0").partition("-")
    return int(ms), int(seq or 0)


def _next(entry_id: tuple[int, int]) -> tuple[int, int]:
    ms, seq = entry_id
    return (ms, seq + 1) if seq < 2**64 - 1 else (ms + 1, 0)


def status(stream: Mapping[str, Any], group: Mapping[str, Any],
           counted: Mapping[str, Any]) -> dict[str, Any]:
    """trimmed_backlog of `stagedoor status` (read-only): account() without writing.

    alarm                 entries the group never read are gone and the group has not
                          read past the gap yet (it clears then; the count stays)
    undelivered_trimmed   every job ever trimmed unread: counted in the hash + what is
                          lost now and not yet counted
    method                "lag": the counters, and Redis's lag agrees with them;
                          "counters": the counters where lag is missing or disagrees
                          (a group created with $ MKSTREAM, Valkey after a trim);
                          "ids": no counter at all, the ids alone say that something is
                          gone, not how much"""
    cursor = _id(group.get("last_delivered_id"))
    first = stream.get("first_id")
    length, added = int(stream.get("length") or 0), stream.get("entries_added")
    read, lag = group.get("entries_read"), group.get("lag")
    if read is None and cursor == (0, 0):
        read = 0  # a group that never delivered has read nothing, whatever XINFO says
    newest = _id(stream.get("last_generated_id"))
    total = int(counted.get("count") or 0)
    skew = int(counted.get("skew" if group.get("entries_read") is not None
                           else "unread_skew") or 0)
    gap_end = counted.get("gap_end")
    before_gap = gap_end is not None and cursor < _id(str(gap_end))
    if read is None or added is None:
        # Ids are timestamps, not contiguous: only a first entry past the id right after
        # the cursor says that something after it is gone (a heuristic).
        behind = newest > cursor and (first is None or _id(first) > _next(cursor))
        return {"alarm": behind or (total > 0 and before_gap),
                "undelivered_trimmed": total or None, "method": "ids"}
    behind = (_id(first) if first is not None else newest) > cursor
    uncounted = max(0, int(added) - int(read) - skew - length)  # see account()
    method = "lag" if lag is not None and int(lag) == int(added) - int(read) - skew \
        else "counters"
    return {"alarm": (behind and uncounted > 0) or (total > 0 and before_gap),
            "undelivered_trimmed": total + uncounted, "method": method}


async def audit(client: Any, settings: Settings) -> int:
    """Run account() once (AUDIT_LUA); log and return a loss it counted now.

    Every worker runs it at boot, before its first read: a group's first read makes
    Redis estimate entries-read from the stream's length, which hides a loss nobody
    counted before it.  Worker slot 0 runs it again every few seconds."""
    script = client.register_script(AUDIT_LUA)
    found = await script(keys=[settings.stream], args=[settings.group, trimmed_key(settings)])
    lost = int(found[1]) if found else 0
    if lost:
        log.error("%d jobs were trimmed from stream %s before any worker read them "
                  "(MAXLEN ~ or XTRIM on a backlog longer than maxlen): lost, counted in "
                  "%s and stagedoor_trimmed_unread_total",
                  lost, settings.stream, trimmed_key(settings))
    return lost
