"""What the worker's Redis heartbeat (fleet presence + pause flag, worker/presence.py)
costs a no-op drain.

1. The beat itself: CPU time of Presence.beat() in the worker's process (client side:
   psutil RSS, orjson, one pipelined round trip of GET/SET/HSET/EXPIRE), over 2000
   beats against a local server; at the default heartbeat_interval (1 s) the fraction
   of one core is that time / 1 s.
2. The drain: `stagedoor work --burst` at the default heartbeat_interval (1 s) against
   60 s (one beat at boot, none during the drain: the baseline), in rounds whose order
   alternates (AB, BA, ...), rate and CPU per job; ratios per round, medians.

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_presence [--n 100000] [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from stagedoor.config import Settings
from stagedoor.stream import connection
from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.worker.presence import Pause, Presence
from stagedoor.worker.slots import Slots

from . import measure_common as mc
from .measure_drain import drain

VARIANTS = (("off", "60"), ("default", "1.0"))


async def beat_cost(url: str, beats: int) -> tuple[float, float]:
    """(CPU us, wall us) per beat."""
    s = Settings(redis_url=url)
    cmd = connection.async_client(s)
    stats = WorkerStats(frozenset({"noop"}))

    async def unblock() -> None:
        return None

    p = Presence(s, cmd, consumer="bench-00", slot=0, stats=stats, slots=Slots(8),
                 pause=Pause(stats, "bench-00"), unblock=unblock)
    for _ in range(100):
        await p.beat()
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(beats):
        await p.beat()
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    await cmd.aclose()
    return cpu / beats * 1e6, wall / beats * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--beats", type=int, default=2000)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in VARIANTS}
    with mc.redis_server() as server:
        cpu_us, wall_us = asyncio.run(beat_cost(server.url, args.beats))
        print(f"one beat: {cpu_us:.0f} us CPU, {wall_us:.0f} us wall; at heartbeat_interval "
              f"1 s: {cpu_us / 1e4:.3f} % of a core")
        for r in range(args.rounds):
            for name, interval in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                res = drain(server.url, args.n, extra=("--heartbeat-interval", interval,
                                                       "--heartbeat-timeout", "120"))
                runs[name].append(res)
                mc.progress(f"round {r + 1}/{args.rounds} heartbeat {name} ({interval} s): "
                            f"{res['rate']:,.0f} jobs/s, {res['cpu_us_per_job']:.1f} us/job")
    on, off = runs["default"], runs["off"]
    rate = mc.median([a["rate"] / b["rate"] for a, b in zip(on, off, strict=True)])
    cpu = mc.median([a["cpu_us_per_job"] / b["cpu_us_per_job"]
                     for a, b in zip(on, off, strict=True)])
    print(f"drain {args.n:,} no-op jobs, 1 worker, {args.rounds} rounds: presence at 1 s "
          f"{mc.median([x['rate'] for x in on]):,.0f} jobs/s vs off "
          f"{mc.median([x['rate'] for x in off]):,.0f}: rate ratio {rate:.3f}, "
          f"CPU/job ratio {cpu:.3f}")


if __name__ == "__main__":
    main()
