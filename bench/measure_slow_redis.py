"""The read-ahead's wait for a reply when Redis answers late (issue 28).

    PYTHONPATH=src:. python -m bench.measure_slow_redis [--n 100000] [--rounds 2]

One no-op drain (`stagedoor work --burst`, seed defaults) per wait mechanism and per
condition, beside the tuned raw loop in the same condition, interleaved:

  mechanisms  learn     the shipped ReplyWait: turns learned from the replies
              sleep     always sleep in epoll until the reply wakes the loop
              turn16    always turn the loop up to 16 times first (the reader before)
  conditions  plain     nothing pinned
              one-core  Redis, the worker (or the raw loop) and this process on CPU 0
              loaded    Redis pinned to CPU 1 beside a busy loop on CPU 1
              quota     Redis in a cgroup (v1 cpu) with 30 % of one CPU

Prints, per condition, jobs/s and CPU a job of each, and each over the raw loop's.  The
conditions need root (taskset-like affinity of Redis, a cgroup); where the cgroup cannot
be made, `quota` is skipped with the reason.  The results are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import measure_common as mc
from .measure_drain import drain

MECHANISMS = {"learn": ("reply-stats=1",), "sleep": ("reply-turns=0", "reply-stats=1"),
              "turn16": ("reply-turns=16", "reply-stats=1")}
CGROUP = Path("/sys/fs/cgroup/cpu/stagedoor-bench")


@contextlib.contextmanager
def condition(name: str, redis_pid: int) -> Iterator[None]:
    """Put Redis (and this process, whose children inherit it) in the condition."""
    mine = os.sched_getaffinity(0)
    theirs = os.sched_getaffinity(redis_pid)
    hog: subprocess.Popen[bytes] | None = None
    try:
        if name == "one-core":
            os.sched_setaffinity(0, {0})
            os.sched_setaffinity(redis_pid, {0})
        elif name == "loaded":
            os.sched_setaffinity(redis_pid, {1})
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            os.sched_setaffinity(hog.pid, {1})
        elif name == "quota":
            CGROUP.mkdir(exist_ok=True)
            (CGROUP / "cpu.cfs_period_us").write_text("100000")
            (CGROUP / "cpu.cfs_quota_us").write_text("30000")
            (CGROUP / "tasks").write_text(str(redis_pid))
        yield
    finally:
        os.sched_setaffinity(0, mine)
        os.sched_setaffinity(redis_pid, theirs)
        if hog is not None:
            hog.kill()
            hog.wait()
        if name == "quota" and CGROUP.exists():
            with contextlib.suppress(OSError):
                Path("/sys/fs/cgroup/cpu/tasks").write_text(str(redis_pid))
            with contextlib.suppress(OSError):
                CGROUP.rmdir()


def measure(n: int, rounds: int, conditions: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with mc.redis_server() as server:
        assert server.process is not None
        pid = server.process.pid
        for cond in conditions:
            try:
                with condition(cond, pid):
                    pass
            except OSError as e:
                print(f"{cond}: skipped ({e})", flush=True)
                continue
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in ("raw", *MECHANISMS)}
            for r in range(rounds):
                order = ["raw", *MECHANISMS]
                for kind in order if r % 2 == 0 else order[::-1]:
                    with condition(cond, pid):
                        if kind == "raw":
                            res = drain(server.url, n, kind="raw")
                        else:
                            res = drain(server.url, n, inject=MECHANISMS[kind])
                    runs[kind].append(res)
                    mc.progress(f"{cond} round {r + 1}/{rounds} {kind}: {res['rate']:,.0f} "
                                f"jobs/s, {res['cpu_us_per_job']:.2f} us CPU a job "
                                f"{' '.join(res['reply_stats'])}")
            raw_rate = mc.median([x["rate"] for x in runs["raw"]])
            raw_cpu = mc.median([x["cpu_us_per_job"] for x in runs["raw"]])
            row = {"raw_rate": raw_rate, "raw_cpu_us": raw_cpu}
            line = f"{cond:9s} raw {raw_rate:9,.0f}/s {raw_cpu:5.2f} us"
            for kind in MECHANISMS:
                rate = mc.median([x["rate"] for x in runs[kind]])
                cpu = mc.median([x["cpu_us_per_job"] for x in runs[kind]])
                row[kind] = {"rate": rate, "cpu_us": cpu, "vs_raw": rate / raw_rate,
                             "cpu_vs_raw": cpu / raw_cpu}
                line += f" | {kind} {rate:9,.0f}/s x{rate / raw_rate:.2f} {cpu:5.2f} us " \
                        f"x{cpu / raw_cpu:.2f}"
            print(line, flush=True)
            out[cond] = row
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.measure_slow_redis")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--conditions", default="plain,one-core,loaded,quota")
    a = p.parse_args()
    print(f"load average {os.getloadavg()}", flush=True)
    measure(a.n, a.rounds, a.conditions.split(","))


if __name__ == "__main__":
    main()
