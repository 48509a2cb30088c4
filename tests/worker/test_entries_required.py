"""The worker requires its extension (worker/entries.py): without
stagedoor.worker._entries a worker stops at boot with one line and exit code 78
(EX_CONFIG), both `stagedoor work` and a supervisor's worker process (child_main), while
the rest of the command line still runs."""

from __future__ import annotations

from stagedoor.exitcodes import EX_CONFIG
from tests.support.cli import cli, one_line

# the child's Python, with the extension made unimportable before anything loads it
UNBUILT = "import sys; sys.modules['stagedoor.worker._entries'] = None; "
NOWHERE = "redis://127.0.0.1:1"  # never reached: the worker stops before it connects


def test_stagedoor_work_without_the_extension_says_so_in_one_line() -> None:
    done = cli("work", "--redis-url", NOWHERE, "--burst", entry=(
        "-c", UNBUILT + "from stagedoor.cli.main import main; sys.exit(main())"))
    assert done.returncode == EX_CONFIG, done.stderr
    line = one_line(done.stderr)
    assert "stagedoor.worker._entries" in line and "build_ext" in line, line


def test_a_supervised_worker_without_the_extension_exits_78() -> None:
    done = cli(entry=("-c", UNBUILT + (
        "from stagedoor.config import Settings; from stagedoor.worker.child import "
        f"child_main; sys.exit(child_main(Settings(redis_url={NOWHERE!r}), 0, -1, -1))")))
    assert done.returncode == EX_CONFIG, done.stderr
    line = one_line(done.stderr)
    assert "stagedoor.worker._entries" in line, line


def test_the_rest_of_the_command_line_runs_without_it() -> None:
    done = cli("--help", entry=(
        "-c", UNBUILT + "from stagedoor.cli.main import main; sys.exit(main())"))
    assert done.returncode == 0, done.stderr
    assert "work" in done.stdout
