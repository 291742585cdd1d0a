"""The headline promise: the same arrival log gives the same tables, row for row, whether produced
by a backfill, a live stream sliced any way, a crashed and restarted stream, backfills of
separate ranges, or another number of shuffle partitions; and they equal the pure-Python
operator library replaying the log record by record.

The tests run two pipelines over one stream: the demo's tumbling windows (the vectorised
backfill) and session windows with allowed lateness (the operator library per key in both
runtimes). The live stream runs both in one query, so every comparison also says that a
pipeline's rows do not depend on the other one running beside it; one test runs each alone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.live import run_live, start_live
from jobs.streams.landing.ingestor import ingest
from jobs.tables import BATCH_METRICS
from tests.log_replay import late_of, metric_totals, replay, results_of
from tests.output_tables import assert_same, output_tables
from tests.platform_home import PER_MINUTE, SESSIONS, copy_of_log, events, settings_for

pytestmark = pytest.mark.spark

QUIET: dict[str, Callable[[str], None]] = {"progress": lambda _: None}
PIPELINES = {"tumbling": PER_MINUTE, "sessions": SESSIONS}
INGEST_BATCHES = 4
SLICE = GeneratorConfig(events=500, duration_ms=8 * 3_600_000, keys=6, producers=3,
                        start_ms=1_767_225_600_000 + 14 * 3_600_000, very_late_fraction=0.02)


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory) -> PlatformSettings:
    """An arrival log of several ingest batches spanning two days, late and bad records
    included."""
    home = tmp_path_factory.mktemp("determinism") / "source"
    settings = settings_for(home, PIPELINES)
    for index in range(INGEST_BATCHES):
        start = SLICE.start_ms + index * SLICE.duration_ms // 2
        generate(GeneratorConfig(**{**SLICE.__dict__, "seed": 100 + index, "start_ms": start}),
                 events(settings).landing)
        ingest(spark, events(settings), **QUIET)
    return settings


def _copy_of(source: PlatformSettings, home: Path,
             pipelines: dict[str, str] = PIPELINES) -> PlatformSettings:
    """A fresh warehouse holding the very same arrival log and quarantine."""
    return copy_of_log(source, home, pipelines)


@pytest.fixture(scope="module")
def backfilled(spark, source, tmp_path_factory) -> dict[str, dict[str, pd.DataFrame]]:
    """Per pipeline, its tables computed by one backfill of every day."""
    settings = _copy_of(source, tmp_path_factory.mktemp("backfill") / "platform")
    frames = {}
    for name, pipeline in platform_of(settings).pipelines.items():
        run_backfill(spark, pipeline, **QUIET)
        frames[name] = output_tables(spark, pipeline)
        assert len(frames[name][tables.LATE_DATA_METRICS]) == 2, "the log must span two days"
        assert len(frames[name][tables.LATE_RECORDS]) > 0, "it must have dropped late records"
        assert (frames[name][tables.WINDOW_RESULTS].pane_index > 0).any(), "and late panes"
    return frames


def assert_all_same(backfilled: dict, settings: PlatformSettings, spark) -> None:
    for name, pipeline in platform_of(settings).pipelines.items():
        assert_same(backfilled[name], output_tables(spark, pipeline))


def test_live_one_file_per_micro_batch_equals_the_backfill(spark, source, backfilled, tmp_path):
    settings = _copy_of(source, tmp_path / "live")
    stream = events(settings)
    report = run_live(spark, stream, max_files_per_trigger=1, **QUIET)
    assert len(report.batches) >= INGEST_BATCHES  # one batch per file, plus timer-only ones
    assert {v.name for v in report.versions.values()} == set(PIPELINES)
    assert len(report.pipeline_batches) == len(PIPELINES)  # one query fed both pipelines
    assert len({b["batch_id"] for b in report.batches}) == len(report.batches)
    assert_all_same(backfilled, settings, spark)
    log_size = spark.read.format("delta").load(stream.arrival_log).count()
    quarantined = spark.read.format("delta").load(stream.quarantine).count()
    for name, pipeline in platform_of(settings).pipelines.items():
        # per micro-batch metrics: every record consumed once, the same totals as per day
        batches = spark.read.format("delta").load(pipeline.table_path(BATCH_METRICS)).toPandas()
        assert batches.records.sum() == log_size == report.records, name
        assert batches.batch_id.is_unique
        per_day = backfilled[name][tables.LATE_DATA_METRICS]
        for column in ("on_time", "late_within_lateness", "dropped_late"):
            assert batches[column].sum() == per_day[column].sum(), (name, column)
        # each quarantined line counted by the micro-batch that read its ingest batch, once
        assert batches.quarantined.sum() == quarantined > 0


def test_a_pipeline_alone_writes_what_it_writes_beside_the_other(spark, source, backfilled,
                                                                  tmp_path):
    """A stream whose only pipeline is the sessions one: its rows are the very rows it wrote
    beside the tumbling one (and the backfill's), so pipelines never leak into each other
    (tests/test_fanout.py checks the same of every combination, without Spark)."""
    settings = _copy_of(source, tmp_path / "alone", {"sessions": PIPELINES["sessions"]})
    run_live(spark, events(settings), max_files_per_trigger=2, **QUIET)
    assert_same(backfilled["sessions"], output_tables(spark, platform_of(settings).pipelines[
        "sessions"]))


def test_live_with_random_batches_a_crash_and_a_restart_equals_the_backfill(
        spark, source, backfilled, tmp_path):
    """Crash after batch 1 wrote every pipeline's tables but before Spark committed it: the
    restart runs it again, and the idempotent writes must not double anything."""
    settings = _copy_of(source, tmp_path / "live")
    checkpoint = str(tmp_path / "checkpoint")
    sizes = random.Random(7)

    def crash_after_second_batch(message: str) -> None:
        if message.startswith("live events: batch 1:"):
            raise RuntimeError("simulated crash after the writes of batch 1")

    query, _ = start_live(spark, events(settings), checkpoint=checkpoint,
                          max_files_per_trigger=sizes.randint(1, 2),
                          progress=crash_after_second_batch)
    with pytest.raises(Exception, match="simulated crash"):
        query.awaitTermination()
    run_live(spark, events(settings), checkpoint=checkpoint,
             max_files_per_trigger=sizes.randint(2, 4), **QUIET)
    assert_all_same(backfilled, settings, spark)


def test_long_running_trigger_stopped_mid_stream_then_resumed_equals_the_backfill(
        spark, source, backfilled, tmp_path):
    """The processing-time trigger (the long-running job), stopped politely after a couple of
    micro-batches, then finished by an AvailableNow run from the same checkpoint."""
    settings = _copy_of(source, tmp_path / "live")
    stream = events(settings)
    checkpoint = str(tmp_path / "checkpoint")
    query, sink = start_live(spark, stream, trigger="1 second", checkpoint=checkpoint,
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
        stream.arrival_log).count(), "stopped before the end of the log"
    run_live(spark, stream, checkpoint=checkpoint, max_files_per_trigger=2, **QUIET)
    assert_all_same(backfilled, settings, spark)


def test_backfills_of_separate_days_and_other_shuffle_partitions_equal_one_backfill(
        spark, source, backfilled, tmp_path):
    settings = _copy_of(source, tmp_path / "ranges")
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "5")
    try:
        for name, pipeline in platform_of(settings).pipelines.items():
            days = sorted(str(d) for d in backfilled[name][tables.LATE_DATA_METRICS]
                          .window_end_date)
            for day in reversed(days):
                run_backfill(spark, pipeline, day, day, **QUIET)
        assert_all_same(backfilled, settings, spark)
        live = _copy_of(source, tmp_path / "live")
        run_live(spark, events(live), max_files_per_trigger=3, **QUIET)  # 5 state partitions
        assert_all_same(backfilled, live, spark)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


def test_the_tables_equal_the_operator_library_replaying_the_log(spark, source, backfilled):
    """Record by record, one driver for all keys, no Spark: the library itself, for each
    pipeline on its own."""
    log = spark.read.format("delta").load(events(source).arrival_log) \
        .orderBy("arrival_seq").toPandas()
    for name, pipeline in platform_of(source).pipelines.items():
        expected = replay(log, pipeline.spec)
        frames = backfilled[name]
        assert results_of(frames[tables.WINDOW_RESULTS], pipeline.spec) == expected.latest
        assert late_of(frames[tables.LATE_RECORDS]) == expected.late
        assert metric_totals(frames[tables.LATE_DATA_METRICS]) == expected.metrics


FIELDS = """
source: events
window: {type: sliding, size: 10m, slide: 5m}
allowed_lateness: 2m
aggregates:
  - {name: events, fn: count}
  - {name: with_value, fn: count, field: value}
  - {name: received_sum, fn: sum, field: received_at}
  - {name: received_max, fn: max, field: received_at}
  - {name: value_min, fn: min, field: value}
  - {name: value_mean, fn: mean, field: value}
"""
"""Standard windows aggregating a payload field and counting a field's presence: their input
columns reach the live engine under names of their own."""


def test_standard_windows_over_payload_fields_live_equal_the_backfill(spark, source, tmp_path):
    """The live engine of standard windows reads the fields Spark extracted for it (the
    payload itself does not travel to it), and its rows equal the backfill's, which reads the
    same fields its own way."""
    backfill = _copy_of(source, tmp_path / "backfill", {"fields": FIELDS})
    pipeline = platform_of(backfill).pipelines["fields"]
    run_backfill(spark, pipeline, **QUIET)
    expected = output_tables(spark, pipeline)
    assert expected[tables.WINDOW_RESULTS].received_sum.notna().any()
    live = _copy_of(source, tmp_path / "live", {"fields": FIELDS})
    run_live(spark, events(live), max_files_per_trigger=2, **QUIET)
    assert_same(expected, output_tables(spark, platform_of(live).pipelines["fields"]))
