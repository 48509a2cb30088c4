"""A change's no-op drain, before and after, side by side in one run.

    python -m bench.drain_before_after /path/to/old/src [--n 50000] [--rounds 6]

Three contenders on one redis-server, interleaved (before, after, raw; then the
reverse order): one `stagedoor work --burst` at the seed defaults from the old tree
(its extensions built: SD_BENCH_SRC, measure_common.env), the same from this tree, and
the tuned raw loop as the round's yardstick.  Prints each round, the medians of rate
and CPU a job, and the medians of each round's after / before ratios (paired: the two
drains of a round ran seconds apart, under the same neighbours).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence

from . import SRC
from . import measure_common as mc
from .measure_drain import drain


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.drain_before_after",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", metavar="SRC", help="the src/ of the earlier checkout")
    p.add_argument("--n", type=int, default=50_000, help="backlog per drain [50000]")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds [6]")
    a = p.parse_args(argv)
    order = [("before", a.before), ("after", str(SRC)), ("raw", str(SRC))]
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in order}
    saved = os.environ.get("SD_BENCH_SRC")
    try:
        with mc.redis_server() as server:
            for r in range(a.rounds):
                for name, src in (order if r % 2 == 0 else order[::-1]):
                    os.environ["SD_BENCH_SRC"] = src
                    x = drain(server.url, a.n, kind="raw" if name == "raw" else "stagedoor")
                    runs[name].append((x["rate"], x["cpu_us_per_job"]))
                    mc.progress(f"round {r + 1}/{a.rounds} {name}: {x['rate']:,.0f} jobs/s, "
                                f"{x['cpu_us_per_job']:.2f} us CPU a job")
    finally:
        if saved is None:
            os.environ.pop("SD_BENCH_SRC", None)
        else:
            os.environ["SD_BENCH_SRC"] = saved
    pairs = list(zip(runs["after"], runs["before"], strict=True))
    print(json.dumps({
        "n": a.n, "rounds": a.rounds,
        "rate": {k: mc.median([x for x, _ in v]) for k, v in runs.items()},
        "cpu_us_per_job": {k: mc.median([c for _, c in v]) for k, v in runs.items()},
        "after_vs_before_rate": mc.median([x[0] / y[0] for x, y in pairs]),
        "after_vs_before_cpu": mc.median([x[1] / y[1] for x, y in pairs]),
    }, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
