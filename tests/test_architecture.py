"""The package's dependency graph: one direction, no cycles, and the library never imports the CLI.

Every import counts, at module level or inside a function: a function-local import is a dependency too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cosim"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """cosim module -> the cosim modules it imports (``from cosim.x import y`` counts y if it is a module)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            else:
                continue
            deps |= {t for t in targets if t.startswith("cosim") and t in modules and t != name}
        graph[name] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A dependency cycle as a list of modules, or None. Importing a package's submodule also runs the
    package's __init__, which does not make the package depend on the submodule."""
    state, stack = {}, []

    def visit(n: str):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_no_import_cycle():
    """No chain of imports between cosim modules leads back to where it started."""
    assert _cycle(import_graph()) is None, " -> ".join(_cycle(import_graph()))


def test_library_never_imports_the_cli():
    """Only cosim.cli (and python -m cosim) may import the command line or click."""
    graph = import_graph()
    for name, deps in graph.items():
        if name.startswith("cosim.cli") or name == "cosim.__main__":
            continue
        assert not {d for d in deps if d.startswith("cosim.cli")}, name
        text = (PACKAGE.parent / (name.replace(".", "/") + ".py"))
        text = text if text.exists() else PACKAGE.parent / name.replace(".", "/") / "__init__.py"
        imports = {a.name for node in ast.walk(ast.parse(text.read_text()))
                   if isinstance(node, ast.Import) for a in node.names}
        imports |= {node.module for node in ast.walk(ast.parse(text.read_text()))
                    if isinstance(node, ast.ImportFrom) and node.module}
        assert "click" not in imports, f"{name} imports click"


def package_graph() -> dict[str, set[str]]:
    """cosim package (``cosim.plan``; a top-level module counts as its own package) -> the packages it imports."""
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for name, deps in import_graph().items():
        graph.setdefault(package(name), set()).update(package(d) for d in deps if package(d) != package(name))
    for deps in list(graph.values()):
        for d in deps:
            graph.setdefault(d, set())
    return graph


def test_no_import_cycle_between_packages():
    """No package imports, through any of its modules, a package that imports it back: each package can be
    read knowing only the ones below it."""
    graph = package_graph()
    graph["cosim"] = set()  # the package's own __init__ is the version and the map, imported by all
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


@pytest.mark.parametrize("layer,forbidden", [
    ("cosim.network", ("cosim.engine", "cosim.spec", "cosim.plan", "cosim.analysis", "cosim.sweep",
                       "cosim.collectives")),
    ("cosim.results", ("cosim.spec", "cosim.plan", "cosim.analysis", "cosim.sweep", "cosim.network",
                       "cosim.engine")),
    ("cosim.workload", ("cosim.spec", "cosim.plan", "cosim.analysis", "cosim.sweep", "cosim.network",
                        "cosim.engine")),
    ("cosim.collectives", ("cosim.spec", "cosim.plan", "cosim.analysis", "cosim.sweep", "cosim.network",
                           "cosim.engine")),
    ("cosim.faults", ("cosim.spec", "cosim.kinds", "cosim.plan", "cosim.results", "cosim.analysis",
                      "cosim.sweep")),
    ("cosim.spec", ("cosim.kinds", "cosim.plan", "cosim.engine", "cosim.run", "cosim.record", "cosim.analysis",
                    "cosim.sweep")),
    ("cosim.kinds", ("cosim.spec", "cosim.plan", "cosim.run", "cosim.record", "cosim.analysis", "cosim.sweep")),
    ("cosim.plan", ("cosim.run", "cosim.record", "cosim.analysis", "cosim.sweep")),
    ("cosim.analysis", ("cosim.plan", "cosim.kinds", "cosim.run", "cosim.record", "cosim.engine")),
])
def test_layers_depend_only_downstream(layer, forbidden):
    """The data flow of cosim/__init__.py: spec → kinds → plan → engine → record → results → analysis and
    sweeps (workload, collectives, network and faults below the plan); a layer imports nothing downstream of it."""
    for name, deps in import_graph().items():
        if name == layer or name.startswith(layer + "."):
            bad = sorted(d for d in deps if d.startswith(forbidden))
            assert not bad, f"{name} imports {bad}"
