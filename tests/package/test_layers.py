"""The package is layered: no module imports, directly or through others, a module that
imports it back.  Issue 27 named five circles (config <-> stream/, handlers/registry <->
handlers/tickets, render/shaped/faces <-> libs, supervisor/loop <-> report, the bench
pair run <-> measure_peers); this graph found eight knots, the others being the package
facade <-> telemetry/tracing (__version__), _render.pyx <-> render/fonts (the default font
plan), cli/commands/dead <-> status, and web/app <-> views.

Read from the source with ast, not from sys.modules: every `import` and `from ... import`
counts, at module level and inside functions alike (an import moved into a function to
dodge a circle still runs, and the two modules still need each other).  Imports under
`if TYPE_CHECKING:` count too: they never run, but a type in a signature is still one
module leaning on another (the supervisor's reporter named the loop's Supervisor).  The
Cython sources (.pyx, and the .pxi units they include) are read for their Python-level
`import` lines, since the extensions import the package.  Not seen: a module imported by a
name computed at run time (importlib.import_module(f"...{name}"), the CLI's commands and
the handler plugins).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import PACKAGE, ROOT

# `from X import Y` / `import X` at the start of a line in Cython source (cimport is C-level)
PYX_IMPORT = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+import\s+([\w ,()]+)|import\s+([\w.]+))",
                        re.MULTILINE)
PYX_INCLUDE = re.compile(r'^include\s+"([^"]+)"', re.MULTILINE)


def module_files() -> dict[str, Path]:
    """Module name -> file, for stagedoor (wherever the tests import it from) and bench."""
    files: dict[str, Path] = {}
    for top, base in (("stagedoor", PACKAGE), ("bench", ROOT / "bench")):
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
                continue
            parts = [top, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def python_imports(tree: ast.AST) -> Iterator[tuple[int, str, list[str]]]:
    """(level, module, names) for every import that can run: anywhere but under
    `if TYPE_CHECKING:`."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or "", [a.name for a in node.names]
        stack.extend(ast.iter_child_nodes(node))


def cython_imports(text: str) -> Iterator[tuple[int, str, list[str]]]:
    for m in PYX_IMPORT.finditer(text):
        if m.group(3):
            yield 0, m.group(3), []
        else:
            dotted = m.group(1)
            level = len(dotted) - len(dotted.lstrip("."))
            names = [n.strip() for n in m.group(2).strip("() ").split(",")]
            yield level, dotted.lstrip("."), [n.split(" as ")[0].strip() for n in names if n]


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        text = path.read_text(encoding="utf-8")
        is_package = path.stem == "__init__"
        if path.suffix == ".pyx":  # with the units it includes: their imports are its own
            text += "".join((path.parent / unit).read_text(encoding="utf-8")
                            for unit in PYX_INCLUDE.findall(text))
        found = (python_imports(ast.parse(text, str(path))) if path.suffix == ".py"
                 else cython_imports(text))
        for level, module, names in found:
            if level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (level - 1)]
                module = ".".join([*base, module] if module else base)
            # `from package import submodule` imports the submodule; `from module import
            # name` the module (a package's __init__ runs first either way, and is not
            # counted: Python finishes it before any of its submodules)
            submodules = [f"{module}.{n}" for n in names if f"{module}.{n}" in files]
            for target in submodules or [module]:
                if target in files and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is a few hundred nodes deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [shortest_cycle(graph, c) for c in components]


def shortest_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle in {component}")


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "stagedoor.worker.child" in graph and "bench.run" in graph
    assert "stagedoor.stream.queue" in graph["stagedoor.worker.reader"]
    # inside a function (fonts reads the faces with the extension, on first use)
    assert "stagedoor._render" in graph["stagedoor.render.fonts"]
    # under TYPE_CHECKING (a type in a signature)
    assert "stagedoor.stream.job" in graph["stagedoor.handlers.registry"]
    # the extensions: a .pyx, and the .pxi units it includes
    assert "stagedoor.stream.job" in graph["stagedoor.worker._entries"]
    assert "stagedoor.render.tables" in graph["stagedoor._render"]


def test_no_import_circles() -> None:
    graph = import_graph()
    found = cycles(graph)
    pairs = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and a in graph[b])
    assert not found, ("import circles (one per knot of modules that import each other):\n"
                       + "\n".join(" -> ".join(c) for c in found)
                       + "\nmodules importing each other directly:\n" + "\n".join(pairs))


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]


