"""The dead-letter stream's format and the worker's dead-letter script.

A dead letter is the entry's original fields as they came (duplicates kept), then
dead:error, dead:source_id, dead:deliveries, dead:consumer and dead:time
(dead_letter_fields); a replay puts back everything but dead:* (original_fields).

Dead-lettering is one Lua script rather than MULTI: the XADD to jobs:dead runs only
if the XACK removed the entry from the pending list.  A MULTI is atomic too, but
when its reply is lost and the worker retries, the dead-letter entry is written
twice; the script makes the retry a no-op, so a poison job lands there exactly once.

Dead letters trimmed: the dead-letter stream is capped too (MAXLEN ~ dead_maxlen), and a
trim drops the oldest dead letters with no trace of its own.  The same script counts
them exactly (XLEN before and after its XADD) into stagedoor:dead-trimmed:<stream>
(keys.dead_trimmed_key; not declared in KEYS for the worker's ACL selectors, as in
backlog.AUDIT_LUA, and on the stream's hash tag for Cluster), and the worker logs one
line per XADD that trimmed (MAXLEN ~ trims whole nodes, ~100 entries at a time), so

    dead letters written = XLEN jobs:dead + the count + what `dead replay/purge` removed

and it records the job's entry id of each dead letter it trimmed in the removed dead
letters' stream (keys.dead_gone_key, how "trimmed"), as `dead replay/delete/purge` do,
so `stagedoor job` still says DEAD ("dead letter removed") once its dead letter was
trimmed (issue 38).  MAXLEN ~ gives no list of what it took: the script reads the
oldest dead letters it may take (at most XLEN + 1 - dead_maxlen) before the XADD,
which at the cap costs an XRANGE of up to a node's entries per dead letter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import redis.asyncio as aioredis

from ..config import Settings
from .keys import dead_gone_key, dead_trimmed_key

log = logging.getLogger("stagedoor.queue")

DEAD_FIELD_PREFIX = b"dead:"
# Metadata added to a dead-letter entry after the original fields.
DEAD_META = ("error", "source_id", "deliveries", "consumer", "time")

# Writes come last and in this order so that an error leaves the entry pending, not
# lost: Redis does not roll a script back, so an XACK before a failing XADD (OOM,
# a payload too large for unpack) would ack a job that never reached jobs:dead.
_DEAD_LETTER_LUA = """
if ARGV[3] == '1' then
  -- NOGROUP (the group destroyed, the stream deleted or flushed): not pending either
  local pending = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
  if pending.err or #pending == 0 then return false end
end
local before = redis.call('XLEN', KEYS[2])
-- At the cap, the oldest dead letters MAXLEN ~ may trim with this XADD (whole nodes, at
-- most before + 1 - cap, at most its default LIMIT): read first, so that their jobs are
-- remembered as DEAD once they are gone.
local doomed = {}
local over = before + 1 - tonumber(ARGV[4])
if over > 0 then
  doomed = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', math.min(over, tonumber(ARGV[7])))
