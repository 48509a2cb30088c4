"""A worker forked the way stagedoor-supervise forks it, on request (bench.measure_startup).

    python -m bench.supervisor_fork <stagedoor-supervise flags>

Imports what the supervisor has imported when it forks (stagedoor.cli.supervise, and
stagedoor.worker.child, which Pool._spawn imports before its first fork), builds the
Supervisor from the flags as `stagedoor-supervise` does, and forks slot 0 through its
Pool (Pool.try_spawn: Process.fork, the supervisor's in_child, child_main) each time a
line "spawn" comes on stdin.  It prints `time.monotonic()` taken just before the fork
(CLOCK_MONOTONIC: the measuring process compares it with its own clock), then, when
the child's READY line arrives on the heartbeat pipe, the seconds from fork to READY.
"stop" sends the worker SIGTERM and reaps it; EOF ends the server.

It imports nothing else of stagedoor (not even bench.measure_common), so the child
inherits exactly a supervisor's modules, and it has no thread and no event loop, as
Pool._spawn requires (process.assert_fork_safe).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

import orjson

from stagedoor import config
from stagedoor.cli.supervise import _setup_logging, build_parser
from stagedoor.supervisor.loop import Supervisor
from stagedoor.supervisor.state import Handle
from stagedoor.worker.child import child_main  # noqa: F401  (as Pool._spawn imports it)


def _wait_ready(h: Handle, timeout: float = 60.0) -> float | None:
    """Block on the heartbeat pipe until the READY line; None if the child ended first."""
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        select.select([h.proc.heartbeat_fd], [], [], max(0.0, deadline - time.monotonic()))
        data = h.proc.read_heartbeats()
        if data is None:
            return None
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if orjson.loads(line).get("t") == "ready":
                return time.monotonic()
    return None


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    settings = config.from_args(args)
    _setup_logging(settings)
    sup = Supervisor(settings)
    out = sys.stdout
    h: Handle | None = None
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "spawn":
            t0 = time.monotonic()
            h = sup.pool.try_spawn(0, "current")
            if h is None:
                print("error fork failed", file=out, flush=True)
                continue
            print(f"forked {t0!r}", file=out, flush=True)
            ready = _wait_ready(h)
            print(f"ready {'-1' if ready is None else repr(ready - t0)}", file=out,
                  flush=True)
        elif cmd == "stop" and h is not None:
            h.proc.send_signal(signal.SIGTERM)
            h.proc.wait()
            sup.pool.forget(h)
            h = None
            print("stopped", file=out, flush=True)
    if h is not None:
        h.proc.send_signal(signal.SIGKILL)
        h.proc.wait()
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    os.environ.pop("NOTIFY_SOCKET", None)  # never talk to a real systemd from a benchmark
    sys.exit(main(sys.argv[1:]))
