"""The project's import graph, read from the source: every import counts, at the top of a module
or inside a function (a lazy import is how a circle hides), ``TYPE_CHECKING`` ones too.

A circle works only as long as every module on it is careful about what it imports when, and
it ties the modules' fates together: none of them can be understood, tested or moved alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("operators", "jobs", "platform_defs", "nexmark", "services", "benchmarks")


def module_name(path: Path) -> str:
    """``jobs/store/storage.py`` -> ``jobs.store.storage``; a package's ``__init__`` is the
    package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    return {module_name(path): path for package in packages
            for path in sorted((ROOT / package).rglob("*.py"))}


def _imported(node: ast.Import | ast.ImportFrom, name: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from this module's package, up ``level - 1`` more
        package = name.split(".") if is_package else name.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    # ``from jobs.store import storage`` imports the module jobs.store.storage
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph(packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Each module of ``packages`` and the modules of ``packages`` it imports, anywhere in it
    (``from a.b import c`` counts as importing ``a.b.c`` when that is a module, else ``a.b``)."""
    found = modules(packages)
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = _imported(node, name, path.name == "__init__.py")
            submodules = {t for t in targets[1:] if t in found}
            if isinstance(node, ast.ImportFrom) and submodules:
                targets = [*submodules, *(t for t in [targets[0]] if
                                          len(submodules) < len(node.names))]
            for target in targets:
                while target and target not in found:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; each component sorted, in the order they complete."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The components of more than one module: each a circle of imports."""
    return [c for c in strongly_connected_components(graph) if len(c) > 1]
