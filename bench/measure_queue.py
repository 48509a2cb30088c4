"""Enqueue rate: single `enqueue` calls (one round trip each) and pipelined `enqueue_many`.

Both are the library's own producer API (stagedoor.stream.queue), against a fresh server;
each XADD carries MAXLEN ~ 100000 and the group is ensured in the same round trip.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import redis.asyncio as aioredis

from stagedoor.stream.queue import enqueue, enqueue_many, enqueue_sync

from . import measure_common as mc


async def _single(url: str, n: int) -> float:
    s = mc.settings(url)
    c = aioredis.Redis.from_url(url, protocol=2, socket_timeout=10)
    try:
        jobs = [mc.job(i) for i in range(n)]
        await enqueue(c, s, jobs[0])  # connect outside the timing
        t0 = time.perf_counter()
        for j in jobs:
            await enqueue(c, s, j)
        return time.perf_counter() - t0
    finally:
        await c.aclose()


async def _many(url: str, n: int, chunk: int) -> float:
    s = mc.settings(url, maxlen=max(100_000, 2 * n))  # n unread: below the refusal level
    c = aioredis.Redis.from_url(url, protocol=2, socket_timeout=10)
    try:
        jobs = [mc.job(i) for i in range(n)]
        await enqueue(c, s, jobs[0])
        t0 = time.perf_counter()
        await enqueue_many(c, s, jobs, chunk=chunk)
        return time.perf_counter() - t0
    finally:
        await c.aclose()


def enqueue_rates(url: str, *, single_n: int = 5000, many_n: int = 100_000,
                  chunk: int = 1000) -> dict[str, Any]:
    """jobs/s of `enqueue` (one job per round trip), `enqueue_many` and `enqueue_sync`."""
    import uvloop

    c = mc.client(url)
    try:
        c.flushall()
        single = uvloop.run(_single(url, single_n))
        mc.progress(f"enqueue single: {single_n / single:,.0f} jobs/s")
        c.flushall()
        many = uvloop.run(_many(url, many_n, chunk))
        mc.progress(f"enqueue_many: {many_n / many:,.0f} jobs/s")
        c.flushall()
        s = mc.settings(url, maxlen=max(100_000, 2 * many_n))
        jobs = [mc.job(i) for i in range(many_n)]
        t0 = time.perf_counter()
        enqueue_sync(c, s, jobs, chunk=chunk)
        sync = time.perf_counter() - t0
        length = c.xlen("jobs")
    finally:
        c.close()
    return {"single_n": single_n, "single_rate": single_n / single,
            "single_us_per_job": single / single_n * 1e6,
            "many_n": many_n, "chunk": chunk, "many_rate": many_n / many,
            "sync_many_rate": many_n / sync, "stream_len_after": length}


if __name__ == "__main__":
    with mc.redis_server() as server:
        print(enqueue_rates(server.url, single_n=2000, many_n=20_000))
    asyncio.set_event_loop_policy(None)
