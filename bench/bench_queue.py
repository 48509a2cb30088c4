"""No-op drain (real worker processes) and enqueue rates, under pytest-benchmark.

The figures come from bench/measure_drain.py and bench/measure_queue.py, the same
code `python -m bench.run` uses; they land in each benchmark's extra_info.  The
absolute targets are reported there (`target_met`), not asserted: the target table
is `python -m bench.run`, the CI gate is `python -m bench.perfcheck`.
"""

from __future__ import annotations

from typing import Any

import pytest

from stagedoor.stream.queue import enqueue_sync

from . import measure_common as mc
from .measure_drain import drain

RESULTS: dict[str, dict[str, Any]] = {}


def _n(quick: bool) -> int:
    return 20_000 if quick else 100_000


@pytest.mark.parametrize(("kind", "workers"), [("stagedoor", 1), ("stagedoor", 2),
                                               ("raw", 1), ("naive", 1)])
def test_drain(benchmark: Any, bench_url: str, quick: bool, kind: str, workers: int) -> None:
    res = benchmark.pedantic(drain, args=(bench_url, _n(quick)),
                             kwargs={"kind": kind, "workers": workers}, rounds=1, iterations=1)
    assert res["handled"] == res["n"]
    RESULTS[f"{kind}x{workers}"] = res
    benchmark.extra_info.update(res)
    if kind == "stagedoor" and workers == 1:
        benchmark.extra_info["target_met"] = res["rate"] >= 25_000


def test_drain_vs_raw_same_run(benchmark: Any, bench_url: str, quick: bool) -> None:
    """Stagedoor 1 worker and the tuned raw loop back to back, 3 interleaved pairs."""
    n = _n(quick) // 2

    def pairs() -> dict[str, Any]:
        sd, raw = [], []
        for i in range(3):
            for kind in (("stagedoor", "raw") if i % 2 == 0 else ("raw", "stagedoor")):
                (sd if kind == "stagedoor" else raw).append(drain(bench_url, n, kind=kind)["rate"])
        ratios = [a / b for a, b in zip(sd, raw, strict=True)]
        return {"stagedoor_rates": sd, "raw_rates": raw, "ratio_median": mc.median(ratios)}

    res = benchmark.pedantic(pairs, rounds=1, iterations=1)
    benchmark.extra_info.update(res)
    benchmark.extra_info["target_met"] = res["ratio_median"] >= 0.5


def test_enqueue_single(benchmark: Any, bench_url: str) -> None:
    """One job per `enqueue_sync` call: XGROUP CREATE + XADD in one round trip."""
    c = mc.client(bench_url)
    # Nobody reads this stream: maxlen high enough that the backlog check never refuses.
    s = mc.settings(bench_url, maxlen=10_000_000)
    counter = iter(range(10**9))
    try:
        benchmark(lambda: enqueue_sync(c, s, [mc.job(next(counter))]))
    finally:
        c.close()


def test_enqueue_many_1000(benchmark: Any, bench_url: str) -> None:
    """1000 jobs per pipelined call."""
    c = mc.client(bench_url)
    s = mc.settings(bench_url, maxlen=10_000_000)  # unread: see test_enqueue_single
    jobs = [mc.job(i) for i in range(1000)]
    try:
        benchmark.pedantic(enqueue_sync, args=(c, s, jobs), rounds=20, iterations=1)
    finally:
        c.close()
    benchmark.extra_info["jobs_per_call"] = 1000


def test_enqueue_rates(benchmark: Any, bench_url: str, quick: bool) -> None:
    """The runner's figures: async enqueue(), enqueue_many(), enqueue_sync()."""
    from .measure_queue import enqueue_rates

    res = benchmark.pedantic(enqueue_rates, args=(bench_url,),
                             kwargs={"single_n": 1000 if quick else 5000,
                                     "many_n": 20_000 if quick else 100_000},
                             rounds=1, iterations=1)
    benchmark.extra_info.update(res)
