"""The worker's per-job CPU on the dispatch path alone, no I/O: `python -m bench.measure_dispatch`.

A `Worker` is built (not run, no Redis connection is made) and batches of 8 no-op
entries go through what the consume loop does with a reply: `slots.reserve`,
`dispatcher.dispatch` (parse, handler, policy, stats, ack bookkeeping), then the
acks are taken as the next read would take them.  `time.process_time` over n jobs.
This is the part of a job that the round trips' noise hides in the drain benchmark
(docs/profile-worker.md, section C); `SD_BENCH_SRC`-style comparisons are done by
running it with another PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Sequence

import uvloop

from stagedoor.config import Settings
from stagedoor.stream.job import Job
from stagedoor.tickets.handlers import registry as builtin
from stagedoor.worker.loop import Worker

from .noop_handlers import registry as noop


async def dispatch_cost(n: int) -> float:
    """CPU microseconds per no-op job on the dispatch path."""
    s = Settings(redis_url="redis://127.0.0.1:1/0", consumer="bench")
    w = Worker(s, builtin.merged(noop))
    batch = [(f"{i}-0".encode(), Job("noop", i + 1, i + 1, f"r{i}", "t").fields())
             for i in range(8)]
    gc.freeze()
    t0 = time.process_time()
    for _ in range(n // 8):
        reserved = await w.slots.reserve(8)
        w.dispatcher.dispatch(batch, reserved, None)
        w.acker.settle(w.acker.take(), None)
        await asyncio.sleep(0)  # let any Task a job made run, as the loop would
    return (time.process_time() - t0) / n * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_dispatch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=200_000)
    a = p.parse_args(argv)
    print(f"{uvloop.run(dispatch_cost(a.n)):.2f} us per job (dispatch path, {a.n} jobs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
