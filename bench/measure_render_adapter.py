"""The render figures, from the other engineer's bench/render_measure.py.

This file only calls that module's functions and maps their dicts onto the runner's
figure names; there is no render benchmark of its own here.
"""

from __future__ import annotations

from typing import Any


def render_figures(quick: bool) -> dict[str, Any]:
    from . import render_measure as rm

    lat = rm.latency(1000 if quick else 5000)
    sc = rm.scaling(total=2000 if quick else 8000, repeat=2 if quick else 3)
    vs = rm.native_vs_reference(1000 if quick else 3000, 20 if quick else 60)
    return {"render_1t_median_ms": lat["median_ms"], "render_1t_p95_ms": lat["p95_ms"],
            "render_2t_speedup": sc["scaling_2_threads"],
            "render_vs_reference": vs["native_vs_reference"],
            "render": {"latency": lat, "scaling": sc, "versus": vs}}


def render_ratio(n_native: int = 600, n_reference: int = 12) -> float:
    """One native/reference speed ratio (perfcheck interleaves several)."""
    from . import render_measure as rm

    return float(rm.native_vs_reference(n_native, n_reference)["native_vs_reference"])
