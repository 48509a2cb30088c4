"""Redis replies read as text, records that turn into JSON, one pipeline: the plumbing
of the per-kind ring's reads (telemetry/kindstats.py) and of the console's operations
(console/fleet, jobs, pending, deadletters).

Every reader takes an asyncio client (stream.connection.async_client, or the console's
console/client.py) whose response callbacks are stripped: replies are bytes and lists,
the same on standalone, Sentinel and Cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

Command = tuple[Any, ...]


class Record:
    """A dataclass that is also a JSON document: `to_json()` is what --json prints."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload, no-any-return]


def text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return "" if value is None else str(value)


def pairs(reply: Any) -> dict[str, Any]:
    """A flat [name, value, ...] reply (or a map) as {str: value}."""
    if isinstance(reply, Mapping):
        return {text(k): v for k, v in reply.items()}
    items = list(reply or [])
    return {text(items[i]): items[i + 1] for i in range(0, len(items) - 1, 2)}


def field_pairs(fields: Sequence[bytes] | None) -> list[tuple[str, str]]:
    """An entry's fields in order, duplicates kept, as text."""
    f = list(fields or [])
    return [(text(f[i]), text(f[i + 1])) for i in range(0, len(f) - 1, 2)]


def field(fields: Sequence[bytes] | None, name: bytes) -> str | None:
    f = list(fields or [])
    for i in range(0, len(f) - 1, 2):
        if f[i] == name:
            return text(f[i + 1])
    return None


def now_ms(time_reply: Any) -> int:
    seconds, micros = (int(text(x)) for x in list(time_reply)[:2])
    return seconds * 1000 + micros // 1000


def raise_transport(replies: Sequence[Any]) -> None:
    for reply in replies:
        if isinstance(reply, redis.ConnectionError | redis.TimeoutError):
            raise reply


async def pipeline(client: aioredis.Redis, commands: Sequence[Command]) -> list[Any]:
    """One round trip, errors returned in place (a lost connection raised)."""
    if not commands:
        return []
    pipe = client.pipeline(transaction=False)
    for cmd in commands:
        pipe.execute_command(*cmd)
    replies = list(await pipe.execute(raise_on_error=False))
    raise_transport(replies)
    return replies
