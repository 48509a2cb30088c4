"""`python -m bench.run [--quick] [--json report.json] [--plot out.png] [--only a,b]`

Runs every benchmark against redis-servers of its own and prints one table: figure,
value, target (from docs/DESIGN "Targets" and issue 14), met yes/no.  Sections:
render, drain, job, enqueue, latency, recovery, rss (`--only` picks some); `--peers`
adds the peers' no-op drain (dramatiq, taskiq, ...: the `bench-peers` extra).  --quick
is the short form (smaller backlogs, shorter latency run, fewer repeats).

Every ratio is measured side by side in one run: the contenders run interleaved
(A B C ..., then the reverse order) and each figure is the median of its rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import measure_common as mc

SECTIONS = ("render", "drain", "job", "enqueue", "latency", "recovery", "rss")
OPTIONAL = ("peers",)  # only with --peers (or --only peers): needs the bench-peers extra


@dataclass(frozen=True)
class Target:
    figure: str
    unit: str
    op: str | None = None  # "<=" or ">=", None: no target (shown for context)
    bound: float | None = None
    text: str = ""


TARGETS = [
    Target("render_1t_median_ms", "ms", "<=", 0.1, "render 1 ticket, 1 thread, median"),
    Target("render_1t_p95_ms", "ms", "<=", 0.2, "render 1 ticket, 1 thread, P95"),
    Target("render_2t_speedup", "x", ">=", 1.8, "render 2 threads vs 1 thread"),
    Target("render_vs_reference", "x", ">=", 30, "native render vs pure-Python reference"),
    Target("drain_1w_rate", "jobs/s", ">=", 25_000, "no-op drain, 1 worker process"),
    Target("drain_1w_vs_raw", "x", ">=", 0.5, "no-op drain 1 worker / tuned raw loop"),
    Target("drain_2w_rate", "jobs/s", None, None, "no-op drain, 2 worker processes"),
    Target("drain_2w_vs_raw", "x", None, None, "no-op drain 2 workers / tuned raw loop"),
    Target("drain_tuned_rate", "jobs/s", None, None,
           "no-op drain, 1 worker --count 100 --concurrency 100"),
    Target("drain_tuned_vs_raw", "x", None, None, "same, / tuned raw loop"),
    Target("drain_raw_rate", "jobs/s", None, None, "tuned raw redis-py loop (COUNT 100)"),
    Target("drain_naive_rate", "jobs/s", None, None, "seed's naive loop (XACK per entry)"),
    Target("drain_1w_vs_naive", "x", None, None, "no-op drain 1 worker / seed naive loop"),
    Target("drain_1w_cpu_us", "us/job", None, None, "CPU per job, stagedoor 1 worker"),
    Target("drain_raw_cpu_us", "us/job", None, None, "CPU per job, tuned raw loop"),
    Target("drain_naive_cpu_us", "us/job", None, None, "CPU per job, seed naive loop"),
    # Issue 28: the worker's CPU a job within 2.5x the raw loop's in the same run.  Both
    # ways: the ratio of the two medians above, and the median of each round's ratio
    # (paired as the throughput ratios are: a round's two drains ran minutes apart at
    # most, so a slow spell of the box weighs on both).
    Target("drain_1w_cpu_vs_raw", "x", "<=", 2.5,
           "CPU a job 1 worker / raw loop (medians)"),
    Target("drain_1w_cpu_vs_raw_paired", "x", "<=", 2.5,
           "CPU a job 1 worker / raw loop (rounds paired)"),
    Target("job_latin_vs_bare", "x", ">=", 0.8,
           "render_tickets, Latin orders, 1 worker / bare durable write loop (8 threads)"),
    Target("job_mixed_vs_bare", "x", None, None,
           "render_tickets, mixed-script orders, 1 worker / same bare loop"),
    Target("job_latin_rate", "jobs/s", None, None, "render_tickets, Latin orders, 1 worker"),
    Target("job_mixed_rate", "jobs/s", None, None, "render_tickets, mixed-script, 1 worker"),
    Target("job_bare_rate", "jobs/s", None, None,
           "bare loop: tmp+fsync+rename+dir fsync, 8 threads"),
    Target("job_round_trips", "/job", None, None,
           "render_tickets: commands sent per job, XACK not counted"),
    Target("job_latin_cpu_us", "us/job", None, None, "render_tickets: worker CPU per job"),
    Target("enqueue_single_rate", "jobs/s", None, None, "enqueue(), one round trip per job"),
    Target("enqueue_many_rate", "jobs/s", None, None, "enqueue_many(), 1000 per pipeline"),
    Target("enqueue_sync_rate", "jobs/s", None, None, "enqueue_sync(), 1000 per pipeline"),
    Target("latency_p50_ms", "ms", None, None, "enqueue -> handler start @1000/s, P50"),
    Target("latency_p95_ms", "ms", "<=", 2.0, "enqueue -> handler start @1000/s, P95"),
    Target("latency_p99_ms", "ms", None, None, "enqueue -> handler start @1000/s, P99"),
    Target("latency_raw_p95_ms", "ms", None, None, "same, bare XREADGROUP BLOCK loop, P95"),
    Target("latency_vs_raw", "x", "<=", 1.5, "P95 @1000/s, stagedoor / bare loop"),
    Target("latency_10k_p95_ms", "ms", None, None, "enqueue -> handler start @10000/s, P95"),
    Target("latency_raw_10k_p95_ms", "ms", None, None, "same, bare loop, P95"),
    Target("latency_10k_vs_raw", "x", "<=", 3.0, "P95 @10000/s, stagedoor / bare loop"),
    Target("latency_send_lag_p99_ms", "ms", None, None, "producer lateness vs timetable, P99"),
    Target("recovery_s", "s", "<=", 2.0, "kill -9 -> 8 pending jobs handled again (max)"),
    Target("worker_rss_mb", "MB", "<=", 60, "worker RSS after draining"),
    Target("worker_rss_scripts_mb", "MB", "<=", 120,
           "worker RSS after rendering the world orders"),
    Target("peers_best_ratio", "x", None, None,
           "no-op drain: stagedoor 1 worker / the fastest peer"),
]


def met(t: Target, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if t.op is None or t.bound is None:
        return "-"
    ok = value <= t.bound if t.op == "<=" else value >= t.bound
    return "yes" if ok else "NO"


# -- sections -----------------------------------------------------------------------------

def section_render(quick: bool) -> dict[str, Any]:
    from . import measure_render_adapter as ra

    return ra.render_figures(quick)


def section_drain(quick: bool, rounds: int | None = None) -> dict[str, Any]:
    """The no-op drain: 1 and 2 workers at the seed defaults, 1 tuned worker, the tuned
    raw loop and the seed's naive loop, interleaved (then the reverse order)."""
    from .measure_drain import drain

    n = 20_000 if quick else 200_000
    naive_n = n // 10  # ~40x slower than the raw loop: a smaller backlog, same rate
    rounds = rounds or (1 if quick else 3)
    tuned = ("--count", "100", "--concurrency", "100")
    order = [("stagedoor", 1, ()), ("stagedoor", 2, ()), ("tuned", 1, tuned),
             ("raw", 1, ()), ("naive", 1, ())]
    runs: dict[str, list[dict[str, Any]]] = {f"{k}x{w}": [] for k, w, _ in order}
    with mc.redis_server() as server:
        for r in range(rounds):
            for kind, workers, extra in (order if r % 2 == 0 else order[::-1]):
                res = drain(server.url, naive_n if kind == "naive" else n,
                            kind="stagedoor" if kind == "tuned" else kind,
                            workers=workers, extra=extra)
                runs[f"{kind}x{workers}"].append(res)
                mc.progress(f"drain round {r + 1}/{rounds} {kind} x{workers}: "
                            f"{res['rate']:,.0f} jobs/s, {res['cpu_us_per_job']:.2f} us "
                            f"CPU a job")

    def ratio(a: str, b: str) -> float:
        return mc.median([x["rate"] / y["rate"] for x, y in zip(runs[a], runs[b],
                                                                 strict=True)])

    med = {k: mc.median([x["rate"] for x in v]) for k, v in runs.items()}
    return {"drain_n": n, "drain_rounds": rounds,
            "drain_1w_rate": med["stagedoorx1"], "drain_2w_rate": med["stagedoorx2"],
            "drain_tuned_rate": med["tunedx1"],
            "drain_raw_rate": med["rawx1"], "drain_naive_rate": med["naivex1"],
            "drain_1w_vs_raw": ratio("stagedoorx1", "rawx1"),
            "drain_2w_vs_raw": ratio("stagedoorx2", "rawx1"),
            "drain_tuned_vs_raw": ratio("tunedx1", "rawx1"),
            "drain_1w_vs_naive": ratio("stagedoorx1", "naivex1"),
            "drain_1w_cpu_us": mc.median([x["cpu_us_per_job"] for x in runs["stagedoorx1"]]),
            "drain_raw_cpu_us": mc.median([x["cpu_us_per_job"] for x in runs["rawx1"]]),
            "drain_naive_cpu_us": mc.median([x["cpu_us_per_job"] for x in runs["naivex1"]]),
            "drain_1w_cpu_vs_raw": (
                mc.median([x["cpu_us_per_job"] for x in runs["stagedoorx1"]])
                / mc.median([x["cpu_us_per_job"] for x in runs["rawx1"]])),
            "drain_1w_cpu_vs_raw_paired": mc.median(
                [x["cpu_us_per_job"] / y["cpu_us_per_job"]
                 for x, y in zip(runs["stagedoorx1"], runs["rawx1"], strict=True)]),
            "drain_1w_peak_rss_mb": max(x["peak_rss_mb"] for x in runs["stagedoorx1"]),
            "drain_runs": runs}


