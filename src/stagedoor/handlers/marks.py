"""How long a done mark lives: about as long as the stream keeps the job's entry.

A done mark (keys.marks_key, context.mark_done) answers "was this outbox id handled?"
for a second delivery of the job.  Second deliveries come from three places:

- the same entry, redelivered after its ack was lost (the worker died between the
  work and the XACK): from its own pending list at once, or by another worker's
  XAUTOCLAIM claim_idle_ms after it was read, on the next reclaim pass;
- another entry with the same outbox id (the relay sent a row twice): on the stream
  beside the first;
- a replayed dead letter of a duplicate.

A mark kept for a fixed time (it was 7 days) grows with the jobs handled, not with the
stream: 104 bytes a job, 36 MB at 600,000 jobs against the stream's 9 MB (issue 36).  So
a mark lives for the time the stream takes to turn over, maxlen entries at the rate it
is being added to now:

    ttl = maxlen * (now - the oldest entry's time) / the stream's length

(for a full stream, the age of its oldest entry; for a young one, longer, as its entries
will stay that long).  Every duplicate on the stream beside its original is inside it;
an entry redelivered after it left the stream runs nothing (trimmed while pending).  The
marks alive are then the jobs done within one turnover: about maxlen, and at most about
2 x maxlen while the rate rises (the estimate follows the stream's contents, which take
a turnover to catch up).  Capped at idempotency_ttl.  A mark is a field of a small hash
(keys.MARK_BUCKET consecutive outbox ids a hash, ~25 bytes a mark in Redis's listpack),
so maxlen marks cost a fraction of the stream's memory.

What it does not cover: the same entry redelivered after a lost ack when the stream
slowed down right after (its entry outlives the turnover its mark was given) runs again,
at least once, as the seed says of a worker that died after the work and before the ack.

The turnover is read (TIME, XLEN, XRANGE <stream> - + COUNT 1) at most once a REFRESH_S,
in the background: a mark never waits for it.  An id ahead of the server's clock
(another producer's, a master whose clock ran ahead) or an empty stream gives no
estimate: the last one stands (idempotency_ttl before the first).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

import redis.asyncio as aioredis

from ..config import Settings
from ..telemetry.inspect import id_ms
from ..telemetry.records import now_ms

log = logging.getLogger("stagedoor.handlers")

REFRESH_S = 1.0


def turnover_ttl(settings: Settings, now_ms: int, oldest_ms: int | None, length: int
                 ) -> int | None:
    """The done mark's time to live in s: the time the stream takes to add maxlen
    entries at its current rate; None when the stream gives no estimate."""
    if oldest_ms is None or length <= 0 or now_ms <= oldest_ms:
        return None
    turnover_s = settings.maxlen * (now_ms - oldest_ms) / 1000 / length
    return max(1, min(settings.idempotency_ttl, math.ceil(turnover_s)))


class MarkWindow:
    """The current done-mark TTL of one worker, refreshed in the background."""

    def __init__(self, client: aioredis.Redis, settings: Settings) -> None:
        self._client = client
        self._settings = settings
        # Until the first read: the longest, so no early mark is ever too short.
        self._ttl = settings.idempotency_ttl
        self._read_at = -math.inf
        self._task: asyncio.Task[None] | None = None

    def ttl(self) -> int:
        if time.monotonic() - self._read_at >= REFRESH_S and (
                self._task is None or self._task.done()):
            self._read_at = time.monotonic()
            self._task = asyncio.get_running_loop().create_task(self._refresh())
        return self._ttl

    async def _refresh(self) -> None:
        s = self._settings
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.execute_command("TIME")
            pipe.execute_command("XLEN", s.stream)
            pipe.execute_command("XRANGE", s.stream, "-", "+", "COUNT", 1)
            clock, length, oldest = await pipe.execute()
        except Exception as e:  # best effort: the last TTL stands
            log.debug("could not read the stream's window: %s", e)
            return
        oldest_ms = id_ms(oldest[0][0]) if oldest else None
        ttl = turnover_ttl(s, now_ms(clock), oldest_ms, int(length))
        if ttl is not None:
            self._ttl = ttl
