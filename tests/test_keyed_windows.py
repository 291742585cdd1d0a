"""Pipelines Spark's expressions cannot compute (sessions with a count trigger, purging count
triggers with an evictor, continuous triggers on sliding windows, user aggregate functions) run
the operator library per key, in the backfill and in the live stream; both must equal the
library replaying the log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from jobs import tables
from jobs.backfill import run_backfill
from jobs.generator import GeneratorConfig, generate
from jobs.ingest import ingest
from jobs.live import run_live
from jobs.runtime import UnsupportedPipeline
from jobs.settings import PlatformSettings
from jobs.windows import compute_windows
from tests.log_replay import late_of, metric_totals, replay, results_of

pytestmark = pytest.mark.spark

QUIET = {"progress": lambda _: None}
WATERMARK = "watermark: {strategy: bounded_out_of_orderness, max_out_of_orderness: 5s}\n"
PIPELINES = {
    "sessions_count_trigger": """
window: {type: session, gap: 4m}
trigger: {type: count, count: 3}
allowed_lateness: 1m
aggregates: [{name: events, fn: count}, {name: total, fn: sum, field: value},
             {name: average, fn: mean, field: value}]
""",
    "tumbling_purging_count_with_evictor": """
window: {type: tumbling, size: 2m}
trigger: {type: count, count: 4, purging: true}
evictor: {type: count, max_count: 2}
allowed_lateness: 2m
aggregates: [{name: events, fn: count}, {name: smallest, fn: min, field: value},
             {name: spread, fn: "tests.user_aggregates:Spread", field: value}]
""",
    "sliding_continuous_event_time": """
window: {type: sliding, size: 4m, slide: 1m}
trigger: {type: continuous_event_time, interval: 30s}
allowed_lateness: 2m
aggregates: [{name: events, fn: count}, {name: largest, fn: max, field: value}]
""",
}
LIVE = ("tumbling_purging_count_with_evictor",)
"""Live session windows are in tests/test_determinism.py; here the purging count trigger
with an evictor, whose buffers a restored key must get back exactly, with a user aggregate
function (tests/user_aggregates.py) that Spark's Python workers import."""


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory) -> PlatformSettings:
    """A log of three ingest batches with late, very late and bad records."""
    home = tmp_path_factory.mktemp("keyed") / "source"
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home)})
    for index in range(3):
        generate(GeneratorConfig(events=400, duration_ms=3 * 3_600_000, keys=5, producers=2,
                                 seed=40 + index, very_late_fraction=0.03,
                                 start_ms=1_767_225_600_000 + 20 * 3_600_000
                                 + index * 2 * 3_600_000), settings.landing)
        ingest(spark, settings, **QUIET)
    return settings


def _with_pipeline(source: PlatformSettings, home: Path, name: str) -> PlatformSettings:
    path = home / f"{name}.yaml"
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(WATERMARK + PIPELINES[name], encoding="utf-8")
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home / "platform"),
                                          "PLATFORM_PIPELINE": str(path)})
    for table in (tables.ARRIVAL_LOG, tables.QUARANTINE):
        shutil.copytree(source.table_path(table), settings.table_path(table))
    assert not settings.pipeline.is_standard_window
    return settings


def _tables(spark, settings: PlatformSettings) -> dict[str, pd.DataFrame]:
    frames = {}
    for name in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS,
                 tables.WINDOW_ASSIGNMENTS):
        frame = spark.read.format("delta").load(settings.table_path(name)).toPandas()
        frame = frame[sorted(frame.columns)]
        frames[name] = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return frames


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_keyed_backfill_equals_the_operator_library(spark, source, tmp_path, name):
    settings = _with_pipeline(source, tmp_path, name)
    log = spark.read.format("delta").load(settings.table_path(tables.ARRIVAL_LOG))
    expected = replay(log.toPandas(), settings.pipeline)
    outputs = compute_windows(log, None, settings.pipeline)
    try:
        results = outputs.results.toPandas()
        assert results_of(results, settings.pipeline) == expected.latest
        assert late_of(outputs.late.toPandas()) == expected.late
        assert metric_totals(outputs.metrics.toPandas()) == expected.metrics
    finally:
        outputs.release()
    assert len(expected.late) > 0 and (results.pane_index > 0).any(), "a log worth testing"
    assert expected.metrics["late_within_lateness"] > 0


@pytest.mark.parametrize("name", LIVE)
def test_live_in_small_batches_equals_the_keyed_backfill(spark, source, tmp_path, name):
    backfilled = _with_pipeline(source, tmp_path / "backfill", name)
    run_backfill(spark, backfilled, **QUIET)
    live = _with_pipeline(source, tmp_path / "live", name)
    report = run_live(spark, live, max_files_per_trigger=2, **QUIET)
    assert len(report.batches) >= 2  # the log in several micro-batches
    expected, got = _tables(spark, backfilled), _tables(spark, live)
    for table, frame in expected.items():
        pd.testing.assert_frame_equal(frame, got[table], check_exact=True, obj=table)


def test_processing_time_triggers_are_refused_before_anything_is_written(spark, source,
                                                                          tmp_path):
    path = tmp_path / "processing.yaml"
    path.write_text(WATERMARK + "window: {type: tumbling, size: 1m}\n"
                    "trigger: {type: processing_time}\n", encoding="utf-8")
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "platform"),
                                          "PLATFORM_PIPELINE": str(path)})
    shutil.copytree(source.table_path(tables.ARRIVAL_LOG),
                    settings.table_path(tables.ARRIVAL_LOG))
    with pytest.raises(UnsupportedPipeline, match="trigger.type 'processing_time'"):
        run_backfill(spark, settings, **QUIET)
    with pytest.raises(UnsupportedPipeline, match="trigger.type 'processing_time'"):
        run_live(spark, settings, **QUIET)
    assert not Path(settings.table_path(tables.WINDOW_RESULTS)).exists()
