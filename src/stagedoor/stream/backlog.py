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

is what the producer checks before its XADD.  A loss found while the counter is
unknown (a group that never read, cursor 0-0) is not added to `skew` but to
`unread_skew`, which only that case reads: Redis estimates the counter from the
stream's length at the group's first read, which leaves the loss out by itself, and
until then `unread_skew` keeps every later audit and enqueue from counting the same
loss again.

Failover (issue 24).  Redis 7.0 copies entries-read to a replica only on a full
resync, not as reads happen (Valkey 8.1 and Redis 8.2 do copy it:
tests/stream/test_entries_read_replication.py, the table in docs/scaling.md); a promoted
7.0 replica keeps a counter that is too low, and Redis goes on incrementing the
stale value, so it never heals.  So the counters are a fast estimate only, and an
upper bound of the backlog (a replica's counter is a master's of earlier, never
higher).  Where a decision or an alarm hangs on them, the stream is counted:

- not behind (the cursor is at or after the stream's first entry): nothing after
  the cursor is gone, so an excess of the counters over the stream is never a loss.
  When the estimate reaches the producer's warning level (and at every audit) the
  live entries after the cursor are counted (`unread_exact`: O(1) when the group is
  caught up; else both sides of the cursor a page at a time, the shorter wins; at
  most AUDIT_SCAN_CAP entries, the whole stream before a refusal), and the counter
  is repaired: XGROUP SETID <the same cursor> ENTRIESREAD <entries-added - count>
  (nothing skipped), `skew` 0, so later estimates are exact and cheap again.  A user
  without XGROUP SETID (the worker's and producer's ACL, docs/security.md) gets the
  count, not the repair (asked once: `setid_refused:audit` / `setid_refused:enqueue`
  in the hash).
- every count is also kept as `at` (the cursor) and `at_read` (entries added up to
  it): how many entries were added up to an id is the stream's history, not the
  group's, so no failover changes it.  Behind at that very cursor (a trim caught the
  group while it was not reading), the loss is entries-added - at_read - length minus
  what was counted at that cursor already (`gap_at`, `gap_lost`): exact, stale
  counter or not.  Behind elsewhere, the counter is all there is (exact if it is).

Known limits: a trim by another producer that the group reads past before anyone
looks (slot 0 looks every few seconds, a producer at every enqueue) is not counted:
once the group is past it, a loss and a counter that missed reads look the same, and
a false "lost" after every failover would be worse.  Our own producers cannot cause
it: they refuse to add before a trim would reach unread entries.  A failover while
the group is behind a gap it was reading into (the cursor moved since the last
count) counts the stale part of the counter with the loss.  Entries XDELed after the
cursor (tombstones; workers cannot XDEL) keep the counter from being repaired.

`status()` is the read-only Python twin of account() for `stagedoor status` and the
exporter: counted total + what is lost and not yet counted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..config import Settings
from .keys import trimmed_key

log = logging.getLogger("stagedoor.worker")