def section_job(quick: bool) -> dict[str, Any]:
    from .measure_job import job_vs_bare

    return job_vs_bare(500 if quick else 2000, 1 if quick else 3)


def section_peers(quick: bool) -> dict[str, Any]:
    from .measure_peers import peers

    return peers(5000 if quick else 20_000, 1 if quick else 2)


def section_enqueue(quick: bool) -> dict[str, Any]:
    from .measure_queue import enqueue_rates

    with mc.redis_server() as server:
        r = enqueue_rates(server.url, single_n=1000 if quick else 5000,
                          many_n=20_000 if quick else 100_000)
    return {"enqueue_single_rate": r["single_rate"], "enqueue_many_rate": r["many_rate"],
            "enqueue_sync_rate": r["sync_many_rate"], "enqueue": r}


def section_latency(quick: bool) -> dict[str, Any]:
    """P95 at 1,000 and 10,000 jobs/s offered, stagedoor and the bare loop interleaved."""
    from .measure_latency import latency

    seconds = 3 if quick else 10
    got: dict[tuple[str, int], dict[str, Any]] = {}
    samples: list[float] = []
    with mc.redis_server() as server:
        for rate, consumers in ((1000, ("stagedoor", "raw")), (10_000, ("raw", "stagedoor"))):
            for consumer in consumers:
                r = latency(server.url, rate=rate, seconds=seconds, consumer=consumer)
                s = r.pop("samples_ms")
                if consumer == "stagedoor" and rate == 1000:
                    samples = s
                got[consumer, rate] = r
                mc.progress(f"latency @{rate:,}/s {consumer}: P95 {r['p95_ms']:.2f} ms "
                            f"(producer late P99 {r['send_lag_p99_ms']:.2f} ms)")
    sd1, raw1 = got["stagedoor", 1000], got["raw", 1000]
    sd10, raw10 = got["stagedoor", 10_000], got["raw", 10_000]
    return {"latency_p50_ms": sd1["p50_ms"], "latency_p95_ms": sd1["p95_ms"],
            "latency_p99_ms": sd1["p99_ms"], "latency_raw_p95_ms": raw1["p95_ms"],
            "latency_vs_raw": sd1["p95_ms"] / raw1["p95_ms"],
            "latency_10k_p95_ms": sd10["p95_ms"], "latency_raw_10k_p95_ms": raw10["p95_ms"],
            "latency_10k_vs_raw": sd10["p95_ms"] / raw10["p95_ms"],
            "latency_send_lag_p99_ms": sd1["send_lag_p99_ms"], "latency": sd1,
            "latency_raw": raw1, "latency_10k": sd10, "latency_raw_10k": raw10,
            "latency_samples_ms": samples}


