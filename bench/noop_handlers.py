"""Handlers for the benchmarks: `--handlers bench.noop_handlers:registry`.

noop      does nothing (the drain benchmarks: the loop's own cost per job)
latency   records (trace = producer's time.time_ns() at send, time.time_ns() at start)
          to $SD_BENCH_LATENCY_FILE, one "send start" line per job
hold      while $SD_BENCH_HOLD names an existing file, sleeps (a job in flight
          when the worker is killed); otherwise appends "outbox_id time_ns" to
          $SD_BENCH_HANDLED_FILE (the kill -9 recovery benchmark)
outage    while $SD_BENCH_OUTAGE names an existing file, fails transiently (a
          dependency away: the job is left pending); otherwise waits
          $SD_BENCH_WORK_S (default 0.002 s) as for a reply (measure_recovery_pending.py)
"""

from __future__ import annotations

import asyncio
import atexit
import os
import time
from typing import IO, Any

from stagedoor.handlers import Registry

registry = Registry()
_latency_out: IO[str] | None = None
_latency_rows: list[str] = []


@registry.register("noop")
async def noop(job: Any, ctx: Any) -> None:
    pass


def _flush_latency() -> None:
    path = os.environ.get("SD_BENCH_LATENCY_FILE")
    if path and _latency_rows:
        with open(path, "a") as f:
            f.write("".join(_latency_rows))
        _latency_rows.clear()


atexit.register(_flush_latency)


@registry.register("latency")
async def latency(job: Any, ctx: Any) -> None:
    start = time.time_ns()
    _latency_rows.append(f"{job.trace} {start}\n")
    if len(_latency_rows) >= 4096:
        _flush_latency()


def _held() -> bool:
    marker = os.environ.get("SD_BENCH_HOLD", "")
    return bool(marker) and os.path.exists(marker)


def _record_handled(line: str) -> None:
    path = os.environ.get("SD_BENCH_HANDLED_FILE")
    if path:
        with open(path, "a") as f:
            f.write(line)


@registry.register("hold", timeout=50.0)
async def hold(job: Any, ctx: Any) -> None:
    start = time.time_ns()
    # The marker is removed by another process (the benchmark): poll it.
    while _held():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    _record_handled(f"{job.outbox_id} {start} {time.time_ns()}\n")


def _outage() -> bool:
    marker = os.environ.get("SD_BENCH_OUTAGE", "")
    return bool(marker) and os.path.exists(marker)


@registry.register("outage")
async def outage(job: Any, ctx: Any) -> None:
    from stagedoor.errors import TransientError

    if _outage():  # one stat, as a dependency's health check would cost
        raise TransientError("dependency away")
    await asyncio.sleep(float(os.environ.get("SD_BENCH_WORK_S", "0.002")))
