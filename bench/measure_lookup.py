"""What a job lookup by order or outbox id costs Redis (console/jobscan.py): a stream of
100,000 entries and 10,000 dead letters, the seed's five fields with a 16-hex request id
and a 32-hex trace; lookups of an order near the newest end, one in the middle, one at
the oldest end, one that is not there, and one dead letter by its entry id.  For each:
the XREVRANGE calls (round trips), the entries read, the wall time, and from
SLOWLOG (threshold 0) the Redis time of every call: its sum and the longest one, which
is how long a lookup can hold Redis at once (SLOWLOG's duration includes any time the
server's thread was descheduled: on a loaded box the longest call says more about
the box than the command; the median and P99 say what a call costs).

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_lookup [--entries 100000] [--dead 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from stagedoor.config import Settings
from stagedoor.console import jobs
from stagedoor.console.client import console_client
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import dead_letter_fields

from . import measure_common as mc


def fill(url: str, settings: Settings, entries: int, dead: int) -> list[str]:
    c = mc.client(url)
    c.execute_command("XGROUP", "CREATE", settings.stream, settings.group, "$", "MKSTREAM")
    ids: list[str] = []
    for start in range(0, entries, 1000):
        pipe = c.pipeline(transaction=False)
        for i in range(start, min(entries, start + 1000)):
            pipe.execute_command("XADD", settings.stream, "*", *make_job(
                "render_tickets", 1_000_000 + i, 5_000_000 + i, f"{i:016x}",
                f"{i:032x}").fields())
        ids += [x.decode() if isinstance(x, bytes) else str(x) for x in pipe.execute()]
    for start in range(0, dead, 1000):
        pipe = c.pipeline(transaction=False)
        for i in range(start, min(dead, start + 1000)):
            pipe.execute_command("XADD", settings.dead_stream, "*", *dead_letter_fields(
                make_job("mail", 9_000_000 + i, 9_500_000 + i, f"{i:016x}",
                         f"{i:032x}").fields(),
                error="card declined", source_id=f"{1_000 + i}-0", deliveries=1,
                consumer="c"))
        pipe.execute()
    c.close()
    return ids


async def measure(url: str, settings: Settings, ids: list[str]) -> None:
    admin = mc.client(url)
    client = console_client(settings)
    n = len(ids)
    cases = [("order, newest end", {"order_id": 1_000_000 + n - 5}),
             ("order, middle", {"order_id": 1_000_000 + n // 2}),
             ("order, oldest end", {"order_id": 1_000_000}),
             ("outbox, not there", {"outbox_id": 1}),
             ("dead letter by entry id", {"entry_id": "1500-0"})]
    try:
        await jobs.lookup(client, settings, order_id=1)  # connections open
        for name, query in cases:
            admin.config_set("slowlog-log-slower-than", 0)
            admin.config_set("slowlog-max-len", 10_000)
            admin.slowlog_reset()
            t0 = time.perf_counter()
            story = await jobs.lookup(client, settings, **query)  # type: ignore[arg-type]
            wall = time.perf_counter() - t0
            log = admin.slowlog_get(10_000)
            admin.config_set("slowlog-log-slower-than", 10_000)
            spent = [int(e["duration"]) for e in log
                     if b"XREVRANGE" in (e["command"] if isinstance(e["command"], bytes)
                                         else str(e["command"]).encode()).upper()]
            print(f"{name:<26} found {len(story.entries)}: {story.scan_calls} XREVRANGE, "
                  f"{story.scan_entries:,} entries read, {wall * 1000:.0f} ms wall; Redis "
                  f"{sum(spent) / 1000:.1f} ms in all, a call {mc.median(spent) / 1000:.2f} ms "
                  f"(median), {sorted(spent)[int(0.99 * (len(spent) - 1))] / 1000:.2f} ms "
                  f"(P99), {max(spent) / 1000:.2f} ms (longest)")
    finally:
        await client.aclose()
        admin.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--dead", type=int, default=10_000)
    args = ap.parse_args()
    with mc.redis_server() as server:
        settings = Settings(redis_url=server.url, maxlen=10 * args.entries)
        ids = fill(server.url, settings, args.entries, args.dead)
        asyncio.run(measure(server.url, settings, ids))


if __name__ == "__main__":
    main()
