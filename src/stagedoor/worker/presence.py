"""The worker's heartbeat to Redis: its claim on its consumer name, its presence in the
fleet registry, and the pause flag.

Once a presence interval (heartbeat_interval, but at least PRESENCE_MIN_INTERVAL: a
sub-second heartbeat, for fast hang detection, must not multiply the Redis traffic of
a fleet), the renewal of the claim on the consumer name (one EVALSHA: ownership.py),
then one pipelined round trip on the worker's command client (stream/keys.py names the
keys and the flag's format; console/fleet.py is how the console reads them):

    GET stagedoor:paused:<stream>
    SET stagedoor:worker:<stream>:<consumer> <json> PX <presence_ttl_ms>
                                           (only while the name is ours)

and at the first beat and once every NAMES_EVERY seconds, in the same round trip:

    HSET stagedoor:fleet:<stream> <consumer> <ms>     (the names, for the reader)
    EXPIRE stagedoor:fleet:<stream> 86400

Nothing here is on the read path: the reader only looks at `Pause.active` (an
attribute) before each read, so a running fleet pays three commands a second a worker,
and a pause is seen within one such beat (one heartbeat at the default 1 s).  Seen,
the worker ends a blocking read that waits (CLIENT UNBLOCK, as at a stop: a reply
already sent is still dispatched), finishes what it holds, reads and reclaims
nothing, and keeps heartbeating; a resume seen (the flag holds a resumed record:
stream/keys.parse_pause), it reads again at once.  The flag gone while it pauses us is not a
resume but a key lost with Redis's data: the worker logs "pause flag disappeared",
sets its pause_lost gauge (alert StagedoorPauseFlagLost) and stays paused until an
operator's resume.

After the pause is looked at, when the worker handled anything since its last beat,
a fourth command: one EVALSHA adds its per-kind counts to the console's per-minute
ring (telemetry/kindstats.py; best effort, what fails is sent at the next beat).

A failed round trip (Redis away, OOM refusing the SET) changes nothing: the worker
keeps the pause state it had and tries again at the next beat.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis

from ..config import Settings
from ..stream import connection
from ..stream.keys import (
    FLEET_TTL_S,
    PauseState,
    fleet_key,
    parse_pause,
    paused_key,
    presence_key,
    presence_ttl_ms,
)
from ..telemetry.kindstats import Flusher
from ..telemetry.metrics import WorkerStats
from ..version import __version__
from .family import ProcessFamily
from .ownership import NameClaim
from .slots import Slots

log = logging.getLogger("stagedoor.worker")
PRESENCE_MIN_INTERVAL = 1.0  # seconds: the shortest time between two presence beats
NAMES_EVERY = 60.0  # seconds between two writes of the fleet's name hash
_BEST_EFFORT: tuple[type[BaseException], ...] = (redis.RedisError, *connection.TRANSIENT_ERRORS)


class Pause:
    """Whether this worker may read, as it last saw: the fleet's pause flag, and its
    consumer name held by another process (ownership.py).  The reader looks only at
    `active` (an attribute) and waits on `wait_clear()`."""

    def __init__(self, stats: WorkerStats, consumer: str) -> None:
        self.stats = stats
        self.consumer = consumer
        self.state: PauseState | None = None  # the fleet's pause, while it holds us
        self.name_out = False  # our consumer name is not ours now
        self.lost = False  # the flag vanished while it paused us (flag_gone)
        self._clear = asyncio.Event()
        self._clear.set()
        stats.gauges["paused"] = 0
        stats.gauges["pause_lost"] = 0

    @property
    def active(self) -> bool:
        return not self._clear.is_set()

    @property
    def fleet(self) -> bool:
        """The fleet's pause holds this worker."""
        return self.state is not None

    def _update(self) -> None:
        if self.state is not None or self.name_out:
            self._clear.clear()
        else:
            self._clear.set()

    def enter(self, state: PauseState) -> None:
        self.state = state
        self.lost = False
        self._update()
        self.stats.gauges["paused"] = 1
        self.stats.gauges["pause_lost"] = 0
        log.warning("fleet paused%s%s: finishing the jobs held, reading nothing new",
                    f" by {state.by}" if state.by else "",
                    f" ({state.reason})" if state.reason else "",
                    extra={"consumer": self.consumer})

    def leave(self, state: PauseState) -> None:
        """An operator's resume (the flag holds a resumed record)."""
        self.state = None
        self.lost = False
        self._update()
        self.stats.gauges["paused"] = 0
        self.stats.gauges["pause_lost"] = 0
        log.warning("fleet resumed%s: reading again",
                    f" by {state.by}" if state.by else "", extra={"consumer": self.consumer})

    def flag_gone(self) -> None:
        """The flag is absent while this worker is paused: not a resume (that leaves a
        resumed record), the key was lost with Redis's data.  Stay paused, loudly."""
        if self.lost:
            return
        self.lost = True
        self.stats.gauges["pause_lost"] = 1
        log.error("pause flag disappeared (Redis flushed, restarted without persistence "
                  "or evicted it), not resumed: staying paused until `stagedoor resume`",
                  extra={"consumer": self.consumer})

    def name(self, ours: bool) -> None:
        """The consumer name is ours again (read on), or held by another process."""
        self.name_out = not ours
        self._update()

    async def wait_clear(self) -> None:
        await self._clear.wait()


