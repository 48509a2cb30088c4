"""The real job end to end against the disk's own speed for the same durable write.

    python -m bench.measure_job [--n 2000] [--rounds 3]
    python -m bench.measure_job --before /path/to/old/src   (before and after, one run)
    python -m bench.measure_job --perf-stat [--n 3000]   (kernel events per job)

Two contenders, interleaved in one run on one filesystem:

  job    one `stagedoor work --burst` process at the seed defaults (8 in flight,
         8 render threads) draining n `render_tickets` jobs over demo orders already
         in the store: the handler's idempotency lease, the order read, the native
         render, the durable write, the rendered mark, the done mark, the ack.
  bare   a plain loop in this process writing the same n PDFs (rendered beforehand)
         with the same durability: tmp file + fsync + rename + fsync of the directory,
         on 8 threads: what the disk allows for that write.

`ratio` = job rate / bare rate of the same round; the figure is the median over the
rounds.  Latin orders are `stagedoor.demo.orders.demo_order` (1-4 tickets, Latin names);
the mixed-script orders are the demo's `world_order` (1-4 tickets of one of the
sample scripts: Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai, CJK, Hangul,
mixed direction), which `stagedoor demo` puts in every third order.

Per job it also reports the commands the worker sent (`commands_per_job`): a separate,
untimed drain of a few hundred jobs with MONITOR attached, counting the commands
clients sent and not those scripts ran inside Redis (INFO commandstats counts both, so
a 3-command script would look like 4 round trips); the bench's own polling and
connection set-up are left out.  With redis-py every command is a round trip; on the
worker's lean connection an XACK usually rides in the same write as the next
XREADGROUP, so `round_trips_per_job` counts every command but XACK.

Redis runs with AOF (appendfsync everysec), as `stagedoor demo` runs it.  The
directories are under the system temp dir, which must be a real disk (a tmpfs fsync
costs nothing and would flatter both contenders alike): `SD_BENCH_DISK_DIR` overrides.
This box's root file system is ext4 without a journal, where every new inode skips the
inodes freed in the last hours whose table block is cached (`recently_deleted`); a
journalled ext4, what servers run, does not, and its fsync commits the journal.  To
measure on one (as root): `truncate -s 12G /tmp/fs.img && mkfs.ext4 -q /tmp/fs.img &&
mkdir -p /mnt/sdfs && mount -o loop /tmp/fs.img /mnt/sdfs`, then
`SD_BENCH_DISK_DIR=/mnt/sdfs` (12 GB: a 5-round isolation run writes ~100,000 PDFs).
No round's files are deleted before the run ends (kept_dirs: on ext4 without a journal
deleting them made every later file creation 10-30x dearer for both contenders, which
flattered the ratio), and `file_create_us` (alloc_probe, at the start and the end)
says what creating a file cost meanwhile: ~25-70 us on a quiet filesystem here, 0.5-0.9
ms within minutes of a mass deletion (a test suite, an earlier run).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from stagedoor.demo.orders import demo_order, world_order
from stagedoor.render.order import Order
from stagedoor.stream.job import make_job
from stagedoor.stream.queue import enqueue_sync, ensure_group_sync
from stagedoor.tickets.orders import put_orders_sync

from . import measure_common as mc
from .measure_drain import _cpu, _exited, _reap

WRITE_THREADS = 8  # the worker's render_threads default: the same parallelism for both
# Commands of the bench itself and of a connection's set-up, left out of the per-job counts.
NOT_PER_JOB = {"xinfo", "info", "config", "ping", "client", "hello", "monitor", "script",
               "xgroup", "flushall", "exists", "xlen"}

def orders(n: int, kind: str, base: int = 1) -> list[Order]:
    """Latin demo orders, or the demo's orders in other scripts (`world_order`)."""
    make = demo_order if kind == "latin" else world_order
    return [make(base + i) for i in range(n)]


# Directories whose removal waits for the end of the run (kept_dirs), else None.
_KEPT: list[Path] | None = None


