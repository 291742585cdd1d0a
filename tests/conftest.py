"""One local SparkSession for the whole suite, and a fresh platform home per test."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Spark's Python workers import user functions named in pipelines (tests.user_aggregates)
_REPO = str(Path(__file__).resolve().parents[1])
if _REPO not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_REPO, os.environ.get("PYTHONPATH")) if p)

# Jobs the suite starts as processes of their own (killed streams, Dagster Pipes, the UI's runs)
# live for seconds: the JVM's optimising C2 compiler costs them more CPU than it saves, so their
# drivers compile with C1 only (Spark's launcher adds SPARK_SUBMIT_OPTS to a driver's Java
# options; a user's long-running jobs keep the default). The suite's own session, which runs
# for the whole suite, is started without it (see ``spark``).
CHILD_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", CHILD_DRIVER_JAVA_OPTIONS)

INTERPRETED_EXPRESSIONS = {"spark.sql.codegen.wholeStage": "false",
                           "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
"""The suite's own session evaluates Spark expressions interpreted, as Spark's own test suites
can: its tests run thousands of small queries of many shapes, and generating and compiling
Java for each (then JIT-compiling that) costs more CPU than the queries (measured: the
determinism and keyed-window modules took 137 s with code generation, 114 s without; the
results are identical, as Spark promises for both modes). Every job the suite starts as a
process of its own (the command line's kills, Dagster Pipes, the UI's runs, the cluster)
generates code as a user's job does, and many tests compare those processes' tables with this
session's row for row, so the two modes are checked against each other."""

THROUGHPUT_GC = {"spark.driver.extraJavaOptions": "-XX:+UseParallelGC"}
"""The suite's own session collects garbage with the throughput collector: it runs for the whole
suite on two cores, where G1's concurrent threads compete with the tests and no pause matters
(measured, alternating on the windowed and determinism modules: 94.0-97.7 s against 99.3-101.2 s
with G1). The jobs the suite starts as processes keep Java's default, as a user's job does
(ParallelGC or SerialGC made no difference measurable on them)."""


LONGEST_FIRST = (
    "tests/faults/test_kills.py",
    "tests/cluster/test_standalone.py",
    "tests/dagster/test_live_spark.py",
    "tests/faults/test_rollout_kills.py",
    "tests/kafka/test_kafka_stream.py",
    "tests/test_determinism.py",
    "tests/test_rollout.py",
    "tests/nexmark/test_spark.py",
    "tests/test_enrichment_spark.py",
    "tests/dagster/test_browser.py",
    "tests/faults/test_misuse.py",
    "tests/faults/test_concurrent_writers.py",
    "tests/test_windowed.py",
    "tests/dagster/test_assets_spark.py",
    "tests/test_demo.py",
    "tests/dagster/test_dg.py",
    "tests/test_keyed_windows.py",
    "tests/test_landing_batch_cut.py",
)
"""Two workers: ``./platform test`` runs the suite in two pytest-xdist processes, each with its
own shared session, and hands each one whole files (``--dist loadfile``, so a module's
fixtures are built once). A test that starts a job of its own (a killed stream, Dagster Pipes,
the cluster) leaves part of a core idle while that job's JVM warms up; the other worker fills
it (measured on the 2-core machine: 26 % idle during the kill and Pipes tests run alone; the
whole suite 673 s in one process, 503 s in two). The files that take longest (per-file
durations in benchmarks/RESULTS.md) are handed out first, so that no long file starts last
while the other worker has nothing left to do; the rest keep pytest's order."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = [path for path in LONGEST_FIRST if not (config.rootpath / path).is_file()]
    if missing:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names missing files: {missing}")
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}

    def file_rank(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(LONGEST_FIRST))

    items.sort(key=file_rank)  # stable: tests inside a file, and the other files, keep order


@pytest.fixture(scope="session")
def spark():
    from jobs.session import get_spark

    children = os.environ.pop("SPARK_SUBMIT_OPTS", None)  # not for the suite-long session
    try:
        session = get_spark("local[2]", shuffle_partitions=2, app_name="tests",
                            extra={**INTERPRETED_EXPRESSIONS, **THROUGHPUT_GC})
    finally:
        if children is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = children
    yield session
    session.stop()


@pytest.fixture
def platform_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A platform home of its own: landing, warehouse and Dagster storage under tmp_path."""
    home = tmp_path / "platform"
    monkeypatch.setenv("PLATFORM_HOME", str(home))
    for name in ("PLATFORM_WAREHOUSE", "PLATFORM_LANDING", "PLATFORM_PIPELINES",
                 "PLATFORM_STREAMS", "PLATFORM_INGEST_CLOCK"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(autouse=True)
def _no_dagster_instance_state_left_behind():
    """Dagster keeps the current definitions-state storage (and the last definitions-load
    context) in process-wide slots holding a weak reference to the instance that set them
    (a schedule or sensor context, an in-process job); once that test's instance is gone, the
    next materialisation in the same process fails with "Attempted to resolve undefined
    DagsterInstance weakref". Each test leaves both unset, as a fresh process has them."""
    yield
    if "dagster" in sys.modules:
        from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext
        from dagster._core.storage.defs_state import base

        DefinitionsLoadContext._instance = None
        base._current_storage.set(None)
