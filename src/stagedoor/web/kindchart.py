"""The Metrics tab's plots: per-minute series by kind as SVG polyline points.

Drawn on the server and printed into the page as inline SVG (no script, no library:
the CSP allows neither inline script nor anything from outside).  Only numbers reach
the points; a kind's name is printed as text by the template (autoescaped).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..console.text import seconds_text
from ..telemetry.kindstats import KindWindow

W, H = 600, 160
# distinguishable colours, one per kind in the order of the table (then again)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf")


def _segments(values: Sequence[float | None], top: float,
              bottom: float | None = None) -> list[str]:
    """Polyline points, one string per run of known values (a gap where None); linear
    from 0 to `top`, or logarithmic from `bottom` to `top` when `bottom` is given."""
    n = max(len(values) - 1, 1)
    if bottom is not None:
        span = math.log(top / bottom) or 1.0
        values = [None if v is None else math.log(max(v, bottom) / bottom) / span * top
                  for v in values]
    out: list[str] = []
    run: list[str] = []
    for i, v in enumerate(values):
        if v is None:
            if run:
                out.append(" ".join(run))
            run = []
            continue
        run.append(f"{i * W / n:.1f},{H - 2 - v * (H - 6) / top:.1f}")
    if run:
        out.append(" ".join(run))
    return out


def charts(w: KindWindow) -> dict[str, Any]:
    """Two plots over the window: jobs per minute (handled solid, failed dashed) and the
    handler's P95 per minute (log scale), one colour per kind."""
    colours = {f.kind: PALETTE[i % len(PALETTE)] for i, f in enumerate(w.kinds)}
    top_jobs = max([1.0, *(float(v) for f in w.kinds
                           for v in (*f.per_minute_handled, *f.per_minute_failed))])
    # log scale: kinds a thousand times apart (a no-op, a render) on one plot
    p95s = [v for f in w.kinds for v in f.per_minute_run_p95_s if v is not None and v > 0]
    top_p95 = max(p95s) * 1.25 if p95s else 1.0
    bottom_p95 = min(p95s) / 1.25 if p95s else 0.001
    if top_p95 / bottom_p95 < 10:  # a decade at least, so that noise stays small
        bottom_p95 = top_p95 / 10
    jobs = [{"kind": f.kind, "colour": colours[f.kind],
             "handled": _segments([float(v) for v in f.per_minute_handled], top_jobs),
             "failed": _segments([float(v) for v in f.per_minute_failed], top_jobs)}
            for f in w.kinds]
    p95 = [{"kind": f.kind, "colour": colours[f.kind],
            "segments": _segments(f.per_minute_run_p95_s, top_p95, bottom_p95)}
           for f in w.kinds]
    return {"width": W, "height": H, "colours": colours, "jobs": jobs, "p95": p95,
            "top_jobs": f"{top_jobs:,.0f}/min", "top_p95": seconds_text(top_p95),
            "bottom_p95": seconds_text(bottom_p95)}
