"""Start-up: a worker's spawn-to-first-job against a bare redis-py XREADGROUP loop's,
and the CLI's --version/--help (issue 27).

    python -m bench.measure_startup [--rounds 9]

worker  `python -m stagedoor.cli work --burst` (bench.noop_handlers) spawned with one
        job waiting: the time until Redis shows it acknowledged (XINFO GROUPS: read,
        none pending), polled every 2 ms from here
bare    `python -c` a redis-py loop (XREADGROUP COUNT 10 BLOCK 5000 '>', XACK): the
        least a Python consumer of the same stream can cost, measured the same way
cli     `stagedoor --version`, `--help`, `render --help`, `work --help`: spawn to exit

Rounds interleave the contenders (the machine's load falls on both alike); medians
are printed with the ratio worker/bare.  `-X importtime` of the worker's command module
says where its import time goes (the top packages, cumulative microseconds).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

from . import measure_common as mc

BARE = """
import sys, redis
r = redis.Redis.from_url(sys.argv[1], protocol=2)
while True:
    reply = r.xreadgroup("workers", "bare", {"jobs": ">"}, count=10, block=5000)
    for _stream, entries in reply or []:
        r.xack("jobs", "workers", *[eid for eid, _f in entries])
        sys.exit(0)
"""


def _acked(c: Any) -> bool:
    g = mc.group_info(c)
    return g["entries_read"] >= 1 and g["pending"] == 0


def first_job(url: str, cmd: list[str], timeout: float = 60.0) -> float:
    """Seconds from spawning cmd to Redis showing the one waiting job acknowledged."""
    mc.fill(url, 1)
    c = mc.client(url)
    try:
        t0 = time.perf_counter()
        proc = mc.spawn(cmd)
        try:
            while not _acked(c):
                if time.perf_counter() - t0 > timeout or proc.poll() not in (None, 0):
                    raise RuntimeError(f"no ack from {cmd[:4]}: {mc.stop(proc)[-600:]}")
                time.sleep(0.002)
            return time.perf_counter() - t0
        finally:
            mc.stop(proc, timeout=15)
    finally:
        c.close()


def cli_time(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([mc.PY, "-m", "stagedoor.cli", *args], env=mc.env(), cwd=mc.ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def import_breakdown(module: str, top: int = 8) -> list[tuple[str, int]]:
    """The heaviest top-level packages `import module` loads (cumulative us)."""
    proc = subprocess.run([mc.PY, "-X", "importtime", "-c", f"import {module}"],
                          env=mc.env(), cwd=mc.ROOT, capture_output=True, text=True, check=True)
    by_pkg: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _self, cum, name = line[len("import time:"):].split("|")
        if not cum.strip().isdigit():  # the header line
            continue
        pkg = name.strip().split(".")[0]
        by_pkg[pkg] = max(by_pkg.get(pkg, 0), int(cum))
    return sorted(by_pkg.items(), key=lambda kv: -kv[1])[:top]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args(argv)
    worker: list[float] = []
    bare: list[float] = []
    cli: dict[str, list[float]] = {k: [] for k in ("--version", "--help", "render --help",
                                                   "work --help")}
    with mc.redis_server() as server:
        url = server.url
        for r in range(a.rounds):
            worker.append(first_job(url, mc.worker_cmd(url)))
            bare.append(first_job(url, [mc.PY, "-c", BARE, url]))
            for k in cli:
                cli[k].append(cli_time(k.split()))
            mc.progress(f"round {r + 1}/{a.rounds}: worker {worker[-1] * 1000:.0f} ms, "
                        f"bare {bare[-1] * 1000:.0f} ms")
    w, b = mc.median(worker), mc.median(bare)
    print(f"spawn to first job acked, median of {a.rounds}: stagedoor work {w * 1000:.0f} ms, "
          f"bare redis-py loop {b * 1000:.0f} ms, ratio {w / b:.2f}")
    for k, v in cli.items():
        print(f"stagedoor {k}: median {mc.median(v) * 1000:.0f} ms")
    print("import time of stagedoor.cli.commands.work + stagedoor.worker.child, by package "
          "(cumulative ms):")
    for pkg, us in import_breakdown("stagedoor.cli.commands.work, stagedoor.worker.child"):
        print(f"  {pkg:<24}{us / 1000:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
