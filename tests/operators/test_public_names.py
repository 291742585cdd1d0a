"""Every module of ``operators`` declares its public names, and the project imports only those.

``__all__`` is the library's promise of what stays put when its insides change; this holds it
to the code: each module has one, sorted and without duplicates, every name in it exists, every
name the module defines without a leading underscore is in it (a public name that is not
declared is a promise nobody meant to make, or forgot to write down), and every name the rest
of the project imports from an ``operators`` module is declared by it (names with a leading
underscore excepted: importing one is a known liberty, not an interface).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import operators

REPO = Path(__file__).resolve().parents[2]
IMPORTERS = ("operators", "jobs", "platform_defs", "nexmark", "benchmarks", "services",
             "examples", "tests/operators")
"""Where the project's code lives: what it imports from ``operators`` must be public."""

MODULES = sorted(["operators", *(f"operators.{m.name}" for m in
                                 pkgutil.iter_modules(operators.__path__))])


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _defined_public_names(module: ModuleType) -> set[str]:
    """Top-level names the module's own source binds (not imports), without a ``_``."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def _imports_from_operators() -> Iterator[tuple[str, str, str]]:
    """``(where, module, name)`` for every ``from operators.X import name`` (at any depth,
    lazy imports in functions included) and ``from operators import X`` in the project."""
    for top in IMPORTERS:
        for path in sorted((REPO / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                if node.module == "operators" or node.module.startswith("operators."):
                    where = f"{path.relative_to(REPO)}:{node.lineno}"
                    for alias in node.names:
                        yield where, node.module, alias.name


def test_every_module_is_checked() -> None:
    assert {"operators.replay", "operators.replay_cli", "operators.window_operator"} <= set(
        MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_all_is_declared_sorted_and_resolves(name: str) -> None:
    module = _module(name)
    declared = getattr(module, "__all__", None)
    assert isinstance(declared, list), f"{name} declares no __all__ list"
    assert all(isinstance(n, str) for n in declared), f"{name}.__all__ holds a non-string"
    assert declared == sorted(set(declared)), f"{name}.__all__ is not sorted and unique"
    missing = [n for n in declared if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    private = [n for n in declared if n.startswith("_")]
    assert not private, f"{name}.__all__ declares private names: {private}"


@pytest.mark.parametrize("name", MODULES)
def test_every_public_definition_is_declared(name: str) -> None:
    module = _module(name)
    undeclared = sorted(_defined_public_names(module) - set(module.__all__))
    assert not undeclared, (f"{name} defines public names its __all__ leaves out (declare "
                            f"them, or give them a leading underscore): {undeclared}")


def test_what_the_project_imports_from_operators_is_declared() -> None:
    imports = list(_imports_from_operators())
    assert len(imports) > 100, "the scan found (almost) no imports: has the layout moved?"
    undeclared = []
    for where, module_name, name in imports:
        if name.startswith("_") or name == "*":
            continue
        if module_name == "operators":
            if f"operators.{name}" not in MODULES:
                undeclared.append(f"{where}: operators has no module {name!r}")
            continue
        if module_name not in MODULES:
            undeclared.append(f"{where}: no module {module_name}")
        elif name not in _module(module_name).__all__:
            undeclared.append(f"{where}: {name} is not in {module_name}.__all__")
    assert not undeclared, "\n".join(undeclared)
