"""What README.md and docs/ name still exists: every file or folder of the repository they
point at, every module ``python -m`` runs, every dotted name of the project's code. A module
that moves without its documentation fails here, not in a new user's first hour."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PACKAGES = ("jobs", "operators", "platform_defs", "nexmark", "services", "tests", "benchmarks")
ROOTS = (*PACKAGES, "docs", "examples", "pipelines", "streams", "workspace.yaml",
         "pyproject.toml", "platform", ".ci")

ROOT_NAMES = "|".join(re.escape(root) for root in ROOTS)
PATH = re.compile(r"(?<![\w./<-])((?:" + ROOT_NAMES + r")(?:/[\w.*{}<>-]+)*/?)")
MODULE_RUN = re.compile(r"python -m ([\w.]+)")
DOTTED = re.compile(r"`((?:" + "|".join(PACKAGES) + r")(?:\.\w+)+)")


def _text(document: Path) -> str:
    return document.read_text(encoding="utf-8")


def _paths(text: str) -> set[str]:
    found = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if any(mark in path for mark in "*{}<>"):  # a pattern or placeholder, not a file
            path = path.split("/")[0]
        found.add(path)
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_every_path_a_document_names_exists(document: Path):
    missing = sorted(p for p in _paths(_text(document)) if not (REPO / p).exists())
    assert not missing, f"{document.name} names what is not in the repository: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_every_module_a_document_runs_resolves(document: Path):
    modules = {m for m in MODULE_RUN.findall(_text(document)) if m.split(".")[0] in PACKAGES}
    missing = sorted(m for m in modules if importlib.util.find_spec(m) is None)
    assert not missing, f"{document.name} runs modules that do not exist: {missing}"


def _resolves(dotted: str) -> bool:
    """A module, or a name inside one (``jobs.live.run_live``, ``operators.pipeline.X.y``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_every_dotted_name_a_document_gives_resolves(document: Path):
    names = {name.rstrip(".") for name in DOTTED.findall(_text(document))}
    names = {n for n in names if not n.endswith((".py", ".md", ".yaml"))}
    missing = sorted(n for n in names if not _resolves(n))
    assert not missing, f"{document.name} names code that does not exist: {missing}"


def _platform_commands() -> set[str]:
    """The subcommands the ``platform`` script's ``case`` answers."""
    script = (REPO / "platform").read_text(encoding="utf-8")
    return set(re.findall(r"^  ([a-z]+)\)", script, flags=re.MULTILINE))


def _jobs_commands() -> set[str]:
    from jobs.__main__ import _parser

    (commands,) = [action for action in _parser()._actions if action.dest == "command"]
    return set(commands.choices)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_every_command_a_document_gives_exists(document: Path):
    text = _text(document)
    unknown = sorted({f"./platform {c}" for c in re.findall(r"\./platform ([a-z]+)", text)
                      if c not in _platform_commands()}
                     | {f"python -m jobs {c}" for c in re.findall(r"python -m jobs ([a-z]+)", text)
                        if c not in _jobs_commands()})
    assert not unknown, f"{document.name} gives commands that do not exist: {unknown}"


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    return [REPO / name for name in listed
            if name.endswith((".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg"))
            or name in ("platform", ".ci/run")]


def test_the_repository_cites_nothing_outside_itself():
    """A clone is all a user has: the contract and its section numbers are docs/contract.md's."""
    outside = re.compile(r"\.\./shared|SEMANTICS(?:\.md| §)")
    citing = sorted(str(path.relative_to(REPO)) for path in _tracked_text_files()
                    if path.exists() and outside.search(path.read_text(encoding="utf-8")))
    assert not citing, f"these cite a document outside the repository: {citing}"
    sections = re.findall(r"^## (\d+)\. ", _text(REPO / "docs" / "contract.md"), re.MULTILINE)
    assert sections == [str(n) for n in range(1, 9)], sections
