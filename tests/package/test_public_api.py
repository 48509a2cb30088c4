"""The package's shape: the public API resolves, the layers import in one direction."""

from __future__ import annotations

import subprocess
import sys

import stagedoor


def test_the_public_api_resolves_to_where_it_lives() -> None:
    from stagedoor.errors import PermanentError, TransientError
    from stagedoor.handlers import Context, Registry, handler
    from stagedoor.stream.job import make_job
    from stagedoor.stream.queue import enqueue_sync

    assert set(stagedoor.__all__) == {"__version__", "config", *stagedoor._PUBLIC}
    assert stagedoor.make_job is make_job
    assert stagedoor.enqueue_sync is enqueue_sync
    assert (stagedoor.Context, stagedoor.Registry, stagedoor.handler) == (Context, Registry,
                                                                        handler)
    assert (stagedoor.TransientError, stagedoor.PermanentError) == (TransientError,
                                                                    PermanentError)
    for name in stagedoor.__all__:
        assert getattr(stagedoor, name) is not None


def _imports_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\n"
                          "print('\\n'.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return set(out.split())


def test_import_stagedoor_is_cheap() -> None:
    loaded = _imports_after("import stagedoor")
    assert "redis" not in loaded and "stagedoor.stream.job" not in loaded


def test_the_supervisor_does_not_import_the_cli_or_redis_clients() -> None:
    loaded = _imports_after("import stagedoor.supervisor.loop")
    assert not {m for m in loaded if m.startswith("stagedoor.cli")}
    assert "stagedoor.stream.connection" not in loaded
