"""The no-op drain against other Python job queues on Redis, in the same run.

    python -m bench.run --peers            (or --only peers)
    python -m bench.measure_peers [--n 20000] [--rounds 2]

Needs the peers: `pip install -e '.[bench-peers]'` (dramatiq, taskiq with
taskiq-redis, rq; never a runtime dependency).  arq is left out: it pins redis-py < 6
and would replace the redis-py 8 stagedoor runs on.

Each contender gets a fresh backlog of n no-op jobs (rq n/20: it forks per job),
written by its own producer API, and drains it with ONE worker process at that
framework's defaults (dramatiq: 8 threads; taskiq: its stream broker, XREADGROUP
COUNT 100, ack after the task; rq: a forked work horse per job, `--burst`).  Timed
like bench.measure_drain: from the first job taken to the last one acknowledged,
polling Redis every few ms.  stagedoor (seed defaults) and the tuned raw loop run in
the same interleaved rounds; the figure is stagedoor's rate over each peer's, median
over the rounds.  A peer that is not installed is reported as such, not dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import measure_common as mc
from .measure_drain import _exited, drain


@dataclass(frozen=True)
class Peer:
    name: str
    module: str  # the import that tells whether it is installed
    fill: Callable[[str, int], None]
    cmd: Callable[[str], list[str]]
    # -> (taken any, all done) from a redis client
    state: Callable[[Any, int], tuple[bool, bool]]
    exits_when_done: bool = False
    scale: float = 1.0  # of the backlog: rq forks per job, ~100x slower; same rate either way


def _env_url(url: str) -> dict[str, str]:
    return {"SD_BENCH_REDIS_URL": url}


def _with_url(url: str) -> Any:
    import os

    os.environ["SD_BENCH_REDIS_URL"] = url
    import bench.peer_apps as apps

    apps.URL = url
    for k in [k for k in vars(apps) if k.endswith(("_broker", "_noop")) and k != "noop_rq"]:
        delattr(apps, k)  # rebuilt for this server
    return apps


# -- dramatiq --------------------------------------------------------------------------

def _dramatiq_fill(url: str, n: int) -> None:
    apps = _with_url(url)
    apps.dramatiq_broker.client.flushall()
    noop = apps.dramatiq_noop
    for _ in range(n):
        noop.send()


def _dramatiq_state(c: Any, n: int) -> tuple[bool, bool]:
    queued = c.llen("dramatiq:default")
    stored = c.hlen("dramatiq:default.msgs")
    return queued < n, queued == 0 and stored == 0


# -- taskiq ----------------------------------------------------------------------------

def _taskiq_fill(url: str, n: int) -> None:
    apps = _with_url(url)
    c = mc.client(url)
    c.flushall()
    c.xgroup_create("taskiq", "taskiq", id="0", mkstream=True)
    c.close()

    async def go() -> None:
        broker = apps.taskiq_broker
        await broker.startup()
        try:
            for _ in range(n):
                await apps.taskiq_noop.kiq()
        finally:
            await broker.shutdown()

    asyncio.run(go())


def _stream_state(stream: str, group: str) -> Callable[[Any, int], tuple[bool, bool]]:
    def state(c: Any, n: int) -> tuple[bool, bool]:
        info = mc.group_info(c, group=group, stream=stream)
        return info["entries_read"] > 0, info["entries_read"] >= n and info["pending"] == 0
    return state


# -- rq --------------------------------------------------------------------------------

def _rq_fill(url: str, n: int) -> None:
    from redis import Redis
    from rq import Queue

    c = Redis.from_url(url)
    c.flushall()
    q = Queue(connection=c)
    with c.pipeline() as pipe:
        for _ in range(n):
            q.enqueue("bench.peer_apps.noop_rq", pipeline=pipe)
        pipe.execute()
    c.close()


def _rq_state(c: Any, n: int) -> tuple[bool, bool]:
    queued = c.llen("rq:queue:default")
    return queued < n, queued == 0


PEERS = [
    Peer("dramatiq", "dramatiq", _dramatiq_fill,
         lambda url: [mc.PY, "-m", "dramatiq", "bench.peer_apps:dramatiq_broker",
                      "--processes", "1"], _dramatiq_state),
    Peer("taskiq", "taskiq_redis", _taskiq_fill,
         lambda url: [mc.PY, "-m", "taskiq", "worker", "bench.peer_apps:taskiq_broker",
                      "--workers", "1"], _stream_state("taskiq", "taskiq")),
    Peer("rq", "rq", _rq_fill,
         lambda url: [mc.PY, "-m", "rq.cli", "worker", "--burst", "--url", url, "default"],
         _rq_state, exits_when_done=True, scale=0.05),
]


def peer_drain(peer: Peer, url: str, n: int, timeout: float = 600.0) -> dict[str, Any]:
    peer.fill(url, n)
    c = mc.client(url)
    with tempfile.TemporaryFile() as log:
        t_spawn = time.perf_counter()
        proc = mc.spawn(peer.cmd(url), _env_url(url), stderr=log)
        try:
            t_first = 0.0
            last = t_spawn
            while True:
                now = time.perf_counter()
                taken, done = peer.state(c, n)
                if taken and not t_first:
                    t_first = now
                if done and (not peer.exits_when_done or _exited(proc)):
                    t_done = now
                    break
                if now - last > 3:
                    last = now
                    mc.progress(f"peer {peer.name}: taken {taken}, done {done}")
                if now - t_spawn > timeout or (_exited(proc) and not done):
                    log.seek(0)
                    raise RuntimeError(f"{peer.name} did not drain: "
                                       f"{log.read().decode(errors='replace')[-600:]}")
                time.sleep(0.003)
        finally:
            if proc.poll() is None:
                proc.terminate()
            mc.stop(proc, timeout=15)
            c.close()
    return {"kind": peer.name, "n": n, "seconds": t_done - t_first,
            "rate": n / (t_done - t_first), "startup_s": t_first - t_spawn}


def peers(n: int, rounds: int, names: Sequence[str] | None = None) -> dict[str, Any]:
    chosen = [p for p in PEERS if names is None or p.name in names]
    errors: dict[str, str] = {}
    ready = []
    for p in chosen:
        if importlib.util.find_spec(p.module) is None:
            errors[p.name] = "not installed (pip install -e '.[bench-peers]')"
        else:
            ready.append(p)
    steps: list[str] = ["stagedoor", "raw", *[p.name for p in ready]]
    runs: dict[str, list[float]] = {s: [] for s in steps}
    by_name = {p.name: p for p in ready}
    with mc.redis_server() as server:
        for r in range(rounds):
            for step in (steps if r % 2 == 0 else steps[::-1]):
                if step in by_name:
                    try:
                        peer = by_name[step]
                        rate = peer_drain(peer, server.url,
                                          max(200, int(n * peer.scale)))["rate"]
                    except Exception as e:  # one broken peer must not hide the rest
                        errors[step] = f"{type(e).__name__}: {e}"[:300]
                        rate = float("nan")
                else:
                    rate = drain(server.url, n * (5 if step == "raw" else 1),
                                 kind=step)["rate"]
                runs[step].append(rate)
                mc.progress(f"peers round {r + 1}/{rounds} {step}: {rate:,.0f} jobs/s")
    import math

    ok = {k: v for k, v in runs.items() if not any(math.isnan(x) for x in v)}
    rates = {k: mc.median(v) for k, v in ok.items()}
    ratios = {k: mc.median([a / b for a, b in zip(runs["stagedoor"], v, strict=True)])
              for k, v in ok.items()}
    peer_ratios = [v for k, v in ratios.items() if k not in ("stagedoor", "raw")]
    return {"peers_n": n, "peers_rounds": rounds, "peers_rates": rates,
            "peers_ratios": ratios, "peers_errors": errors, "peers_runs": runs,
            "peers_best_ratio": min(peer_ratios) if peer_ratios else float("nan")}


def peers_table(report: dict[str, Any]) -> str:
    rows = report.get("peers_rates") or {}
    if not rows:
        return "peers: not measured"
    sd = rows.get("stagedoor", float("nan"))
    lines = ["", f"no-op drain, same backlog, interleaved rounds (medians, "
             f"{report.get('peers_n', 0):,} jobs each)",
             f"{'contender':28} {'jobs/s':>10} {'stagedoor / it':>15}"]
    for name, rate in sorted(rows.items(), key=lambda kv: -kv[1]):
        ratio = report["peers_ratios"].get(name, float("nan"))
        lines.append(f"{name:28} {rate:10,.0f} {ratio:14.2f}x")
    for name, err in (report.get("peers_errors") or {}).items():
        lines.append(f"{name:28} not measured: {err}")
    lines.append(f"stagedoor: {sd:,.0f} jobs/s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_peers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", help="comma list of peers")
    a = p.parse_args(argv)
    r = peers(a.n, a.rounds, a.only.split(",") if a.only else None)
    print(peers_table(r))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
