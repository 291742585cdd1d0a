"""The Nexmark queries on Spark: Nexmark landing files ingested by the platform, each query as a
backfill equal to its DuckDB reference over the very arrival log, and as a live stream in
micro-batches equal to the backfill, row for row."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.nexmark_job import run_backfill, run_live
from jobs.runtime.owed_batch import BATCHES_WITHOUT_DATA
from jobs.streams.landing.ingestor import ingest
from nexmark import reference
from nexmark.arrival import record_from_arrival_row
from nexmark.generator import generate
from nexmark.queries import QUERIES
from tests.nexmark.helpers import DISORDERED, PARAMETERS
from tests.platform_home import write_pipelines

pytestmark = pytest.mark.spark

QUIET = {"progress": lambda _: None}
STREAM = "watermark: {strategy: bounded_out_of_orderness, max_out_of_orderness: 1s}\n"
PIPELINE = "source: nexmark\nwindow: {type: tumbling, size: 1s}\n"
"""A home's pipelines folder holds one pipeline at least; the queries read the stream."""
INGESTS = 3


def nexmark_home(home: Path) -> Stream:
    """A home whose one stream, ``nexmark``, holds the Nexmark events."""
    descriptions = home.parent / f"{home.name}-descriptions"
    env = {"PLATFORM_HOME": str(home),
           "PLATFORM_STREAMS": str(write_pipelines(descriptions / "streams",
                                                   {"nexmark": STREAM})),
           "PLATFORM_PIPELINES": str(write_pipelines(descriptions / "pipelines",
                                                     {"counts": PIPELINE}))}
    return platform_of(PlatformSettings.from_env(env)).streams["nexmark"]


