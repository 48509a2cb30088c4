"""Where a render_tickets job's CPU goes, thread by thread: the worker's event loop, its
render pool (render_isolation = "none"), the render process's event loop and its pool,
over the steady part of one worker's drain.

    PYTHONPATH=src:. python -m bench.measure_threads [--modes process,none]
                                                     [--kinds latin] [--rounds 2] [--n 12000]

One `stagedoor work --burst` process at the seed defaults (bench.measure_job.job_drain:
AOF Redis, the PDFs on a real disk, SD_BENCH_DISK_DIR to choose it) drains n jobs per
contender, interleaved (process, none, then none, process...).  Between a fifth and
four fifths of the jobs done, each thread's user and system time and its voluntary and
involuntary context switches (/proc/PID/task/TID) are read at both ends and divided by
the jobs done between them.  A thread's times tick at 100 Hz: the window is ~3 s of a
12,000-job drain, so ~0.3 us a job.

Why per thread: a drain's rate on this 2-core box swings +-15 % from round to round with
the disk (bench/measure_isolation.py), far more than what the render process costs;
its loop thread's CPU a job is steady to a few microseconds.  Redis's CPU is not here
(the same in both modes).  Run it in each tree to compare two versions.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from . import measure_common as mc
from .measure_job import job_drain, orders

Sample = dict[str, list[float]]     # thread group -> [user s, system s, vcsw, ivcsw]


def _status_counts(path: str) -> tuple[int, int]:
    vol = inv = 0
    with open(path) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                vol = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                inv = int(line.split()[1])
    return vol, inv


def sample(worker: int) -> Sample:
    """Each thread of the worker and of its children, summed by group."""
    import psutil

    out: Sample = {}
    w = psutil.Process(worker)
    for proc in [w, *w.children()]:
        side = "worker" if proc.pid == worker else "render process"
        try:
            threads = proc.threads()
        except psutil.Error:
            continue
        for t in threads:
            try:
                vol, inv = _status_counts(f"/proc/{proc.pid}/task/{t.id}/status")
            except OSError:     # the thread ended meanwhile
                continue
            group = f"{side}: {'event loop' if t.id == proc.pid else 'other threads'}"
            acc = out.setdefault(group, [0.0, 0.0, 0.0, 0.0])
            for i, v in enumerate((t.user_time, t.system_time, vol, inv)):
                acc[i] += v
    return out


def one(url: str, kind: str, mode: str, n: int) -> dict[str, Any]:
    """One drain; per-job figures of the steady window."""
    res: dict[str, Any] = {}

    def watch(pids: Sequence[int]) -> None:
        c = mc.client(url)

        def done() -> int:
            info = mc.group_info(c)
            return int(info["entries_read"]) - int(info["pending"])

        def at(level: int) -> tuple[int, Sample, float]:
            # 20 ms, not job_drain's 3: each poll is an XINFO Redis answers on the box
            # being measured, and the figures divide by the jobs done between the two
            # samples, so the window's edges need not be exact
            while done() < level:
                time.sleep(0.02)
            return done(), sample(pids[0]), time.perf_counter()

        d0, s0, t0 = at(n // 5)
        d1, s1, t1 = at(n * 4 // 5)
        jobs = d1 - d0
        res["rate"] = jobs / (t1 - t0)
        res["threads"] = {g: [(v - s0.get(g, [0.0] * 4)[i]) / jobs * (1e6 if i < 2 else 1)
                              for i, v in enumerate(vals)] for g, vals in s1.items()}

    watcher: list[threading.Thread] = []

    def spawned(pids: Sequence[int]) -> None:
        watcher.append(threading.Thread(target=watch, args=(pids,), daemon=True))
        watcher[0].start()

    job_drain(url, orders(n, kind), extra=["--render-isolation", mode], on_spawned=spawned)
    watcher[0].join(60)
    if "threads" not in res:
        raise SystemExit("the drain ended before its steady window did: raise --n")
    return res


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="process,none")
    ap.add_argument("--kinds", default="latin")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=12_000)
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    print(f"disk: {os.environ.get('SD_BENCH_DISK_DIR') or 'the temp dir'}; "
          f"us of CPU a job (user + system), context switches a job (voluntary, "
          f"involuntary)")
    for kind in args.kinds.split(","):
        for r in range(args.rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                with mc.redis_server(appendonly=True) as server:
                    res = one(server.url, kind, mode, args.n)
                total = sum(v[0] + v[1] for v in res["threads"].values())
                print(f"{kind} {mode} round {r + 1}: {res['rate']:,.0f} jobs/s, "
                      f"{total:.0f} us a job")
                for group, (u, s, vol, inv) in sorted(res["threads"].items()):
                    if u + s + vol + inv == 0:
                        continue
                    print(f"  {group:32s} {u:6.1f} + {s:6.1f} us   {vol:5.2f} {inv:5.2f}")


if __name__ == "__main__":
    main()
