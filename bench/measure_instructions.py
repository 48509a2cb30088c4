"""Instructions a no-op job costs on the worker's read path, counted by callgrind
(issue 28).  Counts, not seconds: the same figure whatever else the box is doing, so a
change to the read path can be weighed on a shared machine.

    PYTHONPATH=src:. python -m bench.measure_instructions [--n 20000] [--src DIR ...]

One `stagedoor work --burst` (seed defaults) drains an n-job backlog under
`valgrind --tool=callgrind`; the figures are the inclusive instruction counts of the
event loop's read callbacks (everything a reply sets off: parsing, dispatch, the
handlers, the next read's write up to the system call), of FastDispatch.run (the C
dispatch of a reply's jobs, handler included), of hiredis' parsing, and what is left
(the Python glue of the read path: the protocol, the read-ahead, slots, acks,
deadlines, uvloop's write), each divided by n.  Kernel time (the write and read system
calls, epoll) is not counted.  Under callgrind the worker is ~50x slower, so a reply
is always in when it is looked for: the figures are the work a job costs, not the
waiting.  `--src` measures other source trees (a checkout of the commit before a
change, its extensions built) the same way: the before/after of a change.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import measure_common as mc

# callgrind function names (substrings of callgrind_annotate's lines)
PARTS = {
    "read callbacks": ":__pyx_f_6uvloop_4loop___uv_stream_on_read ",
    "FastDispatch.run": "FastDispatch_3run ",
    "hiredis gets": ":Reader_gets ",
}


def measure(url: str, n: int, src: str) -> dict[str, float]:
    mc.fill(url, n)
    with tempfile.TemporaryDirectory(prefix="sd-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
               *mc.worker_cmd(url)]
        r = subprocess.run(cmd, env=mc.env(SD_BENCH_SRC=src), cwd=mc.ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           check=False)
        if r.returncode != 0 or not out.exists():
            raise RuntimeError(f"callgrind run failed ({r.returncode}): {r.stderr[-500:]}")
        if mc.group_info(mc.client(url))["pending"]:
            raise RuntimeError("the drain under callgrind left jobs pending")
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--auto=no",
                               "--threshold=100", str(out)], check=True,
                              capture_output=True, text=True).stdout
    got: dict[str, float] = {}
    for line in text.splitlines():
        for part, needle in PARTS.items():
            if needle in line and part not in got:
                m = re.match(r"\s*([\d,]+)", line)
                if m:
                    got[part] = int(m.group(1).replace(",", "")) / n
    missing = [p for p in PARTS if p not in got]
    if missing:
        raise RuntimeError(f"not in callgrind's output: {missing}")
    got["glue"] = got["read callbacks"] - got["FastDispatch.run"] - got["hiredis gets"]
    return got


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.measure_instructions")
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--src", action="append", default=[],
                   help="a source tree to measure (default: this checkout's src)")
    a = p.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("measure_instructions: valgrind is not installed (apt-get install "
                         "valgrind)")
    trees = a.src or [str(mc.SRC)]
    with mc.redis_server() as server:
        for src in trees:
            got = measure(server.url, a.n, os.path.abspath(src))
            print(f"{src}: instructions a no-op job, {a.n} jobs: "
                  + ", ".join(f"{k} {v:,.0f}" for k, v in got.items()), flush=True)


if __name__ == "__main__":
    main()
