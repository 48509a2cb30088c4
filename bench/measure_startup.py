"""Start-up: a worker's spawn to its first job, against a bare redis-py XREADGROUP
loop's, and the CLI's --version/--help (issue 27).

    python -m bench.measure_startup [--rounds 15] [--before SRC] [--json]

fork    a worker forked as stagedoor-supervise forks it (bench.supervisor_fork: a
        process holding the supervisor's imports runs Pool.try_spawn), one job
        waiting: from just before the fork until Redis shows the job acknowledged
        (XINFO GROUPS: read, none pending), polled every 2 ms from here.  Also its
        READY line on the heartbeat pipe (spawn to READY).
work    `python -m stagedoor.cli work --slot 0 --burst` spawned (a container's own
        supervisor, a developer, a supervisor restart: interpreter start and every
        import paid), measured the same way
bare    `python -c` a redis-py loop (XREADGROUP COUNT 10 BLOCK 5000 '>', XACK): process
        spawn, import redis, connect, first reply, ack; the least a Python consumer of
        the same stream can cost, measured the same way
cli     `stagedoor --version`, `--help`, `render --help`, `work --help`: spawn to exit
imports `-X importtime`: by package, and the self time of each module a worker imports
        beyond what `import redis` (the bare loop) does, least of 7 (with --before for
        both trees); `python -m bench.startup_phases` splits a start into its phases

--before SRC runs fork and work a second time from another source tree (the commit
before a change, its extensions built), in the same rounds: before and after side
by side on the same load.  Rounds interleave the contenders and rotate their order
(the machine's load falls on all alike); each prints median, min and max, and the
ratio to bare: of the medians, and the spread of the per-round ratios.  `-X
importtime` of the worker's modules says where its import time goes (top packages,
cumulative ms).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import IO, Any

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

CLI = ("--version", "--help", "render --help", "work --help")


def _acked(c: Any) -> bool:
    g = mc.group_info(c)
    return g["entries_read"] >= 1 and g["pending"] == 0


def _wait_acked(c: Any, t0: float, alive: Any, what: str, timeout: float = 60.0) -> float:
    """Seconds from t0 (time.monotonic) until the waiting job is acked."""
    while not _acked(c):
        if time.monotonic() - t0 > timeout or not alive():
            raise RuntimeError(f"no ack from {what}")
        time.sleep(0.002)
    return time.monotonic() - t0


def first_job(url: str, cmd: list[str], src: str | None = None) -> float:
    """Seconds from spawning cmd to Redis showing the one waiting job acknowledged."""
    mc.fill(url, 1)
    c = mc.client(url)
    try:
        t0 = time.monotonic()
        proc = mc.spawn(cmd, _src_env(src))
        try:
            return _wait_acked(c, t0, lambda: proc.poll() in (None, 0), " ".join(cmd[:4]))
        except RuntimeError as e:
            raise RuntimeError(f"{e}: {mc.stop(proc)[-600:]}") from None
        finally:
            mc.stop(proc, timeout=15)
    finally:
        c.close()


def _src_env(src: str | None) -> dict[str, str]:
    return {"SD_BENCH_SRC": src} if src else {}


class ForkServer:
    """bench.supervisor_fork: forks a worker as the supervisor does, on request."""

    def __init__(self, url: str, src: str | None = None) -> None:
        self.url = url
        self.proc = subprocess.Popen(
            [mc.PY, "-m", "bench.supervisor_fork", *mc.common_flags(url), "--workers", "1"],
            cwd=mc.ROOT, env=mc.env(**_src_env(src)), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, bufsize=1)

    def _ask(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def _line(self, prefix: str) -> str:
        out: IO[str] | None = self.proc.stdout
        assert out is not None
        line = out.readline()
        if not line.startswith(prefix):
            raise RuntimeError(f"fork server: expected {prefix!r}, got {line!r}")
        return line[len(prefix):].strip()

    def first_job(self) -> tuple[float, float]:
        """(fork to first job acked, fork to READY) in seconds."""
        mc.fill(self.url, 1)
        c = mc.client(self.url)
        try:
            self._ask("spawn")
            t0 = float(self._line("forked "))
            acked = _wait_acked(c, t0, lambda: self.proc.poll() is None, "a forked worker")
            ready = float(self._line("ready "))
            self._ask("stop")
            self._line("stopped")
            return acked, ready
        finally:
            c.close()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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


WORKER_IMPORTS = ("import stagedoor.cli.commands.work, stagedoor.worker.child, uvloop; "
                  "from stagedoor.handlers import load_registry; load_registry(); "
                  "from stagedoor.render import fonts, native_import_error; "
                  "native_import_error()")


def _self_times(code: str, src: str | None) -> dict[str, int]:
    proc = subprocess.run([mc.PY, "-X", "importtime", "-c", code], cwd=mc.ROOT,
                          env=mc.env(**_src_env(src)), capture_output=True, text=True,
                          check=True)
    out = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        own, _cum, name = line[len("import time:"):].split("|")
        if own.strip().isdigit():
            out[name.strip()] = int(own)
    return out


def own_imports(src: str | None = None, runs: int = 7) -> dict[str, int]:
    """`-X importtime` self time (us, the least of `runs`) of each module a worker
    imports before its first read that `import redis` (the bare loop) does not."""
    def least(code: str) -> dict[str, int]:
        seen = [_self_times(code, src) for _ in range(runs)]
        return {k: min(r.get(k, 1 << 40) for r in seen) for k in seen[0]}

    shared = least("import redis")
    return {k: v for k, v in least(WORKER_IMPORTS).items() if k not in shared}


def measure(rounds: int = 15, before: str | None = None, cli: bool = True
            ) -> dict[str, Any]:
    """Seconds per round for each contender (lists), READY times of the forked ones."""
    times: dict[str, list[float]] = {"bare": [], "fork": [], "work": []}
    ready: dict[str, list[float]] = {"fork": []}
    if before:
        times |= {"fork before": [], "work before": []}
        ready["fork before"] = []
    cli_times: dict[str, list[float]] = {k: [] for k in CLI} if cli else {}
    with mc.redis_server() as server:
        url = server.url
        forks = {"fork": ForkServer(url)}
        if before:
            forks["fork before"] = ForkServer(url, before)
        try:
            names = list(times)
            for r in range(rounds):
                k = r % len(names)
                for name in names[k:] + names[:k]:  # rotate who goes first
                    if name == "bare":
                        times[name].append(first_job(url, [mc.PY, "-c", BARE, url]))
                    elif name.startswith("fork"):
                        acked, at_ready = forks[name].first_job()
                        times[name].append(acked)
                        ready[name].append(at_ready)
                    else:
                        src = before if name.endswith("before") else None
                        times[name].append(first_job(url, mc.worker_cmd(url), src))
                for key in cli_times:
                    cli_times[key].append(cli_time(key.split()))
                mc.progress(f"round {r + 1}/{rounds}: " + ", ".join(
                    f"{n} {v[-1] * 1000:.0f} ms" for n, v in times.items()))
        finally:
            for f in forks.values():
                f.close()
    return {"rounds": rounds, "times": times, "ready": ready, "cli": cli_times}


def summary(m: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per contender: median/min/max ms, ratio of medians to bare, per-round ratio spread."""
    bare = m["times"]["bare"]
    out: dict[str, dict[str, float]] = {}
    for name, v in m["times"].items():
        per_round = sorted(x / b for x, b in zip(v, bare, strict=True))
        out[name] = {"median_ms": mc.median(v) * 1000, "min_ms": min(v) * 1000,
                     "max_ms": max(v) * 1000, "ratio": mc.median(v) / mc.median(bare),
                     "ratio_min": per_round[0], "ratio_max": per_round[-1]}
    for name, v in m["ready"].items():
        out[name + " READY"] = {"median_ms": mc.median(v) * 1000, "min_ms": min(v) * 1000,
                                "max_ms": max(v) * 1000,
                                "ratio": mc.median(v) / mc.median(bare)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--before", metavar="SRC", help="also run fork and work from this "
                    "source tree (its src/ directory, extensions built)")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI timings")
    ap.add_argument("--json", action="store_true", help="print the raw times as JSON")
    a = ap.parse_args(argv)
    m = measure(a.rounds, a.before, cli=not a.no_cli)
    if a.json:
        print(json.dumps(m | {"summary": summary(m)}, indent=1))
        return 0
    print(f"spawn to first job acked, {a.rounds} rounds (ms: median [min-max]; ratio to "
          "bare: of the medians [per-round min-max]):")
    for name, s in summary(m).items():
        spread = (f" [{s['ratio_min']:.2f}-{s['ratio_max']:.2f}]" if "ratio_min" in s
                  else "")
        print(f"  {name:<20}{s['median_ms']:6.0f} [{s['min_ms']:.0f}-{s['max_ms']:.0f}]"
              f"   x{s['ratio']:.2f}{spread}")
    for k, v in m["cli"].items():
        print(f"stagedoor {k}: median {mc.median(v) * 1000:.0f} ms")
    print("import time of stagedoor.cli.commands.work + stagedoor.worker.child, by package "
          "(cumulative ms):")
    for pkg, us in import_breakdown("stagedoor.cli.commands.work, stagedoor.worker.child"):
        print(f"  {pkg:<24}{us / 1000:7.1f}")
    for label, src in (("after", None), *((("before", a.before),) if a.before else ())):
        own = own_imports(src)
        top = sorted(own.items(), key=lambda kv: -kv[1])[:12]
        print(f"{label}: the worker's imports beyond `import redis`, -X importtime self "
              f"time, least of 7: {sum(own.values()) / 1000:.1f} ms in {len(own)} modules; "
              "the heaviest: " + ", ".join(f"{k} {v / 1000:.1f}" for k, v in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
