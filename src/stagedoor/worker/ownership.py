"""One consumer name, one reading process: the worker's claim on its name in Redis.

A consumer name owns a pending list: whoever reads under it re-reads that list (id 0)
and runs what is on it, and the outbox lease cannot tell two processes of one name
apart (`<consumer>/<entry id>`).  A supervisor keeps its own processes of one name
apart (supervisor/state.py, `held`), but not its orphans still draining after a
kill -9 of it and a restart, a second supervisor with the same --consumer, or
`stagedoor work --slot N` beside a supervisor.  So every worker claims its name in
Redis before it reads anything, its own pending list included:

    stagedoor:owner:<stream>:<consumer>   {"token", "host", "pid", "machine", "start",
                                           "since"}   PX presence_ttl_ms (>= 5 s)

taken by a script (SET only if absent or already ours), renewed at every presence beat
(presence.py), released (DEL if still ours) when the worker exits after its drain.  A
worker that finds its name held by another process is READY but reads nothing, says
once who holds it, and takes the name when the holder released it (its drain ended),
when the claim expired (the holder died on another host), or at once when the holder
is on this machine (same boot id and pid namespace) and its pid no longer runs with the
recorded start time: a kill -9'd worker's successor takes over at its first attempt.

Lost claims.  The key can vanish (Redis restarted empty, FLUSHDB, a failover that lost
the last writes, an eviction): the next renewal finds it absent and takes it back, with
a warning.  Found held by another process, the worker reads nothing more (the jobs it
holds finish) until it has the name again.

A vanished claim is not a free name.  Until the holder's next renewal (one presence
beat) nothing in Redis says it still reads, and a second process of the name that took
the absent key at once would re-read the name's pending list, the jobs the holder is
running among them, and run them twice (the lease cannot tell the two apart).  So an
absent key is free at once only when nothing says the name is in use: a clean exit
left `stagedoor:owner-released:<stream>:<consumer>` (released_key, for a claim's TTL),
or the name has no pending entries and was not seen in the group (XINFO CONSUMERS
idle) for a claim's TTL plus a blocking read.  Otherwise the absent key is VACANT: the
waiting process takes it only after it has stayed absent for a whole claim TTL.  A live
holder renews it well within that (every beat; it stops reading by itself when a
renewal is 0.8 of the TTL overdue), so the name goes back to the holder, and the
waiting process waits for the holder's exit as for any holder.  A fresh name (never
read, or idle for longer than the TTL with nothing pending) is taken at once, as before.
This is checked in the claim script, atomically with the SET.

A claim not renewed for 0.8 of its TTL (Redis too slow or away for the renewal) stops
the reading too, until a renewal goes through: past the TTL another process could take
the name (the jobs the cut-off holder still runs may then run twice, as for any worker
cut off from Redis for longer than that).

Bounded: one small key per live consumer name, so by the fleet's size (hosts x
slots); each goes TTL after its process, or at its clean exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis

from ..config import Settings
from ..stream import connection
from ..stream.keys import owner_key, presence_ttl_ms, released_key
from ..telemetry.metrics import WorkerStats

log = logging.getLogger("stagedoor.worker")

OVERDUE = 0.8  # a claim not renewed for this share of its TTL no longer lets us read
POLL_MIN, POLL_MAX = 0.05, 0.25  # seconds between two attempts while the name is held
_ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, *connection.TRANSIENT_ERRORS)

# KEYS: the claim, its released mark.  ARGV: our value, TTL ms, a dead holder's value we
# may replace (''), '1' to take an absent claim even if the name looks in use (ours, or
# vacant for a TTL), the group, the consumer name, how recently seen (ms) a name counts
# as in use, the stream (in ARGV, not KEYS: the worker's ACL grants the stream and the
# stagedoor:* keys to different selectors, and one EVALSHA's KEYS must all match one).
# -> {2, ''} taken (it was free), {1, ''} renewed (ours, or the dead holder's),
#    {0, holder's value} held by another process, {3, ''} vacant: absent, but the name
#    has pending entries or was seen lately, and no clean exit released it
CLAIM_LUA = """
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] and v ~= ARGV[3] then return {0, v} end
if not v then
  if ARGV[4] ~= '1' and redis.call('EXISTS', KEYS[2]) == 0 then
    local ok, cs = pcall(redis.call, 'XINFO', 'CONSUMERS', ARGV[8], ARGV[5])
    if ok then
      for _, c in ipairs(cs) do
        local f = {}
        for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
        if f['name'] == ARGV[6] and (tonumber(f['pending']) > 0
            or tonumber(f['idle']) < tonumber(ARGV[7])) then
          return {3, ''}
        end
      end
    end
  end
  redis.call('DEL', KEYS[2])
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if v then return {1, ''} end
return {2, ''}
"""
# KEYS: the claim, its released mark.  ARGV: our value, TTL ms.  Deleted only while it
# is still ours; the mark says the name was released, not lost (a successor takes it
# at once).
RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def machine_id() -> str:
    """This kernel boot and pid namespace: a holder's pid means something here only
    when its claim says the same ('' when /proc cannot tell)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def start_ticks(pid: int) -> int | None:
    """The process' start time (clock ticks after boot, /proc/<pid>/stat field 22), or
    None if no such process runs: with the pid, it names one process for good.  A
    zombie (exited, not yet reaped by its parent) runs no more: -1."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return -1 if fields[0] in ("Z", "X", "x") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def holder_gone(holder: dict[str, Any], machine: str) -> bool:
    """The holder ran on this machine and its process provably no longer runs: no such
    pid, or one whose start time differs (a reused pid).  Anything unsure (another
    user's process whose /proc we may not read, a claim without a start time) is
    alive: its claim expires on its own if it is not."""
    if not machine or holder.get("machine") != machine:
        return False
    pid, start = holder.get("pid"), holder.get("start")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists, as another user
    ticks = start_ticks(pid)
    return isinstance(start, int) and ticks is not None and ticks != start


def describe(holder: dict[str, Any]) -> str:
    return (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} "
            f"(claim {str(holder.get('token', '?'))[:8]})")


class NameClaim:
    """This process' claim on its consumer name; `owned` says whether it may read."""

    def __init__(self, settings: Settings, cmd: aioredis.Redis, *, consumer: str,
                 stats: WorkerStats, on_lost: Callable[[], Awaitable[None]],
                 on_back: Callable[[], None]) -> None:
        self.cmd = cmd
        self.consumer = consumer
        self.stats = stats
        self.on_lost = on_lost  # stop reading (the caller ends a blocking read)
        self.on_back = on_back  # read again (the own pending list first)
        self.key = owner_key(settings, consumer)
        self.keys = [self.key, released_key(settings, consumer)]
        self.stream = settings.stream
        self.group = settings.group
        self.ttl_ms = presence_ttl_ms(settings)
        # seen in the group this recently (a blocking read ago, at most), the name is in use
        self.seen_ms = self.ttl_ms + settings.block_ms
        self.vacant_since: float | None = None  # monotonic: first found vacant
        self.poll = min(POLL_MAX, max(POLL_MIN, settings.heartbeat_interval))
        self.machine = machine_id()
        self.me = {"token": uuid.uuid4().hex, "host": socket.gethostname(),
                   "pid": os.getpid(), "machine": self.machine,
                   "start": start_ticks(os.getpid()), "since": round(time.time(), 3)}
        self.value = orjson.dumps(self.me)
        self.owned = False
        self.acquired = False  # owned once: from then on the presence beat renews it
        self.renewed_at = -float("inf")  # monotonic time of the last renewal's request
        self._told: str | None = None  # the holder we last said we wait for
        self._scripts: tuple[Any, Any] | None = None
        stats.gauges["name_held_elsewhere"] = 0

    def _script(self, which: int) -> Any:
        if self._scripts is None:
            self._scripts = (self.cmd.register_script(CLAIM_LUA),
                             self.cmd.register_script(RELEASE_LUA))
        return self._scripts[which]

    async def _claim(self, takeover: bytes = b"", vacant: bool = False
                     ) -> tuple[int, bytes]:
        status, holder = await self._script(0)(
            keys=self.keys, args=[self.value, self.ttl_ms, takeover, "1" if vacant else "",
                                  self.group, self.consumer, self.seen_ms, self.stream])
        return int(status), holder or b""

    async def attempt(self) -> bool:
        """Take or renew the claim once (raises on a Redis error); True if ours now."""
        sent = time.monotonic()
        # ours: a vanished claim is taken back; a vacant name, after a whole TTL of it
        vacant = self.owned or (self.vacant_since is not None
                                and sent - self.vacant_since >= self.ttl_ms / 1000)
        status, raw = await self._claim(vacant=vacant)
        if status == 3:
            self._on_vacant(sent)
            return False
        self.vacant_since = None
        holder: dict[str, Any] = {}
        if status == 0:
            with contextlib.suppress(orjson.JSONDecodeError, TypeError):
                holder = orjson.loads(raw)
            if not isinstance(holder, dict):
                holder = {}
            if holder_gone(holder, self.machine):
                status, raw = await self._claim(raw)
                if status:
                    log.info("worker %s took over its consumer name from %s, which no "
                             "longer runs", self.consumer, describe(holder),
                             extra={"consumer": self.consumer})
        if status:
            self._on_ours(status, sent)
        else:
            await self._on_held(holder)
        return self.owned

    def _on_ours(self, status: int, sent: float) -> None:
        self.renewed_at = sent
        if status == 2 and self.owned:  # ours until now, and no one else took it
            log.warning("worker %s: its claim on the consumer name had vanished from Redis "
                        "(restarted empty, flushed, failed over or evicted); taken back",
                        self.consumer, extra={"consumer": self.consumer})
        was_out = self.acquired and not self.owned
        self.owned = self.acquired = True
        self._told = None
        self.stats.gauges["name_held_elsewhere"] = 0
        if was_out:
            log.warning("worker %s has its consumer name back: reading again", self.consumer,
                        extra={"consumer": self.consumer})
            self.on_back()

    def _on_vacant(self, now: float) -> None:
        """The claim is absent but the name in use (pending entries, or seen lately)
        and no clean exit released it: its holder may be alive and renew it at its next
        beat.  Wait a whole TTL for that before taking it."""
        self.stats.gauges["name_held_elsewhere"] = 1
        if self.vacant_since is None:
            self.vacant_since = now
            self._told = None
            log.warning("worker %s waits for its consumer name: its claim is absent but "
                        "the name has pending entries or read within %d ms, and no clean "
                        "exit released it (a vanished claim, or a holder that stopped); it "
                        "takes the name if no holder renews it within %d ms", self.consumer,
                        self.seen_ms, self.ttl_ms, extra={"consumer": self.consumer})

    async def _on_held(self, holder: dict[str, Any]) -> None:
        self.stats.gauges["name_held_elsewhere"] = 1
        token = str(holder.get("token"))
        if self.owned:
            self.owned = False
            self._told = token
            log.error("worker %s lost its consumer name to %s: reading nothing until the "
                      "name is free (the jobs it holds finish)", self.consumer,
                      describe(holder), extra={"consumer": self.consumer})
            await self.on_lost()
        elif self._told != token:
            self._told = token
            log.warning("worker %s waits for its consumer name: %s holds it (since %s); "
                        "it reads once that process has exited or its claim expired "
                        "(%d ms after its last renewal)", self.consumer, describe(holder),
                        holder.get("since", "?"), self.ttl_ms,
                        extra={"consumer": self.consumer})

    async def acquire(self) -> None:
        """Until the name is ours (the caller races it with the stop)."""
        while True:
            try:
                if await self.attempt():
                    return
            except _ERRORS as e:
                log.debug("claim on the consumer name failed: %s", e)
            await asyncio.sleep(self.poll)

    async def renew(self) -> None:
        """At each presence beat, once acquired: renew, or notice the name is lost; a
        renewal overdue past OVERDUE of the TTL stops the reading too.  Never raises
        for Redis."""
        try:
            await self.attempt()
            return
        except _ERRORS as e:
            log.debug("renewal of the claim on the consumer name failed: %s", e)
        overdue = time.monotonic() - self.renewed_at
        if self.owned and overdue > OVERDUE * self.ttl_ms / 1000:
            self.owned = False
            log.error("worker %s could not renew the claim on its consumer name for %.1fs: "
                      "reading nothing until it is renewed", self.consumer, overdue,
                      extra={"consumer": self.consumer})
            await self.on_lost()

    async def release(self) -> None:
        """At exit, after the drain: the name is free for the next process at once."""
        if not self.acquired:
            return
        self.owned = False
        with contextlib.suppress(*_ERRORS, TimeoutError):
            async with asyncio.timeout(1.0):
                await self._script(1)(keys=self.keys, args=[self.value, self.ttl_ms])
