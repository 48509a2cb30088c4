"""What the worker's Redis heartbeat (fleet presence + pause flag, worker/presence.py)
costs a no-op drain: interleaved rounds of `stagedoor work --burst` at the default
heartbeat_interval (1 s: one pipelined round trip a second), at 0.1 s (ten times the
work, to make a cost visible), and at 60 s (one beat at boot, none during the drain:
the baseline).  Ratios are per round, medians over rounds.

    PYTHONPATH=src:. .venv/bin/python -m bench.measure_presence [--n 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse

from . import measure_common as mc
from .measure_drain import drain

VARIANTS = (("off", "60"), ("default", "1.0"), ("x10", "0.1"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rates: dict[str, list[float]] = {name: [] for name, _ in VARIANTS}
    with mc.redis_server() as server:
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for name, interval in order:
                res = drain(server.url, args.n, extra=("--heartbeat-interval", interval))
                rates[name].append(res["rate"])
                mc.progress(f"round {r + 1}/{args.rounds} heartbeat {name} ({interval} s): "
                            f"{res['rate']:,.0f} jobs/s")
    for name, _ in VARIANTS:
        ratio = mc.median([a / b for a, b in zip(rates[name], rates["off"], strict=True)])
        print(f"presence {name:<8} median {mc.median(rates[name]):>9,.0f} jobs/s   "
              f"vs off {ratio:.3f}")


if __name__ == "__main__":
    main()
