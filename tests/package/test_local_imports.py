"""A function-local import says why it is not at the top of its module.

An import inside a function hides a dependency from whoever reads the module's head, so
one is kept only for an optional dependency (fontTools, python-bidi, Pillow,
OpenTelemetry, the native extension where the pure-Python path must work without it), an
import cycle, or a measured start-up cost (tests/cli/test_cli_imports.py,
docs/benchmarks.md), and a comment says which (issue 40 item 7).  The comment is on the
import's line or above it, over the imports, blank lines and `try:` of the same group.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import PACKAGE

# Packages this test does not hold yet, each with why (none now).
NOT_YET: dict[str, str] = {}


def held(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return not any(rel.startswith(prefix + "/") for prefix in NOT_YET)


def local_imports(tree: ast.AST) -> list[int]:
    """The line of every import inside a function (nested functions included)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(i.lineno for i in ast.walk(node)
                         if isinstance(i, (ast.Import, ast.ImportFrom)))
    return sorted(lines)


def says_why(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or above it before any other statement."""
    if "#" in lines[lineno - 1]:
        return True
    i = lineno - 2
    while i >= 0:
        line = lines[i].strip()
        if line.startswith("#") or (line.startswith("try:") and "#" in line):
            return True
        if line and not line.startswith(("import ", "from ", "try:")):
            return False
        i -= 1
    return False


def unexplained() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts or not held(path):
            continue
        text = path.read_text("utf-8")
        lines = text.splitlines()
        for lineno in local_imports(ast.parse(text)):
            if not says_why(lines, lineno):
                out.append(f"{path.relative_to(PACKAGE)}:{lineno}: {lines[lineno - 1].strip()}")
    return out


def test_every_function_local_import_says_why() -> None:
    assert unexplained() == []


def test_the_check_sees_a_bare_one() -> None:
    source = "def f():\n    x = 1\n    import json\n    return json, x\n"
    lines = source.splitlines()
    assert local_imports(ast.parse(source)) == [3]
    assert not says_why(lines, 3)
    assert says_why([*lines[:2], "    # optional: a reason", *lines[2:]], 4)


def test_not_yet_names_packages_that_exist() -> None:
    for prefix in NOT_YET:
        assert (PACKAGE / prefix).is_dir(), prefix
