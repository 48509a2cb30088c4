"""What the render process costs: render_tickets isolated (render_isolation = "process",
the default) against in the worker ("none"), side by side in one run.

    python -m bench.measure_isolation [--n 2000] [--rounds 3] [--kinds latin,mixed]
                                      [--parts start,render,job] [--before SRC]

Three parts, each interleaved (process, none, then none, process, ...):

  start   a render process's start alone, once a round: a RenderHost's first render
          (the start in it, wall ms), the process's CPU by then, and the CPU of its
          exit (the worker's rusage of its reaped child, less that).

  render  in this process, without Redis: the render and durable write of one order
          at a time (latency: median and P95 from the call to the durable PDF) and of
          n orders with 8 in flight (the seed's concurrency: throughput, and CPU per
          order of this process and the render process, their start left out), through
          render_host.RenderHost (the render process, already started: the first
          render is not timed) and render_pool.LocalRender (the worker's own native
          pool, as with render_isolation = "none").  The caller holds the order's JSON
          as render_tickets does (the store's bytes), and the order parsed.
  job     bench.measure_job.job_drain: one `stagedoor work --burst` process at the seed
          defaults draining n render_tickets jobs, `--render-isolation process` and
          `none`: the whole job (lease, order read, render, write, marks, ack).  The
          rate runs from the first read, so it includes what is left of the render
          process's start (~0.1 s at rest, 0.3-0.5 s at load 5-8) when it was not
          started at boot (render_tickets jobs next: started then, and waited for);
          `first_done_ms` is the first read to the first ack, where a start shows;
          `boot_ms` the worker's spawn to its first read (a render process started at
          boot is waited for before the first read: tickets.wait_for_render_process),
          and `..._from_spawn` ratios compare rates from the spawn, boot included.
          CPU is the worker's wait4 rusage, which includes its reaped render process
          and so its start.  `steady_*`: the same drain from a quarter of the jobs done
          to nine tenths (no start in it): its rate, and the CPU a job of the worker and
          of its render process apart (psutil, children not reaped yet); ratios named
          `..._steady` compare those rates (bare: its whole rate).  Each round also runs
          measure_job.bare_writes, the bare durable-write loop (the same PDFs, tmp +
          fsync + rename + directory fsync on 8 threads: what the disk allows), and
          prints the medians of the rounds' ratios job_<kind>_process_vs_bare and
          job_<kind>_process_vs_none (issue 36's targets: >= 0.45 and >= 0.95).
          With --before SRC (the src/ of an earlier commit, its extensions built) the
          rounds also drain with `--render-isolation process` workers from that tree:
          before and after side by side.

The PDFs go under the system temp dir, which must be a real disk (measure_job's
disk_dir; SD_BENCH_DISK_DIR overrides); no round's files are deleted before the end.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from stagedoor.config import Settings
from stagedoor.render.order import Order
from stagedoor.telemetry.metrics import WorkerStats
from stagedoor.tickets.render_host import RenderHost
from stagedoor.tickets.render_pool import LocalRender

from . import measure_common as mc
from .measure_drain import _cpu
from .measure_job import (
    bare_writes,
    disk_dir,
    job_drain,
    kept_dirs,
    orders,
    render_all,
    workers_from,
)

MODES = ("process", "none")
IN_FLIGHT = 8   # the seed's concurrency


def _pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _render_round(mode: str, batch: Sequence[Order], lat_n: int) -> dict[str, Any]:
    data = [o.to_json() for o in batch]
    threads = ThreadPoolExecutor(8)
    loop = asyncio.get_running_loop()

    async def in_thread(fn: Any, *args: Any) -> Any:
        return await loop.run_in_executor(threads, fn, *args)

    host: RenderHost | None = None
    local: LocalRender | None = None
    call: Callable[[int, Path], Awaitable[Any]]
    if mode == "process":
        host = RenderHost(Settings(), WorkerStats(["render_tickets"]))
        h = host

        def call(i: int, path: Path) -> Awaitable[Any]:
            return h.render_to(batch[i].order_id, data[i], path)
    else:
        local = LocalRender(8, in_thread)
        lr = local

        def call(i: int, path: Path) -> Awaitable[Any]:
            return lr.render_to(batch[i], path)
    try:
        with disk_dir("sd-iso-") as d:
            (d / "warm").mkdir()
            await call(0, d / "warm" / "order-0.pdf")      # the process started, fonts open
            (d / "one").mkdir()
            lat = []
            for i in range(lat_n):
                t = time.perf_counter()
                await call(i, d / "one" / f"order-{i}.pdf")
                lat.append((time.perf_counter() - t) * 1e3)
            (d / "many").mkdir()
            procs = [psutil.Process()] + ([psutil.Process(host.pid)] if host and host.pid else [])
            cpu0 = sum(_cpu(p) for p in procs)
            sem = asyncio.Semaphore(IN_FLIGHT)

            async def one(i: int) -> None:
                async with sem:
                    await call(i, d / "many" / f"order-{i}.pdf")
            t = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(len(batch))))
            seconds = time.perf_counter() - t
            cpu = sum(_cpu(p) for p in procs) - cpu0
    finally:
        if host is not None:
            await host.close()
        if local is not None:
            local.close()
        threads.shutdown()
    return {"median_ms": _pct(lat, 0.5), "p95_ms": _pct(lat, 0.95),
            "rate": len(batch) / seconds, "cpu_us": cpu / len(batch) * 1e6}


async def _start_round(order: Order) -> dict[str, Any]:
    """A render process's start: from a RenderHost's first render (the start in it) to
    its reply, and its CPU then and once it has exited (wait4: its teardown)."""
    host = RenderHost(Settings(), WorkerStats(["render_tickets"]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with disk_dir("sd-iso-start-") as d:
        t = time.perf_counter()
        await host.render_to(order.order_id, order.to_json(), d / "order.pdf")
        wall = time.perf_counter() - t
        assert host.pid is not None
        up = _cpu(psutil.Process(host.pid))
        await host.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"first_render_ms": wall * 1e3, "cpu_ms": up * 1e3,
            "exit_cpu_ms": max(0.0, total - up) * 1e3}


def _job_step(url: str, step: str, batch: Sequence[Order], pdfs: Sequence[bytes],
              before: str | None) -> dict[str, Any]:
    if step == "bare":
        return bare_writes(pdfs)
    with workers_from(before if step == "before" else None):
        mode = "process" if step == "before" else step
        return job_drain(url, batch, extra=["--render-isolation", mode])


def measure(n: int, rounds: int, kinds: Sequence[str],
            parts: Sequence[str] = ("render", "job"),
            before: str | None = None) -> dict[str, Any]:
    batches = {k: orders(n, k) for k in kinds}
    pdfs = {k: render_all(batches[k]) for k in kinds} if "job" in parts else {}
    steps = (*MODES, "bare", *(("before",) if before else ()))
    render: dict[tuple[str, str], list[dict[str, Any]]] = {}
    job: dict[tuple[str, str], list[dict[str, Any]]] = {}
    starts: list[dict[str, Any]] = []
    with mc.redis_server(appendonly=True) as server, kept_dirs():
        for r in range(rounds):
            if "start" in parts:
                starts.append(asyncio.run(_start_round(batches[kinds[0]][0])))
                mc.progress(f"round {r + 1}/{rounds} start: {starts[-1]}")
            for kind in kinds:
                for mode in (MODES if r % 2 == 0 and "render" in parts else
                             MODES[::-1] if "render" in parts else ()):
                    res = asyncio.run(_render_round(mode, batches[kind], min(500, n)))
                    render.setdefault((kind, mode), []).append(res)
                    mc.progress(f"round {r + 1}/{rounds} render {kind} {mode}: "
                                f"median {res['median_ms']:.3f} ms, {res['rate']:,.0f}/s")
                for step in (steps if r % 2 == 0 and "job" in parts else
                             steps[::-1] if "job" in parts else ()):
                    res = _job_step(server.url, step, batches[kind], pdfs[kind], before)
                    job.setdefault((kind, step), []).append(res)
                    mc.progress(f"round {r + 1}/{rounds} job {kind} {step}: "
                                f"{res['rate']:,.0f}/s")
    out: dict[str, Any] = {}
    for field in ("first_render_ms", "cpu_ms", "exit_cpu_ms") if starts else ():
        out[f"start_{field}"] = mc.median([x[field] for x in starts])
    for (kind, mode), runs in render.items():
        for field in ("median_ms", "p95_ms", "rate", "cpu_us"):
            out[f"render_{kind}_{mode}_{field}"] = mc.median([x[field] for x in runs])
    for (kind, step), runs in job.items():
        out[f"job_{kind}_{step}_rate"] = mc.median([x["rate"] for x in runs])
        if step != "bare":
            out[f"job_{kind}_{step}_cpu_us"] = mc.median([x["cpu_us_per_job"] for x in runs])
            for field in ("first_done_ms", "boot_ms", "spawn_rate", "steady_rate",
                          "steady_worker_cpu_us", "steady_child_cpu_us"):
                if all(field in x for x in runs):
                    out[f"job_{kind}_{step}_{field}"] = mc.median([x[field] for x in runs])

    def ratios(kind: str, a: str, b: str, field: str) -> list[float]:
        return [x[field] / y[field if field in y else "rate"]
                for x, y in zip(job[(kind, a)], job[(kind, b)], strict=True)]
    for kind in kinds if job else ():
        for a, b in [("process", "bare"), ("none", "bare"), ("process", "none"),
                     *([("before", "bare"), ("before", "none")] if before else [])]:
            # the whole drain (from the first read, a render process's start included),
            # then its steady window (a quarter to nine tenths done: measure_job.job_drain)
            # and from the worker's spawn (its boot in it; bare: its whole rate)
            for field, name in (("rate", ""), ("steady_rate", "_steady"),
                                ("spawn_rate", "_from_spawn")):
                if not all(field in x for x in job[(kind, a)]):
                    continue
                rs = ratios(kind, a, b, field)
                out[f"job_{kind}_{a}_vs_{b}{name}"] = mc.median(rs)
                # the spread of the rounds' ratios: on a shared box wider than the effect
                out[f"job_{kind}_{a}_vs_{b}{name}_min"] = min(rs)
                out[f"job_{kind}_{a}_vs_{b}{name}_max"] = max(rs)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_isolation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kinds", default="latin,mixed")
    p.add_argument("--parts", default="render,job")
    p.add_argument("--before", metavar="SRC",
                   help="also drain with render-process workers from SRC (an earlier "
                        "commit's src/, its extensions built), in the same rounds")
    a = p.parse_args(argv)
    for k, v in measure(a.n, a.rounds, a.kinds.split(","), a.parts.split(","),
                        a.before).items():
        print(f"{k:34} {v:,.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
