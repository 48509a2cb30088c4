"""How many requests reach Redis at once: fewer than the client's connection pool holds.

The console's asyncio client keeps at most POOL connections (redis-py's default, 100)
and fails a command at once when all are busy (MaxConnectionsError, a ConnectionError):
500 concurrent requests overflowed it, and the outage middleware called that "cannot
reach Redis".  Here a request past the gate (every page but the log-in and the static
files) takes one of LIMIT places first, leaving the rest of the pool to the sampler and
to a request's own second command; past LIMIT it waits up to WAIT seconds for one, and
then gets a 503 "busy, retry" with Retry-After, never a false outage.  A page holds its
place for a few milliseconds of Redis work, so a burst queues here and is served.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

POOL = 100  # redis-py's default max_connections for the asyncio pool
LIMIT = 64  # requests at Redis at once; the rest of the pool: sampler, audit writes
WAIT = 2.0  # seconds a request waits for a place before "busy"
RETRY_AFTER = 1  # seconds


def busy(why: str) -> web.HTTPServiceUnavailable:
    """The 503 of a console with every place taken: retry, Redis is fine."""
    return web.HTTPServiceUnavailable(
        text=f"the console is busy ({why}): retry in a moment\n",
        headers={"Retry-After": str(RETRY_AFTER)})


class Gate:
    """At most `limit` requests inside at once; a request waits `wait` s for a place."""

    def __init__(self, limit: int = LIMIT, wait: float = WAIT) -> None:
        self.limit = limit
        self.wait = wait
        self._places = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        try:
            await asyncio.wait_for(self._places.acquire(), self.wait)
        except TimeoutError:
            raise busy(f"{self.limit} requests at Redis and more waiting") from None
        try:
            yield
        finally:
            self._places.release()
