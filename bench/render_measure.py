"""Render measurements, as plain functions returning dicts of numbers (no pytest).

Used by bench/bench_render.py and by any runner that compares ratios across runs:

    PYTHONPATH=src python -m bench.render_measure      # prints JSON, checks the targets

Every figure is from this process, in this run: latency of one single-ticket order on one
thread, throughput of a fixed number of renders split over N threads (the GIL is
released for the C part, so threads should scale with cores), and the native renderer
against the pure-Python reference on the same orders.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from stagedoor.demo.orders import demo_order
from stagedoor.render import reference as render
from stagedoor.render.order import Order

RenderFn = Callable[[Order], bytes]

TARGETS = {"median_ms": 0.1, "p95_ms": 0.2, "scaling_2_threads": 1.8, "native_vs_reference": 30.0}


def native() -> RenderFn:
    from stagedoor import _render  # fails loudly when the extension is not built

    return _render.render_order


def sample_orders(n: int = 64) -> list[Order]:
    """Single-ticket orders with realistic fields (Latin names, small print)."""
    out = []
    for i in range(1, n + 1):
        o = demo_order(i)
        out.append(Order(order_id=o.order_id, tickets=o.tickets[:1]))
    return out


def _percentile(sorted_values: list[float], q: float) -> float:
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def latency(n: int = 5000, fn: RenderFn | None = None, warmup: int = 500) -> dict[str, Any]:
    """Per-render wall time of one-ticket orders on one thread, in milliseconds."""
    fn = fn or native()
    orders = sample_orders()
    for i in range(warmup):
        fn(orders[i % len(orders)])
    times = []
    clock = time.perf_counter_ns
    for i in range(n):
        o = orders[i % len(orders)]
        t0 = clock()
        fn(o)
        times.append((clock() - t0) / 1e6)
    times.sort()
    return {"n": n, "median_ms": statistics.median(times), "mean_ms": statistics.fmean(times),
            "p95_ms": _percentile(times, 0.95), "p99_ms": _percentile(times, 0.99),
            "min_ms": times[0], "max_ms": times[-1]}


def _schedstat() -> tuple[float, float] | None:
    """(seconds this thread ran, seconds it was runnable but preempted), Linux only."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            run, wait, _ = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        return None
    return run / 1e9, wait / 1e9


def throughput(threads: int, total: int = 8000, fn: RenderFn | None = None) -> dict[str, Any]:
    """`total` renders split evenly over `threads` threads; renders per second of wall time.

    Also, from the kernel's per-thread schedstat: the share of the threads' time spent
    preempted (runnable, no free core: a busy machine) and the share spent sleeping
    (waiting for the GIL, mostly) -- so a poor scaling figure says which it was.
    """
    fn = fn or native()
    orders = sample_orders()
    per_thread = total // threads
    start = threading.Barrier(threads + 1)
    done: list[float] = []
    shares: list[tuple[float, float]] = []

    def work(k: int) -> None:
        start.wait()
        s0, t0 = _schedstat(), time.perf_counter()
        for i in range(per_thread):
            fn(orders[(k + i) % len(orders)])
        s1, t1 = _schedstat(), time.perf_counter()
        done.append(t1)
        if s0 and s1:
            run, preempted = s1[0] - s0[0], s1[1] - s0[1]
            shares.append((preempted / (t1 - t0), (t1 - t0 - run - preempted) / (t1 - t0)))

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    for w in workers:
        w.join()
    elapsed = max(done) - t0
    cpu = time.process_time() - cpu0
    renders = per_thread * threads
    # cpu_per_wall near `threads` (at most the free cores) means the threads really ran
    # at once; a GIL held through the render would keep it at 1.0 or below.
    result = {"threads": threads, "renders": renders, "seconds": elapsed,
              "renders_per_s": renders / elapsed, "cpu_per_wall": cpu / elapsed}
    if shares:
        result["preempted_share"] = statistics.fmean(p for p, _ in shares)
        result["sleeping_share"] = statistics.fmean(s for _, s in shares)
    return result


def scaling(total: int = 8000, repeat: int = 3, fn: RenderFn | None = None) -> dict[str, Any]:
    """Throughput with 1, 2 and 8 threads (best of `repeat`), and the ratios to 1 thread."""
    fn = fn or native()
    fn(sample_orders(1)[0])
    best: dict[int, dict[str, Any]] = {}
    for _ in range(repeat):
        for n in (1, 2, 8):
            r = throughput(n, total, fn)
            if n not in best or r["renders_per_s"] > best[n]["renders_per_s"]:
                best[n] = r
    rate = {n: float(best[n]["renders_per_s"]) for n in best}
    return {"renders_per_s_1": rate[1], "renders_per_s_2": rate[2], "renders_per_s_8": rate[8],
            "scaling_2_threads": rate[2] / rate[1], "scaling_8_threads": rate[8] / rate[1],
            "cpu_per_wall_2_threads": best[2]["cpu_per_wall"],
            "cpu_per_wall_8_threads": best[8]["cpu_per_wall"],
            "preempted_share_2_threads": best[2].get("preempted_share"),
            "sleeping_share_2_threads": best[2].get("sleeping_share")}


def native_vs_reference(n_native: int = 3000, n_reference: int = 60) -> dict[str, Any]:
    """Median per-render time of both renderers on the same orders, and the ratio."""
    nat = latency(n_native, native(), warmup=300)
    ref = latency(n_reference, render.render_order, warmup=5)
    return {"native_median_ms": nat["median_ms"], "reference_median_ms": ref["median_ms"],
            "native_vs_reference": ref["median_ms"] / nat["median_ms"]}


def measure_all() -> dict[str, Any]:
    lat = latency()
    return {"latency": lat, "scaling": scaling(), "versus": native_vs_reference()}


def check(results: dict[str, Any]) -> list[str]:
    """The targets missed, one line each (empty when all are met)."""
    lat, sc, vs = results["latency"], results["scaling"], results["versus"]
    misses = []
    if lat["median_ms"] > TARGETS["median_ms"]:
        misses.append(f"median {lat['median_ms']:.4f} ms > {TARGETS['median_ms']} ms")
    if lat["p95_ms"] > TARGETS["p95_ms"]:
        misses.append(f"P95 {lat['p95_ms']:.4f} ms > {TARGETS['p95_ms']} ms")
    if sc["scaling_2_threads"] < TARGETS["scaling_2_threads"]:
        misses.append(f"2 threads {sc['scaling_2_threads']:.2f}x < "
                      f"{TARGETS['scaling_2_threads']}x one thread")
    if vs["native_vs_reference"] < TARGETS["native_vs_reference"]:
        misses.append(f"native {vs['native_vs_reference']:.1f}x < "
                      f"{TARGETS['native_vs_reference']}x the reference")
    return misses


def main() -> int:
    results = measure_all()
    misses = check(results)
    results["targets_missed"] = misses
    print(json.dumps(results, indent=2))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
