"""The producer: enqueue jobs, one script per chunk with the backlog check.

Writers ensure the group before (in the same round trip as) their XADD, so no entry
can be added before the group exists and be skipped by the group's `$` start; that
also covers a Redis that restarted empty.

Failover (Sentinel): replication is asynchronous, so an XADD the master acknowledged
can be missing on the replica that is promoted.  With `wait_replicas` (1 by default
under Sentinel) every round trip of XADDs ends with WAIT: enqueue returns only when
that many replicas have the entries, and raises NotReplicated otherwise (the entries
are on the master, unconfirmed; enqueueing them again is safe, handlers dedupe on
outbox_id).  The producer's client needs a socket timeout above wait_timeout_ms:
connection.sync_client and async_client(producer=True) give it one.

The master changed (errors.master_changed: the server answered as a replica, in any
of its wordings): if the script's own reply says so, nothing of the chunk was written
(a replica writes nothing), and the chunk is sent again on new connections, which a
Sentinel pool opens to the master it asks for again: up to MASTER_TRIES times, with the
worker's reconnect backoff (backoff.reconnect).  If WAIT's reply says so ("WAIT cannot
be used with replica instances": the master was demoted between the XADDs and the WAIT;
"UNBLOCKED ... master -> replica" while WAIT waited), the XADDs went in on a server that
is a replica now, unconfirmed: NotReplicated with their ids, never a retry that would
add them twice unasked.

One plan for both clients: _plan is the whole decision (chunks, what each reply means,
a retry on a new connection after a replica's refusal, which error to raise), as a
generator that yields what it needs done (_Call a chunk's script and WAIT, _Reconnect,
_Sleep) and is sent the answers or thrown the Redis errors; enqueue_many (asyncio) and
enqueue_sync (blocking) only run those steps on their client.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import redis
import redis.asyncio as aioredis

from ..backoff import Backoff
from ..config import Settings
from .backlog import ACCOUNT_LUA, AUDIT_SCAN_CAP
from .enqueue_errors import (
    BacklogFull,
    EnqueueError,
    NotReplicated,
    RedisOutOfMemory,
    _progress,
)
from .errors import OOM_ADVICE, first_line, is_oom, master_changed
from .job import Job
from .keys import trimmed_key

log = logging.getLogger("stagedoor.queue")


def xadd_args(settings: Settings, fields: Sequence[bytes | str]) -> tuple[Any, ...]:
    return ("XADD", settings.stream, "MAXLEN", "~", settings.maxlen, "*", *fields)


def _wait_args(settings: Settings) -> tuple[int, int]:
    return settings.replicas_to_wait, settings.wait_timeout_ms


# One round trip per chunk: count entries trimmed unread, check the backlog, ensure the
# group, XADD what fits (backlog.lua's account() is prepended).
_ENQUEUE_LUA = """
local stream, group, counter = KEYS[1], ARGV[1], ARGV[5]
local maxlen, limit, width = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local jobs = (#ARGV - 7) / width
-- The stream is counted (not the group's counters) when the chunk would warn.
local r = account(stream, group, counter, tonumber(ARGV[6]) - jobs, tonumber(ARGV[7]),
                  limit - jobs, 'enqueue')
local backlog, lost = 0, 0
if r == nil then
  local added, info = 0, redis.pcall('XINFO', 'STREAM', stream)
  if not info.err then added = fields(info)['entries-added'] end
  -- ENTRIESREAD: the group's counter is exact from its first moment, so what it
  -- has not read is entries-added minus entries-read, also after a trim.
  redis.call('XGROUP', 'CREATE', stream, group, '$', 'MKSTREAM', 'ENTRIESREAD', added)
else
  backlog, lost = r[1], r[2]
end
local n = jobs
if backlog >= 0 then n = math.max(0, math.min(jobs, limit - backlog)) end
local out = {backlog, lost}
for j = 0, n - 1 do
  local args = {'XADD', stream, 'MAXLEN', '~', maxlen, '*'}
  for i = 1, width do args[#args + 1] = ARGV[7 + j * width + i] end
  out[#out + 1] = redis.call(unpack(args))
end
return out
"""
ENQUEUE_LUA = ACCOUNT_LUA + _ENQUEUE_LUA
JOB_WIDTH = 10  # Job.fields(): five names, five values
# Entries the enqueue script may read to check a warning (a log line; a refusal is
# checked on the whole stream): ~3 ms of Redis.  Past it, it warns on the estimate, an
# upper bound of the backlog.
WARN_SCAN = AUDIT_SCAN_CAP


def backlog_limits(settings: Settings) -> tuple[int, int]:
    """(warn at, refuse above) in entries: the settings' fractions of maxlen."""
    return (math.floor(settings.maxlen * settings.backlog_warn_fraction),
            math.floor(settings.maxlen * settings.backlog_refuse_fraction))


def _chunks(settings: Settings, jobs: Iterable[Job], chunk: int
            ) -> Iterator[tuple[list[str], list[Any], int]]:
    s = settings
    batch = list(jobs)
    warn, limit = backlog_limits(s)
    for start in range(0, len(batch), chunk):
        # The counter hash goes in ARGV, not KEYS: see backlog.AUDIT_LUA.  From the
        # warning level on, the stream is counted, not the group's entries-read
        # trusted: up to WARN_SCAN entries for a warning, all of it before a refusal.
        args: list[Any] = [s.group, s.maxlen, limit, JOB_WIDTH, trimmed_key(s), warn,
                           WARN_SCAN]
        part = batch[start:start + chunk]
        for job in part:
            fields = job.fields()
            assert len(fields) == JOB_WIDTH
            args.extend(fields)
        yield [s.stream], args, len(part)


def _settle(settings: Settings, reply: Any, wanted: int, ids: list[str], total: int) -> None:
    """Take the ids of one chunk's reply; warn, log a loss, or raise BacklogFull."""
    backlog, lost = int(reply[0]), int(reply[1])
    got = [x.decode() if isinstance(x, bytes) else str(x) for x in reply[2:]]
    ids.extend(got)
    if lost:
        log.error("%d jobs were trimmed from stream %s before any worker read them "
                  "(counted in %s)", lost, settings.stream, trimmed_key(settings))
    warn, limit = backlog_limits(settings)
    now = backlog + len(got)
    if len(got) < wanted:
        raise BacklogFull(
            f"backlog of {settings.stream} is {backlog} entries, the refusal level "
            f"{settings.backlog_refuse_fraction:.0%} of maxlen {settings.maxlen} ({limit}): "
            f"adding more would trim jobs no worker has read; {_progress(ids, total)}",
            ids, total, backlog=backlog, limit=limit)
    if backlog >= 0 and now >= warn:
        log.warning("backlog of %s is %d entries, %d%% of maxlen %d (warns at %s, refuses "
                    "above %s)", settings.stream, now, 100 * now // settings.maxlen,
                    settings.maxlen, f"{settings.backlog_warn_fraction:.0%}",
                    f"{settings.backlog_refuse_fraction:.0%}")


def _sent(e: redis.RedisError) -> bool:
    """The request was written and no answer read: a timeout or a connection lost while
    reading (not one refused or timed out while connecting: then nothing was sent)."""
    if not isinstance(e, redis.TimeoutError | redis.ConnectionError):
        return False
    return "connecting to" not in str(e) and not isinstance(e.__cause__, ConnectionRefusedError)


def _failed(e: redis.RedisError, ids: list[str], total: int, wanted: int = 0
            ) -> EnqueueError:
    """The error for a chunk of `wanted` jobs that failed after `ids` went in."""
    if is_oom(e):
        return RedisOutOfMemory(f"{OOM_ADVICE}; {_progress(ids, total)}", ids, total)
    unknown = wanted if _sent(e) else 0
    return EnqueueError(f"{first_line(e)}; {_progress(ids, total, unknown)}", ids, total,
                        unknown=unknown)


# Tries of one chunk whose script a replica refused (nothing written): a new connection
# each, so a Sentinel pool asks for the master again; the backoff between them is the
# worker's reconnect schedule (0.05 s doubling, jittered: at most 0.75 s over the five).
MASTER_TRIES = 5


def _replica_said(e: redis.RedisError) -> str:
    """The first sentence of the replica's reply behind e (redis-py's Sentinel
    connection raises READONLY or UNBLOCKED as a ConnectionError of its own, from the
    reply); Redis goes on about writable replicas after it."""
    reply = e.__context__ if isinstance(e, redis.ConnectionError) and e.__context__ else e
    return first_line(reply).split(". ")[0].rstrip(".")


def _wrote_nothing(e: redis.RedisError) -> bool:
    """A failed chunk whose script reply said "replica": a replica writes nothing.

    In the pipeline the script's reply comes first and WAIT's last; redis-py's Sentinel
    connection raises READONLY (only the script can get it) and UNBLOCKED (only a
    waiting WAIT can) alike as ConnectionError, with the reply as __context__."""
    if isinstance(e, redis.ConnectionError):
        return isinstance(e.__context__, redis.exceptions.ReadOnlyError)
    return master_changed(e)


def _no_master(e: redis.RedisError, ids: list[str], total: int) -> EnqueueError:
    """Every try of a chunk refused by a replica: nothing of it went in."""
    return EnqueueError(f"Redis answered as a replica {MASTER_TRIES} times: the master "
                        f"changed (a failover) and no new master took the jobs yet "
                        f"({_replica_said(e)}); {_progress(ids, total)}", ids, total)


def _new_connections(client: redis.Redis) -> None:
    """Drop the pool's connections: a Sentinel pool asks for the master on each new one.
    (A cluster client, routed by slot, has no one pool: a replica answers it MOVED.)"""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        pool.disconnect()


async def _new_connections_async(client: aioredis.Redis) -> None:
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        await pool.disconnect()


def _script_reply(reply: Any) -> Any:
    """The script's reply from a pipeline run with raise_on_error=False, raised if it is
    an error (a replica's: nothing of the chunk was written)."""
    if isinstance(reply, redis.RedisError):
        raise reply
    return reply


def _confirmed(settings: Settings, acked: Any, ids: list[str], total: int
               ) -> EnqueueError | None:
    """What WAIT's reply means for a chunk whose XADDs went in (in ids): None when the
    replicas confirmed them, else the error to raise, after new connections for a
    NotReplicated (this server lost its replicas, or is no longer the master: a Sentinel
    pool asks for the master again)."""
    if acked is None:
        return None  # no WAIT asked
    if isinstance(acked, redis.RedisError):
        if master_changed(acked):
            return NotReplicated(ids, total, 0, settings, demoted=_replica_said(acked))
        return _failed(acked, ids, total)  # e.g. NOPERM: went in, and ids say so
    if int(acked) < settings.replicas_to_wait:
        return NotReplicated(ids, total, int(acked), settings)
    return None


def _lost_wait(e: redis.RedisError, settings: Settings, ids: list[str], total: int,
               wanted: int) -> NotReplicated | None:
    """A demoted master's answer to WAIT raised by redis-py's Sentinel connection: the
    script had answered (its ids unread), so the chunk may be in, unconfirmed."""
    if settings.replicas_to_wait and master_changed(e):  # (after _wrote_nothing)
        return NotReplicated(ids, total, 0, settings, demoted=_replica_said(e),
                             unread=wanted)
    return None


# -- the plan, and the two clients that run it -----------------------------------------


class _Call(NamedTuple):
    """Run one chunk's script (and WAIT, when replicas are waited for); answer with
    (the script's reply, WAIT's reply or None), or throw the Redis error."""
    keys: list[str]
    args: list[Any]


class _Reconnect(NamedTuple):
    """Drop the pool's connections (a Sentinel pool asks for the master again)."""


class _Sleep(NamedTuple):
    seconds: float


_Step = _Call | _Reconnect | _Sleep


def _plan(settings: Settings, jobs: Iterable[Job], chunk: int
          ) -> Generator[_Step, Any, list[str]]:
    """enqueue's decisions, without I/O (module docstring); returns the ids."""
    batch = list(jobs)
    total = len(batch)
    ids: list[str] = []
    for keys, args, wanted in _chunks(settings, batch, chunk):
        backoff = Backoff()
        for attempt in range(1, MASTER_TRIES + 1):
            try:
                reply, acked = yield _Call(keys, args)
                break
            except redis.RedisError as e:
                if _wrote_nothing(e):
                    yield _Reconnect()  # find the master again
                    if attempt == MASTER_TRIES:
                        raise _no_master(e, ids, total) from e
                    yield _Sleep(backoff.next())
                    continue
                if (lost := _lost_wait(e, settings, ids, total, wanted)) is not None:
                    yield _Reconnect()
                    raise lost from None  # its text names the reply
                raise _failed(e, ids, total, wanted) from e
        _settle(settings, reply, wanted, ids, total)
        if (error := _confirmed(settings, acked, ids, total)) is not None:
            if isinstance(error, NotReplicated):
                yield _Reconnect()
            raise error
    return ids


async def enqueue(client: aioredis.Redis, settings: Settings, job: Job) -> str:
    """Add one job (MAXLEN ~) after ensuring the group, in one round trip. Returns its id."""
    return (await enqueue_many(client, settings, [job]))[0]


async def enqueue_many(client: aioredis.Redis, settings: Settings, jobs: Iterable[Job],
                       *, chunk: int = 1000) -> list[str]:
    """The bulk form: `chunk` jobs per round trip (one script call).

    Raises BacklogFull (the backlog is near MAXLEN), RedisOutOfMemory, NotReplicated
    (WAIT did not confirm them), or EnqueueError (any other Redis error), each carrying
    the ids that did go in.  A chunk a replica refused is sent again (module docstring)."""
    script = client.register_script(ENQUEUE_LUA)
    plan = _plan(settings, jobs, chunk)
    answer: Any = None
    error: redis.RedisError | None = None
    while True:
        try:
            step = plan.send(answer) if error is None else plan.throw(error)
        except StopIteration as done:
            ids: list[str] = done.value
            return ids
        answer, error = None, None
        if isinstance(step, _Call):
            try:
                if settings.replicas_to_wait:
                    pipe = client.pipeline(transaction=False)  # one connection: WAIT covers it
                    await script(keys=step.keys, args=step.args, client=pipe)
                    pipe.execute_command("WAIT", *_wait_args(settings))
                    reply, acked = await pipe.execute(raise_on_error=False)
                    answer = (_script_reply(reply), acked)
                else:
                    answer = (await script(keys=step.keys, args=step.args), None)
            except redis.RedisError as e:
                error = e
        elif isinstance(step, _Sleep):
            await asyncio.sleep(step.seconds)
        else:
            await _new_connections_async(client)


def enqueue_sync(client: redis.Redis, settings: Settings, jobs: Iterable[Job],
                 *, chunk: int = 1000) -> list[str]:
    """enqueue_many for callers without an event loop (the CLI, a sync api): the same
    plan, run on a blocking client."""
    script = client.register_script(ENQUEUE_LUA)
    plan = _plan(settings, jobs, chunk)
    answer: Any = None
    error: redis.RedisError | None = None
    while True:
        try:
            step = plan.send(answer) if error is None else plan.throw(error)
        except StopIteration as done:
            ids: list[str] = done.value
            return ids
        answer, error = None, None
        if isinstance(step, _Call):
            try:
                if settings.replicas_to_wait:
                    pipe = client.pipeline(transaction=False)  # one connection: WAIT covers it
                    script(keys=step.keys, args=step.args, client=pipe)
                    pipe.execute_command("WAIT", *_wait_args(settings))
                    reply, acked = pipe.execute(raise_on_error=False)
                    answer = (_script_reply(reply), acked)
                else:
                    answer = (script(keys=step.keys, args=step.args), None)
            except redis.RedisError as e:
                error = e
        elif isinstance(step, _Sleep):
            time.sleep(step.seconds)
        else:
            _new_connections(client)
