"""The producer's bulk path against a pipelined raw XADD of the same fields: enqueue_sync
of n jobs in chunks of 1000 (one script call a chunk: the backlog check, the group
ensured, the XADDs) and the same jobs as bare `XADD jobs MAXLEN ~ <maxlen> * <fields>`
pipelined 1000 at a time, interleaved rounds on one fresh server, the stream deleted
between runs.  Issue 36's target: the bulk path keeps at least 0.8 of the raw rate.

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_enqueue [--n 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import redis

from stagedoor.config import Settings
from stagedoor.stream import connection, queue
from stagedoor.stream.job import make_job

from . import measure_common as mc

CHUNK = 1000


def jobs(n: int) -> list[queue.Job]:
    return [make_job("render_tickets", i, 1_000_000 + i, f"{i:016x}", f"{i:032x}")
            for i in range(1, n + 1)]


def bulk(c: redis.Redis, s: Settings, batch: list[queue.Job]) -> float:
    t0 = time.perf_counter()
    queue.enqueue_sync(c, s, batch, chunk=CHUNK)
    return time.perf_counter() - t0


def raw(c: redis.Redis, s: Settings, batch: list[queue.Job]) -> float:
    fields = [job.fields() for job in batch]  # encoded outside the clock, as bulk's are not
    t0 = time.perf_counter()
    for start in range(0, len(fields), CHUNK):
        pipe = c.pipeline(transaction=False)
        for f in fields[start:start + CHUNK]:
            pipe.execute_command("XADD", s.stream, "MAXLEN", "~", s.maxlen, "*", *f)
        pipe.execute()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    batch = jobs(args.n)
    rates: dict[str, list[float]] = {"bulk": [], "raw": []}
    with mc.redis_server() as server:
        # maxlen above n: the backlog never nears the refusal level (a drained group's)
        s = Settings(redis_url=server.url, maxlen=10 * args.n)
        c = connection.sync_client(s, timeout=30)
        for r in range(args.rounds):
            for name in (("bulk", "raw") if r % 2 == 0 else ("raw", "bulk")):
                c.delete(s.stream)
                took = (bulk if name == "bulk" else raw)(c, s, batch)
                rates[name].append(args.n / took)
                mc.progress(f"round {r + 1}/{args.rounds} {name}: {args.n / took:,.0f} jobs/s")
        c.close()
    ratio = mc.median([a / b for a, b in zip(rates["bulk"], rates["raw"], strict=True)])
    print(f"enqueue_sync {mc.median(rates['bulk']):,.0f} jobs/s, pipelined raw XADD "
          f"{mc.median(rates['raw']):,.0f} jobs/s: ratio {ratio:.3f} (target >= 0.8)")


if __name__ == "__main__":
    main()
