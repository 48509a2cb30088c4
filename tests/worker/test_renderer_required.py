"""A worker whose native renderer cannot load refuses to start, unless told otherwise.

issue 24 item 7: with `stagedoor._render` unavailable the worker logged one line,
reported ready, and every render_tickets job then failed.  Real supervisor and worker
processes in which the extension cannot be imported: a sitecustomize on PYTHONPATH
puts None in sys.modules["stagedoor._render"] (what an unbuilt or broken .so looks
like to `import`: ImportError).
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

from stagedoor.demo.embedded_redis import free_port
from stagedoor.exitcodes import EX_CONFIG
from tests.support.paths import SRC
from tests.support.supervisor import REPO, supervisor, wait_for


def no_native_env(tmp_path: Path, *, extra: bool = True) -> dict[str, str]:
    shim = tmp_path / "shim"
    shim.mkdir()
    hidden = ["stagedoor._render"] + ([] if extra else ["fontTools"])
    (shim / "sitecustomize.py").write_text(
        f"import sys\nfor name in {hidden!r}:\n    sys.modules[name] = None  # cannot load\n")
    return {"PYTHONPATH": os.pathsep.join((str(shim), str(SRC), str(REPO)))}


def test_a_worker_without_its_native_renderer_refuses_to_start(tmp_path: Path,
                                                               redis_url: str) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "1"], env=no_native_env(tmp_path)
                    ) as sup:
        assert sup.wait(30) == EX_CONFIG
        assert sup.status().get("ready") is not True
        err = sup.stderr()
    assert "Traceback" not in err
    lines = [ln for ln in sup.log_lines() if "render_tickets cannot run" in ln.get("msg", "")]
    assert lines, err[-3000:]
    msg = lines[0]["msg"]
    assert "stagedoor._render not importable" in msg  # the cause
    assert "--render-fallback reference" in msg and "pip install" in msg  # the fixes
    assert "stagedoor doctor" in msg  # what this host lacks


def test_the_reference_fallback_runs_when_allowed_and_says_so(tmp_path: Path,
                                                              redis_url: str) -> None:
    port = free_port()
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--render-fallback", "reference",
                                          "--metrics-port", str(port)],
                    env=no_native_env(tmp_path)) as sup:
        sup.wait_ready(1, 30)

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            return text if "stagedoor_workers_renderer{" in text else ""

        text = wait_for(scrape, 15, 0.1, "the renderer gauge")
        assert 'stagedoor_workers_renderer{renderer="reference",stream="jobs"} 1.0' in text
        assert 'stagedoor_workers_renderer{renderer="native",stream="jobs"} 0.0' in text
        assert "NATIVE RENDERER MISSING" in sup.stderr()
        sup.signal(15)
        assert sup.wait() == 0


def test_the_fallback_without_its_extra_refuses_too(tmp_path: Path, redis_url: str) -> None:
    with supervisor(tmp_path, redis_url, ["--workers", "1", "--render-fallback", "reference"],
                    env=no_native_env(tmp_path, extra=False)) as sup:
        assert sup.wait(30) == EX_CONFIG
    assert "Traceback" not in sup.stderr()
    [msg] = {ln["msg"] for ln in sup.log_lines() if "cannot run either" in ln.get("msg", "")}
    assert "stagedoor._render not importable" in msg and "fontTools" in msg
    assert "pip install 'stagedoor[reference]'" in msg
    assert "stagedoor doctor" in msg