ACCOUNT_LUA = """
local function fields(t)
  local o = {}
  for i = 1, #t, 2 do o[t[i]] = t[i + 1] end
  return o
end
local function cmp(a, b)  -- entry ids 'ms-seq': -1, 0, 1
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  if am ~= bm then return am < bm and -1 or 1 end
  if as ~= bs then return as < bs and -1 or 1 end
  return 0
end
-- The live entries after `cursor`, counted from the stream itself, never from
-- entries-read (which a promoted replica may have stale: see the module docstring).
-- O(1) when the group is caught up or behind the first entry; otherwise both sides
-- of the cursor are counted a page at a time and the shorter one wins.  nil once
-- `cap` entries were looked at without an answer.
local function unread_exact(stream, s, cursor, cap)
  if cmp(cursor, s['last-generated-id']) >= 0 then return 0 end
  local first = s['first-entry']
  if not first or cmp(cursor, first[1]) < 0 then return s['length'] end
  local after, before, seen, page = 0, 0, 0, 100
  local a_from, b_from = '(' .. cursor, '-'
  while seen < cap do
    local r = redis.call('XRANGE', stream, a_from, '+', 'COUNT', page)
    after = after + #r
    if #r < page then return after end
    a_from = '(' .. r[#r][1]
    local l = redis.call('XRANGE', stream, b_from, cursor, 'COUNT', page)
    before = before + #l
    if #l < page then return s['length'] - before end
    b_from = '(' .. l[#l][1]
    seen = seen + #r + #l
    page = 1000
  end
  return nil
end
-- -> nil (no stream or no group), or {backlog (-1: unknown), lost now counted,
-- entries-read corrected by}.  The counters are a fast estimate; where a decision
-- hangs on it (backlog + jobs >= check_at, or a loss), the stream is counted.
local function account(stream, group, counter, check_at, cap, refuse_at, who)
  check_at, cap = check_at or 0, cap or 0
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
    local n = unread_exact(stream, s, cursor, cap)
    if n then return {n + g['pending'], 0, 0} end
    if g['lag'] then return {g['lag'] + g['pending'], 0, 0} end
    return {-1, 0, 0}
  end
  local first = s['first-entry']
  local unread = s['entries-added'] - read - skew
  -- Behind: the stream's first entry (or, empty, its last id) is past the cursor, so
  -- every entry left is unread and what the counter says beyond them is gone:
  -- exact as long as the counter is.  Not behind, nothing after the cursor is gone,
  -- and what the counter says beyond the stream is not a loss but a counter that
  -- missed reads (Redis 7.0 copies entries-read to a replica only on a full resync,
  -- and a promoted one never catches up): the stream's own count is the truth.
  local behind = cmp(cursor, first and first[1] or s['last-generated-id']) < 0
  local lost = 0
  local fixed = 0
  if behind then
    lost = math.max(0, unread - s['length'])
    -- The counter may be stale (a failover, no SETID allowed to fix it); the last
    -- count of the stream at this very cursor is not: how many entries were added up
    -- to an id is the stream's, not the group's, and no failover changes it.
    local at, at_read, gap_at, gap_lost = unpack(redis.call(
      'HMGET', counter, 'at', 'at_read', 'gap_at', 'gap_lost'))
    if at == cursor then
      local already = (gap_at == cursor) and tonumber(gap_lost) or 0
      lost = math.max(0, s['entries-added'] - tonumber(at_read) - s['length'] - already)
    end
    if lost > 0 then
      if gap_at ~= cursor then gap_lost = 0 end
      redis.call('HSET', counter, 'gap_at', cursor, 'gap_lost', tonumber(gap_lost) + lost)
    end
    unread = s['length']
  elseif cursor ~= '0-0' and unread + g['pending'] >= check_at then
    -- A refusal must be right whatever it costs: then the whole stream may be read
    -- (MAXLEN ~ lets it pass maxlen a little); a warning or an audit only `cap`.
    if refuse_at and unread + g['pending'] > refuse_at then cap = 2 * s['length'] + 2000 end
    local n = unread_exact(stream, s, cursor, cap)
    local tomb = s['max-deleted-entry-id']
    if n and (not tomb or cmp(tomb, cursor) <= 0) then
      local true_read = s['entries-added'] - n
      if redis.call('HGET', counter, 'at') ~= cursor then
        redis.call('HSET', counter, 'at', cursor, 'at_read', true_read)
      end
      local memo = 'setid_refused:' .. (who or 'audit')
      if read + skew ~= true_read and not redis.call('HGET', counter, memo) then
        -- Resync it (the same cursor: nothing skipped), so later estimates are exact
        -- and cheap.  A user without XGROUP SETID (the worker's ACL) counts instead;
        -- asked once per kind of caller (`who`: audit, enqueue: the workers' user and
        -- the producers' differ), not at every audit (HDEL the memo after granting).
        local ok = redis.pcall('XGROUP', 'SETID', stream, group, cursor,
                               'ENTRIESREAD', true_read)
        if type(ok) == 'table' and ok.err then
          redis.call('HSET', counter, memo, 1)
        else
          fixed = true_read - read
          redis.call('HSET', counter, 'skew', 0)
        end
      end
    end
    if n then unread = n end
  end
  if lost > 0 then
    redis.call('HINCRBY', counter, 'count', lost)
    redis.call('HSET', counter, 'last', lost,
               'gap_end', first and first[1] or s['last-generated-id'])
    redis.call('HINCRBY', counter, skew_field, lost)
  end
  return {unread + g['pending'], lost, fixed}
end
"""

# The audit worker slot 0 runs: account() alone.  -> {backlog, lost} or false.
# KEYS[1] the stream; ARGV[1] the group, ARGV[2] the counter hash.  The hash is not
# declared in KEYS: an ACL selector must allow a command on *all* its declared keys,
# and the worker's (docs/security.md) allows the stream and stagedoor:* in separate
# selectors; the HINCRBY inside is checked against the stagedoor:* one all the same.
# (So this script, like the enqueue script, is not for Redis Cluster.)
AUDIT_LUA = ACCOUNT_LUA + """
return account(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])) or false
"""
# How many entries the audit (and a producer's warning) may read to count the
# backlog exactly (two XRANGE sides, pages of up to 1,000): a few ms of Redis, every
# few seconds at most (docs/benchmarks.md, "Why the code is the way it is").
# Past it the estimate stands, an upper bound; a refusal counts it all.
AUDIT_SCAN_CAP = 2000


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
    # see account(): only while behind is the counters' excess over the stream a loss
    uncounted = max(0, int(added) - int(read) - skew - length) if behind else 0
    at = counted.get("at")
    if behind and at is not None and _id(str(at)) == cursor:
        # account()'s exact count at this cursor: no stale counter in it
        already = int(counted.get("gap_lost") or 0) \
            if counted.get("gap_at") is not None and _id(str(counted["gap_at"])) == cursor \
            else 0
        uncounted = max(0, int(added) - int(counted.get("at_read") or 0) - length - already)
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
    found = await script(keys=[settings.stream],
                         args=[settings.group, trimmed_key(settings), 0, AUDIT_SCAN_CAP])
    lost = int(found[1]) if found else 0
    fixed = int(found[2]) if found else 0
    if fixed:
        log.warning("the entries-read counter of group %s was %d off the stream (a "
                    "failover to a replica that had not copied it): set to the count "
                    "of the stream, so backlog, lag and the trimmed-jobs audit are "
                    "exact again", settings.group, fixed)
    if lost:
        log.error("%d jobs were trimmed from stream %s before any worker read them "
                  "(MAXLEN ~ or XTRIM on a backlog longer than maxlen): lost, counted in "
                  "%s and stagedoor_trimmed_unread_total",
                  lost, settings.stream, trimmed_key(settings))
    return lost
