"""Run the command line as an operator would: `python -m stagedoor.cli ARGS` (or
`stagedoor-supervise`) in a child process, the one way every test does.

The child runs the code under test (SRC first on PYTHONPATH, then the repository for
the tests' own handler modules), from the repository, with no STAGEDOOR_* variable of
the test's environment leaking in (a test that wants one passes it in `env`), and
stdin closed unless the test feeds it text.  `python=` runs another interpreter (a venv
the test made), `path=` adds to its PYTHONPATH (that venv's site-packages).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from tests.support.paths import ROOT, SRC

STAGEDOOR = ("-m", "stagedoor.cli")
SUPERVISE = ("-c", "import sys; from stagedoor.cli.supervise import main; sys.exit(main())")


def module(name: str) -> tuple[str, ...]:
    """The entry `python -m name` (stagedoor, stagedoor.cli; or stagedoor.cli.supervise,
    which has no __main__: SUPERVISE)."""
    return SUPERVISE if name == "stagedoor.cli.supervise" else ("-m", name)


def cli_env(env: Mapping[str, str] | None = None, path: Sequence[str] = ()) -> dict[str, str]:
    """The child's environment: this one without STAGEDOOR_*, PYTHONPATH set (then
    `path`), then `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    base["PYTHONPATH"] = os.pathsep.join([str(SRC), str(ROOT), *path])
    return {**base, **(env or {})}


def cli(*args: str, env: Mapping[str, str] | None = None,
        stdin: str | int | None = subprocess.DEVNULL, timeout: float = 90,
        entry: Sequence[str] = STAGEDOOR, python: str = sys.executable,
        path: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """`stagedoor ARGS`, finished: its exit code, stdout and stderr (text).  stdin: text
    to feed it, or a file descriptor (subprocess.DEVNULL, the default; None inherits)."""
    feed = {"input": stdin} if isinstance(stdin, str) else {"stdin": stdin}
    return subprocess.run([python, *entry, *args], cwd=ROOT,
                          env=cli_env(env, path), capture_output=True, text=True,
                          timeout=timeout, **feed)


def one_line(text: str) -> str:
    """The one line the CLI says (an error, a refusal), with no traceback."""
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{text}"
    assert "Traceback" not in text
    return lines[0]