def test_nothing_outside_the_cli_imports_it() -> None:
    """The CLI is the top: the web and console/ share what they need with it from below
    (console/text.py, telemetry/inspect.watch_sample, console/sandbox.py), never from
    cli/.  The one exception is `python -m stagedoor` (stagedoor/__main__.py), an entry
    point like the CLI's own."""
    graph = import_graph()
    reaching = sorted(f"{name} -> {target}" for name, targets in graph.items()
                      if name.startswith("stagedoor.") and not _in_cli(name)
                      and name != "stagedoor.__main__"
                      for target in targets if _in_cli(target))
    assert not reaching, "modules outside cli/ that import it:\n" + "\n".join(reaching)


def _in_cli(module: str) -> bool:
    return _in("cli", module)


def _in(package: str, module: str) -> bool:
    return module == f"stagedoor.{package}" or module.startswith(f"stagedoor.{package}.")


def reached(graph: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module `start` imports, directly or through others, with one shortest path."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    following.append(w)
        frontier = following
    del paths[start]
    return paths


def reaching(graph: dict[str, set[str]], lower: str, upper: tuple[str, ...]) -> list[str]:
    """The paths by which a module of package `lower` reaches one of the packages `upper`."""
    return sorted(" -> ".join(path) for name in graph if _in(lower, name)
                  for target, path in reached(graph, name).items()
                  if any(_in(package, target) for package in upper))


def test_telemetry_is_below_the_console() -> None:
    """telemetry/ is what the worker and the supervisor report (counters, logs, traces,
    the queue's numbers, /metrics); console/ is what operators query and do, shared by
    the CLI and the web.  Telemetry reaches none of console/, cli/ or web/, not even
    through another module."""
    graph = import_graph()
    found = reaching(graph, "telemetry", ("console", "cli", "web"))
    assert not found, "telemetry/ reaching a layer above it:\n" + "\n".join(found)


def test_the_worker_and_the_supervisor_reach_no_console() -> None:
    """The processes that run jobs import telemetry/, never the console's queries (nor
    the CLI or the web that run them)."""
    graph = import_graph()
    found = [path for lower in ("worker", "supervisor")
             for path in reaching(graph, lower, ("console", "cli", "web"))]
    assert not found, "worker/ or supervisor/ reaching the console:\n" + "\n".join(found)


def test_reaching_is_found_through_other_modules() -> None:
    graph = {"stagedoor.telemetry.a": {"stagedoor.stream.b"},
             "stagedoor.stream.b": {"stagedoor.console.c"}, "stagedoor.console.c": set()}
    assert reaching(graph, "telemetry", ("console",)) == [
        "stagedoor.telemetry.a -> stagedoor.stream.b -> stagedoor.console.c"]
    assert reaching(graph, "console", ("telemetry",)) == []


def test_the_worker_reads_its_keys_from_stream_keys() -> None:
    """Key names and formats live in stream/keys.py: the worker reaches no console
    module (console/fleet.py) for one."""
    graph = import_graph()
    assert "stagedoor.console.fleet" not in graph["stagedoor.worker.presence"]
    assert "stagedoor.stream.keys" in graph["stagedoor.worker.presence"]


def test_no_production_module_imports_the_demo() -> None:
    """demo/ (demo orders, an embedded redis-server) is for `stagedoor demo` and the
    tests: the one module that imports it is that command (cli/commands/demo.py).  The
    render process warms up on an order of its own (render_serve._warm_up)."""
    graph = import_graph()
    importing = sorted(f"{name} -> {target}" for name, targets in graph.items()
                       if name.startswith("stagedoor.") and not _in("demo", name)
                       and name != "stagedoor.cli.commands.demo"
                       for target in targets if _in("demo", target))
    assert not importing, "modules outside demo/ that import it:\n" + "\n".join(importing)
    found = [" -> ".join(path) for target, path in
             reached(graph, "stagedoor.tickets.render_serve").items() if _in("demo", target)]
    assert not found, "the render process reaching demo/:\n" + "\n".join(found)


def test_the_handler_api_does_not_import_the_ticket_application() -> None:
    """handlers/ is the API a handler author imports; tickets/ is an application built
    on it (and loaded by its spec, handlers/loading.BUILTIN), so tickets/ may import
    handlers/ and never the other way round, not even through another module."""
    graph = import_graph()
    found = reaching(graph, "handlers", ("tickets",))
    assert not found, "handlers/ modules that reach tickets/:\n" + "\n".join(found)
    assert "stagedoor.handlers.registry" in graph["stagedoor.tickets.handlers"]
