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
from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.live import run_live
from jobs.streams.landing.ingestor import ingest
from jobs.windows import compute_windows
from tests.log_replay import late_of, metric_totals, replay, results_of
from tests.platform_home import PER_MINUTE, events, only_pipeline, settings_for

pytestmark = pytest.mark.spark

QUIET = {"progress": lambda _: None}
SOURCE = "source: events\n"
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
    settings = settings_for(home, {"per_minute": PER_MINUTE})
    for index in range(3):
        generate(GeneratorConfig(events=400, duration_ms=3 * 3_600_000, keys=5, producers=2,
                                 seed=40 + index, very_late_fraction=0.03,
                                 start_ms=1_767_225_600_000 + 20 * 3_600_000
                                 + index * 2 * 3_600_000), events(settings).landing)
        ingest(spark, events(settings), **QUIET)
    return settings


def _with_pipeline(source: PlatformSettings, home: Path, name: str) -> Pipeline:
    settings = settings_for(home / "platform", {name: SOURCE + PIPELINES[name]})
    for table in (tables.ARRIVAL_LOG, tables.QUARANTINE):
        shutil.copytree(events(source).table_path(table), events(settings).table_path(table))
    pipeline = only_pipeline(settings)
    assert not pipeline.spec.is_standard_window
    return pipeline


def _tables(spark, pipeline: Pipeline) -> dict[str, pd.DataFrame]:
    frames = {}
    for name in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS,
                 tables.WINDOW_ASSIGNMENTS):
        frame = spark.read.format("delta").load(pipeline.table_path(name)).toPandas()
        frame = frame[sorted(frame.columns)]
        frames[name] = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return frames


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_keyed_backfill_equals_the_operator_library(spark, source, tmp_path, name):
    pipeline = _with_pipeline(source, tmp_path, name)
    log = spark.read.format("delta").load(pipeline.table_path(tables.ARRIVAL_LOG))
    expected = replay(log.toPandas(), pipeline.spec)
    outputs = compute_windows(log, None, pipeline.spec)
    try:
        results = outputs.results.toPandas()
        assert results_of(results, pipeline.spec) == expected.latest
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
    report = run_live(spark, live.stream, max_files_per_trigger=2, **QUIET)
    assert len(report.batches) >= 2  # the log in several micro-batches
    expected, got = _tables(spark, backfilled), _tables(spark, live)
    for table, frame in expected.items():
        pd.testing.assert_frame_equal(frame, got[table], check_exact=True, obj=table)


def test_processing_time_triggers_are_refused_before_anything_is_written(tmp_path):
    """The Spark runtimes cannot run them: the pipeline is refused when the folder is read,
    naming its file, so no command starts Spark for it."""
    with pytest.raises(SettingsError, match=r"processing\.yaml: trigger\.type "
                                            r"'processing_time': processing-time triggers run"):
        settings_for(tmp_path / "platform", {"processing": SOURCE + "window: {type: tumbling, "
                                             "size: 1m}\ntrigger: {type: processing_time}\n"})
    assert not (tmp_path / "platform").exists()
