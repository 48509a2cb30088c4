"""What one and two no-op workers spend their time on (issue 28): `perf stat` of each
worker process over a drain of the same backlog, at the seed defaults.

    PYTHONPATH=src:. python -m bench.profile_workers [--n 200000]

Per job, summed over the workers, with the start-up (a run on an empty stream) taken
off: CPU (task-clock, ms -> us a job), context switches (voluntary: a
sleep in epoll; the rest: preempted, by Redis or the other worker on its CPU), CPU
migrations, and the system calls of the read path (write: a read or an ack sent;
read: replies received; epoll_pwait: a loop turn or a sleep).  Needs `perf` (Debian's
linux-perf) with access to the syscalls tracepoints (root).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

from . import measure_common as mc

EVENTS = ("task-clock", "context-switches", "cpu-migrations", "syscalls:sys_enter_write",
          "syscalls:sys_enter_read", "syscalls:sys_enter_epoll_pwait")


def run(url: str, n: int, workers: int) -> dict[str, float]:
    mc.fill(url, n)
    procs = []
    t0 = time.perf_counter()
    for k in range(workers):
        cmd = ["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "--",
               *mc.worker_cmd(url, slot=k)]
        procs.append(subprocess.Popen(cmd, cwd=mc.ROOT, env=mc.env(), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE))
    totals = dict.fromkeys(EVENTS, 0.0)
    for p in procs:
        _, err = p.communicate(timeout=300)
        for line in err.decode().splitlines():
            parts = line.split(",")
            if len(parts) > 3 and parts[2] in totals and parts[0] not in ("<not counted>", ""):
                totals[parts[2]] += float(parts[0])
    totals["wall_s"] = time.perf_counter() - t0
    return totals


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.profile_workers")
    p.add_argument("--n", type=int, default=200_000)
    a = p.parse_args()
    print(f"load average {os.getloadavg()}", flush=True)
    with mc.redis_server() as server:
        for workers in (1, 2, 1, 2):
            # the start-up and exit alone (an empty stream), taken off the drain's counts
            base = run(server.url, 0, workers)
            t = run(server.url, a.n, workers)
            per = {k: (t[k] - base[k]) / a.n * 1000 for k in EVENTS}  # per 1000 jobs
            print(f"{workers} worker(s): CPU {per['task-clock']:.2f} us/job, per 1000 jobs: "
                  f"{per['context-switches']:.0f} context switches, "
                  f"{per['cpu-migrations']:.1f} migrations, "
                  f"{per['syscalls:sys_enter_write']:.0f} write, "
                  f"{per['syscalls:sys_enter_read']:.0f} read, "
                  f"{per['syscalls:sys_enter_epoll_pwait']:.0f} epoll_pwait; "
                  f"drain {t['wall_s'] - base['wall_s']:.2f} s", flush=True)


if __name__ == "__main__":
    main()
