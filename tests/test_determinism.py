"""The headline promise (SEMANTICS §7): the same arrival log gives the same tables, row for row,
whether produced by a backfill, a live stream sliced any way, a crashed and restarted stream,
backfills of separate ranges, or another number of shuffle partitions; and they equal the
pure-Python operator library replaying the log record by record.

The tests run for two pipelines over the same log: the demo's tumbling windows (the vectorised
backfill) and session windows with allowed lateness (the operator library per key in both
runtimes); the crash and trigger tests, whose subject is the runtime, for the first."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from jobs import tables
from jobs.backfill import run_backfill
from jobs.generator import GeneratorConfig, generate
from jobs.ingest import ingest
from jobs.live import run_live, start_live
from jobs.settings import PlatformSettings
from jobs.tables import BATCH_METRICS
from tests.log_replay import late_of, metric_totals, replay, results_of
from tests.output_tables import assert_same, output_tables

pytestmark = pytest.mark.spark

QUIET: dict[str, Callable[[str], None]] = {"progress": lambda _: None}
SESSIONS = """
watermark: {strategy: bounded_out_of_orderness, max_out_of_orderness: 5s, idle_timeout: 1m}
window: {type: session, gap: 4m}
allowed_lateness: 1m
aggregates:
  - {name: events, fn: count}
  - {name: value_sum, fn: sum, field: value}
  - {name: value_max, fn: max, field: value}
