"""The consumer group: create it (MKSTREAM), and tell the errors that say it is missing.

Writers ensure the group before (in the same round trip as) their XADD, so no entry
can be added before the group exists and be skipped by the group's `$` start; that
also covers a Redis that restarted empty.  The enqueue script (producer.py) creates
the group itself, in the same script as its XADDs; these are for the readers and the
tools.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis

from ..config import Settings


def is_busygroup(exc: BaseException) -> bool:
    return isinstance(exc, redis.ResponseError) and str(exc).startswith("BUSYGROUP")


# Redis 7.0's answer to a read blocked on a stream that DEL or FLUSHDB removed (Valkey 8
# and Redis 8 answer NOGROUP).  Only this text: "UNBLOCKED" alone is also CLIENT UNBLOCK
# ERROR's prefix.
_STREAM_DELETED = "UNBLOCKED the stream key no longer exists"


def is_nogroup(exc: BaseException) -> bool:
    """The group is missing: destroyed (XGROUP DESTROY), or its stream deleted (DEL,
    FLUSHDB, a restart without data); both are mended by recreating it (MKSTREAM)."""
    if not isinstance(exc, redis.ResponseError):
        return False
    text = str(exc)
    return text.startswith("NOGROUP") or text.startswith(_STREAM_DELETED)


def group_create_args(settings: Settings) -> tuple[Any, ...]:
    return ("XGROUP", "CREATE", settings.stream, settings.group, "$", "MKSTREAM")


async def ensure_group(client: aioredis.Redis, settings: Settings) -> bool:
    """XGROUP CREATE ... $ MKSTREAM; BUSYGROUP is success. True if it was created now."""
    try:
        await client.execute_command(*group_create_args(settings))
        return True
    except redis.ResponseError as e:
        if is_busygroup(e):
            return False
        raise


def ensure_group_sync(client: redis.Redis, settings: Settings) -> bool:
    try:
        client.execute_command(*group_create_args(settings))
        return True
    except redis.ResponseError as e:
        if is_busygroup(e):
            return False
        raise
