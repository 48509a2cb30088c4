"""Where a second worker's time goes, and the ceiling of this box (issue 28).

    PYTHONPATH=src:. python -m bench.measure_ceiling [--n 200000] [--rounds 2]

No-op drains at the seed defaults by 1 and 2 `stagedoor work --burst` processes and by
the tuned raw loop, interleaved, each on a fresh backlog of one server.  Beside each
drain's rate and the workers' CPU a job (wait4 rusage), Redis's own CPU a job is read
from its process (/proc, user + system, over the drain), and the box's: the drain's
wall time x the CPUs.  On a 2-CPU box the ceiling of any number of workers is
2 / (Redis's CPU a job + a worker's CPU a job) jobs/s, when both CPUs do nothing else;
Redis, single-threaded, caps it at 1 / (its CPU a job).  Both are printed next to what
was reached.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import psutil

from . import measure_common as mc
from .measure_drain import drain


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def measure(n: int, rounds: int) -> dict[str, Any]:
    kinds = [("stagedoor", 1), ("stagedoor", 2), ("raw", 1)]
    runs: dict[str, list[dict[str, Any]]] = {f"{k}x{w}": [] for k, w in kinds}
    with mc.redis_server() as server:
        assert server.process is not None
        redis_proc = psutil.Process(server.process.pid)
        for r in range(rounds):
            for kind, workers in kinds if r % 2 == 0 else kinds[::-1]:
                before = _cpu(redis_proc)
                res = drain(server.url, n, kind=kind, workers=workers)
                # Redis's CPU over the whole drain call includes the fill (XADDs) and the
                # polls of the bench: measured alone below and taken off.
                res["redis_cpu_us_total"] = (_cpu(redis_proc) - before) / n * 1e6
                runs[f"{kind}x{workers}"].append(res)
        # Redis's CPU for the fill and the bench's polling alone: a drain of nothing
        before = _cpu(redis_proc)
        mc.fill(server.url, n)
        fill_us = (_cpu(redis_proc) - before) / n * 1e6
        c = mc.client(server.url)
        c.delete("jobs")
        c.close()
    out: dict[str, Any] = {"fill_redis_cpu_us": fill_us, "cpus": os.cpu_count()}
    for key, rs in runs.items():
        rate = mc.median([x["rate"] for x in rs])
        worker_us = mc.median([x["cpu_us_per_job"] for x in rs])
        redis_us = mc.median([x["redis_cpu_us_total"] for x in rs]) - fill_us
        cpus = os.cpu_count() or 2
        out[key] = {"rate": rate, "worker_cpu_us": worker_us, "redis_cpu_us": redis_us,
                    "ceiling_redis": 1e6 / redis_us,
                    "ceiling_box": cpus * 1e6 / (redis_us + worker_us)}
        print(f"{key:12s} {rate:9,.0f} jobs/s  worker CPU {worker_us:5.2f} us/job  "
              f"Redis CPU {redis_us:5.2f} us/job  ceilings: Redis alone "
              f"{1e6 / redis_us:9,.0f}/s, box {cpus * 1e6 / (redis_us + worker_us):9,.0f}/s",
              flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.measure_ceiling")
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    print(f"load average {os.getloadavg()}", flush=True)
    measure(a.n, a.rounds)


if __name__ == "__main__":
    main()
