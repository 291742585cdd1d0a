"""The modules of ``operators`` import each other without a circle.

A circle works only as long as every module on it is careful about what it imports when (a
lazy import inside a function is how one hides), and it ties the modules' fates together: none
of them can be understood, tested or moved alone. So every import counts here, at the top of a
module or inside a function, and the import graph among ``operators`` modules must have no
strongly connected component of more than one module.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "operators"


def _module_name(path: Path) -> str:
    return "operators" if path.stem == "__init__" else f"operators.{path.stem}"


def import_graph() -> dict[str, set[str]]:
    """Each ``operators`` module and the ``operators`` modules it imports, anywhere in it."""
    modules = {_module_name(path): path for path in PACKAGE.glob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: within this package (its modules sit at one level)
                    base = "operators" + (f".{base}" if base else "")
                # ``from operators import timers`` imports the module operators.timers
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
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


def test_the_components_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert sorted(strongly_connected_components(graph)) == [["a", "b", "c"], ["d"]]


def test_operators_modules_import_each_other_without_a_circle() -> None:
    graph = import_graph()
    assert len(graph) > 20 and "operators.window_operator" in graph
    circles = [c for c in strongly_connected_components(graph) if len(c) > 1]
    assert not circles, f"import circles among operators modules: {circles}"


def test_the_replay_library_imports_neither_its_command_nor_the_transcripts() -> None:
    """The command sits on top: it imports the library and the transcripts, which import the
    library, which imports neither (the circle there before ran through ``main``)."""
    graph = import_graph()
    assert {"operators.replay", "operators.transcript"} <= graph["operators.replay_cli"]
    assert "operators.replay" in graph["operators.transcript"]
    assert "operators.replay_cli" not in graph["operators.transcript"]
    assert not {"operators.replay_cli", "operators.transcript"} & graph["operators.replay"]
    assert not any("operators.replay_cli" in imported for imported in graph.values())
