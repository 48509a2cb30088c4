"""Render benchmarks (pytest-benchmark): `PYTHONPATH=src:. pytest bench -k bench_render`.

pytest-benchmark times the two renderers on one single-ticket order; the target checks
use bench/render_measure.py (percentiles, thread scaling, the native/reference ratio
measured in the same run) and put the figures in the benchmark's extra_info.
"""

from __future__ import annotations

from typing import Any

from stagedoor import _render
from stagedoor.render import reference as render

from . import render_measure as rm

ORDER = rm.sample_orders(1)[0]


def test_native_one_ticket(benchmark: Any) -> None:
    pdf = benchmark(_render.render_order, ORDER)
    assert pdf == render.render_order(ORDER)


def test_reference_one_ticket(benchmark: Any) -> None:
    benchmark.pedantic(render.render_order, args=(ORDER,), rounds=30, iterations=1)


def test_latency_single_thread(benchmark: Any, quick: bool) -> None:
    result = benchmark.pedantic(rm.latency, kwargs={"n": 1000 if quick else 5000},
                                rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    assert result["median_ms"] <= rm.TARGETS["median_ms"], result
    assert result["p95_ms"] <= rm.TARGETS["p95_ms"], result


def test_thread_scaling(benchmark: Any, quick: bool) -> None:
    kwargs = {"total": 2000, "repeat": 2} if quick else {"total": 8000, "repeat": 3}
    result = benchmark.pedantic(rm.scaling, kwargs=kwargs, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    assert result["scaling_2_threads"] >= rm.TARGETS["scaling_2_threads"], result


def test_native_vs_reference(benchmark: Any, quick: bool) -> None:
    kwargs = {"n_native": 1000, "n_reference": 20} if quick else {}
    result = benchmark.pedantic(rm.native_vs_reference, kwargs=kwargs, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    assert result["native_vs_reference"] >= rm.TARGETS["native_vs_reference"], result
