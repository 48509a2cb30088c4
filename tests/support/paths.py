"""Where the code under test is: the repository's files, and the stagedoor package imported.

SRC is the directory that holds the `stagedoor` package the tests import: src/ in a
checkout (editable install), site-packages when the tests run from an unpacked sdist
against an installed wheel (scripts/check-package.sh).  Subprocesses get SRC on
PYTHONPATH, so they run the same code as the test process, extension included.
"""

from __future__ import annotations

from pathlib import Path

import stagedoor

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(stagedoor.__file__).resolve().parent
SRC = PACKAGE.parent
