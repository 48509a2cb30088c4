"""Where a `stagedoor work` start goes, phase by phase, to its first XREADGROUP reply.

    python -m bench.startup_phases [--runs 7] [--before SRC]

Runs `stagedoor work --slot 0 --burst` (bench handlers, one job waiting) in a child that
wraps the worker's boot steps with time markers (nothing else changes: the same CLI,
the same code path), `--runs` times per source tree, and prints the median of each
phase in ms, from just before the spawn:

    interpreter         Python up, site imported (the child's first line)
    asyncio + redis     `import asyncio, redis`: what the bare redis-py loop imports too
    stagedoor imports   stagedoor.cli.main and the `work` command's modules (the rest)
    parse + settings    argparse, Settings, logging
    registry            load_registry: the built-in handlers and the bench's
    uvloop + Worker     uvloop, the process title, Worker() (no I/O)
    tracing + renderer  OTel set-up, the native renderer's import (check_renderer)
    boot                HELLO, XGROUP CREATE, the hot-path connects, the audit, the
                        on_start hooks, the first presence beat (READY after it)
    fonts + warnings    warn_at_start: the font plan (the installed fonts' coverage) and
                        the boot warnings, before the first read
    first read          until the reply of the first XREADGROUP (own pending)

--before SRC measures another source tree the same way, in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

PHASES = ("interpreter", "asyncio + redis", "stagedoor imports", "parse + settings",
          "registry", "uvloop + Worker", "tracing + renderer", "boot",
          "fonts + warnings", "first read")


# The child: a `python -c` of its own, so that nothing of bench/ (argparse, json,
# pathlib, ...) is imported before stagedoor imports it.
CHILD = r"""
import sys, time
t0 = float(sys.argv[1])
marks = {"interpreter": time.monotonic() - t0}
def mark(name):
    marks.setdefault(name, time.monotonic() - t0)
import asyncio
import redis
mark("asyncio + redis")
import stagedoor.cli.commands.work as work
import stagedoor.cli.main as cli_main
from stagedoor.telemetry import tracing
from stagedoor.worker import lifecycle, reader
mark("stagedoor imports")
def before(obj, name, phase):  # phase ends when obj.name is first called
    fn = getattr(obj, name)
    if asyncio.iscoroutinefunction(fn):
        async def wrapped(*a, **k):
            mark(phase)
            return await fn(*a, **k)
    else:
        def wrapped(*a, **k):
            mark(phase)
            return fn(*a, **k)
    setattr(obj, name, wrapped)
def after(obj, name, phase):  # phase ends when obj.name first returns
    fn = getattr(obj, name)
    def wrapped(*a, **k):
        try:
            return fn(*a, **k)
        finally:
            mark(phase)
    setattr(obj, name, wrapped)
before(work, "load_registry", "parse + settings")
after(work, "load_registry", "registry")
before(tracing, "setup_or_config_error", "uvloop + Worker")
before(lifecycle, "boot", "tracing + renderer")
before(lifecycle, "warn_at_start", "boot")
after(lifecycle, "warn_at_start", "fonts + warnings")
after(reader, "stream_entries", "first read")
try:
    code = cli_main.main(sys.argv[2:])
finally:
    import json
    print("PHASES " + json.dumps(marks), file=sys.stderr, flush=True)
sys.exit(code)
"""


def run_once(url: str, src: str | None) -> dict[str, float]:
    from . import measure_common as mc

    mc.fill(url, 1)
    args = mc.worker_cmd(url)[3:]  # after `python -m stagedoor.cli`
    t0 = time.monotonic()
    proc = subprocess.run([mc.PY, "-c", CHILD, repr(t0), *args],
                          cwd=mc.ROOT, env=mc.env(**({"SD_BENCH_SRC": src} if src else {})),
                          capture_output=True, text=True, timeout=120)
    line = [x for x in proc.stderr.splitlines() if x.startswith("PHASES ")]
    if proc.returncode or not line:
        raise RuntimeError(f"stagedoor work failed: {proc.stderr[-800:]}")
    marks: dict[str, float] = json.loads(line[-1][len("PHASES "):])
    return marks


def main(argv: list[str] | None = None) -> int:
    from . import measure_common as mc

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--before", metavar="SRC")
    a = ap.parse_args(argv)
    trees = {"after": None} | ({"before": a.before} if a.before else {})
    got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    with mc.redis_server() as server:
        for _ in range(a.runs):
            for name, src in trees.items():
                got[name].append(run_once(server.url, src))
    print(f"stagedoor work, ms from spawn, median of {a.runs} (phase length | cumulative):")
    print(f"  {'phase':<20}" + "".join(f"{n:>20}" for n in trees))
    prev = {n: 0.0 for n in trees}
    for phase in PHASES:
        cells = []
        for name in trees:
            cum = mc.median([m[phase] for m in got[name]]) * 1000
            cells.append(f"{cum - prev[name]:8.1f} | {cum:7.1f}  ")
            prev[name] = cum
        print(f"  {phase:<20}" + "".join(f"{c:>20}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
