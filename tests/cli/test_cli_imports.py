"""`stagedoor --version` and `--help` import no command and no Redis client; a command
imports its own module and none of the others' (issue 27: every CLI call paid the
worker's whole import graph, redis.asyncio alone ~140 ms).  Measured by what
the interpreter's sys.modules at exit, not by time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stagedoor.cli import main as cli_main

# sys.modules at exit (argparse's --help exits through SystemExit); -X importtime would
# not do: it does not log what importlib.import_module loads
PROBE = ("import atexit, sys\n"
         "atexit.register(lambda: print(*sorted(sys.modules), sep='\\n', file=sys.stderr))\n"
         "from stagedoor.cli.main import main\n"
         "sys.exit(main(sys.argv[1:]))\n")


def imported(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(proc.stderr.split())


def commands_in(modules: set[str]) -> set[str]:
    prefix = "stagedoor.cli.commands."
    return {m[len(prefix):] for m in modules if m.startswith(prefix)}


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_command_and_no_redis(flag: str) -> None:
    modules = imported(flag)
    assert "stagedoor.cli.main" in modules
    assert commands_in(modules) == set()
    assert not {m for m in modules if m == "redis" or m.startswith(("redis.", "uvloop"))}


# what a command uses of another's module: the connection flags and client of status.py
# (the escaping of what came off the stream is console/text.py's, no command's)
USES = {"dead": {"status"}, "enqueue": {"status"}, "job": {"dead", "status"},
        "pause": {"status"}, "resume": {"status"},
        "pending": {"dead", "status"}, "web": {"status"}}


@pytest.mark.parametrize("command", sorted(cli_main.COMMANDS))
def test_a_command_imports_its_own_module_only(command: str) -> None:
    assert commands_in(imported(command, "--help")) == {cli_main.module_of(command),
                                                        *USES.get(command, ())}


@pytest.mark.parametrize("command", ["systemd", "monitoring", "doctor"])
def test_commands_without_redis_do_not_import_it(command: str) -> None:
    assert "redis" not in imported(command, "--help")


def test_the_help_listing_is_each_commands_own_line() -> None:
    """COMMANDS' lines (the listing without importing the commands) are the help= each
    command module registers, in the same order."""
    parser = cli_main.build_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    own = {a.dest: a.help for a in sub._choices_actions}  # type: ignore[attr-defined]
    assert own == cli_main.COMMANDS
    assert list(own) == list(cli_main.COMMANDS)


def test_a_worker_start_leaves_out_what_it_does_not_run(redis_url: str,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """`stagedoor work` with the native renderer, no --config and no OTEL_* does not
    import the pure-Python reference renderer (~8 ms), tomllib or the OTel tracing SDK
    (issue 27: a worker's spawn to its first job; docs/benchmarks.md, "A worker's
    start")."""
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    modules = imported("work", "--redis-url", redis_url, "--consumer", "imports",
                       "--burst", "--log-level", "warning")
    assert "stagedoor.worker.loop" in modules and "stagedoor._render" in modules
    assert not {m for m in modules if m.startswith(("stagedoor.render.reference",
                                                    "stagedoor.render.shaped",
                                                    "tomllib", "opentelemetry.sdk.trace"))}
