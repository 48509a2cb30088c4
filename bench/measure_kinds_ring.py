"""What the console's per-kind ring (telemetry/kindstats.py) keeps in Redis: its 60 keys'
MEMORY USAGE after a full hour, for 1, 3 and 10 kinds, with the buckets a steady job
fills (typical: every counter, 5 duration and 6 queue-wait buckets) and with every
bucket of both histograms filled (the most a kind can write).  The ring is written by
the workers' own Flusher, a minute at a time, into a redis-server of its own.

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_kinds_ring
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis
from stagedoor.stream import connection
from stagedoor.stream.keys import kinds_key
from stagedoor.telemetry.kindstats import SLOTS, Flusher
from stagedoor.telemetry.metrics import DURATION_BUCKETS, WAIT_BUCKETS, WorkerStats


def fill(stats: WorkerStats, kinds: list[str], every_bucket: bool) -> None:
    runs = DURATION_BUCKETS if every_bucket else DURATION_BUCKETS[3:8]
    waits = WAIT_BUCKETS if every_bucket else WAIT_BUCKETS[2:8]
    for kind in kinds:
        for name in ("handled", "failed", "retried", "dead_lettered"):
            stats.inc(name, kind, 1000)
        for s in (*runs, 99.0) if every_bucket else runs:
            stats.observe(kind, s)
        for s in (*waits, 9999.0) if every_bucket else waits:
            stats.observe_wait(kind, s)


async def seed(url: str, n_kinds: int, every_bucket: bool) -> None:
    """A full hour of `n_kinds` kinds in the ring, a flush a minute (bench.measure_console
    seeds its queue with it too)."""
    settings = Settings(redis_url=url)
    client = connection.async_client(settings, name="measure")
    try:
        kinds = [f"kind_{i:02d}" for i in range(n_kinds)]
        stats = WorkerStats(kinds)
        flusher = Flusher(settings, stats)
        now = time.time()
        for ago in range(SLOTS - 1, -1, -1):
            fill(stats, kinds, every_bucket)
            await flusher.flush(client, now - ago * 60)
    finally:
        await client.aclose()


async def one(url: str, n_kinds: int, every_bucket: bool) -> int:
    settings = Settings(redis_url=url)
    sync = redis.Redis.from_url(url, protocol=2)
    try:
        sync.flushall()
        await seed(url, n_kinds, every_bucket)
        return sum(int(sync.memory_usage(kinds_key(settings, i), samples=0) or 0)
                   for i in range(SLOTS))
    finally:
        sync.close()


async def main() -> None:
    with tempfile.TemporaryDirectory() as d, EmbeddedRedis(Path(d)) as server:
        print("| kinds | typical (5 + 6 buckets a kind) | every bucket filled |")
        print("| --- | --- | --- |")
        for n in (1, 3, 10):
            typical = await one(server.url, n, False)
            full = await one(server.url, n, True)
            print(f"| {n} | {typical:,} bytes ({typical / 1024:.0f} KiB) | "
                  f"{full:,} bytes ({full / 1024:.0f} KiB) |")


if __name__ == "__main__":
    asyncio.run(main())
