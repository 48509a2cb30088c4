"""Enqueue -> handler start at a fixed offered 1,000 jobs/s (bench/measure_latency.py)."""

from __future__ import annotations

from typing import Any

from .measure_latency import latency


def test_latency_1000_per_s(benchmark: Any, bench_url: str, quick: bool) -> None:
    res = benchmark.pedantic(latency, args=(bench_url,),
                             kwargs={"rate": 1000, "seconds": 3 if quick else 10},
                             rounds=1, iterations=1)
    res.pop("samples_ms")
    assert res["n"] > 0
    benchmark.extra_info.update(res)
    benchmark.extra_info["target_met"] = res["p95_ms"] <= 2.0