def section_recovery(quick: bool) -> dict[str, Any]:
    from .measure_recovery import recovery

    with mc.redis_server() as server:
        r = recovery(server.url, repeats=2 if quick else 5)
    return {"recovery_s": r["recovery_s_max"], "recovery": r}


def section_rss(quick: bool) -> dict[str, Any]:
    from .measure_rss import worker_rss, worker_rss_scripts

    with mc.redis_server() as server:
        r = worker_rss(server.url, n=10_000 if quick else 50_000)
        scripts = worker_rss_scripts(server.url, orders=400 if quick else 1200)
    mc.progress(f"worker RSS after {scripts['orders']} world orders: "
                f"{scripts['rss_mb']:.1f} MB (font files {scripts['fonts_mb']:.1f} MB, "
                f"anonymous {scripts['anon_mb']:.1f} MB)")
    return {"worker_rss_mb": r["rss_mb"], "rss": r,
            "worker_rss_scripts_mb": scripts["rss_mb"], "rss_scripts": scripts}


RUNNERS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "render": section_render, "drain": section_drain, "job": section_job,
    "peers": section_peers, "enqueue": section_enqueue,
    "latency": section_latency, "recovery": section_recovery, "rss": section_rss}


# -- output -------------------------------------------------------------------------------

def fmt(value: Any, unit: str) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if unit == "jobs/s":
        return f"{value:,.0f} {unit}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "/job":
        return f"{value:.2f} per job"
    return f"{value:.2f} {unit}"