"""
INGEST_BATCHES = 4
SLICE = GeneratorConfig(events=500, duration_ms=8 * 3_600_000, keys=6, producers=3,
                        start_ms=1_767_225_600_000 + 14 * 3_600_000, very_late_fraction=0.02)


BOTH = pytest.mark.parametrize("pipeline", ["tumbling", "sessions"], indirect=True)
TUMBLING = pytest.mark.parametrize("pipeline", ["tumbling"], indirect=True)
"""The crash, restart and trigger mechanics do not depend on the pipeline: they run once."""


@pytest.fixture(scope="module")
def pipeline(request, tmp_path_factory) -> str | None:
    """The pipeline file for ``PLATFORM_PIPELINE`` (None: the demo's). Both share the demo's
    watermark strategy, so one arrival log serves both."""
    if request.param == "tumbling":
        return None
    path = tmp_path_factory.mktemp("pipelines") / "sessions.yaml"
    path.write_text(SESSIONS, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory) -> PlatformSettings:
    """An arrival log of several ingest batches spanning two days, late and bad records
    included."""
    home = tmp_path_factory.mktemp("determinism") / "source"
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home)})
    for index in range(INGEST_BATCHES):
        start = SLICE.start_ms + index * SLICE.duration_ms // 2
        generate(GeneratorConfig(**{**SLICE.__dict__, "seed": 100 + index, "start_ms": start}),
                 settings.landing)
        ingest(spark, settings, **QUIET)
    return settings


def _copy_of(source: PlatformSettings, home: Path, pipeline: str | None) -> PlatformSettings:
    """A fresh warehouse holding the very same arrival log and quarantine."""
    env = {"PLATFORM_HOME": str(home)}
    if pipeline is not None:
        env["PLATFORM_PIPELINE"] = pipeline
    settings = PlatformSettings.from_env(env)
    assert settings.pipeline.watermark == source.pipeline.watermark
    for name in (tables.ARRIVAL_LOG, tables.QUARANTINE):
        shutil.copytree(source.table_path(name), settings.table_path(name))
    return settings


@pytest.fixture(scope="module")
def backfilled(spark, source, pipeline, tmp_path_factory) -> dict[str, pd.DataFrame]:
    settings = _copy_of(source, tmp_path_factory.mktemp("backfill") / "platform", pipeline)
    run_backfill(spark, settings, **QUIET)
    frames = output_tables(spark, settings)
    assert len(frames[tables.LATE_DATA_METRICS]) == 2, "the log must span two days"
    assert len(frames[tables.LATE_RECORDS]) > 0, "the log must have dropped late records"
    assert (frames[tables.WINDOW_RESULTS].pane_index > 0).any(), "and late panes"
    return frames


@BOTH
def test_live_one_file_per_micro_batch_equals_the_backfill(spark, source, pipeline, backfilled,
                                                           tmp_path):
    settings = _copy_of(source, tmp_path / "live", pipeline)
    report = run_live(spark, settings, max_files_per_trigger=1, **QUIET)
    assert len(report.batches) >= INGEST_BATCHES  # one batch per file, plus timer-only ones
    assert_same(backfilled, output_tables(spark, settings))
    # per micro-batch metrics: every record consumed once, and the same totals as per day
    batches = spark.read.format("delta").load(settings.table_path(BATCH_METRICS)).toPandas()
    log_size = spark.read.format("delta").load(settings.table_path(tables.ARRIVAL_LOG)).count()
    assert batches.records.sum() == log_size == report.records
    assert batches.batch_id.is_unique
    per_day = backfilled[tables.LATE_DATA_METRICS]
    for column in ("on_time", "late_within_lateness", "dropped_late"):
        assert batches[column].sum() == per_day[column].sum(), column
    # each quarantined line counted by the micro-batch that read its ingest batch, once
    quarantined = spark.read.format("delta").load(settings.table_path(tables.QUARANTINE))
    assert batches.quarantined.sum() == quarantined.count() > 0


@TUMBLING
def test_live_with_random_batches_a_crash_and_a_restart_equals_the_backfill(
        spark, source, pipeline, backfilled, tmp_path):
    """Crash after batch 1 wrote everything but before Spark committed it: the restart runs it
    again, and the idempotent writes must not double anything."""
    settings = _copy_of(source, tmp_path / "live", pipeline)
    checkpoint = str(tmp_path / "checkpoint")
    sizes = random.Random(7)

    def crash_after_second_batch(message: str) -> None:
        if message.startswith("live: batch 1:"):
            raise RuntimeError("simulated crash after the writes of batch 1")

    query, _ = start_live(spark, settings, checkpoint=checkpoint,
                          max_files_per_trigger=sizes.randint(1, 2),
                          progress=crash_after_second_batch)
    with pytest.raises(Exception, match="simulated crash"):
        query.awaitTermination()
    run_live(spark, settings, checkpoint=checkpoint, max_files_per_trigger=sizes.randint(2, 4),
             **QUIET)
    assert_same(backfilled, output_tables(spark, settings))


@TUMBLING
def test_long_running_trigger_stopped_mid_stream_then_resumed_equals_the_backfill(
        spark, source, pipeline, backfilled, tmp_path):
    """The processing-time trigger (the long-running job), stopped politely after a couple of
    micro-batches, then finished by an AvailableNow run from the same checkpoint."""
    settings = _copy_of(source, tmp_path / "live", pipeline)
    checkpoint = str(tmp_path / "checkpoint")
    query, sink = start_live(spark, settings, trigger="1 second", checkpoint=checkpoint,
                             max_files_per_trigger=1, **QUIET)
    try:
        deadline = time.monotonic() + 240
        while len(sink.batches) < 2 and time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.5)
        assert len(sink.batches) >= 2
    finally:
        query.stop()
    assert sum(b["records"] for b in sink.batches) < spark.read.format("delta").load(
        settings.table_path(tables.ARRIVAL_LOG)).count(), "stopped before the end of the log"
    run_live(spark, settings, checkpoint=checkpoint, max_files_per_trigger=2, **QUIET)
    assert_same(backfilled, output_tables(spark, settings))


@BOTH
def test_backfills_of_separate_days_and_other_shuffle_partitions_equal_one_backfill(
        spark, source, pipeline, backfilled, tmp_path):
    settings = _copy_of(source, tmp_path / "ranges", pipeline)
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "5")
    try:
        days = sorted(str(d) for d in backfilled[tables.LATE_DATA_METRICS].window_end_date)
        for day in reversed(days):
            run_backfill(spark, settings, day, day, **QUIET)
        assert_same(backfilled, output_tables(spark, settings))
        live = _copy_of(source, tmp_path / "live", pipeline)
        run_live(spark, live, max_files_per_trigger=3, **QUIET)  # 5 state-store partitions
        assert_same(backfilled, output_tables(spark, live))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


@BOTH
def test_the_tables_equal_the_operator_library_replaying_the_log(spark, source, pipeline,
                                                                backfilled, tmp_path):
    """Record by record, one driver for all keys, no Spark: the library itself."""
    log = spark.read.format("delta").load(source.table_path(tables.ARRIVAL_LOG)) \
        .orderBy("arrival_seq").toPandas()
    spec = _copy_of(source, tmp_path / "replay", pipeline).pipeline
    expected = replay(log, spec)
    assert results_of(backfilled[tables.WINDOW_RESULTS], spec) == expected.latest
    assert late_of(backfilled[tables.LATE_RECORDS]) == expected.late
    assert metric_totals(backfilled[tables.LATE_DATA_METRICS]) == expected.metrics