@contextlib.contextmanager
def kept_dirs() -> Iterator[None]:
    """Keep every disk_dir of the rounds inside until the run ends, then remove them.

    Why: on ext4 without a journal (this VM's root filesystem) a new inode is not taken
    from those freed in the last 1-6 minutes, and the allocator walks past each of them
    per file (`recently_deleted` in fs/ext4/ialloc.c: perf put 89 % of a file creation
    there).  A round that deleted its 2,000 PDFs made every file of the next round cost
    0.5-0.9 ms of CPU instead of ~0.05 ms, for either contender: a cost no deployment
    that keeps its tickets pays, which flattered the job's ratio.  alloc_probe() shows
    what file creation costs while the rounds run."""
    global _KEPT
    outer, _KEPT = _KEPT, []
    try:
        yield
    finally:
        for d in _KEPT:
            shutil.rmtree(d, ignore_errors=True)
        _KEPT = outer


@contextlib.contextmanager
def disk_dir(prefix: str) -> Iterator[Path]:
    root = os.environ.get("SD_BENCH_DISK_DIR") or None
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    try:
        yield d
    finally:
        if _KEPT is None:
            shutil.rmtree(d, ignore_errors=True)
        else:
            _KEPT.append(d)


def alloc_probe(files: int = 200) -> float:
    """CPU microseconds to create one empty file (unnamed, then linked: the worker's way)
    in a fresh directory on the bench's disk: the filesystem's own cost per file, which
    both contenders pay.  On a quiet ext4 here ~45 us; after a burst of deletions
    0.5-0.9 ms (kept_dirs)."""
    with disk_dir("sd-probe-") as d:
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            c0 = time.process_time()
            for i in range(files):
                fd = os.open(".", os.O_WRONLY | os.O_TMPFILE, 0o644, dir_fd=dfd)
                try:
                    os.link(f"/proc/self/fd/{fd}", f"p{i}", dst_dir_fd=dfd)
                finally:
                    os.close(fd)
            return (time.process_time() - c0) / files * 1e6
        finally:
            os.close(dfd)


# -- the bare loop -------------------------------------------------------------------------

def _durable_write(directory: Path, name: str, data: bytes) -> None:
    """The baseline's own copy of the write, not tickets.handlers.write_atomic: the
    product's write is what is being measured and will change (group commit)."""
    tmp = directory / f".{name}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / name)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def bare_writes(pdfs: Sequence[bytes], threads: int = WRITE_THREADS) -> dict[str, Any]:
    """Write every PDF durably from `threads` threads into a fresh directory."""
    with disk_dir("sd-bare-") as d:
        def worker(k: int) -> None:
            for i in range(k, len(pdfs), threads):
                _durable_write(d, f"order-{i}.pdf", pdfs[i])

        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            for f in [pool.submit(worker, k) for k in range(threads)]:
                f.result()
        seconds = time.perf_counter() - t0
        written = len(list(d.glob("order-*.pdf")))
    if written != len(pdfs):
        raise RuntimeError(f"bare loop wrote {written} of {len(pdfs)}")
    return {"kind": "bare", "n": len(pdfs), "seconds": seconds, "rate": len(pdfs) / seconds}


# -- the worker ----------------------------------------------------------------------------

def _fill(url: str, batch: Sequence[Order], outbox_base: int) -> None:
    c = mc.client(url)
    try:
        c.flushall()
        s = mc.settings(url)
        put_orders_sync(c, s, batch)
        ensure_group_sync(c, s)
        jobs = [make_job("render_tickets", o.order_id, outbox_base + i, f"r{i}", f"t{i}")
                for i, o in enumerate(batch)]
        for k in range(0, len(jobs), 5000):
            enqueue_sync(c, s, jobs[k:k + 5000])
        c.config_resetstat()
    finally:
        c.close()