def table(report: dict[str, Any]) -> str:
    rows = [("figure", "value", "target", "met")]
    for t in TARGETS:
        if t.figure not in report and not report.get("_ran_all"):
            continue
        v = report.get(t.figure)
        target = f"{t.op} {fmt(t.bound, t.unit)}" if t.op else ""
        rows.append((t.text, fmt(v, t.unit), target, met(t, v)))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [" | ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    lines.insert(1, "-+-".join("-" * x for x in w))
    return "\n".join(lines)


def plot(report: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    samples = report.get("latency_samples_ms") or []
    if samples:
        top = max(mc.percentile(samples, 99.9), 1.0)
        ax1.hist([min(s, top) for s in samples], bins=120, color="#4a7ab5")
        for p, style in ((50, "-"), (95, "--"), (99, ":")):
            v = mc.percentile(samples, p)
            ax1.axvline(v, color="k", linestyle=style, label=f"P{p} {v:.2f} ms")
        ax1.axvline(2.0, color="r", label="target P95 2 ms")
        ax1.set_xlabel("enqueue -> handler start (ms), 1,000 jobs/s offered")
        ax1.set_ylabel("jobs")
        ax1.legend()
    else:
        ax1.text(0.5, 0.5, "latency not run", ha="center")
    bars = [(name, report.get(key)) for name, key in (
        ("stagedoor\n1 worker", "drain_1w_rate"), ("stagedoor\n2 workers", "drain_2w_rate"),
        ("tuned raw\nCOUNT 100", "drain_raw_rate"), ("seed naive", "drain_naive_rate"),
        ("enqueue()", "enqueue_single_rate"), ("enqueue_many", "enqueue_many_rate"))
        if report.get(key)]
    if bars:
        ax2.bar([b[0] for b in bars], [b[1] for b in bars],
                color=["#4a7ab5", "#4a7ab5", "#999", "#999", "#6a5", "#6a5"][:len(bars)])
        ax2.axhline(25_000, color="r", label="target: 1 worker >= 25,000 jobs/s")
        ax2.set_ylabel("jobs/s")
        ax2.legend()
        ax2.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"stagedoor benchmarks {time.strftime('%Y-%m-%d %H:%M')} "
                 f"({'quick' if report.get('quick') else 'full'})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short form (smoke run)")
    p.add_argument("--json", metavar="FILE", help="write the full report as JSON")
    p.add_argument("--plot", metavar="PNG", help="latency histogram and throughput bars")
    p.add_argument("--only", metavar="LIST",
                   help="comma list of " + ",".join(SECTIONS + OPTIONAL))
    p.add_argument("--peers", action="store_true",
                   help="also the peers' no-op drain (dramatiq, taskiq, ...) beside stagedoor "
                   "and the raw loop; `pip install -e .[bench-peers]` first")
    a = p.parse_args(argv)
    wanted = a.only.split(",") if a.only else list(SECTIONS)
    if a.peers and "peers" not in wanted:
        wanted.append("peers")
    bad = [w for w in wanted if w not in SECTIONS + OPTIONAL]
    if bad:
        p.error(f"unknown section(s) {bad}; known: {', '.join(SECTIONS + OPTIONAL)}")
    report: dict[str, Any] = {"quick": a.quick, "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                              "python": sys.version.split()[0], "machine": platform.node(),
                              "cpus": __import__("os").cpu_count(), "errors": {}}
    t0 = time.monotonic()
    for name in wanted:
        mc.progress(f"section {name} ...")
        try:
            report.update(RUNNERS[name](a.quick))
        except Exception as e:  # one broken section must not hide the others
            report["errors"][name] = f"{type(e).__name__}: {e}"
            mc.progress(f"section {name} FAILED: {e}")
    report["seconds"] = time.monotonic() - t0
    report["_ran_all"] = not a.only
    if "peers" in wanted:
        from .measure_peers import peers_table

        print(peers_table(report))
    report["met"] = {t.figure: met(t, report.get(t.figure)) for t in TARGETS
                     if t.figure in report}
    print(table(report))
    if report["errors"]:
        print("\nerrors: " + "; ".join(f"{k}: {v}" for k, v in report["errors"].items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    if a.plot:
        plot(report, a.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
