"""py-spy profile of one `stagedoor work --burst` process draining a backlog.

    python -m bench.measure_profile [--n 40000] [--out drain.txt] [--rate 250]
    python -m bench.measure_profile --job latin --n 3000 --out job.txt [--idle]

The no-op drain by default; `--job latin|mixed` drains render_tickets jobs over demo
orders (bench.measure_job: AOF Redis, tickets on a real disk), where `--idle` also
samples threads that wait (fsync, the loop's epoll), which is where that job's time goes.

Starts its own redis-server, fills the backlog, runs the worker under `py-spy record
--format raw`, and returns/prints the top frames by self and inclusive samples, the
socket writes grouped by caller, and the server's XREADGROUP/XACK counts.  Used for
docs/profile-worker.md.
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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_profile")
    p.add_argument("--n", type=int, default=40_000)
    p.add_argument("--out", default="drain.txt")
    p.add_argument("--rate", type=int, default=250)
    p.add_argument("--job", choices=("latin", "mixed"), default="",
                   help="render_tickets over demo orders instead of the no-op drain")
    p.add_argument("--idle", action="store_true", help="also sample waiting threads")
    a = p.parse_args(argv)
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