def job_drain(url: str, batch: Sequence[Order], *, extra: Sequence[str] = (),
              workers: int = 1, timeout: float = 300.0, inject: Sequence[str] = (),
              on_filled: Callable[[], None] | None = None,
              on_spawned: Callable[[Sequence[int]], None] | None = None) -> dict[str, Any]:
    """Drain len(batch) render_tickets jobs with real worker processes (`on_spawned`
    gets their pids before they read anything, e.g. to attach perf)."""
    n = len(batch)
    _fill(url, batch, outbox_base=10_000_000)
    if on_filled is not None:
        on_filled()
    with disk_dir("sd-tickets-") as tickets, contextlib.ExitStack() as stack:
        flags = ["--tickets-dir", str(tickets), *extra]
        logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(workers)]
        t_spawn = time.perf_counter()
        procs = [mc.spawn(mc.worker_cmd(url, slot=k, extra=flags, inject=inject),
                          stderr=log)
                 for k, log in enumerate(logs)]
        if on_spawned is not None:
            on_spawned([p.pid for p in procs])
        import psutil

        ps = [psutil.Process(p.pid) for p in procs]
        c = mc.client(url)
        # the steady window: from a quarter of the jobs done to nine tenths, so neither
        # the worker's first reads nor a render process's start (~0.1 s) is in it; its
        # CPU is each worker's and its children's (the render process), split
        lo, hi = n // 4, n * 9 // 10
        steady: list[tuple[float, int, float, float]] = []  # when, done, CPU: worker, children
        try:
            t_first = cpu_first = t_acked = 0.0
            while True:
                now = time.perf_counter()
                info = mc.group_info(c)
                if not t_first and info["entries_read"] > 0:
                    t_first, cpu_first = now, sum(_cpu(p) for p in ps)
                done = info["entries_read"] - info["pending"]
                if t_first and not t_acked and done > 0:
                    t_acked = now     # the first job done: a render process's start shows
                if len(steady) < 2 and done >= (lo, hi)[len(steady)]:
                    steady.append((now, done, sum(_cpu(p) for p in ps),
                                   sum(_cpu(k) for p in ps for k in _children(p))))
                if info["entries_read"] >= n and info["pending"] == 0:
                    t_done = now
                    break
                if now - t_spawn > timeout:
                    raise RuntimeError(f"job drain not done after {timeout:g}s: {info}")
                if all(_exited(p) for p in procs):
                    time.sleep(0.05)
                    info = mc.group_info(c)
                    if not (info["entries_read"] >= n and info["pending"] == 0):
                        errs = []
                        for log in logs:
                            log.seek(0)
                            errs.append(log.read().decode(errors="replace")[-800:])
                        raise RuntimeError(f"workers exited before the drain was done: "
                                           f"{info}: {' | '.join(errs)}")
                time.sleep(_poll_gap(now, t_first, done, n))
            cpu = sum(_reap(p) for p in procs) - cpu_first
            dead = c.xlen(mc.settings(url).dead_stream) if c.exists(
                mc.settings(url).dead_stream) else 0
        finally:
            c.close()
        pdfs = len(list(tickets.glob("order-*.pdf")))
    if pdfs != n or dead:
        raise RuntimeError(f"job drain: {pdfs} PDFs of {n}, {dead} dead-lettered")
    out = {"kind": "job", "workers": workers, "n": n, "seconds": t_done - t_first,
           "rate": n / (t_done - t_first), "cpu_us_per_job": cpu / n * 1e6}
    if t_acked:
        out["first_done_ms"] = (t_acked - t_first) * 1e3
    # from the worker's spawn: its boot too (imports, Redis, start hooks: a render
    # process started at boot is waited for before the first read), the rate a
    # restarted worker gives its first n jobs
    out["boot_ms"] = (t_first - t_spawn) * 1e3
    out["spawn_rate"] = n / (t_done - t_spawn)
    if len(steady) == 2 and steady[1][0] > steady[0][0]:
        jobs = steady[1][1] - steady[0][1]
        out["steady_rate"] = jobs / (steady[1][0] - steady[0][0])
        out["steady_worker_cpu_us"] = (steady[1][2] - steady[0][2]) / jobs * 1e6
        out["steady_child_cpu_us"] = (steady[1][3] - steady[0][3]) / jobs * 1e6
    return out


POLL_MIN, POLL_MAX = 0.003, 0.05


