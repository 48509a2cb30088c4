"""How long a done mark lives: as long as the stream holds the job's entry, no longer.

A done mark (`stagedoor:done:<outbox id>`, context.mark_done) answers "was this outbox id
handled?" for a second delivery of the job.  Second deliveries come from three places:

- the same entry, redelivered after its ack was lost (the worker died between the
  work and the XACK): from its own pending list at once, or by another worker's
  XAUTOCLAIM claim_idle_ms after it was read, on the next reclaim pass;
- another entry with the same outbox id (the relay sent a row twice): on the stream
  beside the first;
- a replayed dead letter of a duplicate.

A mark kept for a fixed time (it was 7 days) grows with the jobs handled, not with the
stream: 104 bytes a job, 104 MB at 1,000,000 jobs against the stream's 12 MB (issue 36).
So a mark lives for the stream's window: the time from the oldest entry on the stream
to now.  Every duplicate on the stream beside its original is inside it; an entry
redelivered after it is gone from the stream runs nothing (trimmed while pending).  The
window is never shorter than claim_idle_ms + reclaim_interval (the redelivery after a
lost ack, should the stream slow down after a burst and keep the entry longer than the
burst's window) nor longer than idempotency_ttl.  The marks alive are then the jobs done
within the window, about the entries the stream holds (maxlen), or the jobs done within
that floor when the drain runs faster than maxlen / floor (1,100 jobs a second at the
defaults).

The window is read (XRANGE <stream> - + COUNT 1, and TIME) at most once a REFRESH_S, in
the background: a mark never waits for it.  An id ahead of the server's clock (another
producer's, a master whose clock ran ahead) counts as an empty window: the floor.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

import redis.asyncio as aioredis

from ..config import Settings

log = logging.getLogger("stagedoor.handlers")

REFRESH_S = 1.0


def window_ttl(settings: Settings, now_ms: int, oldest_ms: int | None) -> int:
    """The done mark's time to live in s for a stream whose oldest entry is oldest_ms."""
    floor = math.ceil(settings.claim_idle_ms / 1000 + settings.reclaim_interval)
    window = 0 if oldest_ms is None else math.ceil((now_ms - oldest_ms) / 1000)
    return max(1, min(settings.idempotency_ttl, max(floor, window)))


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
            pipe.execute_command("XRANGE", s.stream, "-", "+", "COUNT", 1)
            clock, oldest = await pipe.execute()
        except Exception as e:  # best effort: the last TTL stands
            log.debug("could not read the stream's window: %s", e)
            return
        seconds, micros = (int(x) for x in list(clock)[:2])
        oldest_ms = None
        if oldest:
            first = oldest[0][0]
            first = first.decode() if isinstance(first, bytes) else str(first)
            oldest_ms = int(first.partition("-")[0])
        self._ttl = window_ttl(s, seconds * 1000 + micros // 1000, oldest_ms)
