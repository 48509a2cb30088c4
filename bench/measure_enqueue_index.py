"""What the job index (ops/jobs.py) costs the producer: enqueue_sync of n jobs in
chunks of 1000 (the enqueue script), with the index written (the default) and with an
empty index prefix (the script writes none: the baseline), interleaved rounds on one
fresh server, the stream deleted between runs.  Also the index's memory per job.

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_enqueue_index [--n 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

from stagedoor.config import Settings
from stagedoor.stream import connection, queue
from stagedoor.stream.job import make_job

from . import measure_common as mc


def run(url: str, n: int, *, index: bool) -> tuple[float, int]:
    s = Settings(redis_url=url, maxlen=10 * n)
    c = connection.sync_client(s, timeout=30)
    c.flushdb()
    jobs = [make_job("render_tickets", i, 1_000_000 + i, "r", "t") for i in range(1, n + 1)]
    prefix = queue.job_index_prefix if index else (lambda _s: "")
    with mock.patch.object(queue, "job_index_prefix", prefix):
        t0 = time.perf_counter()
        queue.enqueue_sync(c, s, jobs)
        took = time.perf_counter() - t0
    used = sum(int(c.memory_usage(k) or 0) for k in c.scan_iter("stagedoor:jobidx:*"))
    c.close()
    return n / took, used


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rates: dict[bool, list[float]] = {True: [], False: []}
    used = 0
    with mc.redis_server() as server:
        for r in range(args.rounds):
            for index in ((True, False) if r % 2 == 0 else (False, True)):
                rate, mem = run(server.url, args.n, index=index)
                rates[index].append(rate)
                used = mem or used
                mc.progress(f"round {r + 1}/{args.rounds} index {'on' if index else 'off'}: "
                            f"{rate:,.0f} jobs/s")
    ratio = mc.median([a / b for a, b in zip(rates[True], rates[False], strict=True)])
    print(f"enqueue with index {mc.median(rates[True]):,.0f} jobs/s, without "
          f"{mc.median(rates[False]):,.0f} jobs/s: ratio {ratio:.3f}; index memory "
          f"{used / args.n:.0f} bytes/job ({used / 2**20:.1f} MB for {args.n:,} jobs)")


if __name__ == "__main__":
    main()