def _poll_gap(now: float, t_first: float, done: int, n: int) -> float:
    """Seconds until the drain's next XINFO GROUPS.  Every 3 ms until the first read and
    near the end (the figures' ends are read to 3 ms), and in between a quarter of the
    time the rate so far says is left (at most 50 ms): on this 2-core box a fixed 3 ms
    poll took 3-4 % of every CPU sample from the worker it measures (perf over a drain:
    this process plus Redis answering it), and the bare loop has no poller.  The steady
    window's rate uses the counts read at its two samples, so a coarse gap costs it
    nothing."""
    if not t_first or done <= 0:
        return POLL_MIN
    left = (n - done) * (now - t_first) / done
    return min(POLL_MAX, max(POLL_MIN, left / 4))


def _children(p: Any) -> list[Any]:
    import psutil

    try:
        return list(p.children())
    except psutil.Error:
        return []


def commands_per_job(url: str, batch: Sequence[Order], extra: Sequence[str] = ()
                     ) -> dict[str, Any]:
    """Client-sent commands per job, from MONITOR over an untimed drain of `batch`."""
    import redis

    n = len(batch)
    mon = redis.Redis.from_url(url, protocol=2)
    counts: dict[str, int] = {}
    stop = threading.Event()

    def listen() -> None:
        with mon.monitor() as m:
            ready.set()
            for cmd in m.listen():
                if cmd["client_type"] != "lua":
                    name = cmd["command"].split(" ", 1)[0].lower()
                    counts[name] = counts.get(name, 0) + 1
                if stop.is_set() and name == "ping":
                    return

    ready = threading.Event()
    t = threading.Thread(target=listen, daemon=True)

    def attach() -> None:
        t.start()
        ready.wait(10)

    try:
        job_drain(url, batch, extra=extra, on_filled=attach)
    finally:
        stop.set()
        c = mc.client(url)
        deadline = time.monotonic() + 10
        while t.is_alive() and time.monotonic() < deadline:
            c.ping()
            t.join(0.1)
        c.close()
        mon.close()
    per_job = {k: v / n for k, v in sorted(counts.items()) if k not in NOT_PER_JOB}
    return {"commands_per_job": per_job,
            "round_trips_per_job": sum(v for k, v in per_job.items() if k != "xack")}


PERF_EVENTS = ("syscalls:sys_enter_futex", "context-switches", "syscalls:sys_enter_fsync",
               "syscalls:sys_enter_write", "syscalls:sys_enter_epoll_pwait")


def perf_stat_per_job(url: str, batch: Sequence[Order], extra: Sequence[str] = ()
                      ) -> dict[str, float]:
    """Kernel events per job of one worker over an untimed drain of `batch`, from
    `perf stat` attached to it (every thread): futex calls and context switches are
    what thread hand-overs and GIL contention cost (docs/profile-worker.md (G)).
    Needs perf and access to tracepoints (root, or kernel.perf_event_paranoid <= -1)."""
    import signal
    import subprocess

    out = Path(tempfile.mkdtemp(prefix="sd-perf-")) / "stat.csv"
    perf: list[subprocess.Popen[bytes]] = []

    def attach(pids: Sequence[int]) -> None:
        perf.append(subprocess.Popen(
            ["perf", "stat", "-x", ",", "-o", str(out), "-e", ",".join(PERF_EVENTS),
             "-p", str(pids[0])], stderr=subprocess.DEVNULL))
        time.sleep(0.3)  # attached before the worker reads its first entry

    try:
        job_drain(url, batch, extra=extra, on_spawned=attach)
    finally:
        for p in perf:
            p.send_signal(signal.SIGINT)
            p.wait(10)
    counts: dict[str, float] = {}
    for line in out.read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] in PERF_EVENTS:
            if not fields[0].replace(".", "").isdigit():
                raise RuntimeError(f"perf stat could not count {fields[2]}: {fields[0]} "
                                   "(run as root, or sysctl kernel.perf_event_paranoid=-1)")
            counts[fields[2].removeprefix("syscalls:sys_enter_")] = float(fields[0]) / len(batch)
    shutil.rmtree(out.parent, ignore_errors=True)
    return counts


