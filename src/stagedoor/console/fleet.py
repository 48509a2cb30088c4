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

A record is anyone's JSON (another version's, a hand-written one): each field is checked
for its type and range, and a record that fails is listed in `malformed` with the
reason, its name taken from its key, never as a worker (a "paused": "no" is not
paused, a "started": 1e20 is not a time), and never breaks the page or `status`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import orjson
import redis.asyncio as aioredis

from ..config import Settings
from ..errors import StagedoorError

# the keys, their lifetimes and the pause flag's format are stream/keys.py's (the worker
# writes and reads them too); presence_ttl_ms is still read from here by worker/ownership.py
from ..stream.keys import PauseState, fleet_key, parse_pause, paused_key, presence_key
from ..stream.keys import presence_ttl_ms as presence_ttl_ms
from ..telemetry.records import Record, now_ms, pairs, pipeline, text


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
    set_, raw = await pipeline(client, [("SET", key, doc, "NX"), ("GET", key)])
    state = parse_pause(raw, key)
    state.kept_earlier = set_ is None and state.paused
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
class MalformedRecord(Record):
    """A presence record that is not what a worker writes: shown as such, not as a worker."""
    consumer: str  # the name in its key
    reason: str  # one line: the first field that is wrong, and why


@dataclasses.dataclass
class Fleet(Record):
    time_ms: int
    paused: PauseState
    workers: list[WorkerPresence]
    consumers: list[ConsumerRow]
    orphaned: list[str]  # consumer names holding pending entries with no live process
    malformed: list[MalformedRecord] = dataclasses.field(default_factory=list)


MAX_TIME_S = 253_402_300_799  # 9999-12-31T23:59:59Z: a time a date can show
MAX_COUNT = 2**63 - 1


class _Bad(StagedoorError, ValueError):
    pass


def _get(d: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in d:
        raise _Bad(f"no {name}")
    value = d[name]
    # bool is an int to Python, and "no" a true value: only the JSON type itself counts
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise _Bad(f"{name}: {_show(value)} is not {_KINDS.get(kind, 'valid')}")
    return value


_KINDS: dict[Any, str] = {str: "text", bool: "true or false", int: "an integer",
                          (int, float): "a number"}


def _show(value: Any) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(d: dict[str, Any], name: str, hi: int = MAX_COUNT) -> int:
    value: int = _get(d, name, int)
    if not 0 <= value <= hi:
        raise _Bad(f"{name}: {value} is out of range")
    return value


def _time(d: dict[str, Any], name: str) -> float:
    value = float(_get(d, name, (int, float)))
    if not math.isfinite(value) or not 0 <= value <= MAX_TIME_S:
        raise _Bad(f"{name}: {_show(d[name])} is not a time")
    return value


def presence_record(raw: Any, now: int, name: str = "?") -> WorkerPresence | MalformedRecord:
    """A worker's record, or why it is not one (MalformedRecord, named from its key)."""
    try:
        d = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return MalformedRecord(consumer=name, reason="not JSON")
    if not isinstance(d, dict):
        return MalformedRecord(consumer=name, reason="not a JSON object")
    try:
        renderer = d.get("renderer")
        if renderer is not None and not isinstance(renderer, str):
            raise _Bad(f"renderer: {_show(renderer)} is not text")
        seen_ms = _int(d, "seen_ms", MAX_TIME_S * 1000)
        return WorkerPresence(
            consumer=_get(d, "consumer", str), host=_get(d, "host", str),
            slot=_int(d, "slot"), pid=_int(d, "pid"), version=_get(d, "version", str),
            renderer=renderer, started=_time(d, "started"), handled=_int(d, "handled"),
            in_flight=_int(d, "in_flight"), rss_bytes=_int(d, "rss_bytes"),
            paused=_get(d, "paused", bool), seen_ms=seen_ms,
            age_ms=max(0, now - seen_ms))
    except _Bad as e:
        return MalformedRecord(consumer=name, reason=str(e))


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
    malformed: list[MalformedRecord] = []
    for name, raw in zip(every, records, strict=True):
        if raw is None or isinstance(raw, Exception):
            continue
        w = presence_record(raw, now, name)
        if isinstance(w, MalformedRecord):
            malformed.append(w)
        else:
            workers.append(w)
    # a malformed record is still written by something alive under that name
    alive = {w.consumer for w in workers} | {m.consumer for m in malformed}
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
                 consumers=rows, orphaned=[r.name for r in rows if r.orphaned],
                 malformed=malformed)
