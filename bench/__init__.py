"""Stagedoor benchmarks: measure_* modules return dicts; bench_* wrap them for pytest-benchmark.

Run everything with `python -m bench.run`, the CI check with `python -m bench.perfcheck`
(both with PYTHONPATH=src:. from the repository root).  See docs/benchmarks.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
if str(SRC) not in sys.path:  # `python -m bench.run` from the root without PYTHONPATH
    sys.path.insert(0, str(SRC))
