"""The stream as a queue: ensure the group, enqueue, ack, dead-letter.

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

Dead-lettering is one Lua script rather than MULTI: the XADD to jobs:dead runs only
if the XACK removed the entry from the pending list.  A MULTI is atomic too, but
when its reply is lost and the worker retries, the dead-letter entry is written
twice; the script makes the retry a no-op, so a poison job lands there exactly once.

Dead letters trimmed: the dead-letter stream is capped too (MAXLEN ~ dead_maxlen), and a
trim drops the oldest dead letters with no trace of its own.  The same script counts
them exactly (XLEN before and after its XADD) into stagedoor:dead-trimmed:<stream>
(keys.dead_trimmed_key; not declared in KEYS for the worker's ACL selectors, as in
backlog.AUDIT_LUA, and on the stream's hash tag for Cluster), and the worker logs one
line per XADD that trimmed (MAXLEN ~ trims whole nodes, ~100 entries at a time), so

    dead letters written = XLEN jobs:dead + the count + what `dead replay/purge` removed

and it records the job's entry id of each dead letter it trimmed in the removed dead
letters' stream (keys.dead_gone_key, how "trimmed"), as `dead replay/delete/purge` do,
so `stagedoor job` still says DEAD ("dead letter removed") once its dead letter was
trimmed (issue 38).  MAXLEN ~ gives no list of what it took: the script reads the
oldest dead letters it may take (at most XLEN + 1 - dead_maxlen) before the XADD,
which at the cap costs an XRANGE of up to a node's entries per dead letter.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

from ..backoff import Backoff
from ..config import Settings
from .backlog import ACCOUNT_LUA, AUDIT_SCAN_CAP, trimmed_key
from .errors import OOM_ADVICE, first_line, is_oom, master_changed
from .job import Job
from .keys import dead_gone_key, dead_trimmed_key

log = logging.getLogger("stagedoor.queue")

DEAD_FIELD_PREFIX = b"dead:"
# Metadata added to a dead-letter entry after the original fields.
DEAD_META = ("error", "source_id", "deliveries", "consumer", "time")

# Writes come last and in this order so that an error leaves the entry pending, not
# lost: Redis does not roll a script back, so an XACK before a failing XADD (OOM,
# a payload too large for unpack) would ack a job that never reached jobs:dead.
_DEAD_LETTER_LUA = """
if ARGV[3] == '1' then
  -- NOGROUP (the group destroyed, the stream deleted or flushed): not pending either
  local pending = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
  if pending.err or #pending == 0 then return false end
end
local before = redis.call('XLEN', KEYS[2])
-- At the cap, the oldest dead letters MAXLEN ~ may trim with this XADD (whole nodes, at
-- most before + 1 - cap, at most its default LIMIT): read first, so that their jobs are
-- remembered as DEAD once they are gone.
local doomed = {}
local over = before + 1 - tonumber(ARGV[4])
if over > 0 then
  doomed = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', math.min(over, tonumber(ARGV[7])))