end
local args = {'XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*'}
for i = 8, #ARGV do args[#args + 1] = ARGV[i] end
local dead_id = redis.call(unpack(args))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
-- What MAXLEN ~ took with this XADD, counted exactly, and the job of each dead letter it
-- took, in the removed dead letters' stream as the console's removals are (ARGV[6],
-- capped like the dead-letter stream); last, and with pcall, so that a record that
-- cannot be written never costs the dead letter itself.
local trimmed = before + 1 - redis.call('XLEN', KEYS[2])
local total, kept = 0, 0
if trimmed > 0 then
  total = redis.pcall('INCRBY', ARGV[5], trimmed)
  if type(total) == 'table' then total = -1 end
  for k = 1, math.min(trimmed, #doomed) do
    local f, source = doomed[k][2], ''
    for i = 1, #f - 1, 2 do
      if f[i] == 'dead:source_id' then source = f[i + 1] break end
    end
    if source ~= '' then
      local r = redis.pcall('XADD', ARGV[6], 'MAXLEN', '~', ARGV[4], '*', 'source_id',
                            source, 'dead_id', doomed[k][1], 'how', 'trimmed', 'new_id', '')
      if type(r) ~= 'table' then kept = kept + 1 end
    end
  end
end
return {dead_id, trimmed, total, kept}
"""
# The most dead letters one XADD's MAXLEN ~ trims (its default LIMIT: 100 nodes of
# stream-node-max-entries, 100 by default), so the most the script reads ahead of it.
DEAD_TRIM_READ = 10_000
# Lua's unpack() stops at ~8000 values; a dead letter keeps the first fields of a
# payload with more (the reason already says what was wrong with it).
MAX_DEAD_FIELDS = 256


def dead_letter_fields(fields: Sequence[bytes] | None, *, error: str, source_id: str,
                       deliveries: int, consumer: str) -> list[bytes]:
    """Original fields as they came (duplicates kept) plus dead:* metadata."""
    out = list(fields or [])
    if len(out) > 2 * MAX_DEAD_FIELDS:
        error += f" [dead letter keeps the first {MAX_DEAD_FIELDS} of {len(out) // 2} fields]"
        out = out[:2 * MAX_DEAD_FIELDS]
    meta = (error, source_id, str(deliveries), consumer, f"{time.time():.3f}")
    for name, value in zip(DEAD_META, meta, strict=True):
        out += [DEAD_FIELD_PREFIX + name.encode(), value.encode()]
    return out


def original_fields(dead_fields: Sequence[bytes]) -> list[bytes]:
    """The fields a replay puts back on the job stream: everything but dead:*."""
    out: list[bytes] = []
    for i in range(0, len(dead_fields) - 1, 2):
        if not dead_fields[i].startswith(DEAD_FIELD_PREFIX):
            out += [dead_fields[i], dead_fields[i + 1]]
    return out


class DeadLetter:
    """Move an entry to the dead-letter stream and ack it, atomically and at most once."""

    def __init__(self, client: aioredis.Redis, settings: Settings) -> None:
        self._settings = settings
        self._script = client.register_script(_DEAD_LETTER_LUA)

    async def __call__(self, entry_id: bytes | str, fields: Sequence[bytes] | None, *,
                       error: str, deliveries: int, consumer: str,
                       only_if_pending: bool = True) -> bytes | None:
        """Returns the dead entry's id, or None if the entry was no longer pending."""
        s = self._settings
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        payload = dead_letter_fields(fields, error=error, source_id=eid,
                                     deliveries=deliveries, consumer=consumer)
        result = await self._script(
            keys=[s.stream, s.dead_stream],
            args=[s.group, eid, "1" if only_if_pending else "0", s.dead_maxlen,
                  dead_trimmed_key(s), dead_gone_key(s), DEAD_TRIM_READ, *payload])
        if not isinstance(result, list | tuple) or len(result) != 4:
            return None  # false: the entry was no longer pending
        dead_id, trimmed, total = result[0], int(result[1]), int(result[2])
        if int(result[3]) < trimmed:    # out of memory, or no source id in them
            log.error("%s: %d of the %d dead letters trimmed at the cap have no record in "
                      "%s: their jobs' lookups cannot say DEAD", s.dead_stream,
                      trimmed - int(result[3]), trimmed, dead_gone_key(s))
        if trimmed > 0:
            if total < 0:
                log.error("%s is at its cap (dead_maxlen %d): %d dead letters trimmed, "
                          "and the count in %s could not be written", s.dead_stream,
                          s.dead_maxlen, trimmed, dead_trimmed_key(s))
            else:
                log.warning("%s is at its cap (dead_maxlen %d): %d oldest dead letters "
                            "trimmed, %d in all (%s); raise dead_maxlen or replay/purge them",
                            s.dead_stream, s.dead_maxlen, trimmed, total,
                            dead_trimmed_key(s),
                            extra={"trimmed": trimmed, "trimmed_total": total})
        return dead_id if isinstance(dead_id, bytes) else None
