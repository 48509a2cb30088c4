"""What stagedoor keeps in Redis besides the streams, by key family, as jobs go through:
a real worker (in this process) drains every chunk the producer's bulk path adds, at
the default settings (maxlen 100,000), with a handler that takes the idempotency guard
and marks each job done, as the ticket handler does.  At each checkpoint: every key's
MEMORY USAGE, grouped by family (ids stripped), against the job stream's own memory,
and the largest key besides the streams (the one whose expiry or deletion would cost
Redis the most time).  Jobs carry the seed's five fields with a 16-hex request id and a
32-hex trace id (W3C), so the stream's entries are the size a real relay writes.

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_memory [--jobs 1000000] \
        [--at 600000 --at 1000000] [--no-done-marks]

Run against an older checkout (PYTHONPATH=<that checkout>/src:.) for the before figures.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict

import redis

from stagedoor.config import Settings
from stagedoor.console.doctor.keys import family as doctor_family
from stagedoor.handlers import Context, Registry
from stagedoor.stream import connection
from stagedoor.stream.job import Job, make_job
from stagedoor.stream.queue import enqueue_sync
from stagedoor.worker.loop import Worker

from . import measure_common as mc

CHUNK = 1_000


def family(key: str) -> str:
    """stagedoor:done:4471 -> stagedoor:done:<n>: the doctor's families, prefix kept."""
    return doctor_family("", key)


def registry(done_marks: bool) -> Registry:
    reg = Registry()

    @reg.register("render_tickets")
    async def guarded(job: Job, ctx: Context) -> None:
        if not done_marks:
            return
        if await ctx.already_done(job):
            return
        await ctx.mark_done(job)

    return reg


def census(client: redis.Redis, settings: Settings) -> tuple[dict[str, list[int]], int, str]:
    """family -> [keys, bytes, hash fields]; the stream's bytes; the largest key but the
    streams."""
    streams = {settings.stream, settings.dead_stream}
    fams: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    largest, largest_bytes = "", 0
    for key in client.scan_iter(count=5000):
        name = key.decode()
        if name in streams:
            continue
        used = int(client.memory_usage(name, samples=0) or 0)
        f = fams[family(name)]
        f[0] += 1
        f[1] += used
        if client.type(name) == b"hash":
            f[2] += int(client.hlen(name))
        if used > largest_bytes:
            largest, largest_bytes = name, used
    stream = int(client.memory_usage(settings.stream, samples=0) or 0)
    return dict(fams), stream, f"{largest} ({largest_bytes:,} bytes)"


async def caught_up(worker: Worker, handled: int) -> None:
    """Wait until the worker handled that many jobs (a poll: the bench's own pace)."""
    while worker.stats.total("handled") < handled:  # noqa: ASYNC110
        await asyncio.sleep(0.002)


async def drain(settings: Settings, total: int, checkpoints: list[int],
                done_marks: bool) -> None:
    client = connection.sync_client(settings, timeout=30)
    worker = Worker(settings, registry(done_marks), slot=0)
    task = asyncio.create_task(worker.run())
    await worker.ready.wait()
    t0 = time.perf_counter()
    try:
        for start in range(0, total, CHUNK):
            enqueue_sync(client, settings, [
                make_job("render_tickets", 1 + (i % 50_000), 1 + i, f"{i:016x}",
                         f"{i:032x}") for i in range(start, start + CHUNK)])
            await caught_up(worker, start + CHUNK)
            done = start + CHUNK
            if done in checkpoints:
                fams, stream, largest = census(client, settings)
                kept = sum(f[1] for f in fams.values())
                print(f"\n{done:,} jobs ({time.perf_counter() - t0:.0f} s): stream "
                      f"{client.xlen(settings.stream):,} entries, {stream / 2**20:.1f} MiB; "
                      f"everything else {kept / 2**20:.2f} MiB "
                      f"({kept / stream:.2f}x the stream)")
                for name, (keys, used, fields) in sorted(fams.items(),
                                                         key=lambda kv: -kv[1][1]):
                    held = f" ({fields:,} fields: {used / fields:.1f} bytes each)" \
                        if fields else ""
                    print(f"  {name:<48} {keys:>9,} keys {used:>13,} bytes "
                          f"{used / done:8.1f} bytes/job{held}")
                print(f"  largest key besides the streams: {largest}")
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 60)
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--at", type=int, action="append", default=None)
    ap.add_argument("--no-done-marks", action="store_true",
                    help="a handler that keeps no idempotency mark")
    args = ap.parse_args()
    checkpoints = args.at or [600_000, args.jobs]
    with mc.redis_server() as server:
        settings = Settings(redis_url=server.url, consumer="bench", block_ms=100)
        asyncio.run(drain(settings, args.jobs, checkpoints, not args.no_done_marks))


if __name__ == "__main__":
    main()
