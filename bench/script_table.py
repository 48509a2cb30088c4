"""Per-script render time, warm: `PYTHONPATH=src:. python -m bench.script_table [N]`.

One row per script: median and P95 ms per one-ticket order, 1 thread, over N distinct
orders after a warm-up on other ones (bench.scripts_measure's generators: Latin,
Cyrillic, Arabic and CJK names; each newly covered script -- Tibetan, Syriac, Thaana,
Mongolian, Cherokee, Canadian syllabics, Tifinagh, Urdu in Nastaliq -- with three words
of its sample as event and buyer; and bench/ticket_corpus.py's worst-case page per script
family, long wrapped and cut fields included, with a distinct admission code per order).
Issue 39 item 9's target: every row's P95 <= 0.3 ms.  To compare two builds side by side,
run it once with each on PYTHONPATH, one right after the other (docs/benchmarks.md).
`--cpu`: each order's CPU time (the thread's clock) instead of the wall clock, for a
shared host whose other load would otherwise make the P95 (a wait for a core, not the
render).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Iterable

from bench import scripts_measure, ticket_corpus
from stagedoor import _render
from stagedoor.render.order import Order

CLOCK = time.perf_counter_ns


def _times(orders: Iterable[Order]) -> list[float]:
    clock = CLOCK
    out = []
    for o in orders:
        t0 = clock()
        _render.render_order(o)
        out.append((clock() - t0) / 1e6)
    return sorted(out)


def _row(name: str, times: list[float]) -> tuple[str, float, float]:
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return name, statistics.median(times), p95


def table(n: int) -> list[tuple[str, float, float]]:
    rows = []
    for script in ("latin", "cyrillic", "arabic", "cjk"):
        _times(scripts_measure.orders(script, 300, seed=99))
        rows.append(_row(script, _times(scripts_measure.orders(script, n, seed=1))))
    k = len(scripts_measure.NEW_SCRIPTS)
    _times(scripts_measure.new_script_orders(300, seed=99))
    new = scripts_measure.new_script_orders(n * k, seed=1)
    for i, script in enumerate(scripts_measure.NEW_SCRIPTS):
        rows.append(_row(script, _times(new[i::k])))
    for family in ticket_corpus.FAMILIES:
        base = ticket_corpus.family_order(family).tickets[0]
        work = [Order(order_id=i + 1, tickets=(dataclasses.replace(
            base, order_id=i + 1, admission_code=f"SD-{i + 1:08d}-01-{i:06X}"),))
            for i in range(n + 100)]
        _times(work[:100])
        rows.append(_row(f"family {family}", _times(work[100:])))
    return rows


def main(argv: list[str]) -> int:
    global CLOCK
    if "--cpu" in argv:
        argv = [a for a in argv if a != "--cpu"]
        CLOCK = time.thread_time_ns
    n = int(argv[0]) if argv else 1000
    for name, median, p95 in table(n):
        print(f"{name:36s} median {median:.4f} ms  P95 {p95:.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
