"""The queue as an operator sees it: one dict of numbers, from a few read-only commands.

`queue_status` (blocking client) and `aqueue_status` (asyncio client) send the same
two pipelined round trips and hand the replies to the same pure function, so the
CLI, the metrics exporter and the tests all read one shape:

  round 1: TIME, XINFO STREAM, XINFO GROUPS, XINFO CONSUMERS, XPENDING (summary),
           XPENDING - + 1 (the oldest pending entry), XLEN of the dead-letter stream,
           GET stagedoor:dead-trimmed:<stream> (dead letters MAXLEN ~ dead_maxlen trimmed)
  round 2: XRANGE jobs (<last-delivered-id> + COUNT n: the oldest undelivered entry
           (and up to STATUS_SCAN of them, to count them: see "Undelivered"),
           HMGET stagedoor:trimmed:<stream> count gap_end skew unread_skew at at_read
           gap_at gap_lost: jobs trimmed unread so far, and the last exact count

Every age is measured against the server's clock (TIME), because entry ids are
stamped by that clock too; a skewed operator laptop must not invent a backlog.

Trimmed backlog.  MAXLEN ~ and XTRIM ignore the group, so entries the group never
delivered can be dropped.  The rule and its counters are stagedoor.stream.backlog's
(read-only twin of the accounting the producer and worker slot 0 do in Redis):

    undelivered_trimmed = counted (stagedoor:trimmed:<stream>, `count`)
                          + entries-added - entries-read - length   while behind the gap
    alarm = lost entries not yet counted, or the group is still before the gap

entries-read is taken as 0 for a group that never delivered (Redis reports it as
unknown after `XGROUP CREATE ... $ MKSTREAM` and then estimates the lag from the
stream's length, which hid every loss of a group that had not read yet), and lag
is never trusted alone (Valkey may say 0 after a trim).  The alarm clears once the
group reads past the gap; the count stays (metric stagedoor_trimmed_unread_total).
With no counters at all (method "ids") the alarm is the ids' heuristic: the first
entry is newer than the id right after the cursor.

Undelivered (`undelivered`, what --check, the lag gauge and --watch read): the
entries after the group's cursor counted from the stream, not XINFO's lag, which is
entries-added - entries-read and stays too high after a failover to a Redis 7.0
replica (its entries-read is copied only on a full resync; docs/scaling.md).  O(1)
when the group is caught up or behind the first entry; else round 2's XRANGE reads
up to STATUS_SCAN entries after the cursor (Redis's lag is an upper bound, so it says
how many suffice); beyond that, XINFO's lag.  `group.lag` stays XINFO's own.

Consumers: `idle_ms` is XINFO CONSUMERS' idle; `inactive_ms` (ms since the last
successful read or claim) is there on servers that report it (Redis >= 7.2, Valkey)
and None elsewhere: detected from the reply, not from a version string.

`watch_sample` turns two statuses in a row into throughput and time to drain (what
`status --watch` prints and the console's overview charts).

Missing stream or group are reported (`exists: False`), never raised.  Any other
Redis error (WRONGTYPE on the key, say) is raised as InspectError with one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

from ..config import Settings
from ..errors import StagedoorError
from ..stream import backlog
from ..stream.keys import dead_trimmed_key, trimmed_key

__all__ = ["MAX_ID_MS", "BadEntryId", "InspectError", "aqueue_status", "build_status",
           "check_id", "id_ms", "memory_from_info", "parse_id", "queue_gauges",
           "queue_status", "redis_memory", "valid_id", "watch_sample"]


class InspectError(StagedoorError, RuntimeError):
    """Redis answered, but not with a queue we can read; the message is one line."""


Command = tuple[Any, ...]


# The newest time a Redis clock can stamp that a date can show: 9999-12-31T23:59:59.999Z.
# Redis itself takes any 64-bit millisecond part, but no entry stagedoor adds (XADD *,
# the server's clock) is stamped later, and no page or line could show its time.
MAX_ID_MS = 253_402_300_799_999
MAX_SEQ = 2**64 - 1
_ENTRY_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")


class BadEntryId(StagedoorError, ValueError):
    """An entry id given by the operator that is malformed or out of range (one line)."""


def check_id(text: str) -> str:
    """An entry id as the operator gave it, if Redis could have stamped it: digits-digits,
    the time at most MAX_ID_MS (year 9999), the sequence at most 2**64 - 1.  Else
    BadEntryId with one line (the CLI's exit 2, the page's 400)."""
    m = _ENTRY_ID.fullmatch(text)
    if m is None:
        raise BadEntryId(f"{text[:60]!r} is not a stream entry id like 1758200000000-0")
    if int(m[1]) > MAX_ID_MS:
        raise BadEntryId(f"entry id {text}: its time is past the year 9999 (the millisecond "
                         f"part is at most {MAX_ID_MS})")
    if int(m[2]) > MAX_SEQ:
        raise BadEntryId(f"entry id {text}: the sequence part is at most {MAX_SEQ}")
    return text


def valid_id(text: str | bytes | None) -> bool:
    """True for an id check_id accepts (a stored dead:source_id is anyone's text)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        check_id(text or "")
    except BadEntryId:
        return False
    return True


def parse_id(entry_id: str | bytes) -> tuple[int, int]:
    """'1758200000000-3' -> (1758200000000, 3)."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def id_ms(entry_id: str | bytes) -> int:
    """The millisecond timestamp Redis put in an entry id: when the entry was added."""
    return parse_id(entry_id)[0]


def _text(value: Any) -> Any:
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bytes | str):
        return int(value)
    return int(value)


def _pairs(reply: Any) -> dict[str, Any]:
    """A flat [name, value, ...] RESP2 reply (or a dict) as {str: value}."""
    if isinstance(reply, Mapping):
        return {str(_text(k)): v for k, v in reply.items()}
    items = list(reply or [])
    return {str(_text(items[i])): items[i + 1] for i in range(0, len(items) - 1, 2)}


def _is_missing(reply: Any) -> bool:
    """Errors that mean 'no such stream' or 'no such group', which we report, not raise."""
    if not isinstance(reply, redis.ResponseError):
        return False
    text = str(reply)
    return text.startswith("NOGROUP") or "no such key" in text.lower()


def _check(reply: Any, what: str) -> Any:
    if isinstance(reply, Exception) and not _is_missing(reply):
        first = str(reply).splitlines()[0] if str(reply) else type(reply).__name__
        raise InspectError(f"{what}: {first}")
    return reply


def _first_commands(settings: Settings) -> list[Command]:
    s = settings
    return [
        ("TIME",),
        ("XINFO", "STREAM", s.stream),
        ("XINFO", "GROUPS", s.stream),
        ("XINFO", "CONSUMERS", s.stream, s.group),
        ("XPENDING", s.stream, s.group),
        ("XPENDING", s.stream, s.group, "-", "+", 1),
        ("XLEN", s.dead_stream),
        ("GET", dead_trimmed_key(s)),
    ]


def _find_group(groups_reply: Any, name: str) -> dict[str, Any] | None:
    if isinstance(groups_reply, Exception) or not groups_reply:
        return None
    for raw in groups_reply:
        group = _pairs(raw)
        if _text(group.get("name")) == name:
            return group
    return None


def _second_commands(settings: Settings, first: Sequence[Any]) -> list[Command]:
    """The oldest undelivered entry: the first one after the group's last-delivered-id."""
    group = _find_group(first[2], settings.group)
    if isinstance(first[1], Exception) or group is None:
        return []
    last = _text(group.get("last-delivered-id")) or "0-0"
    return [("XRANGE", settings.stream, f"({last}", "+", "COUNT", _scan_count(group)),
            ("HMGET", trimmed_key(settings), "count", "gap_end", "skew", "unread_skew",
             "at", "at_read", "gap_at", "gap_lost")]


# Undelivered entries status reads to count them (not to trust the group's counters).
STATUS_SCAN = 1000


def _scan_count(group: Mapping[str, Any]) -> int:
    """How many entries after the cursor to read (the first is the oldest undelivered,
    for the queue age): all of them when Redis's lag, an upper bound (a stale
    entries-read is only ever too low), says there are at most STATUS_SCAN, else
    STATUS_SCAN + 1, which counts them where the lag was wrong and they are fewer."""
    lag = _int(group.get("lag"))
    if lag is None or lag > STATUS_SCAN:
        return STATUS_SCAN + 1
    return max(lag, 0) + 1


def _undelivered(stream: Mapping[str, Any], group: Mapping[str, Any],
                 entries: Sequence[Any], asked: int) -> int | None:
    """Entries after the group's cursor, from the stream itself (never entries-read,
    which a promoted Redis 7.0 replica has stale): None if too many to count here."""
    cursor = parse_id(group.get("last_delivered_id") or "0-0")
    newest = parse_id(stream.get("last_generated_id") or "0-0")
    if cursor >= newest:
        return 0
    first = stream.get("first_id")
    if first is None or parse_id(first) > cursor:
        return int(stream.get("length") or 0)
    return len(entries) if len(entries) < asked else None


def _now_ms(time_reply: Any) -> int:
    seconds, micros = (int(_text(x)) for x in list(time_reply)[:2])
    return seconds * 1000 + micros // 1000


def _entry_id(entry: Any) -> str | None:
    """first-entry / last-entry of XINFO STREAM: [id, fields] or None."""
    if not entry:
        return None
    return str(_text(entry[0]))


def build_status(settings: Settings, first: Sequence[Any], second: Sequence[Any]) -> dict[str, Any]:
    """Turn the raw replies of the two rounds into the status dict (pure; no I/O)."""
    s = settings
    names = ("TIME", "XINFO STREAM", "XINFO GROUPS", "XINFO CONSUMERS", "XPENDING",
             "XPENDING - + 1", "XLEN", "GET")
    for reply, name in zip(first, names, strict=False):  # GET may be left out: 0
        key = {"XLEN": s.dead_stream, "GET": dead_trimmed_key(s)}.get(name, s.stream)
        _check(reply, f"{name} {key}")
    for reply, name in zip(second, ("XRANGE", "HMGET"), strict=False):
        _check(reply, f"{name} {s.stream if name == 'XRANGE' else trimmed_key(s)}")
    now = _now_ms(first[0])
    info = first[1]
    stream_exists = not isinstance(info, Exception)
    si = _pairs(info) if stream_exists else {}
    stream: dict[str, Any] = {
        "name": s.stream,
        "exists": stream_exists,
        "length": _int(si.get("length")) or 0,
        "first_id": _entry_id(si.get("first-entry")),
        "last_id": _entry_id(si.get("last-entry")),
        "last_generated_id": _text(si.get("last-generated-id")),
        "entries_added": _int(si.get("entries-added")),
    }
    graw = _find_group(first[2], s.group)
    group: dict[str, Any] = {
        "name": s.group,
        "exists": graw is not None,
        "last_delivered_id": _text(graw.get("last-delivered-id")) if graw else None,
        "entries_read": _int(graw.get("entries-read")) if graw else None,
        "lag": _int(graw.get("lag")) if graw else None,
        "consumers": _int(graw.get("consumers")) if graw else 0,
    }
    consumers: list[dict[str, Any]] = []
    if graw is not None and not isinstance(first[3], Exception):
        for raw in first[3]:
            c = _pairs(raw)
            consumers.append({"name": str(_text(c.get("name"))),
                              "pending": _int(c.get("pending")) or 0,
                              "idle_ms": _int(c.get("idle")) or 0,
                              # Redis >= 7.2 and Valkey: ms since the last successful
                              # read; -1 for a consumer that never read one.
                              "inactive_ms": _int(c.get("inactive"))})
    pending: dict[str, Any] = {"count": 0, "oldest": None, "by_consumer": {}}
    summary = first[4]
    if graw is not None and not isinstance(summary, Exception) and summary:
        pending["count"] = _int(summary[0]) or 0
        pending["by_consumer"] = {str(_text(name)): int(_text(n)) for name, n in summary[3] or []}
        oldest = first[5]
        if pending["count"] and oldest and not isinstance(oldest, Exception):
            eid, consumer, idle, deliveries = oldest[0]
            eid = str(_text(eid))
            pending["oldest"] = {"id": eid, "consumer": str(_text(consumer)),
                                 "age_ms": max(0, now - id_ms(eid)), "idle_ms": int(idle),
                                 "deliveries": int(deliveries)}
    undelivered_id: str | None = None
    # Counted from the stream where it can be (see _undelivered), else XINFO's lag.
    undelivered: int | None = group["lag"]
    queue_age_ms: int | None = None
    if graw is not None and stream_exists:
        queue_age_ms = 0
        entries = second[0] if second else []
        exact = _undelivered(stream, group, entries, _scan_count(graw))
        undelivered = group["lag"] if exact is None else exact
        if entries:
            undelivered_id = str(_text(entries[0][0]))
            # An id ahead of the server's clock (a producer's or a master's clock ran
            # ahead: Redis keeps every later id at that time) says nothing of when the
            # entry was queued: its age is unknown, never 0 (ids_ahead_ms says why).
            age = now - id_ms(undelivered_id)
            queue_age_ms = age if age >= 0 else None
    if graw is not None and stream_exists:
        counted = second[1] if len(second) > 1 else None
        fields = ("count", "gap_end", "skew", "unread_skew", "at", "at_read", "gap_at",
                  "gap_lost")
        values = list(counted) if isinstance(counted, list | tuple) else [None] * 8
        raw = dict(zip(fields, values, strict=False))
        ints = {k: _int(raw.get(k)) for k in ("count", "skew", "unread_skew", "at_read",
                                              "gap_lost")}
        texts = {k: _text(raw.get(k)) for k in ("gap_end", "at", "gap_at")}
        trimmed = backlog.status(stream, group, {**ints, **texts})
    else:
        trimmed = {"alarm": False, "undelivered_trimmed": None, "method": "none"}
    return {
        "time_ms": now,
        "stream": stream,
        "group": group,
        "pending": pending,
        "consumers": consumers,
        "oldest_undelivered_id": undelivered_id,
        "undelivered": undelivered,
        "queue_age_ms": queue_age_ms,
        # How far the stream's newest id is ahead of the server's clock (0: not ahead).
        "ids_ahead_ms": (max(0, id_ms(stream["last_generated_id"]) - now)
                         if stream_exists and stream["last_generated_id"] else 0),
        "trimmed_backlog": trimmed,
        # trimmed: dead letters MAXLEN ~ maxlen dropped, counted by the dead-letter script
        "dead": {"name": s.dead_stream, "length": _int(first[6]) or 0,
                 "maxlen": s.dead_maxlen,
                 "trimmed": (_int(first[7]) or 0) if len(first) > 7 else 0},
    }


def _run_sync(client: redis.Redis, commands: Sequence[Command]) -> list[Any]:
    if not commands:
        return []
    pipe: Any = client.pipeline(transaction=False)  # its execute_command may be untyped
    for cmd in commands:
        pipe.execute_command(*cmd)
    return list(pipe.execute(raise_on_error=False))


async def _run_async(client: aioredis.Redis, commands: Sequence[Command]) -> list[Any]:
    if not commands:
        return []
    pipe = client.pipeline(transaction=False)
    for cmd in commands:
        pipe.execute_command(*cmd)
    return list(await pipe.execute(raise_on_error=False))


def _raise_transport(replies: Sequence[Any]) -> None:
    """A pipeline reports a lost connection per command; raise it like a single call."""
    for reply in replies:
        if isinstance(reply, redis.ConnectionError | redis.TimeoutError):
            raise reply


def queue_status(client: redis.Redis, settings: Settings) -> dict[str, Any]:
    """The queue's numbers (see the module docstring) with a blocking client."""
    first = _run_sync(client, _first_commands(settings))
    _raise_transport(first)
    second = _run_sync(client, _second_commands(settings, first))
    _raise_transport(second)
    return build_status(settings, first, second)


async def aqueue_status(client: aioredis.Redis, settings: Settings) -> dict[str, Any]:
    """queue_status for an asyncio client (the worker in slot 0 sends it with heartbeats)."""
    first = await _run_async(client, _first_commands(settings))
    _raise_transport(first)
    second = await _run_async(client, _second_commands(settings, first))
    _raise_transport(second)
    return build_status(settings, first, second)


def redis_memory(client: redis.Redis) -> dict[str, Any] | None:
    """Redis's memory against maxmemory, for `stagedoor status`: None when INFO is not
    allowed (the worker's ACL user has no INFO; an operator's user should).

    full: writes are refused now (used above maxmemory under noeviction), the state in
    which the workers pause (worker/outage.py)."""
    try:
        info = client.info("memory")
    except redis.ResponseError:
        return None
    return memory_from_info(info)


def memory_from_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """redis_memory's numbers from an INFO reply that has the memory section (the web
    console asks for it together with the server and replication sections)."""
    used, limit = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
    policy = str(info.get("maxmemory_policy", ""))
    return {"used_bytes": used, "maxmemory_bytes": limit, "policy": policy,
            "full": bool(limit) and used > limit and policy == "noeviction"}


def queue_gauges(status: Mapping[str, Any] | None) -> dict[str, float]:
    """The numbers of a status dict that are gauges, by metric suffix (for the exporter).

    Values that are unknown (missing stream or group) are left out rather than
    reported as 0.
    """
    if not status:
        return {}
    out: dict[str, float] = {}
    stream = status.get("stream") or {}
    group = status.get("group") or {}
    pending = status.get("pending") or {}
    trimmed = status.get("trimmed_backlog") or {}
    if stream.get("exists"):
        out["stream_length"] = float(stream.get("length") or 0)
    if group.get("exists"):
        out["pending"] = float(pending.get("count") or 0)
        lag = status.get("undelivered", group.get("lag"))
        if lag is not None:
            out["lag"] = float(lag)
        oldest = pending.get("oldest")
        out["oldest_pending_age_seconds"] = (oldest or {}).get("age_ms", 0) / 1000
    if status.get("queue_age_ms") is not None:
        out["queue_age_seconds"] = float(status["queue_age_ms"]) / 1000
    if stream.get("exists"):
        out["stream_ids_ahead_seconds"] = float(status.get("ids_ahead_ms") or 0) / 1000
    out["trimmed_backlog"] = 1.0 if trimmed.get("alarm") else 0.0
    if trimmed.get("undelivered_trimmed") is not None:
        out["trimmed_undelivered_entries"] = float(trimmed["undelivered_trimmed"])
    dead = status.get("dead") or {}
    if "length" in dead:
        out["dead_letter_length"] = float(dead["length"])
    if "maxlen" in dead:
        out["dead_letter_maxlen"] = float(dead["maxlen"])
    return out


def watch_sample(status: dict[str, Any], previous: tuple[float, int] | None
                 ) -> dict[str, Any]:
    """One --watch line's numbers; throughput from the counter of the previous sample.

    done = entries the group read minus those still pending (acknowledged ones, whether
    handled or dead-lettered); rate = its change per second of Redis time; time to
    drain = (waiting + pending) / rate."""
    group, stream = status["group"], status["stream"]
    pending = int(status["pending"]["count"])
    read = group.get("entries_read")
    if read is None and stream.get("entries_added") is not None and group.get("lag") is not None:
        read = int(stream["entries_added"]) - int(group["lag"])
    done = max(0, int(read or 0) - pending)
    waiting = int(status.get("undelivered", group.get("lag")) or 0)
    now = status["time_ms"] / 1000
    rate: float | None = None
    drain: float | None = None
    if previous is not None and now > previous[0]:
        rate = max(0.0, (done - previous[1]) / (now - previous[0]))
        backlog = waiting + pending
        drain = 0.0 if backlog == 0 else (backlog / rate if rate > 0 else None)
    return {"time_ms": status["time_ms"], "waiting": waiting, "pending": pending,
            "queue_age_ms": status["queue_age_ms"], "dead": int(status["dead"]["length"]),
            "done": done, "rate": rate, "drain_seconds": drain,
            "trimmed_alarm": bool(status["trimmed_backlog"]["alarm"])}