@pytest.fixture(scope="module")
def nexmark_log(spark, tmp_path_factory) -> Stream:
    """Disordered Nexmark events with late ones, landed and ingested in three batches."""
    root = tmp_path_factory.mktemp("nexmark")
    settings = nexmark_home(root / "source")
    generate(replace(DISORDERED, flush_interval_ms=5_000), root / "staging")
    files = sorted((root / "staging").glob("*/*.jsonl"), key=lambda p: (p.name, p.parent.name))
    share = -(-len(files) // INGESTS)
    for start in range(0, len(files), share):
        for path in files[start:start + share]:
            target = settings.landing_dir / path.relative_to(root / "staging")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
        ingest(spark, settings, **QUIET)
    return settings


@pytest.fixture(scope="module")
def records(spark, nexmark_log) -> list[dict]:
    log = spark.read.format("delta").load(nexmark_log.table_path(tables.ARRIVAL_LOG))
    return [record_from_arrival_row(row) for row in
            log.orderBy("arrival_seq").toPandas().to_dict("records")]


@pytest.fixture(scope="module")
def backfilled(spark, nexmark_log, tmp_path_factory) -> Callable[[str], Stream]:
    """Each query's backfill over the log, computed once for the module: the reference test
    checks it, the live tests compare against it."""
    done: dict[str, Stream] = {}

    def backfill_of(name: str) -> Stream:
        if name not in done:
            settings = _copy(nexmark_log, tmp_path_factory.mktemp(f"backfill-{name}"))
            run_backfill(spark, settings, name, PARAMETERS[name], **QUIET)
            done[name] = settings
        return done[name]

    return backfill_of


def _copy(source: Stream, home: Path) -> Stream:
    stream = nexmark_home(home)
    shutil.copytree(source.arrival_log, stream.arrival_log)
    return stream


def _table(spark, settings: Stream, name: str) -> pd.DataFrame:
    frame = spark.read.format("delta").load(settings.table_path(name)).toPandas()
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def _rows(spark, settings: Stream, name: str) -> list[dict]:
    columns = list(QUERIES[name].columns)
    frame = spark.read.format("delta").load(settings.table_path(f"nexmark_{name}")).toPandas()
    frame = frame[columns].sort_values(columns)
    return [{k: (v if k == "name" else int(v)) for k, v in row.items()}
            for row in frame.to_dict("records")]


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_the_backfill_equals_the_reference(spark, backfilled, records, name):
    settings = backfilled(name)
    parameters = PARAMETERS[name]
    expected = (reference.q11_in_arrival_order(records, **parameters) if name == "q11"
                else reference.REFERENCES[name](records, **parameters))
    assert _rows(spark, settings, name) == expected
    assert len(expected) >= 5
    late = spark.read.format("delta").load(settings.table_path(f"nexmark_{name}_late"))
    got_late = sorted((r.arrival_seq, r.window_start, r.window_end) for r in late.collect())
    if name in ("q5", "q7", "q8"):
        assert got_late == reference.late_windows(records, name, **parameters)
        assert got_late, "the log has late records"
    if name == "q12":
        assert got_late == []  # nothing is late on the ingest clock


@pytest.mark.parametrize("name", ["q5", "q7", "q8", "q11", "q12"])
def test_live_in_micro_batches_equals_the_backfill(spark, nexmark_log, backfilled, tmp_path,
                                                   name):
    expected = backfilled(name)
    live = _copy(nexmark_log, tmp_path / "live")
    # two files per micro-batch: still several batches per ingest, half the batches' fixed cost
    report = run_live(spark, live, name, PARAMETERS[name], max_files_per_trigger=2, **QUIET)
    assert len(report.batches) >= INGESTS
    names = [f"nexmark_{name}", f"nexmark_{name}_late"] + (
        ["nexmark_q5_counts"] if name == "q5" else [])
    for table in names:
        pd.testing.assert_frame_equal(_table(spark, expected, table),
                                      _table(spark, live, table), check_exact=True, obj=table)


def test_a_live_run_stopped_before_its_batch_without_data_finishes_when_run_again(
        spark, nexmark_log, backfilled, tmp_path):
    """A live run whose query stopped after its last batch with data, before the batch
    without data that fires the timers due by its watermark (the checkpoint a kill there
    leaves; Spark's setting for such batches off leaves the same): the next run runs that
    batch again and then the one without data, and the tables equal the backfill."""
    expected = backfilled("q8")
    settings = _copy(nexmark_log, tmp_path / "owed")
    spark.conf.set(BATCHES_WITHOUT_DATA, "false")
    try:
        run_live(spark, settings, "q8", PARAMETERS["q8"], max_files_per_trigger=2, **QUIET)
    finally:
        spark.conf.unset(BATCHES_WITHOUT_DATA)
    assert len(_table(spark, settings, "nexmark_q8")) < len(_table(spark, expected,
                                                                   "nexmark_q8"))
    said: list[str] = []
    run_live(spark, settings, "q8", PARAMETERS["q8"], progress=said.append)
    assert any("runs again (the same rows, written once)" in line for line in said)
    for table in ("nexmark_q8", "nexmark_q8_late"):
        pd.testing.assert_frame_equal(_table(spark, expected, table),
                                      _table(spark, settings, table), check_exact=True,
                                      obj=table)


def test_a_live_run_over_backfilled_tables_adds_nothing_twice(spark, nexmark_log, backfilled,
                                                              tmp_path):
    """A live stream started (fresh checkpoint) over tables a backfill already wrote
    recomputes the same rows: each table must stay as the backfill left it, not doubled."""
    expected = backfilled("q8")
    settings = _copy(nexmark_log, tmp_path / "both")
    run_backfill(spark, settings, "q8", PARAMETERS["q8"], **QUIET)
    run_live(spark, settings, "q8", PARAMETERS["q8"], max_files_per_trigger=2, **QUIET)
    for table in ("nexmark_q8", "nexmark_q8_late"):
        pd.testing.assert_frame_equal(_table(spark, expected, table),
                                      _table(spark, settings, table), check_exact=True,
                                      obj=table)


def test_a_query_without_rows_says_why_when_the_log_is_shorter_than_a_window(spark,
                                                                            nexmark_log):
    """2,000 generated events span a fraction of a second: with 10 s windows nothing is
    emitted, and a bare "0 rows" would look like a bug (issue 33)."""
    from jobs.nexmark_job import empty_result_hint
    from nexmark.queries import make_query

    log = spark.read.format("delta").load(nexmark_log.table_path(tables.ARRIVAL_LOG))
    month = 30 * 86_400_000
    hint = empty_result_hint(log, "q5", make_query("q5", {"window_size_ms": month}))
    assert "of event time and q5's windows are 720 h" in hint
    assert "--param window_size_ms=" in hint
    assert empty_result_hint(log, "q5", make_query("q5", {"window_size_ms": 1_000})) == ""
