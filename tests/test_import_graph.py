"""The project's modules import each other without a circle, and the layers only downwards.

``operators`` is engine-free and imports no other layer; ``jobs`` runs it on Spark and never
imports Dagster's layer; ``platform_defs`` sits on top. Inside ``jobs``, the ingestors import
what they share and never the module that chooses between them, and the settings never load
the registry built from them.
"""

from __future__ import annotations

import pytest

from tests.import_graph import PACKAGES, ROOT, circles, import_graph


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_graph_reads_imports_inside_functions_and_from_packages(graph):
    # jobs.streams.ingestors imports both ingestors inside its function
    assert {"jobs.streams.landing.ingestor", "jobs.streams.kafka.ingest"} <= \
        graph["jobs.streams.ingestors"]
    # ``from jobs.store import storage`` is the module jobs.store.storage, not the package
    assert "jobs.store.storage" in graph["jobs.config.settings"]
    assert "jobs.store" not in graph["jobs.config.settings"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(graph, package):
    inside = {name: {t for t in targets if t.split(".")[0] == package}
              for name, targets in graph.items() if name.split(".")[0] == package}
    assert not circles(inside), f"import circles in {package}: {circles(inside)}"


def test_no_import_circle_across_the_project(graph):
    assert not circles(graph)


FRONT_DOORS = {"jobs.__main__", "jobs.backfill", "jobs.increment", "jobs.enrichment",
               "jobs.nexmark_job", "jobs.warm_up", "jobs.pipes", "jobs.generator"}
"""The modules at the top of ``jobs/``: the runtimes and the commands a person or Dagster runs;
every other module sits in the folder of its concept."""


def test_the_top_of_jobs_holds_only_the_front_doors(graph):
    loose = {name for name in graph if name.count(".") == 1 and name.startswith("jobs.")
             and not (ROOT / name.replace(".", "/") / "__init__.py").exists()}
    assert loose == FRONT_DOORS


def test_the_folders_of_jobs_import_each_other_without_a_circle(graph):
    """A folder is one concept: its modules may import each other, but two folders never import
    each other both ways, however the arrows run between their modules."""
    def folder(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2])

    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name.startswith("jobs."):
            folders.setdefault(folder(name), set()).update(
                folder(t) for t in targets if t.startswith("jobs.") and folder(t) != folder(name))
    for targets in list(folders.values()):
        for target in targets:
            folders.setdefault(target, set())
    assert len(folders) > 15
    assert not circles(folders), f"folders of jobs importing each other: {circles(folders)}"


@pytest.mark.parametrize(("lower", "upper"), [
    ("operators", "jobs"), ("operators", "platform_defs"), ("operators", "nexmark"),
    ("jobs", "platform_defs"), ("jobs", "benchmarks"), ("nexmark", "jobs"),
    ("services", "jobs"), ("platform_defs", "benchmarks"),
])
def test_a_layer_never_imports_one_above_it(graph, lower, upper):
    upward = sorted(f"{name} -> {target}" for name, targets in graph.items()
                    if name.split(".")[0] == lower
                    for target in targets if target.split(".")[0] == upper)
    assert not upward, f"{lower} imports {upper}: {upward}"


def test_the_ingestors_never_import_the_module_that_chooses_between_them(graph):
    ingestors = [name for name in graph
                 if name.startswith(("jobs.streams.landing", "jobs.streams.kafka"))]
    assert len(ingestors) > 10
    assert not [name for name in ingestors if "jobs.streams.ingestors" in graph[name]]


def test_the_settings_import_nothing_built_from_them(graph):
    """The settings are read first and hold values only: the registry, the stream descriptions
    and everything that runs are above them."""
    settings = graph["jobs.config.settings"]
    assert settings <= {"jobs.config.errors", "jobs.store.storage", "operators.time"}, settings
