"""The import graph of evirank, read from the source: no circle, and no package imports one above it.

Imports inside functions count (an import that waits until a function runs is still a dependency);
imports under ``if TYPE_CHECKING:`` do not (they never run).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "evirank"

#: The packages (and top-level modules) from the bottom up: each may import only from its own
#: layer or below. ``evirank`` itself (the front door) and ``__main__`` sit above everything.
LAYERS: list[set[str]] = [
    {"errors", "frames", "stage", "version", "extras", "outputs", "progress", "terms", "markdown", "grammar"},
    {"checksums"},
    {"config", "datasets", "record"},
    {"io", "segment", "aggregate", "evaluate", "data", "vectors"},
    {"score"},
    {"lucene", "firststage", "rerank", "train", "tune", "scale"},
    {"pipeline", "report"},
    {"ranker", "serve"},
    {"cli", "conditions"},
]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["evirank", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports() -> dict[str, set[str]]:
    """Module -> the evirank modules it imports (at module level or inside functions)."""
    known = modules()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]

        def visit(node: ast.AST, module: str = module, package: str = package) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                    continue
                targets: list[str] = []
                if isinstance(child, ast.Import):
                    targets = [a.name for a in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:
                        parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                        base = ".".join([*parts, base] if base else parts)
                    targets = [
                        f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in child.names
                    ]
                for target in targets:
                    found = resolve(target) if target.startswith("evirank") else None
                    if found and found != module:
                        graph[module].add(found)
                visit(child)

        visit(ast.parse(path.read_text(encoding="utf-8")))
    return graph


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return len(LAYERS)
    for number, layer in enumerate(LAYERS):
        if parts[1] in layer:
            return number
    pytest.fail(f"{module}: its package {parts[1]!r} is in no layer of tests/test_layers.py (add it)")


def test_the_import_graph_has_no_circle() -> None:
    graph = imports()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                pytest.fail("an import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_package_imports_one_above_it() -> None:
    upward = [
        f"{module} -> {target}"
        for module, targets in imports().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "imports of a higher layer:\n" + "\n".join(sorted(upward))


def test_scoring_imports_nothing_of_training_pipelines_or_front_ends() -> None:
    above = ("train", "pipeline", "rerank", "serve", "cli", "tune", "scale", "lucene", "firststage", "ranker")
    found = [
        f"{module} -> {target}"
        for module, targets in imports().items()
        if module.startswith("evirank.score")
        for target in targets
        if target.split(".")[1] in above
    ]
    assert not found


def test_no_private_module_is_imported_from_another_package() -> None:
    found = [
        f"{module} -> {target}"
        for module, targets in imports().items()
        for target in targets
        if target.rpartition(".")[2].startswith("_")
        and target.rpartition(".")[0] != module.rpartition(".")[0]
        and target.rpartition(".")[0] != module
    ]
    assert not found
