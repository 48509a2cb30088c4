"""The stream as a queue: ensure the group, enqueue, ack, dead-letter.

Writers ensure the group before (in the same round trip as) their XADD, so no entry
can be added before the group exists and be skipped by the group's `$` start; that
also covers a Redis that restarted empty.

Dead-lettering is one Lua script rather than MULTI: the XADD to jobs:dead runs only
if the XACK removed the entry from the pending list.  A MULTI is atomic too, but
when its reply is lost and the worker retries, the dead-letter entry is written
twice; the script makes the retry a no-op, so a poison job lands there exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

from ..config import Settings
from .job import Job

DEAD_FIELD_PREFIX = b"dead:"
# Metadata added to a dead-letter entry after the original fields.
DEAD_META = ("error", "source_id", "deliveries", "consumer", "time")

# Writes come last and in this order so that an error leaves the entry pending, not
# lost: Redis does not roll a script back, so an XACK before a failing XADD (OOM,
# a payload too large for unpack) would ack a job that never reached jobs:dead.
_DEAD_LETTER_LUA = """
if ARGV[3] == '1' then
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
  if #pending == 0 then return false end
end
local args = {'XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*'}
for i = 5, #ARGV do args[#args + 1] = ARGV[i] end
local dead_id = redis.call(unpack(args))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return dead_id
"""
# Lua's unpack() stops at ~8000 values; a dead letter keeps the first fields of a
# payload with more (the reason already says what was wrong with it).
MAX_DEAD_FIELDS = 256


def is_busygroup(exc: BaseException) -> bool:
    return isinstance(exc, redis.ResponseError) and str(exc).startswith("BUSYGROUP")


def is_nogroup(exc: BaseException) -> bool:
    return isinstance(exc, redis.ResponseError) and str(exc).startswith("NOGROUP")


def group_create_args(settings: Settings) -> tuple[Any, ...]:
    return ("XGROUP", "CREATE", settings.stream, settings.group, "$", "MKSTREAM")


def xadd_args(settings: Settings, fields: Sequence[bytes | str]) -> tuple[Any, ...]:
    return ("XADD", settings.stream, "MAXLEN", "~", settings.maxlen, "*", *fields)


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


def _ids(replies: list[Any]) -> list[str]:
    """Pipeline replies of [XGROUP CREATE, XADD...]: raise real errors, return the ids."""
    first = replies[0]
    if isinstance(first, Exception) and not is_busygroup(first):
        raise first
    out: list[str] = []
    for reply in replies[1:]:
        if isinstance(reply, Exception):
            raise reply
        out.append(reply.decode() if isinstance(reply, bytes) else str(reply))
    return out


async def enqueue(client: aioredis.Redis, settings: Settings, job: Job) -> str:
    """Add one job (MAXLEN ~) after ensuring the group, in one round trip. Returns its id."""
    return (await enqueue_many(client, settings, [job]))[0]


async def enqueue_many(client: aioredis.Redis, settings: Settings, jobs: Iterable[Job],
                       *, chunk: int = 1000) -> list[str]:
    """The bulk form: pipelined XADDs, `chunk` per round trip."""
    ids: list[str] = []
    for pipe in _pipelines(client, settings, jobs, chunk):
        ids.extend(_ids(await pipe.execute(raise_on_error=False)))
    return ids


def enqueue_sync(client: redis.Redis, settings: Settings, jobs: Iterable[Job],
                 *, chunk: int = 1000) -> list[str]:
    """enqueue_many for callers without an event loop (the CLI, a sync api)."""
    ids: list[str] = []
    for pipe in _pipelines(client, settings, jobs, chunk):
        ids.extend(_ids(pipe.execute(raise_on_error=False)))
    return ids


def _pipelines(client: Any, settings: Settings, jobs: Iterable[Job], chunk: int
               ) -> Iterator[Any]:
    """Pipelines of [XGROUP CREATE, XADD x chunk], for a sync or an asyncio client."""
    batch = list(jobs)
    for start in range(0, len(batch), chunk):
        pipe = client.pipeline(transaction=False)
        pipe.execute_command(*group_create_args(settings))
        for job in batch[start:start + chunk]:
            pipe.execute_command(*xadd_args(settings, job.fields()))
        yield pipe


def dead_letter_fields(fields: Sequence[bytes] | None, *, error: str, source_id: str,
                       deliveries: int, consumer: str) -> list[bytes]:
    """Original fields as they came (duplicates kept) plus dead:* metadata."""
    out = list(fields or [])
    if len(out) > 2 * MAX_DEAD_FIELDS:
        error += f" [dead letter keeps the first {MAX_DEAD_FIELDS} of {len(out) // 2} fields]"
        out = out[:2 * MAX_DEAD_FIELDS]
    meta = (error, source_id, str(deliveries), consumer, f"{time.time():.3f}")
    for name, value in zip(DEAD_META, meta, strict=True):
        out += [DEAD_FIELD_PREFIX + name.encode(), value.encode()]
    return out


def original_fields(dead_fields: Sequence[bytes]) -> list[bytes]:
    """The fields a replay puts back on the job stream: everything but dead:*."""
    out: list[bytes] = []
    for i in range(0, len(dead_fields) - 1, 2):
        if not dead_fields[i].startswith(DEAD_FIELD_PREFIX):
            out += [dead_fields[i], dead_fields[i + 1]]
    return out


class DeadLetter:
    """Move an entry to the dead-letter stream and ack it, atomically and at most once."""

    def __init__(self, client: aioredis.Redis, settings: Settings) -> None:
        self._settings = settings
        self._script = client.register_script(_DEAD_LETTER_LUA)

    async def __call__(self, entry_id: bytes | str, fields: Sequence[bytes] | None, *,
                       error: str, deliveries: int, consumer: str,
                       only_if_pending: bool = True) -> bytes | None:
        """Returns the dead entry's id, or None if the entry was no longer pending."""
        s = self._settings
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        payload = dead_letter_fields(fields, error=error, source_id=eid,
                                     deliveries=deliveries, consumer=consumer)
        result = await self._script(
            keys=[s.stream, s.dead_stream],
            args=[s.group, eid, "1" if only_if_pending else "0", s.dead_maxlen, *payload])
        return result if isinstance(result, bytes) else None