def render_all(batch: Sequence[Order]) -> list[bytes]:
    from stagedoor.render import renderer

    render = renderer()
    return [render(o) for o in batch]


@contextlib.contextmanager
def workers_from(src: str | None) -> Iterator[None]:
    """Spawn the workers from another source tree meanwhile (mc.env's SD_BENCH_SRC)."""
    saved = os.environ.get("SD_BENCH_SRC")
    if src is not None:
        os.environ["SD_BENCH_SRC"] = src
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("SD_BENCH_SRC", None)
        else:
            os.environ["SD_BENCH_SRC"] = saved


def job_vs_bare(n: int, rounds: int, kinds: Sequence[str] = ("latin", "mixed"),
                extra: Sequence[str] = (), before: str | None = None) -> dict[str, Any]:
    """Interleaved rounds of (job per kind, bare) and the reverse; medians of ratios.

    With `before` (a source tree of an earlier commit, its extensions built), every
    round also drains each kind with workers from that tree: before and after side by
    side in one run, on the same server and the same filesystem state."""
    batches = {k: orders(n, k) for k in kinds}
    pdfs = render_all(batches[kinds[0]])
    steps = [*kinds, *(f"before_{k}" for k in kinds if before), "bare"]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in steps}
    with mc.redis_server(appendonly=True) as server, kept_dirs():
        probes = [alloc_probe()]
        for r in range(rounds):
            for step in (steps if r % 2 == 0 else steps[::-1]):
                if step == "bare":
                    res = bare_writes(pdfs)
                else:
                    old = step.startswith("before_")
                    with workers_from(before if old else None):
                        res = job_drain(server.url, batches[step.removeprefix("before_")],
                                        extra=extra)
                runs[step].append(res)
                mc.progress(f"job round {r + 1}/{rounds} {step}: {res['rate']:,.0f}/s")
        probes.append(alloc_probe())
        counted = commands_per_job(server.url, batches[kinds[0]][:300], extra)
    out: dict[str, Any] = {"job_n": n, "job_rounds": rounds, "job_runs": runs,
                           "job_file_create_us": probes,
                           "job_bare_rate": mc.median([x["rate"] for x in runs["bare"]])}
    for k in [s for s in steps if s != "bare"]:
        out[f"job_{k}_rate"] = mc.median([x["rate"] for x in runs[k]])
        out[f"job_{k}_vs_bare"] = mc.median(
            [a["rate"] / b["rate"] for a, b in zip(runs[k], runs["bare"], strict=True)])
        out[f"job_{k}_cpu_us"] = mc.median([x["cpu_us_per_job"] for x in runs[k]])
    out["job_round_trips"] = counted["round_trips_per_job"]
    out["job_commands"] = counted["commands_per_job"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.measure_job", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--kinds", default="latin,mixed")
    p.add_argument("--worker-flag", action="append", default=[], metavar="FLAG",
                   help="extra `stagedoor work` flag, e.g. --worker-flag=--concurrency=16")
    p.add_argument("--before", metavar="SRC",
                   help="also drain with workers from SRC (the src/ of a checkout of an "
                        "earlier commit, its extensions built), interleaved in the same "
                        "rounds: before and after figures from one run")
    p.add_argument("--perf-stat", action="store_true",
                   help="instead: one untimed drain of n Latin jobs with `perf stat` "
                        "attached to the worker; futex calls, context switches, fsync, "
                        "write and epoll_pwait calls per job")
    a = p.parse_args(argv)
    if a.perf_stat:
        with mc.redis_server(appendonly=True) as server, kept_dirs():
            counts = perf_stat_per_job(server.url, orders(a.n, "latin"), a.worker_flag)
        for k, v in counts.items():
            print(f"{k + ' per job':24} {v:,.2f}")
        return 0
    r = job_vs_bare(a.n, a.rounds, a.kinds.split(","), a.worker_flag, a.before)
    r.pop("job_runs")
    for k, v in r.items():
        print(f"{k:24} {v:,.3f}" if isinstance(v, float) else f"{k:24} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
