"""py-spy profile of one `stagedoor work --burst` process draining a backlog.

    python -m bench.measure_profile [--n 40000] [--out drain.txt] [--rate 250]
    python -m bench.measure_profile --job latin --n 3000 --out job.txt [--idle]
    python -m bench.measure_profile --attach 3 --n 1500000 [--perf] [--rate 2000]

The no-op drain by default; `--job latin|mixed` drains render_tickets jobs over demo
orders (bench.measure_job: AOF Redis, tickets on a real disk), where `--idle` also
samples threads that wait (fsync, the loop's epoll), which is where that job's time goes.

Starts its own redis-server, fills the backlog, runs the worker under `py-spy record
--format raw`, and returns/prints the top frames by self and inclusive samples, the
socket writes grouped by caller, and the server's XREADGROUP/XACK counts.  Used for
docs/profile-worker.md.

`--attach S` profiles the drain only, not the worker's start-up (its imports are most
of a short drain's samples): the worker starts alone, and S seconds later py-spy
(--nonblocking) or, with `--perf`, `perf record -g` (every instruction, the kernel's
too, where py-spy sees only Python frames) attaches for `--seconds`.  With `--perf`
it prints the shares by shared object (the interpreter, the kernel, the extensions)
and of the system calls the worker makes; the backlog must outlast S + seconds.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import measure_common as mc

_FRAME = re.compile(r"^(.*) \((.*?)(?::\d+)?\)$")


def _key(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    fn, path = m.groups()
    for cut in ("site-packages/", "/src/", "/lib/python3.11/"):
        path = path.split(cut)[-1]
    return f"{fn} ({path})"


def analyse(raw: str, top: int = 30) -> dict[str, Any]:
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    writes: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_key(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for k in set(frames):
            incl[k] += n
        names = [f.split(" (")[0] for f in frames]
        for i, name in enumerate(names):
            if name.endswith((".write", ".write_many", ".writelines")):
                writes[" <- ".join(reversed(names[max(0, i - 3):i + 1]))] += n
                break
    pct = 100.0 / max(1, total)
    return {"samples": total,
            "self": [(k, round(v * pct, 1)) for k, v in own.most_common(top)],
            "inclusive": [(k, round(v * pct, 1)) for k, v in incl.most_common(top)],
            "writes_by_caller": writes.most_common(10)}


def profile(n: int = 40_000, out: str = "drain.txt", rate: int = 250, job: str = "",
            idle: bool = False) -> dict[str, Any]:
    import tempfile

    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    with mc.redis_server(appendonly=bool(job)) as server, \
            tempfile.TemporaryDirectory(prefix="sd-prof-") as tickets:
        extra: list[str] = []
        if job:
            from .measure_job import _fill, orders

            _fill(server.url, orders(n, job), outbox_base=1)
            extra = ["--tickets-dir", tickets]
        else:
            mc.fill(server.url, n)
        cmd = [spy, "record", "-r", str(rate), "-o", out, "--format", "raw",
               *(["--idle", "--threads"] if idle else []), "--",
               *mc.worker_cmd(server.url, extra=extra)]
        proc = mc.spawn(cmd)
        err = mc.stop(proc, timeout=600)
        c = mc.client(server.url)
        stats = {k.removeprefix("cmdstat_"): v["calls"] for k, v in
                 c.info("commandstats").items()
                 if k.removeprefix("cmdstat_") in ("xreadgroup", "xack", "evalsha", "hmget")}
        c.close()
    result = analyse(Path(out).read_text())
    result.update({"n": n, "commandstats": stats, "worker_stderr_tail": err[-300:]})
    return result


_SYSCALLS = ("ksys_write", "__x64_sys_epoll_pwait", "ksys_read")


def attached(n: int, out: str, rate: int, after: float, seconds: float,
             use_perf: bool) -> dict[str, Any]:
    """Profile a live worker draining n no-op jobs, from `after` s for `seconds` s."""
    import subprocess
    import time

    with mc.redis_server() as server:
        mc.fill(server.url, n)
        proc = mc.spawn(mc.worker_cmd(server.url))
        try:
            time.sleep(after)
            if proc.poll() is not None:
                raise RuntimeError("the worker exited before the profile: " + mc.stop(proc))
            if use_perf:
                subprocess.run(["perf", "record", "-F", str(rate), "-g", "-p", str(proc.pid),
                                "-o", out, "--", "sleep", str(seconds)],
                               check=True, capture_output=True)
            else:
                spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
                subprocess.run([spy, "record", "--pid", str(proc.pid), "-r", str(rate),
                                "--duration", str(int(seconds)), "--nonblocking",
                                "--format", "raw", "-o", out], check=True, capture_output=True)
            still_draining = proc.poll() is None
        finally:
            proc.terminate()
            mc.stop(proc)
    if not still_draining:
        raise RuntimeError("the backlog ran out during the profile: raise --n")
    if not use_perf:
        return analyse(Path(out).read_text())

    def report(*args: str) -> list[tuple[float, str]]:
        text = subprocess.run(["perf", "report", "-i", out, "--stdio", "-g", "none", *args],
                              check=True, capture_output=True, text=True).stdout
        rows = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith("%") and not line.startswith("#"):
                rows.append((float(parts[0].rstrip("%")), parts[-1]))
        return rows

    dsos = report("--no-children", "--sort", "dso")
    calls = [(pct, sym) for pct, sym in report("--children", "--sort", "sym")
             if sym in _SYSCALLS]
    return {"dso": dsos[:10], "syscalls": calls}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_profile")
    p.add_argument("--n", type=int, default=40_000)
    p.add_argument("--out", default="drain.txt")
    p.add_argument("--rate", type=int, default=250)
    p.add_argument("--job", choices=("latin", "mixed"), default="",
                   help="render_tickets over demo orders instead of the no-op drain")
    p.add_argument("--idle", action="store_true", help="also sample waiting threads")
    p.add_argument("--attach", type=float, metavar="S",
                   help="profile the running drain from S s after the start (no-op drain)")
    p.add_argument("--seconds", type=float, default=5.0, help="with --attach: how long")
    p.add_argument("--perf", action="store_true", help="with --attach: perf, not py-spy")
    a = p.parse_args(argv)
    if a.attach is not None:
        got = attached(a.n, a.out, a.rate, a.attach, a.seconds, a.perf)
        if a.perf:
            print("--- by shared object (self)")
            for v, k in got["dso"]:
                print(f"{v:5.1f}% {k}")
            print("--- system calls (inclusive)")
            for v, k in got["syscalls"]:
                print(f"{v:5.1f}% {k}")
            return 0
        print(f"{got['samples']} samples of the running drain")
        for k, v in got["self"]:
            print(f"{v:5.1f}% {k}")
        return 0
    r = profile(a.n, a.out, a.rate, a.job, a.idle)
    print(f"{r['samples']} samples, {a.n} jobs; {r['commandstats']}")
    for title in ("self", "inclusive"):
        print(f"--- {title}")
        for k, v in r[title]:
            print(f"{v:5.1f}% {k}")
    print("--- socket writes by caller (samples)")
    for k, v in r["writes_by_caller"]:
        print(f"{v:6d} {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
