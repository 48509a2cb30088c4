"""The queue as an operator sees it: one dict of numbers, from a few read-only commands.

`queue_status` (blocking client) and `aqueue_status` (asyncio client) send the same
two pipelined round trips and hand the replies to the same pure function, so the
CLI, the metrics exporter and the tests all read one shape:

  round 1: TIME, XINFO STREAM, XINFO GROUPS, XINFO CONSUMERS, XPENDING (summary),
           XPENDING - + 1 (the oldest pending entry), XLEN of the dead-letter stream
  round 2: XRANGE jobs (<last-delivered-id> + COUNT 1: the oldest undelivered entry

Every age is measured against the server's clock (TIME), because entry ids are
stamped by that clock too; a skewed operator laptop must not invent a backlog.

Trimmed backlog.  MAXLEN ~ and XTRIM ignore the group, so entries the group never
delivered can be dropped.  Trimming removes the oldest entries first, so the alarm
is a *current* state: "the entry after the group's cursor is gone".  We chose:

    behind = last-generated-id > last-delivered-id          (something came after it)
             and (stream empty or first-entry id > the id right after last-delivered-id)
    waiting = lag (XINFO GROUPS; Redis estimates it itself when entries-read is
              unknown) or else entries-added - entries-read        (method "lag"/"counters")
    undelivered_trimmed = max(0, waiting - length)   if behind, else 0
    alarm = behind and (undelivered_trimmed > 0 or the stream is empty)

When the group is behind the stream's start every entry left is undelivered, so
waiting - length is the number of never-delivered entries that were trimmed: this is
the brief's "entries-added > entries-read + length".  The counters alone are not
enough: Redis never re-syncs entries-read after a trim, so `lag` keeps counting the
lost entries forever, and "entries-added > entries-read + length" would stay true
after the group has caught up.  Requiring `behind` makes the alarm clear once the
group reads past the gap (the worker's `deleted` counter keeps the event).  The ids
alone are not enough either: ids are timestamps, not contiguous, so a first entry
newer than the cursor can also mean that only delivered entries were trimmed.
With no counters at all (method "ids") the alarm is that heuristic.  Known blind
spot: lag inflated by an older loss, then every delivered entry trimmed, then new
entries not yet read; and XDEL holes (nothing in stagedoor XDELs the job stream).

Missing stream or group are reported (`exists: False`), never raised.  Any other
Redis error (WRONGTYPE on the key, say) is raised as InspectError with one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

from ..config import Settings

__all__ = ["InspectError", "aqueue_status", "build_status", "id_ms", "parse_id",
           "queue_gauges", "queue_status"]


class InspectError(RuntimeError):
    """Redis answered, but not with a queue we can read; the message is one line."""


Command = tuple[Any, ...]


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
    return [("XRANGE", settings.stream, f"({last}", "+", "COUNT", 1)]


def _now_ms(time_reply: Any) -> int:
    seconds, micros = (int(_text(x)) for x in list(time_reply)[:2])
    return seconds * 1000 + micros // 1000


def _entry_id(entry: Any) -> str | None:
    """first-entry / last-entry of XINFO STREAM: [id, fields] or None."""
    if not entry:
        return None
    return str(_text(entry[0]))


def _next_id(entry_id: tuple[int, int]) -> tuple[int, int]:
    ms, seq = entry_id
    return (ms, seq + 1) if seq < 2**64 - 1 else (ms + 1, 0)


def _trimmed(stream: dict[str, Any], group: dict[str, Any]) -> dict[str, Any]:
    """Is the group's next entry gone?  See the module docstring for the rule."""
    cursor = parse_id(group["last_delivered_id"] or "0-0")
    first = stream["first_id"]
    newest = parse_id(stream["last_generated_id"] or "0-0")
    length, lag = stream["length"], group["lag"]
    read, added = group["entries_read"], stream["entries_added"]
    behind = newest > cursor and (first is None or parse_id(first) > _next_id(cursor))
    if lag is not None:
        waiting, method = lag, "lag"
    elif read is not None and added is not None:
        waiting, method = added - read, "counters"
    else:
        waiting, method = None, "ids"
    if not behind:
        return {"alarm": False, "undelivered_trimmed": 0, "method": method}
    if waiting is None:
        # Empty stream: entries up to last-generated-id were added after the cursor and
        # are all gone, a certain loss. Otherwise only the ids say so: a heuristic.
        return {"alarm": True, "undelivered_trimmed": None, "method": method}
    lost = max(0, waiting - length)
    return {"alarm": lost > 0 or length == 0, "undelivered_trimmed": lost, "method": method}


def build_status(settings: Settings, first: Sequence[Any], second: Sequence[Any]) -> dict[str, Any]:
    """Turn the raw replies of the two rounds into the status dict (pure; no I/O)."""
    s = settings
    names = ("TIME", "XINFO STREAM", "XINFO GROUPS", "XINFO CONSUMERS", "XPENDING",
             "XPENDING - + 1", "XLEN")
    for reply, name in zip(first, names, strict=True):
        _check(reply, f"{name} {s.dead_stream if name == 'XLEN' else s.stream}")
    for reply in second:
        _check(reply, f"XRANGE {s.stream}")
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
            row = {"name": str(_text(c.get("name"))), "pending": _int(c.get("pending")) or 0,
                   "idle_ms": _int(c.get("idle")) or 0}
            if "inactive" in c:  # Redis >= 7.2: ms since the last successful read
                row["inactive_ms"] = _int(c.get("inactive"))
            consumers.append(row)
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
    queue_age_ms: int | None = None
    if graw is not None and stream_exists:
        queue_age_ms = 0
        entries = second[0] if second else []
        if entries:
            undelivered_id = str(_text(entries[0][0]))
            queue_age_ms = max(0, now - id_ms(undelivered_id))
    if graw is not None and stream_exists:
        trimmed = _trimmed(stream, group)
    else:
        trimmed = {"alarm": False, "undelivered_trimmed": None, "method": "none"}
    return {
        "time_ms": now,
        "stream": stream,
        "group": group,
        "pending": pending,
        "consumers": consumers,
        "oldest_undelivered_id": undelivered_id,
        "queue_age_ms": queue_age_ms,
        "trimmed_backlog": trimmed,
        "dead": {"name": s.dead_stream, "length": _int(first[6]) or 0},
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
        if group.get("lag") is not None:
            out["lag"] = float(group["lag"])
        oldest = pending.get("oldest")
        out["oldest_pending_age_seconds"] = (oldest or {}).get("age_ms", 0) / 1000
    if status.get("queue_age_ms") is not None:
        out["queue_age_seconds"] = float(status["queue_age_ms"]) / 1000
    out["trimmed_backlog"] = 1.0 if trimmed.get("alarm") else 0.0
    if trimmed.get("undelivered_trimmed") is not None:
        out["trimmed_undelivered_entries"] = float(trimmed["undelivered_trimmed"])
    dead = status.get("dead") or {}
    if "length" in dead:
        out["dead_letter_length"] = float(dead["length"])
    return out
