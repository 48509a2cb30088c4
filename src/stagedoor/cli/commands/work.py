"""`stagedoor work`: one worker in the foreground, without a supervisor.

For development, for a container that has its own supervisor, and for --burst runs
(drain what is there, then exit) in tests and benchmarks.  Production runs
`stagedoor-supervise`.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from ... import config
from ...exitcodes import EX_UNAVAILABLE
from ...handlers import load_registry
from ...worker.lifecycle import BootError
from ...worker.loop import Worker


def register(sub: Any) -> None:
    p = sub.add_parser("work", help="Run one worker in the foreground.",
                       description="Run one worker process in the foreground: recover its "
                       "own pending entries, then read, handle and ack until SIGTERM/SIGINT "
                       "(graceful) or, with --burst, until the stream is drained.")
    p.add_argument("--slot", type=int, default=0, help="Slot number: the consumer name is "
                   "<consumer>-<slot>, stable across restarts. [default: 0]")
    p.add_argument("--burst", action="store_true", help="Exit once nothing is left to do.")
    config.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ...ops.logs import setup_logging
    from ...proctitle import set_title

    settings = config.from_args(args)
    setup_logging(settings.log_format, settings.log_level)
    registry = load_registry(settings.handlers)
    set_title(f"stagedoor work: worker {settings.consumer_name(args.slot)}, stream "
              f"{settings.stream}")
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    try:
        runner(_main(settings, registry, args.slot, args.burst))
    except BootError as e:
        print(f"stagedoor work: {e}", file=sys.stderr)
        return EX_UNAVAILABLE
    return 0


async def _main(settings: config.Settings, registry: Any, slot: int, burst: bool) -> None:
    worker = Worker(settings, registry, slot=slot, burst=burst)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.request_stop)
    await worker.run()
    s = worker.stats
    print(f"handled {s.total('handled')}, dead-lettered {s.total('dead_lettered')}, "
          f"failed {s.total('failed')}, reclaimed {s.total('reclaimed')}, "
          f"recovered {s.total('recovered')}", file=sys.stderr)
