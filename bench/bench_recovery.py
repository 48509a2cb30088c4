"""kill -9 -> pending jobs handled again, and worker RSS (bench/measure_recovery.py,
bench/measure_rss.py).  Recovery uses stagedoor-supervise when it is there."""

from __future__ import annotations

from typing import Any

from .measure_recovery import recovery
from .measure_rss import worker_rss


def test_kill9_recovery(benchmark: Any, bench_url: str, quick: bool) -> None:
    res = benchmark.pedantic(recovery, args=(bench_url,),
                             kwargs={"repeats": 2 if quick else 5}, rounds=1, iterations=1)
    benchmark.extra_info.update(res)
    benchmark.extra_info["target_met"] = res["recovery_s_max"] <= 2.0


def test_worker_rss(benchmark: Any, bench_url: str, quick: bool) -> None:
    res = benchmark.pedantic(worker_rss, args=(bench_url,),
                             kwargs={"n": 10_000 if quick else 50_000}, rounds=1, iterations=1)
    benchmark.extra_info.update(res)
    benchmark.extra_info["target_met"] = res["rss_mb"] <= 60
