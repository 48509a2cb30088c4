"""No-op drain throughput: a backlog of n jobs, drained by real worker processes.

Three contenders, each a process of its own on the same fresh backlog, timed the
same way (the bench process polls XINFO GROUPS every few ms):

  stagedoor   `stagedoor work --burst` (1 or 2 processes), seed defaults
              (COUNT 10, 8 in flight, coalesced XACK), handler `noop`
  tuned raw   asyncio + uvloop + hiredis, XREADGROUP COUNT 100, handle each entry
              (await a no-op), one XACK per batch
  seed naive  the seed's loop: COUNT 10, Semaphore(8), a task per entry, one XACK
              per entry in the task's finally

`rate` is n / (PEL empty and all read  -  first entry read): the loop's throughput.
`rate_wall` also counts the process start (spawn -> PEL empty).  `python -m
bench.measure_drain raw|naive URL` is the raw loops' own entry point.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import psutil

from . import measure_common as mc

RAW_LOOPS = ("raw", "naive")


def _handled(stderr: str) -> int:
    m = re.findall(r"handled (\d+)", stderr)
    return int(m[-1]) if m else -1


def drain(url: str, n: int, *, kind: str = "stagedoor", workers: int = 1,
          inject: Sequence[str] = (), extra: Sequence[str] = (), timeout: float = 120.0,
          extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Fill a backlog of n no-op jobs and drain it; returns rates and checks.

    extra: more `stagedoor work` flags; extra_env: more environment for the worker
    processes (OTEL_* for the tracing bench)."""
    mc.fill(url, n)
    c = mc.client(url)
    stack = contextlib.ExitStack()
    try:
        if kind == "stagedoor":
            cmds = [mc.worker_cmd(url, slot=k, inject=inject, extra=extra)
                    for k in range(workers)]
        elif kind in RAW_LOOPS:
            cmds = [[mc.PY, "-m", "bench.measure_drain", kind, url, f"raw-{k}"]
                    for k in range(workers)]
        else:
            raise ValueError(kind)
        logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in cmds]  # noqa: SIM115
        t_spawn = time.perf_counter()
        procs = [mc.spawn(cmd, extra_env, stderr=log)
                 for cmd, log in zip(cmds, logs, strict=True)]
        ps = [psutil.Process(p.pid) for p in procs]
        t_first = t_done = 0.0
        cpu_first = cpu_done = 0.0
        peak_rss = [0] * len(procs)
        last_rss = time.perf_counter() - 1
        last_progress = t_spawn
        while True:
            now = time.perf_counter()
            info = mc.group_info(c)
            if not t_first and info["entries_read"] > 0:
                t_first = now
                cpu_first = sum(_cpu(p) for p in ps)
            if info["entries_read"] >= n and info["pending"] == 0:
                t_done = now
                # the CPU of the drain, not of the exit that follows (a worker's shutdown
                # and the interpreter's teardown cost tens of ms: 3-4 us a job of an
                # 8,000-job drain, more than a raw loop's whole job)
                cpu_done = sum(_cpu(p) for p in ps)
                break
            if now - last_rss > 0.1:
                last_rss = now
                for i, p in enumerate(ps):
                    with contextlib.suppress(psutil.Error):
                        peak_rss[i] = max(peak_rss[i], p.memory_info().rss)
            if now - last_progress > 3:
                last_progress = now
                mc.progress(f"drain {kind} x{workers}: read {info['entries_read']}/{n}, "
                            f"pending {info['pending']}")
            if now - t_spawn > timeout:
                raise RuntimeError(f"drain {kind} x{workers} not done after {timeout:g}s: "
                                   f"{info}")
            if all(_exited(p) for p in procs):
                time.sleep(0.05)  # the last ack may land just after the exit
                info = mc.group_info(c)
                if not (info["entries_read"] >= n and info["pending"] == 0):
                    raise RuntimeError(f"drain {kind} x{workers}: workers exited before the "
                                       f"drain was done: {info}, exit codes "
                                       f"{[p.returncode for p in procs]}")
            time.sleep(0.003)
        cpu_total = sum(_reap(p) for p in procs)
        errs = []
        for log in logs:
            log.seek(0)
            errs.append(log.read().decode(errors="replace"))
    finally:
        c.close()
        stack.close()
    handled = sum(max(0, _handled(e)) for e in errs)
    if handled != n:
        raise RuntimeError(f"drain {kind} x{workers}: handled {handled} of {n}; stderr: "
                           + " | ".join(e[-500:] for e in errs))
    return {"kind": kind, "workers": workers, "n": n, "seconds": t_done - t_first,
            "rate": n / (t_done - t_first), "rate_wall": n / (t_done - t_spawn),
            "startup_s": t_first - t_spawn, "handled": handled,
            "peak_rss_mb": max(peak_rss) / 2**20,
            "cpu_us_per_job": (cpu_done - cpu_first) / n * 1e6,
            "cpu_us_per_job_to_exit": (cpu_total - cpu_first) / n * 1e6,
            "reply_stats": [ln for e in errs for ln in e.splitlines()
                            if ln.startswith("reply-stats ")]}


