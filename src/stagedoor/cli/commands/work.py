"""`stagedoor work`: one worker in the foreground, without a supervisor.

For development, for a container that has its own supervisor, and for --burst runs
(drain what is there, then exit) in tests and benchmarks.  Production runs
`stagedoor-supervise`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any

from ... import config
from ...exitcodes import EX_CONFIG, EX_UNAVAILABLE
from ...handlers import load_registry
from ...proctitle import set_title
from ...telemetry.logs import setup_logging


def register(sub: Any) -> None:
    p = sub.add_parser("work", help="Run one worker in the foreground.",
                       description="Run one worker process in the foreground: recover its "
                       "own pending entries, then read, handle and ack until SIGTERM/SIGINT "
                       "(graceful) or, with --burst, until the stream is drained.  Its "
                       "consumer name is <consumer>-work-<pid> unless --slot says otherwise.")
    p.add_argument("--slot", type=int, default=None, help="Run as slot N: the consumer name "
                   "is <consumer>-<NN>, the name stagedoor-supervise gives its slot N, stable "
                   "across restarts (a restart re-reads its own pending entries at once). "
                   "Never beside a supervisor with the same consumer prefix: two processes "
                   "of one name run the same jobs. [default: no slot: the name is "
                   "<consumer>-work-<pid>, which no supervisor slot uses; the entries it "
                   "leaves pending when it dies are taken over by the other workers "
                   "after claim_idle_ms]")
    p.add_argument("--burst", action="store_true", help="Exit once nothing is left to do.")
    config.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = config.from_args(args)
    # here, not at the top: the worker requires its extension (worker/entries.py), and
    # `stagedoor --help`, which loads every command's module, must not
    try:
        from ...worker.lifecycle import BootError
        from ...worker.loop import Worker
    except ImportError as e:  # entries.NativeMissing: one line, as the supervisor's child
        print(f"stagedoor work: {e}", file=sys.stderr)
        return EX_CONFIG
    setup_logging(settings.log_format, settings.log_level)
    registry = load_registry(settings.handlers)
    consumer = work_consumer(settings, args.slot)
    set_title(f"stagedoor work: worker {consumer}, stream {settings.stream}")
    try:  # asyncio's own loop when uvloop is missing
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    try:
        runner(_main(Worker, settings, registry, args.slot or 0, consumer, args.burst))
    except BootError as e:
        print(f"stagedoor work: {e}", file=sys.stderr)
        return EX_UNAVAILABLE
    return 0


def work_consumer(settings: config.Settings, slot: int | None) -> str:
    """The consumer name: slot N's (--slot), else one no supervisor slot ever uses.

    A supervisor's slot k is <prefix>-<kk> for good; a `stagedoor work` that took
    <prefix>-00 by default re-read ("recovered") and ran again the entries pending under
    a live supervisor's worker 0.  Without --slot the name carries the pid: unique
    among live processes, and never <prefix>-<digits>.  What such a worker leaves
    pending when it dies is not re-read by its successor (another name): any worker's
    XAUTOCLAIM takes it once it has been idle claim_idle_ms."""
    if slot is not None:
        return settings.consumer_name(slot)
    return f"{settings.consumer_prefix}-work-{os.getpid()}"


async def _main(make: Any, settings: config.Settings, registry: Any, slot: int,
                consumer: str, burst: bool) -> None:
    worker = make(settings, registry, slot=slot, consumer=consumer, burst=burst)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.request_stop)
    await worker.run()
    s = worker.stats
    print(f"handled {s.total('handled')}, dead-lettered {s.total('dead_lettered')}, "
          f"failed {s.total('failed')}, reclaimed {s.total('reclaimed')}, "
          f"recovered {s.total('recovered')}", file=sys.stderr)