class Presence:
    """Writes this worker's presence record and reads the pause flag, each heartbeat."""

    def __init__(self, settings: Settings, cmd: aioredis.Redis, *, consumer: str, slot: int,
                 stats: WorkerStats, slots: Slots, pause: Pause,
                 unblock: Callable[[], Awaitable[None]],
                 claim: NameClaim | None = None) -> None:
        self.settings = settings
        self.claim = claim
        self.cmd = cmd
        self.consumer = consumer
        self.slot = slot
        self.stats = stats
        self.slots = slots
        self.pause = pause
        self.unblock = unblock
        self.started = time.time()
        self.host = socket.gethostname()
        self._family = ProcessFamily(os.getpid())   # with the render process (family.py)
        self._keys = (paused_key(settings), presence_key(settings, consumer),
                      fleet_key(settings))
        self._ttl = presence_ttl_ms(settings)
        self.interval = max(settings.heartbeat_interval, PRESENCE_MIN_INTERVAL)
        self._names_due = 0.0  # monotonic time the name hash is next written
        # what this worker counted by kind since the last beat, into the console's
        # per-minute ring (telemetry/kindstats.py): one EVALSHA, only when it counted something
        self.kinds = Flusher(settings, stats)

    def record(self) -> dict[str, Any]:
        gauges = self.stats.gauges
        renderer = ("native" if gauges.get("renderer_native") else
                    "reference" if gauges.get("renderer_reference") else None)
        return {"consumer": self.consumer, "host": self.host, "slot": self.slot,
                "pid": self._family.pid, "version": __version__, "renderer": renderer,
                "started": round(self.started, 3),
                "handled": int(sum(self.stats.counters.get("handled", {}).values())),
                "in_flight": len(self.slots.running),
                "rss_bytes": self._family.rss(), "paused": self.pause.fleet,
                "seen_ms": int(time.time() * 1000)}

    async def beat(self) -> None:
        paused, presence, names = self._keys
        claim = self.claim
        # Renewed once a beat (not again right after the boot's attempt took it); never
        # raises for Redis, and may stop the reading (ownership.py).
        if claim is not None and claim.acquired and \
                time.monotonic() - claim.renewed_at >= self.interval / 2:
            await claim.renew()
        pipe = self.cmd.pipeline(transaction=False)
        pipe.execute_command("GET", paused)
        if claim is None or claim.owned:  # the name's record is its reading process's
            pipe.execute_command("SET", presence, orjson.dumps(self.record()), "PX",
                                 self._ttl)
        now = time.monotonic()
        if now >= self._names_due:
            pipe.execute_command("HSET", names, self.consumer, int(time.time() * 1000))
            pipe.execute_command("EXPIRE", names, FLEET_TTL_S)
        replies = await pipe.execute(raise_on_error=False)
        if now >= self._names_due and not any(isinstance(r, BaseException)
                                              for r in replies[-2:]):
            self._names_due = now + NAMES_EVERY
        flag = replies[0]
        if isinstance(flag, BaseException):
            raise flag
        state = parse_pause(flag, paused)
        if state.paused:
            if not self.pause.fleet or self.pause.lost:  # a pause, or a new one
                self.pause.enter(state)
                await self.unblock()
        elif self.pause.fleet:
            if state.resumed is not None:
                self.pause.leave(state)
            else:
                self.pause.flag_gone()
        await self.flush_kinds()  # after the pause is seen: it waits for nothing

    async def flush_kinds(self) -> None:
        """The per-kind counts since the last flush (telemetry/kindstats.py); best effort:
        a failure keeps them for the next beat."""
        try:
            await self.kinds.flush(self.cmd, time.time())
        except _BEST_EFFORT as e:
            log.debug("per-kind counts not written: %s", e)

    async def run(self) -> None:
        while True:
            try:
                await self.beat()
            except _BEST_EFFORT as e:
                log.debug("presence heartbeat failed: %s", e)
            await asyncio.sleep(self.interval)
