"""The example handler package (examples/receipts) passes its own tests.

It is what docs/handlers.md walks through, so it must keep working: its tests run the
handler in a real `stagedoor work --burst` against a redis-server of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import ROOT, SRC

EXAMPLE = ROOT / "examples" / "receipts"


def test_receipts_example_passes_its_own_tests() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGEDOOR_")}
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLE / "src"), str(SRC)])
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(EXAMPLE / "tests")], cwd=EXAMPLE, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert r.stdout.rstrip().splitlines()[-1].startswith("2 passed")
