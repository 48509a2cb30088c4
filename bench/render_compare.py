"""One line of render latencies, to put two builds side by side:
`cd <checkout> && PYTHONPATH=src:. python -m bench.render_compare` in each, alternating.

Median and P95 in ms, one thread, warm: bench.scripts_measure's one-ticket orders per
script (2,000 distinct each), bench.render_measure's Latin demo order (5,000), and
bench/ticket_corpus.py's worst-case page per script family (500 each).  Prints one
JSON object {name: [median, p95]}; checks nothing (scripts_measure and render_measure
hold the targets).
"""

from __future__ import annotations

import json
import sys

from bench import render_measure, scripts_measure


def measure() -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for script in ("latin", "cyrillic", "arabic", "cjk", "new"):
        r = scripts_measure.latency(script, 2000)
        out[script] = [round(r["median_ms"], 4), round(r["p95_ms"], 4)]
    r = render_measure.latency(5000)
    out["render_measure"] = [round(r["median_ms"], 4), round(r["p95_ms"], 4)]
    for family, f in scripts_measure.family_latency(500).items():
        out[f"family:{family}"] = [round(f["median_ms"], 4), round(f["p95_ms"], 4)]
    return out


def main() -> int:
    print(json.dumps(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
