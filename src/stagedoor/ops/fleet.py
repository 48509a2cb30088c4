"""The fleet: the pause flag, and who is alive (the registry the workers write).

Pause.  One key, `stagedoor:paused:<stream>` (keys.paused_key, on the stream's hash tag),
holds {"since", "by", "reason"} as JSON while the fleet is paused.  Each worker reads it
at its heartbeat (worker/presence.py): paused, it finishes what it holds, reads and
reclaims nothing, and keeps heartbeating.  `resume` does not delete the key: it writes
{"resumed", "by"} in its place, so that a worker can tell an operator's resume from a
flag lost with Redis's data (FLUSHDB, a restart without persistence, an eviction): it
reads again at its next heartbeat after a resume, and stays paused, saying "pause flag
disappeared", when the key is gone.  `pause` sets it with NX (a second pause keeps the
first one's time) or over a resumed record.  One key per stream either way.

Registry.  Each worker, at each presence beat (worker/presence.py: its heartbeat,
at least a second apart), in the pipeline that reads the flag:

    SET stagedoor:worker:<stream>:<consumer> <json> PX <presence_ttl_ms>
    HSET stagedoor:fleet:<stream> <consumer> <ms>        (the names, once a minute)
    EXPIRE stagedoor:fleet:<stream> 86400                (with the HSET)

A host that dies stops writing and its record expires after presence_ttl_ms; the name
stays in the fleet hash (bounded by hosts x slots, gone a day after the last worker).
`fleet()` reads, in two round trips: TIME, HGETALL of the names, XINFO CONSUMERS,
GET of the flag; then GET of each record.  A consumer with pending entries and no live
record is flagged `orphaned`: nothing will run its entries until a worker of that name
comes back or another worker reclaims them after claim_idle_ms.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import orjson
import redis.asyncio as aioredis

from ..config import Settings
from ..stream.keys import fleet_key, paused_key, presence_key
from .records import Record, now_ms, pairs, pipeline, text

FLEET_TTL_S = 86_400


def presence_ttl_ms(settings: Settings) -> int:
    """How long a presence record outlives its last beat: five beats (a beat is the
    heartbeat, at least a second apart: worker/presence.py), so at least 5 s."""
    return max(5_000, int(settings.heartbeat_interval * 5_000))


@dataclasses.dataclass
class PauseState(Record):
    paused: bool
    since: float | None = None  # epoch seconds the flag was set
    by: str | None = None
    reason: str | None = None
    key: str = ""
    resumed: float | None = None  # epoch seconds of the resume the flag records, if so


def parse_pause(raw: Any, key: str) -> PauseState:
    """The flag's value -> its state: absent (never paused, or lost), a resumed record,
    or a pause (any other value: a flag that cannot be read still pauses)."""
    if raw is None:
        return PauseState(paused=False, key=key)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    by = str(doc["by"]) if doc.get("by") is not None else None
    resumed = doc.get("resumed")
    if isinstance(resumed, int | float) and not isinstance(resumed, bool):
        return PauseState(paused=False, by=by, key=key, resumed=float(resumed))
    since = doc.get("since")
    return PauseState(paused=True, since=float(since) if isinstance(since, int | float) else None,
                      by=str(doc["by"]) if doc.get("by") is not None else None,
                      reason=str(doc["reason"]) if doc.get("reason") is not None else None,
                      key=key)


async def pause_state(client: aioredis.Redis, settings: Settings) -> PauseState:
    key = paused_key(settings)
    (raw,) = await pipeline(client, [("GET", key)])
    return parse_pause(raw, key)


async def pause(client: aioredis.Redis, settings: Settings, *, by: str = "",
                reason: str = "") -> PauseState:
    """Set the flag (SET NX: an earlier pause keeps its time; over a resumed record,
    SET); returns the state now."""
    key = paused_key(settings)
    doc = orjson.dumps({"since": round(time.time(), 3), "by": by or None,
                        "reason": reason or None})
    _set, raw = await pipeline(client, [("SET", key, doc, "NX"), ("GET", key)])
    state = parse_pause(raw, key)
    if not state.paused:  # a resumed record (or the key went meanwhile): pause over it
        _set, raw = await pipeline(client, [("SET", key, doc), ("GET", key)])
        state = parse_pause(raw, key)
    return state


async def resume(client: aioredis.Redis, settings: Settings, *, by: str = "") -> PauseState:
    """Record a resume in the flag's place (not a DEL: a lost flag stays paused, an
    operator's resume does not); returns the state the flag had (paused False if it
    was not set).  Also when the flag is gone: workers that saw it disappear read again."""
    key = paused_key(settings)
    doc = orjson.dumps({"resumed": round(time.time(), 3), "by": by or None})
    raw, _set = await pipeline(client, [("GET", key), ("SET", key, doc)])
    return parse_pause(raw, key)


@dataclasses.dataclass
class WorkerPresence(Record):
    """One live worker, as it described itself at its last heartbeat."""
    consumer: str
    host: str
    slot: int
    pid: int
    version: str
    renderer: str | None  # native, reference, or None (no render handler)
    started: float  # epoch seconds
    handled: int
    in_flight: int
    rss_bytes: int
    paused: bool
    seen_ms: int  # the worker's clock at its last heartbeat
    age_ms: int  # now (Redis TIME) minus seen_ms: how fresh the record is


@dataclasses.dataclass
class ConsumerRow(Record):
    """A consumer of the group (XINFO CONSUMERS) beside its process, if any is alive."""
    name: str
    pending: int
    idle_ms: int
    inactive_ms: int | None
    alive: bool  # a presence record of this name exists
    orphaned: bool  # pending entries and no live process behind the name


@dataclasses.dataclass
class Fleet(Record):
    time_ms: int
    paused: PauseState
    workers: list[WorkerPresence]
    consumers: list[ConsumerRow]
    orphaned: list[str]  # consumer names holding pending entries with no live process


def presence_record(raw: Any, now: int) -> WorkerPresence | None:
    try:
        d = orjson.loads(raw)
        return WorkerPresence(
            consumer=str(d["consumer"]), host=str(d["host"]), slot=int(d["slot"]),
            pid=int(d["pid"]), version=str(d["version"]),
            renderer=None if d.get("renderer") is None else str(d["renderer"]),
            started=float(d["started"]), handled=int(d["handled"]),
            in_flight=int(d["in_flight"]), rss_bytes=int(d["rss_bytes"]),
            paused=bool(d["paused"]), seen_ms=int(d["seen_ms"]),
            age_ms=max(0, now - int(d["seen_ms"])))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None  # not ours, or from another version: not shown


async def fleet(client: aioredis.Redis, settings: Settings) -> Fleet:
    """The live workers, the group's consumers beside them, and the pause flag."""
    s = settings
    first = await pipeline(client, [
        ("TIME",), ("HGETALL", fleet_key(s)),
        ("XINFO", "CONSUMERS", s.stream, s.group), ("GET", paused_key(s))])
    now = now_ms(first[0])
    names = sorted(pairs(first[1]) if not isinstance(first[1], Exception) else {})
    consumers_raw = [] if isinstance(first[2], Exception) else list(first[2] or [])
    consumers = [pairs(c) for c in consumers_raw]
    every = sorted(set(names) | {text(c.get("name")) for c in consumers})
    records = await pipeline(client, [("GET", presence_key(s, n)) for n in every])
    workers: list[WorkerPresence] = []
    for raw in records:
        if raw is None or isinstance(raw, Exception):
            continue
        w = presence_record(raw, now)
        if w is not None:
            workers.append(w)
    alive = {w.consumer for w in workers}
    rows = []
    for c in consumers:
        name = text(c.get("name"))
        pending = int(c.get("pending") or 0)
        inactive = c.get("inactive")
        rows.append(ConsumerRow(
            name=name, pending=pending, idle_ms=int(c.get("idle") or 0),
            inactive_ms=None if inactive is None else int(inactive),
            alive=name in alive, orphaned=pending > 0 and name not in alive))
    pause_raw = None if isinstance(first[3], Exception) else first[3]
    return Fleet(time_ms=now, paused=parse_pause(pause_raw, paused_key(s)),
                 workers=sorted(workers, key=lambda w: (w.host, w.slot)),
                 consumers=rows, orphaned=[r.name for r in rows if r.orphaned])
