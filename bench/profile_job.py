"""Where a render_tickets job's CPU goes on the whole box: `perf record -a -g` attached
to the steady part of one worker's drain, split by process and shared object, with the
render process's system calls (issue 36: "say where the remaining CPU a job goes").

    PYTHONPATH=src:. python -m bench.profile_job [--kind latin|mixed] [--mode process|none]
                                                 [--n 8000] [--after 1.0] [--seconds 2]

One `stagedoor work --burst` process (bench.measure_job.job_drain: AOF Redis, the PDFs on
a real disk) drains n render_tickets jobs; `--after` seconds after its spawn (past its
boot), perf samples every CPU for `--seconds`: the worker, its render process,
redis-server, the kernel's threads and idle (swapper).  Prints the drain's figures, the
shares by process and by process and shared object, and the render process's kernel
paths that take more than 0.5 % (inode allocation, fsync, write, link).  The backlog
must outlast after + seconds.  Needs `perf` (Debian's linux-perf) and root, or
kernel.perf_event_paranoid <= -1.

System-wide on purpose: the render process, Redis and the kernel's work for them are
the job's cost as much as the worker's Python is (bench.measure_profile --perf samples
the worker process alone).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from . import measure_common as mc
from .measure_job import job_drain, orders

SYSCALL_PATHS = ("__x64_sys_openat", "ext4_tmpfile", "recently_deleted", "__x64_sys_fsync",
                 "ksys_write", "__x64_sys_linkat", "__x64_sys_futex", "__x64_sys_epoll_pwait")


def _report(data: Path, *args: str) -> list[str]:
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "-g", "none",
                          *args], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.strip() and not line.startswith("#")]


def profile(kind: str, mode: str, n: int, after: float, seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="sd-perf-") as tmp, \
            mc.redis_server(appendonly=True) as server:
        data = Path(tmp) / "perf.data"
        perf: list[subprocess.Popen[bytes]] = []

        def attach(_pids: Sequence[int]) -> None:
            time.sleep(after)
            perf.append(subprocess.Popen(
                ["perf", "record", "-a", "-g", "-F", "999", "-o", str(data), "--",
                 "sleep", str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        res = job_drain(server.url, orders(n, kind), extra=["--render-isolation", mode],
                        on_spawned=attach)
        if perf[0].wait() != 0 or not data.exists():
            raise SystemExit("perf record failed (perf installed? root or "
                             "kernel.perf_event_paranoid <= -1?)")
        print({k: round(v, 1) if isinstance(v, float) else v for k, v in res.items()})
        print("\n-- by process")
        print("\n".join(_report(data, "--no-children", "--sort", "comm")[:10]))
        print("\n-- by process and shared object")
        print("\n".join(_report(data, "--no-children", "--sort", "comm,dso")[:24]))
        print("\n-- the render process's kernel paths (children included)")
        lines = _report(data, "--children", "--comm", "stagedoor rende", "--sort", "sym")
        print("\n".join(line for line in lines if any(p in line for p in SYSCALL_PATHS)))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_job", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", default="latin", choices=("latin", "mixed"))
    p.add_argument("--mode", default="process", choices=("process", "none"))
    p.add_argument("--n", type=int, default=8000)
    p.add_argument("--after", type=float, default=1.0)
    p.add_argument("--seconds", type=float, default=2.0)
    a = p.parse_args(argv)
    profile(a.kind, a.mode, a.n, a.after, a.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