end
local args = {'XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*'}
for i = 8, #ARGV do args[#args + 1] = ARGV[i] end
local dead_id = redis.call(unpack(args))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
-- What MAXLEN ~ took with this XADD, counted exactly, and the job of each dead letter it
-- took, in the removed dead letters' stream as the console's removals are (ARGV[6],
-- capped like the dead-letter stream); last, and with pcall, so that a record that
-- cannot be written never costs the dead letter itself.
local trimmed = before + 1 - redis.call('XLEN', KEYS[2])
local total, kept = 0, 0
if trimmed > 0 then
  total = redis.pcall('INCRBY', ARGV[5], trimmed)
  if type(total) == 'table' then total = -1 end
  for k = 1, math.min(trimmed, #doomed) do
    local f, source = doomed[k][2], ''
    for i = 1, #f - 1, 2 do
      if f[i] == 'dead:source_id' then source = f[i + 1] break end
    end
    if source ~= '' then
      local r = redis.pcall('XADD', ARGV[6], 'MAXLEN', '~', ARGV[4], '*', 'source_id',
                            source, 'dead_id', doomed[k][1], 'how', 'trimmed', 'new_id', '')
      if type(r) ~= 'table' then kept = kept + 1 end
    end
  end
end
return {dead_id, trimmed, total, kept}
"""
# The most dead letters one XADD's MAXLEN ~ trims (its default LIMIT: 100 nodes of
# stream-node-max-entries, 100 by default), so the most the script reads ahead of it.
DEAD_TRIM_READ = 10_000
# Lua's unpack() stops at ~8000 values; a dead letter keeps the first fields of a
# payload with more (the reason already says what was wrong with it).
MAX_DEAD_FIELDS = 256


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


class EnqueueError(RuntimeError):
    """Not every job went in.  `ids` are those that did (in order: jobs[:len(ids)]),
    so the caller can resume after the last one; the message is one line.

    `unknown`: the jobs after those whose fate nobody knows: their request was sent and
    Redis did not answer (a timeout, a connection lost while reading), so they may be
    on the stream.  Send them again: handlers dedupe on outbox_id."""

    def __init__(self, message: str, ids: list[str], total: int, *, unknown: int = 0) -> None:
        super().__init__(message)
        self.ids = ids
        self.total = total
        self.unknown = unknown

    @property
    def progress(self) -> str:
        return _progress(self.ids, self.total, self.unknown)


def _progress(ids: list[str], total: int, unknown: int = 0) -> str:
    """'N of M jobs went in, last id X', and the jobs that may have gone in too."""
    last = f", last id {ids[-1]}" if ids else ""
    text = f"{len(ids)} of {total} jobs went in{last}"
    if unknown:
        text += (f"; the next {unknown} may have gone in too (sent, and Redis did not "
                 f"answer): send them again, deduped by outbox_id")
    return text


class BacklogFull(EnqueueError):
    """The group's backlog reached backlog_refuse_fraction of maxlen: adding more would
    let MAXLEN ~ trim jobs no worker has read.  Retry when the workers caught up."""

    def __init__(self, message: str, ids: list[str], total: int, *, backlog: int,
                 limit: int) -> None:
        super().__init__(message, ids, total)
        self.backlog = backlog
        self.limit = limit


class NotReplicated(EnqueueError, redis.ConnectionError):
    """WAIT returned fewer replicas than asked, or the master changed before WAIT could
    answer (`demoted`: the server's reply): the entries went in, but a failover may
    lose them.  Enqueue them again (handlers dedupe on outbox_id).

    `unread`: the last chunk's jobs that may have gone in although their ids were never
    read (redis-py's Sentinel connection raises a demoted master's answer to WAIT as a
    ConnectionError, without the script's reply); `ids` stop before them."""

    def __init__(self, ids: list[str], total: int, acked: int, settings: Settings, *,
                 demoted: str = "", unread: int = 0) -> None:
        if not demoted:
            why = (f"only {acked} of {settings.replicas_to_wait} replicas confirmed the "
                   f"jobs within {settings.wait_timeout_ms} ms (WAIT)")
        else:
            why = f"the master changed before WAIT confirmed the jobs ({demoted})"
        went = f"{len(ids)} of {total} jobs went in unconfirmed"
        if unread:
            went = (f"the last {unread} jobs may have gone in, unconfirmed (their ids were "
                    f"not read), {len(ids)} of {total} before them went in")
        message = (f"{why}; a failover may lose them: enqueue them again (deduped by "
                   f"outbox_id); {went}")
        super().__init__(message, ids, total)
        # EnqueueError's __init__ (RuntimeError's) comes first in the MRO and never runs
        # redis-py's, whose __repr__ needs what it sets (error_type): a repr of this error
        # (asyncio's of a task that raised it) raised AttributeError.
        redis.ConnectionError.__init__(self, message)
        self.acked, self.wanted = acked, settings.replicas_to_wait
        self.unread = unread


def _wait_args(settings: Settings) -> tuple[int, int]:
    return settings.replicas_to_wait, settings.wait_timeout_ms


class RedisOutOfMemory(EnqueueError):
    """Redis answered OOM (maxmemory reached, noeviction): nothing more can be added."""


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
    batch = list(jobs)
    ids: list[str] = []
    for keys, args, wanted in _chunks(settings, batch, chunk):
        backoff = Backoff()
        for attempt in range(1, MASTER_TRIES + 1):
            try:
                if settings.replicas_to_wait:
                    pipe = client.pipeline(transaction=False)  # one connection: WAIT covers it
                    await script(keys=keys, args=args, client=pipe)
                    pipe.execute_command("WAIT", *_wait_args(settings))
                    reply, acked = await pipe.execute(raise_on_error=False)
                    reply = _script_reply(reply)
                else:
                    reply, acked = await script(keys=keys, args=args), None
                break
            except redis.RedisError as e:
                if _wrote_nothing(e):
                    await _new_connections_async(client)  # find the master again
                    if attempt == MASTER_TRIES:
                        raise _no_master(e, ids, len(batch)) from e
                    await asyncio.sleep(backoff.next())
                    continue
                if (lost := _lost_wait(e, settings, ids, len(batch), wanted)) is not None:
                    await _new_connections_async(client)
                    raise lost from None  # its text names the reply
                raise _failed(e, ids, len(batch), wanted) from e
        _settle(settings, reply, wanted, ids, len(batch))
        if (error := _confirmed(settings, acked, ids, len(batch))) is not None:
            if isinstance(error, NotReplicated):
                await _new_connections_async(client)
            raise error
    return ids


def enqueue_sync(client: redis.Redis, settings: Settings, jobs: Iterable[Job],
                 *, chunk: int = 1000) -> list[str]:
    """enqueue_many for callers without an event loop (the CLI, a sync api)."""
    script = client.register_script(ENQUEUE_LUA)
    batch = list(jobs)
    ids: list[str] = []
    for keys, args, wanted in _chunks(settings, batch, chunk):
        backoff = Backoff()
        for attempt in range(1, MASTER_TRIES + 1):
            try:
                if settings.replicas_to_wait:
                    pipe = client.pipeline(transaction=False)  # one connection: WAIT covers it
                    script(keys=keys, args=args, client=pipe)
                    pipe.execute_command("WAIT", *_wait_args(settings))
                    reply, acked = pipe.execute(raise_on_error=False)
                    reply = _script_reply(reply)
                else:
                    reply, acked = script(keys=keys, args=args), None
                break
            except redis.RedisError as e:  # as in enqueue_many
                if _wrote_nothing(e):
                    _new_connections(client)
                    if attempt == MASTER_TRIES:
                        raise _no_master(e, ids, len(batch)) from e
                    time.sleep(backoff.next())
                    continue
                if (lost := _lost_wait(e, settings, ids, len(batch), wanted)) is not None:
                    _new_connections(client)
                    raise lost from None
                raise _failed(e, ids, len(batch), wanted) from e
        _settle(settings, reply, wanted, ids, len(batch))
        if (error := _confirmed(settings, acked, ids, len(batch))) is not None:
            if isinstance(error, NotReplicated):
                _new_connections(client)
            raise error
    return ids


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
            args=[s.group, eid, "1" if only_if_pending else "0", s.dead_maxlen,
                  dead_trimmed_key(s), dead_gone_key(s), DEAD_TRIM_READ, *payload])
        if not isinstance(result, list | tuple) or len(result) != 4:
            return None  # false: the entry was no longer pending
        dead_id, trimmed, total = result[0], int(result[1]), int(result[2])
        if int(result[3]) < trimmed:    # out of memory, or no source id in them
            log.error("%s: %d of the %d dead letters trimmed at the cap have no record in "
                      "%s: their jobs' lookups cannot say DEAD", s.dead_stream,
                      trimmed - int(result[3]), trimmed, dead_gone_key(s))
        if trimmed > 0:
            if total < 0:
                log.error("%s is at its cap (dead_maxlen %d): %d dead letters trimmed, "
                          "and the count in %s could not be written", s.dead_stream,
                          s.dead_maxlen, trimmed, dead_trimmed_key(s))
            else:
                log.warning("%s is at its cap (dead_maxlen %d): %d oldest dead letters "
                            "trimmed, %d in all (%s); raise dead_maxlen or replay/purge them",
                            s.dead_stream, s.dead_maxlen, trimmed, total,
                            dead_trimmed_key(s),
                            extra={"trimmed": trimmed, "trimmed_total": total})
        return dead_id if isinstance(dead_id, bytes) else None
