"""Shared pieces of the measurements: a private redis-server, worker processes, backlogs.

Every measurement starts its own redis-server on a free loopback port (never the
machine's Redis on 6379) and runs workers as real processes: `python -m stagedoor.cli
work ...` with PYTHONPATH=src:. and the bench handlers, exactly what an operator runs.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import redis

from stagedoor.config import Settings
from stagedoor.demo.embedded_redis import EmbeddedRedis
from stagedoor.stream.job import Job
from stagedoor.stream.queue import enqueue_sync

from . import ROOT, SRC

HANDLERS = "bench.noop_handlers:registry"
PY = sys.executable


def progress(msg: str) -> None:
    """A progress line on stderr (long runs print one every few seconds)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


_COMPILED: set[str] = set()


def _compiled(*trees: str) -> None:
    """Byte-compile the trees the workers import, once per bench process: a worker's
    start must not include compiling its modules, which an installed package never
    does but a fresh checkout does on every start where PYTHONDONTWRITEBYTECODE is set
    (~30 ms of a forked worker's ~45 ms: perfcheck's startup ratio fell from ~2.9 to
    1.6 on a fresh worktree)."""
    import compileall

    for tree in trees:
        if tree not in _COMPILED:
            _COMPILED.add(tree)
            compileall.compile_dir(tree, quiet=1)


def env(**extra: str) -> dict[str, str]:
    """The workers' environment.  $SD_BENCH_SRC runs them from another source tree
    (a checkout of the commit before a change, its extensions built): the "before"
    figures of a change, measured by the same benchmark code); so does SD_BENCH_SRC in
    `extra`, for one process."""
    e = dict(os.environ)
    src = extra.get("SD_BENCH_SRC") or os.environ.get("SD_BENCH_SRC") or str(SRC)
    _compiled(src, str(ROOT / "bench"))
    e["PYTHONPATH"] = os.pathsep.join([src, str(ROOT)])
    for k in [k for k in e if k.startswith("STAGEDOOR_")]:
        del e[k]  # the operator's settings must not leak into a benchmark
    e.update(extra)
    return e


@contextlib.contextmanager
def redis_server(directory: str | Path | None = None, *, appendonly: bool = False
                 ) -> Iterator[EmbeddedRedis]:
    """A fresh redis-server on a free 127.0.0.1 port, stopped afterwards."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="sd-bench-"))
        server = EmbeddedRedis(Path(directory) / "redis", appendonly=appendonly)
        server.start()
        stack.callback(server.stop)
        yield server


def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, protocol=2, socket_timeout=30)


def settings(url: str, **kw: Any) -> Settings:
    """Seed defaults (COUNT 10, BLOCK 5000, 8 in flight) pointed at the bench server."""
    return Settings(redis_url=url, consumer=kw.pop("consumer", "bench"), **kw)


def job(i: int, kind: str = "noop", trace: str = "t") -> Job:
    return Job(kind=kind, order_id=i + 1, outbox_id=i + 1, request_id=f"r{i}", trace=trace)


def fill(url: str, n: int, kind: str = "noop") -> float:
    """Flush the server and put a backlog of n jobs on the stream; returns seconds taken."""
    c = client(url)
    try:
        c.flushall()
        # A backlog of n unread jobs: maxlen well above it, or the producer's backlog
        # check (95 % of maxlen) refuses the rest, as it should in production.
        s = settings(url, maxlen=max(100_000, 2 * n))
        t0 = time.perf_counter()
        chunk = 5000
        for start in range(0, n, chunk):
            enqueue_sync(c, s, [job(i, kind) for i in range(start, min(n, start + chunk))])
        return time.perf_counter() - t0
    finally:
        c.close()


def group_info(c: redis.Redis, group: str = "workers", stream: str = "jobs") -> dict[str, Any]:
    for g in c.execute_command("XINFO", "GROUPS", stream):
        d = dict(zip(g[::2], g[1::2], strict=True))
        if d[b"name"] == group.encode():
            return {"pending": int(d[b"pending"]), "entries_read": int(d[b"entries-read"] or 0),
                    "lag": d[b"lag"]}
    raise RuntimeError(f"group {group} not found")


def common_flags(url: str) -> list[str]:
    """Settings flags shared by `stagedoor work` and `stagedoor-supervise`."""
    return ["--redis-url", url, "--consumer", "bench", "--handlers", HANDLERS,
            "--log-format", "text", "--log-level", "warning"]


def supervise_cmd(url: str, workers: int = 1) -> list[str]:
    return [PY, "-c", "import sys; from stagedoor.cli.supervise import main as supervise_main; "
            "sys.exit(supervise_main(sys.argv[1:]))", *common_flags(url),
            "--workers", str(workers)]


def worker_cmd(url: str, *, slot: int = 0, burst: bool = True, extra: Sequence[str] = (),
               inject: Sequence[str] = ()) -> list[str]:
    """The `stagedoor work` command line; with `inject`, through bench.slowdown."""
    args = ["work", *common_flags(url), "--slot", str(slot), *extra]
    if burst:
        args.append("--burst")
    if inject:
        pre = [PY, "-m", "bench.slowdown"]
        for spec in inject:
            pre += ["--inject", spec]
        return [*pre, "--", *args]
    return [PY, "-m", "stagedoor.cli", *args]


def spawn(cmd: Sequence[str], extra_env: dict[str, str] | None = None,
          stderr: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(cmd), cwd=ROOT, env=env(**(extra_env or {})),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=stderr)


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> str:
    """Wait for (or terminate) a process; returns its stderr text."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    return (err or b"").decode(errors="replace")


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")
