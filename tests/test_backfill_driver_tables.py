"""A backfill's late records and metrics computed in the driver are the rows Spark's computation
writes: the same tables, row for row, either way (standard windows from the log, sessions'
assignments taken to the driver and written there, and their metrics counted from them)."""

from __future__ import annotations

import pytest

from jobs import backfill, tables
from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.store import fast_writes
from jobs.streams.landing.ingestor import ingest
from jobs.windows import driver_tables
from tests.output_tables import output_tables
from tests.platform_home import PER_MINUTE, SESSIONS, platform_env

pytestmark = pytest.mark.spark

DST_EVE = 1_772_928_000_000  # 2026-03-08 00:00 UTC: New York changes clocks that morning
SLIDING = """
source: events
window: {type: sliding, size: 10m, slide: 2m}
allowed_lateness: 2m
aggregates:
  - {name: events, fn: count}
  - {name: value_max, fn: max, field: value}
"""
LENIENT = """
source: events
window: {type: tumbling, size: 1h}
allowed_lateness: 24h
aggregates:
  - {name: events, fn: count}
"""
"""Nothing is ever dropped: no late records at all."""


@pytest.fixture(scope="module")
def pipelines(spark, tmp_path_factory):
    """Two pipelines over a log of two days across a change of clocks, with late, very late
    and malformed lines, partitioned by New York's days."""
    home = tmp_path_factory.mktemp("driver-tables") / "platform"
    env = {**platform_env(home, {"per_minute": PER_MINUTE, "sliding": SLIDING,
                                      "lenient": LENIENT, "sessions": SESSIONS}),
           "PLATFORM_TIME_ZONE": "America/New_York"}
    settings = PlatformSettings.from_env(env)
    stream = platform_of(settings).streams["events"]
    generate(GeneratorConfig(events=6_000, duration_ms=2 * 86_400_000, keys=12,
                             start_ms=DST_EVE - 6 * 3_600_000, late_fraction=0.1,
                             very_late_fraction=0.03, bad_fraction=0.02), stream.landing)
    ingest(spark, stream, progress=lambda _: None)
    return platform_of(settings).pipelines


def _noted(function, name: str, ran: list[str]):
    def noted(*args, **kwargs):
        ran.append(name)
        return function(*args, **kwargs)
    return noted


def _backfill(spark, pipeline, in_driver: bool, monkeypatch, *days: str | None,
              assignments_in_driver: bool | None = None) -> dict:
    """``assignments_in_driver`` (default: as ``in_driver``): whether a keyed pipeline's
    assignments are taken to the driver, or written by Spark and read back for metrics."""
    if assignments_in_driver is None:
        assignments_in_driver = in_driver
    monkeypatch.setattr(driver_tables, "DRIVER_RECORDS", 10**12 if in_driver else -1)
    monkeypatch.setattr(backfill, "DRIVER_ASSIGNMENTS", 10**12 if assignments_in_driver else -1)
    ran: list[str] = []  # which of the keyed backfill's driver paths wrote
    for path in ("_driver_assignments_write", "_assigned_metrics_write"):
        monkeypatch.setattr(backfill, path, _noted(getattr(backfill, path), path, ran))
    said: list[str] = []
    report = run_backfill(spark, pipeline, *days, progress=said.append)
    if pipeline.spec.is_standard_window:
        assert ran == []
    else:
        assert ran == (["_driver_assignments_write"] if assignments_in_driver else
                       ["_assigned_metrics_write"] if in_driver else [])
    found = output_tables(spark, pipeline)
    assignments = pipeline.table_path(tables.WINDOW_ASSIGNMENTS)
    if pipeline.spec.is_standard_window:
        assert not fast_writes.table_exists(assignments)
    else:
        frame = spark.read.format("delta").load(assignments).toPandas()
        found[tables.WINDOW_ASSIGNMENTS] = frame.sort_values(
            sorted(frame.columns)).reset_index(drop=True)[sorted(frame.columns)]
    return {"report": report, "said": said, "tables": found}


EVERY_DAY, CLOCK_CHANGE_DAY = (None, None), ("2026-03-08", "2026-03-08")


@pytest.mark.parametrize(("name", "days"), [
    ("per_minute", EVERY_DAY), ("per_minute", CLOCK_CHANGE_DAY), ("sliding", EVERY_DAY),
    ("lenient", EVERY_DAY), ("sessions", EVERY_DAY), ("sessions", CLOCK_CHANGE_DAY)])
def test_the_driver_writes_what_spark_writes(spark, pipelines, monkeypatch, name, days):
    pipeline = pipelines[name]
    by_spark = _backfill(spark, pipeline, False, monkeypatch, *days)
    by_driver = _backfill(spark, pipeline, True, monkeypatch, *days)
    kept = [tables.WINDOW_ASSIGNMENTS] if name == "sessions" else []
    # sessions past the driver's share of assignments: Spark writes them, the driver reads
    # them back for the metrics
    others = [_backfill(spark, pipeline, True, monkeypatch, *days,
                        assignments_in_driver=False)] if name == "sessions" else []
    for table in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS, *kept):
        expected = by_spark["tables"][table]
        assert len(expected) > 0 or (name, table) == ("lenient", tables.LATE_RECORDS), table
        for got in (by_driver["tables"][table], *(other["tables"][table] for other in others)):
            assert list(got.columns) == list(expected.columns), table
            # dtypes too: a column written by deltalake reads back as Spark's
            assert got.dtypes.to_dict() == expected.dtypes.to_dict(), table
            assert got.to_dict("records") == expected.to_dict("records"), table
    late = by_spark["tables"][tables.LATE_RECORDS]
    assert (len(late) > 10) == (name != "lenient")
    assert by_driver["report"].metrics == by_spark["report"].metrics
    assert (by_driver["report"].results, by_driver["report"].late) == \
        (by_spark["report"].results, by_spark["report"].late)
    assert by_driver["report"].summary() == by_spark["report"].summary()
    written = by_spark["report"].late
    assert any(f"wrote {written} rows to {tables.LATE_RECORDS}" in line
               for line in by_driver["said"])
