"""Release a stuck pending entry to the fleet now, instead of after claim_idle_ms.

A pending entry is taken over by the next reclaim pass of any worker once it has been
idle claim_idle_ms (worker/reclaim.py: XAUTOCLAIM ... claim_idle_ms).  Releasing it
makes it that idle at once, in one script on the stream's slot:

    XPENDING <stream> <group> <id> <id> 1            still pending, still on the owner shown?
    XCLAIM <stream> <group> <owner> 0 <id> IDLE <RELEASE_IDLE_MS> JUSTID

The entry stays on the stream and in the group's pending list, on the same consumer,
with the same delivery count (JUSTID does not count a delivery: the worker that takes
it does); only its idle time changes, to RELEASE_IDLE_MS, past any worker's claim
threshold (claim_idle_ms is at most a day, config/settings.py).  The next reclaim pass
takes it: an idle worker reclaims once per block_ms, a busy one every reclaim_interval.

What keeps the guarantees: nothing is acked, copied or deleted, so the entry runs at
least once as before; a second run of a job whose first run is still going (the owner
alive and running it) waits on the job's outbox lease (handlers/context.already_done:
"is running", retried) and is skipped as done once the first finished, so the side
effect is applied once for handlers that use already_done (RELIABILITY.md).  The owner
shown on the confirm page is checked in the script: an entry acked meanwhile is
"not pending", one taken by another worker meanwhile is "moved" (look again), and
neither is touched.  Caveat: a live owner still running it may take it back on its own
next reclaim pass (a worker takes and then skips an id it runs, which resets its idle
time); the entry then waits for that run's end like any running job.
"""

from __future__ import annotations

import dataclasses

import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import presence_key
from ..telemetry.records import Record, now_ms, pipeline, text
from .fleet import MalformedRecord, WorkerPresence, presence_record
from .pending import PendingEntry, show_pending

# The largest claim_idle_ms a worker may have (config/settings.py: hi): past it, every
# worker's next reclaim pass takes the entry whatever its own threshold.
RELEASE_IDLE_MS = 86_400_000

# KEYS: the stream.  ARGV: group, entry id, the owner shown ('' for any), idle ms.
# -> {1, owner} released; {0} not pending (or no group); {2, the consumer that holds it
#    now} another consumer holds it
_RELEASE_LUA = """
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if type(p) ~= 'table' or p.err or #p == 0 then return {0} end
local owner = p[1][2]
if ARGV[3] ~= '' and owner ~= ARGV[3] then return {2, owner} end
local idle = ARGV[4]
if tonumber(p[1][3]) > tonumber(idle) then idle = tostring(p[1][3]) end
redis.call('XCLAIM', KEYS[1], ARGV[1], owner, 0, ARGV[2], 'IDLE', idle, 'JUSTID')
return {1, owner}
"""


@dataclasses.dataclass
class Owner(Record):
    """The consumer that holds a pending entry, and whether a worker runs under its name."""
    consumer: str
    alive: bool  # a presence record of this name exists (a beat within presence_ttl_ms)
    seen_ms_ago: int | None  # since its last beat (None: no record)
    in_flight: int | None  # jobs it said it runs at its last beat
    host: str | None
    pid: int | None
    malformed: str | None = None  # its record is not what a worker writes: why


@dataclasses.dataclass
class ReleasePlan(Record):
    """What a release would do: the confirm page's and the CLI's dry-run text."""
    entry: PendingEntry
    owner: Owner
    claim_idle_ms: int  # this configuration's threshold (workers may have their own)
    maybe_running: bool  # the owner is alive and the entry idle less than claim_idle_ms


@dataclasses.dataclass
class Released(Record):
    status: str  # "released", "not-pending" (acked, dead-lettered), "moved" (another owner)
    entry_id: str
    consumer: str  # the owner it was released from, or the one that holds it now (moved)


async def owner_of(client: aioredis.Redis, settings: Settings, consumer: str) -> Owner:
    t, raw = await pipeline(client, [("TIME",), ("GET", presence_key(settings, consumer))])
    if raw is None or isinstance(raw, Exception):
        return Owner(consumer=consumer, alive=False, seen_ms_ago=None, in_flight=None,
                     host=None, pid=None)
    w: WorkerPresence | MalformedRecord = presence_record(raw, now_ms(t), consumer)
    if isinstance(w, MalformedRecord):  # written by something alive all the same
        return Owner(consumer=consumer, alive=True, seen_ms_ago=None, in_flight=None,
                     host=None, pid=None, malformed=w.reason)
    return Owner(consumer=consumer, alive=True, seen_ms_ago=w.age_ms,
                 in_flight=w.in_flight, host=w.host, pid=w.pid)


async def plan(client: aioredis.Redis, settings: Settings, entry_id: str
               ) -> ReleasePlan | None:
    """The entry, its owner and its presence (None: not pending in the group)."""
    entry = await show_pending(client, settings, entry_id)
    if entry is None:
        return None
    owner = await owner_of(client, settings, entry.consumer)
    return ReleasePlan(entry=entry, owner=owner, claim_idle_ms=settings.claim_idle_ms,
                       maybe_running=owner.alive and entry.idle_ms < settings.claim_idle_ms)


async def release(client: aioredis.Redis, settings: Settings, entry_id: str, *,
                  owner: str | None) -> Released:
    """Make the entry idle RELEASE_IDLE_MS on its owner (the module docstring), if it is
    still pending and, when `owner` is given, still held by that consumer."""
    s = settings
    script = client.register_script(_RELEASE_LUA)
    reply = await script(keys=[s.stream], args=[s.group, entry_id, owner or "",
                                                RELEASE_IDLE_MS])
    code = int(reply[0]) if reply else 0
    if code == 0:
        return Released(status="not-pending", entry_id=entry_id, consumer=owner or "")
    return Released(status="released" if code == 1 else "moved", entry_id=entry_id,
                    consumer=text(reply[1]))