def _cpu(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
        return float(t.user + t.system)
    except psutil.Error:
        return 0.0


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Has it exited?  WNOWAIT: leave it to _reap, whose wait4 gets the rusage."""
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _reap(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> float:
    """Wait for a worker to exit (burst mode) and return its CPU seconds (wait4 rusage)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return float(ru.ru_utime + ru.ru_stime)
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.005)


# -- the raw loops, run as `python -m bench.measure_drain raw|naive URL NAME` ----------

async def _noop(fields: Any) -> None:
    pass


async def tuned_loop(url: str, name: str) -> int:
    """asyncio + hiredis, COUNT 100, one XACK per batch; exits when nothing is left."""
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(url, protocol=2)
    r.response_callbacks.pop("XREADGROUP", None)
    handled = 0
    try:
        while True:
            reply = await r.execute_command("XREADGROUP", "GROUP", "workers", name,
                                            "COUNT", 100, "STREAMS", "jobs", ">")
            entries = reply[0][1] if reply else []
            if not entries:
                return handled
            for _eid, fields in entries:
                await _noop(fields)
            await r.execute_command("XACK", "jobs", "workers", *[e[0] for e in entries])
            handled += len(entries)
    finally:
        await r.aclose()


async def naive_loop(url: str, name: str) -> int:
    """The seed's loop: COUNT 10, 8 in flight, a task per entry, XACK per entry."""
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(url, protocol=2)
    slots = asyncio.Semaphore(8)
    tasks: set[asyncio.Task[None]] = set()
    handled = 0

    async def handle(entry_id: bytes, fields: Any) -> None:
        nonlocal handled
        try:
            await _noop(fields)
            handled += 1
        finally:
            await r.xack("jobs", "workers", entry_id)
            slots.release()

    try:
        while True:
            batches = await r.xreadgroup("workers", name, {"jobs": ">"}, count=10)
            got = 0
            for _, entries in batches:
                for entry_id, fields in entries:
                    got += 1
                    await slots.acquire()
                    t = asyncio.create_task(handle(entry_id, fields))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
            if not got:
                await asyncio.gather(*tasks)
                return handled
    finally:
        await r.aclose()


async def blocking_latency_loop(url: str, name: str) -> int:
    """The latency floor: XREADGROUP COUNT 100 BLOCK, note time.time_ns() per entry.

    Writes "trace start_ns" lines to $SD_BENCH_LATENCY_FILE (as the `latency` handler
    does) and exits after 3 s without entries.  COUNT 100 (it was 10): at 10,000 jobs/s
    on a busy box a COUNT 10 loop falls behind for good and measures its own queue, not
    the floor; below saturation a read returns what is there, so 1,000/s is unchanged."""
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(url, protocol=2, socket_timeout=10)
    r.response_callbacks.pop("XREADGROUP", None)
    rows = LATENCY_ROWS
    try:
        with contextlib.suppress(Exception):
            await r.execute_command("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
        while True:
            reply = await r.execute_command("XREADGROUP", "GROUP", "workers", name,
                                            "COUNT", 100, "BLOCK", 3000, "STREAMS", "jobs", ">")
            entries = reply[0][1] if reply else []
            if not entries:
                break
            for _eid, fields in entries:
                start = time.time_ns()
                trace = fields[fields.index(b"trace") + 1].decode()
                rows.append(f"{trace} {start}\n")
            await r.execute_command("XACK", "jobs", "workers", *[e[0] for e in entries])
    finally:
        await r.aclose()
    return len(rows)


LATENCY_ROWS: list[str] = []


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_drain")
    p.add_argument("loop", choices=(*RAW_LOOPS, "rawblock"))
    p.add_argument("url")
    p.add_argument("name", nargs="?", default="raw")
    a = p.parse_args(argv)
    import uvloop

    fn = {"raw": tuned_loop, "naive": naive_loop, "rawblock": blocking_latency_loop}[a.loop]
    handled = uvloop.run(fn(a.url, a.name))
    if a.loop == "rawblock":
        with open(os.environ["SD_BENCH_LATENCY_FILE"], "a") as f:
            f.write("".join(LATENCY_ROWS))
    print(f"handled {handled}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
