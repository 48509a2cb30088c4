"""`stagedoor-supervise`: the supervisor's command line (flags, help, exit codes).

It builds the Supervisor from parsed settings and runs it; the supervisor package does
not know about argparse, so nothing there imports the cli (this is what broke the old
cli <-> supervisor import cycle).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import config
from ..config import ConfigError, Settings
from ..exitcodes import EX_CONFIG
from ..redaction import install_excepthook
from ..supervisor.loop import Supervisor
from ..supervisor.state import Options
from ..supervisor.systemd import Notifier
from ..telemetry.logs import setup_logging
from .main import Parser, add_version

EPILOG = """\
signals:
  SIGTERM, SIGINT  graceful stop: STOPPING=1, one SIGTERM to each worker; workers stop
                   reading, finish in-flight jobs within --graceful-timeout, ack and exit;
                   stragglers get SIGKILL (their jobs stay pending, nothing is lost); exit 0.
                   A second SIGTERM/SIGINT is a quick stop: SIGKILL to every worker now.
  SIGHUP           rolling restart, one slot at a time: fork the new worker, wait for its
                   READY, then stop the old one gracefully (capacity never drops).
                   Workers import the handler code after the fork, so a deploy of
                   handlers or worker code is picked up, and the --config file is
                   re-read (a bad one keeps the running settings); changes to the
                   supervisor itself, flags, environment, --workers, --consumer or
                   the metrics address need a restart.
  SIGTTIN, SIGTTOU one worker more / less (never fewer than 1).
  SIGABRT to a worker dumps all its threads' stacks to stderr (what a hang does).

exit codes:
  0   stopped on request
  2   bad command line
  69  Redis unavailable: no worker could reach Redis within --boot-timeout (EX_UNAVAILABLE)
  70  internal error, or flapping: too many worker restarts (EX_SOFTWARE)
  78  bad configuration, in the supervisor or in a worker (bad handler module, Redis too
      old, an ACL refusing a command, metrics port taken) (EX_CONFIG); systemd does not
      restart on it (RestartPreventExitStatus=78)

Every setting is also STAGEDOOR_<NAME> in the environment or a key of the --config
TOML file (flags > environment > file > defaults).  See docs/supervisor.md.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="stagedoor-supervise",
                    description="Run and supervise N stagedoor worker processes: fork them, "
                    "watch their heartbeats, respawn crashed or hung ones (same consumer "
                    "name, so their pending jobs are handled first), roll them on SIGHUP, "
                    "and report to systemd (Type=notify, watchdog).",
                    epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(parser)
    config.add_arguments(parser)
    sup = parser.add_argument_group("supervisor only")
    sup.add_argument("--flap-max", type=int, default=20, metavar="N",
                     help="More than N worker restarts within --flap-window seconds, "
                     "with no job handled by any worker in that time, is flapping: "
                     "exit 70. [default: 20]")
    sup.add_argument("--flap-window", type=float, default=60.0, metavar="SECONDS",
                     help="[default: 60]")
    sup.add_argument("--boot-retries", type=int, default=3, metavar="N",
                     help="Exit when every slot failed to boot N times in a row. [default: 3]")
    sup.add_argument("--status-file", default="", metavar="FILE",
                     help="Write the pool's state as JSON to FILE whenever it changes.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `stagedoor-supervise` entry point: parse, check, run the Supervisor."""
    install_excepthook()  # an unforeseen traceback is printed with secrets masked
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.flap_max < 1 or args.flap_window <= 0 or args.boot_retries < 1:
        print("stagedoor-supervise: config error: --flap-max, --flap-window and "
              "--boot-retries must be positive", file=sys.stderr)
        return EX_CONFIG
    try:
        settings = config.from_args(args)
        if not settings.redis_url:
            raise ConfigError("redis_url is empty: set STAGEDOOR_REDIS_URL or --redis-url "
                              "(the supervisor does not start an embedded Redis)")
    except ConfigError as e:
        print(f"stagedoor-supervise: config error: {e}", file=sys.stderr)
        return EX_CONFIG
    _setup_logging(settings)
    notifier, watchdog = Notifier.from_environ(os.environ)
    options = Options(flap_max=args.flap_max, flap_window=args.flap_window,
                      boot_retries=args.boot_retries, status_file=args.status_file)
    return Supervisor(settings, options, notifier, watchdog,
                      reload_settings=lambda: config.from_args(args)).run()


def _setup_logging(settings: Settings) -> None:
    setup_logging(settings.log_format, settings.log_level, stream=sys.stderr)
