"""The `stagedoor` command: its parser and the error mapping around every subcommand.

Each subcommand lives in stagedoor/cli/commands/<name>.py and exposes
`register(subparsers)`, which adds its parser and sets `func(args) -> int`.
Errors an operator can fix are one line on stderr: exit 2 for wrong arguments,
78 (EX_CONFIG) for a bad setting, 69 (EX_UNAVAILABLE) when Redis cannot be reached,
75 (EX_TEMPFAIL) when Redis is out of memory or the backlog is near MAXLEN, 141 with
nothing on stderr when stdout's reader went away (`| head`).  A Cluster that is up but
not ready is "cluster not ready: <cause>" (69).  Every line goes through
redaction.redact: no password, however given, is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..exitcodes import (
    EX_BROKEN_PIPE,
    EX_CONFIG,
    EX_TEMPFAIL,
    EX_UNAVAILABLE,
    EX_USAGE,
    EX_USAGE_DOCTOR,
)
from ..redaction import install_excepthook, redact
from ..version import __version__

# name -> its line in `stagedoor --help`.  Only the command being run is imported (its
# module pulls in redis-py, the renderer, ...): `stagedoor --version` and `--help` import
# none, `stagedoor render` no Redis client (issue 27).  tests/cli/test_cli.py checks these
# lines against each module's own help=.
COMMANDS = {
    "enqueue": "Add jobs to the stream.",
    "work": "Run one worker in the foreground.",
    "demo": "Run the supervisor on demo orders until drained.",
    "status": "Show the queue: length, lag, pending, queue age, dead letters.",
    "dead": "List, show, group, replay, delete or purge dead-letter entries.",
    "render": "Render an order (JSON) to a PDF, one page per ticket.",
    "systemd": "Print or install the systemd units of this package.",
    "monitoring": "Print the shipped Prometheus alerts and Grafana dashboard.",
    "doctor": "Check this host: renderer, fonts, tickets directory, Redis, ...",
    "pending": "List or show pending entries (delivered, not acked yet).",
    "job": "Where is a job: queued, pending, retrying, done, dead or trimmed.",
    "pause": "Stop the whole fleet taking new jobs (the processes stay up).",
    "resume": "Let the fleet take new jobs again (ends the pause).",
    "web": "Serve the operator's console: an authenticated web page.",
}
# a command registered by another command's module (it registers both)
MODULES = {"resume": "pause"}


def module_of(command: str) -> str:
    """The module of stagedoor.cli.commands that registers the command."""
    return MODULES.get(command, command)


# the exit code of a wrong argument, where it is not EX_USAGE (exitcodes.py)
USAGE_CODES = {"doctor": EX_USAGE_DOCTOR}


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: what is wrong and where the help is."""

    usage_code = EX_USAGE

    def error(self, message: str) -> NoReturn:
        self.exit(self.usage_code, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")


def build_parser(only: str | None = None) -> Parser:
    """The whole parser, or (only=) the named command's in full and the others as
    entries of the help listing: argparse only ever parses the command named."""
    parser = Parser(prog="stagedoor", description="Stagedoor job queue tools: enqueue jobs, "
                    "run a worker, inspect the queue and the dead letters.")
    add_version(parser)
    # an argument the command does not know is the top parser's error: the command's code
    parser.usage_code = USAGE_CODES.get(only or "", EX_USAGE)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    wanted = None if only is None else module_of(only)
    registered: set[str] = set()
    for name, line in COMMANDS.items():
        module = module_of(name)
        if wanted is None or module == wanted:
            if module not in registered:  # its register() adds all of its commands
                importlib.import_module(f"stagedoor.cli.commands.{module}").register(sub)
                registered.add(module)
        else:
            sub.add_parser(name, help=line, add_help=False)
    return parser


def command_named(argv: Sequence[str]) -> str:
    """The command argv runs ("" for none): the first word that is not an option (the
    top-level options, --help and --version, take no value)."""
    return next((a for a in argv if not a.startswith("-")), "")


def say(line: str) -> None:
    """One line on stderr, secrets masked (redaction.redact)."""
    print(redact(line), file=sys.stderr)


def run(func: object, args: argparse.Namespace) -> int:
    # here, not at the top: --version and --help never need redis-py (tests/cli/test_cli_imports)
    import redis

    from ..config import ConfigError
    from ..stream.errors import OOM_ADVICE, OUTAGE_ERRORS, first_line, is_oom

    try:
        code = int(func(args))  # type: ignore[operator]
        sys.stdout.flush()  # here, so a reader gone away is seen here (below)
        return code
    except BrokenPipeError:
        return broken_pipe()
    except ConfigError as e:
        say(f"stagedoor: config error: {e}")
        return EX_CONFIG
    except OUTAGE_ERRORS as e:  # unreachable, or a Cluster up but not ready
        say(f"stagedoor: {outage_of(args, e)}")
        return EX_UNAVAILABLE
    except redis.ResponseError as e:
        if is_oom(e):
            say(f"stagedoor: {OOM_ADVICE}")
            return EX_TEMPFAIL
        say(f"stagedoor: Redis refused: {first_line(e)}")
        return EX_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


def outage_of(args: argparse.Namespace, exc: BaseException) -> str:
    """The outage line, with the Cluster's state looked up when the settings read."""
    # here: only an outage needs them, and the config and Redis modules stay out of
    # --version and --help (tests/cli/test_cli_imports)
    from .. import config
    from ..config import ConfigError
    from ..stream.diagnose import outage
    from ..stream.errors import outage_line

    try:
        return outage(config.from_args(args), exc)
    except ConfigError:
        return outage_line(url(args), exc)


def broken_pipe() -> int:
    """The reader of stdout went away (`stagedoor dead list | head`): end quietly, as a
    process killed by SIGPIPE would (exit 141 = 128 + SIGPIPE), not with a traceback.
    stdout goes to /dev/null first, so the interpreter's last flush cannot fail again."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EX_BROKEN_PIPE


def url(args: argparse.Namespace) -> str:
    return str(getattr(args, "redis_url", None) or os.environ.get("STAGEDOOR_REDIS_URL", ""))


def main(argv: Sequence[str] | None = None) -> int:
    install_excepthook()  # an unforeseen traceback is printed with secrets masked
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(only=command_named(argv)).parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
