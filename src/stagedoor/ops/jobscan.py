"""Finding jobs by order id or outbox id: a bounded scan of the streams, no index.

Redis cannot search a stream by field, and an index written beside the stream grows
with the jobs queued, not with the stream: one hash field per job for a day was 3.6x the
stream's own memory at 100,000 jobs and 126 MiB at 800,000 (issue 36), and a job added
by a bare XADD (the seed's relay) was never in it.  So a lookup reads what is there,
the job stream (at most ~maxlen entries) and the dead-letter stream (~dead_maxlen), in
slices small enough that no one command holds Redis for more than about a millisecond:

    EVALSHA FIND_LUA 1 <stream> <from id> <to id> <slice> <max matches> <name> <value> ...

walks one slice newest first (XREVRANGE ... COUNT <slice>), keeps the entries with any
of the given field/value pairs, and returns {the id to go on from, entries read, the
matches with their fields}.  Only the matches cross the network, so the client parses
a handful of entries, not 100,000.  A lookup stops early once it holds `limit` matches
(newest first), and otherwise ends at the stream's start.  Each slice is its own round
trip: other clients' commands run between them.

Cost, measured on this machine (bench/measure_lookup.py): see docs/console.md, "Finding
a job".  The scan is the product here (no library searches a stream), so it is written
by hand; it is plain Lua over XREVRANGE.
"""

from __future__ import annotations

import dataclasses

import redis.asyncio as aioredis

from .records import text

# Entries one script call reads: ~0.5-1 ms of Redis for jobs of the seed's five fields.
SLICE = 1_000
# Matches one call returns at most (a hostile stream of one order's jobs stays cheap).
SLICE_MATCHES = 100

FIND_LUA = """
local entries = redis.call('XREVRANGE', KEYS[1], ARGV[2], ARGV[1], 'COUNT', ARGV[3])
local want = tonumber(ARGV[4])
local out = {}
for n = 1, #entries do
  local e = entries[n]
  local f = e[2]
  local hit = false
  for i = 1, #f - 1, 2 do
    for j = 5, #ARGV - 1, 2 do
      if f[i] == ARGV[j] and f[i + 1] == ARGV[j + 1] then hit = true end
    end
  end
  if hit then
    out[#out + 1] = e
    if #out >= want then return {e[1], n, out} end
  end
end
local last = ''
if #entries > 0 then last = entries[#entries][1] end
return {last, #entries, out}
"""


@dataclasses.dataclass
class ScanCost:
    """What one lookup cost Redis: script calls (round trips) and entries read."""
    calls: int = 0
    entries: int = 0


def _before(entry_id: str) -> str:
    """The exclusive upper bound just below an id, for XREVRANGE's next slice."""
    return "(" + entry_id


async def find(client: aioredis.Redis, stream: str, match: list[tuple[str, str]], *,
               limit: int, cost: ScanCost | None = None, oldest: str = "-",
               newest: str = "+") -> list[tuple[str, list[bytes]]]:
    """The newest `limit` entries of `stream` with any (field, value) of `match`, newest
    first, as (id, fields).  A missing stream is no entries."""
    script = client.register_script(FIND_LUA)
    flat: list[str] = [x for pair in match for x in pair]
    found: list[tuple[str, list[bytes]]] = []
    hi = newest
    while len(found) < limit:
        want = min(SLICE_MATCHES, limit - len(found))
        last, read, hits = await script(keys=[stream], args=[oldest, hi, SLICE, want, *flat])
        if cost is not None:
            cost.calls += 1
            cost.entries += int(read)
        found += [(text(eid), list(fields or [])) for eid, fields in hits]
        if int(read) < SLICE and len(hits) < want:
            break  # the slice reached the stream's start
        if not last:
            break
        hi = _before(text(last))
    return found[:limit]

