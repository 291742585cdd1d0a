"""Late-data metrics of the days that only quarantined lines touched: one rule for both
runtimes (docs/contract.md, section 6). A day has a metrics row when records were assigned to
windows ending on it or lines were quarantined on it (by ingest time), whichever runtime wrote
it and however the log was read.

The log: good events on 2026-01-01 whose ingest batch also quarantines lines stamped after
midnight (a day no window ends on), an ingest batch of bad lines only on 2026-01-03, good events
on 2026-01-04, then bad lines only on 2026-01-06 and, after the live job's last micro-batch,
on 2026-01-07. The live job reads it as it grows, in three runs; a backfill reads it whole.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.live import run_live
from jobs.streams.landing.ingestor import ingest
from jobs.tables.days import day_of
from tests.log_replay import metric_totals, replay
from tests.output_tables import assert_same, output_tables
from tests.platform_home import PER_MINUTE, SESSIONS, copy_of_log, events, settings_for

pytestmark = pytest.mark.spark

QUIET: dict[str, Callable[[str], None]] = {"progress": lambda _: None}
LENIENT = """
source: events
window: {type: tumbling, size: 10m}
allowed_lateness: 1d
aggregates: [{name: events, fn: count}]
"""
"""Drops nothing: its late_records table is there, empty, whichever runtime wrote it."""
PIPELINES = {"tumbling": PER_MINUTE, "sessions": SESSIONS, "lenient": LENIENT}
HOUR = 3_600_000


def _ms(day: str, hour: float) -> int:
    midnight = dt.datetime.fromisoformat(f"{day}T00:00:00+00:00")
    return int(midnight.timestamp() * 1000 + hour * HOUR)


def _good(key: str, event_ms: int, received_ms: int, value: float) -> str:
    return json.dumps({"key": key, "event_time": event_ms, "value": value,
                       "received_at": received_ms})


def _bad(received_ms: int, number: int) -> str:
    """A line quarantined for its content, stamped with its collector's clock (a line with no
    usable stamp would take the ingest's wall clock, a day of the test run)."""
    if number % 2:
        return json.dumps({"event_time": received_ms - 1_000, "value": 1.0,
                           "received_at": received_ms})  # no key
    return json.dumps({"key": "k0", "event_time": received_ms - 1_000, "value": "twelve",
                       "received_at": received_ms})


def _events(day: str, first_hour: float, hours: float, count: int) -> list[tuple[str, int]]:
    """``count`` events spread over ``hours`` from ``first_hour``: (key, event time)."""
    step = int(hours * HOUR / count)
    return [(f"k{i % 5}", _ms(day, first_hour) + i * step) for i in range(count)]


def _land(settings: PlatformSettings, name: str, partitions: dict[str, list[str]]) -> None:
    for partition, lines in partitions.items():
        folder = Path(events(settings).landing) / partition
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _ingest(spark, settings: PlatformSettings, name: str,
            partitions: dict[str, list[str]]) -> None:
    _land(settings, name, partitions)
    ingest(spark, events(settings), **QUIET)


def _first_day(spark, settings: PlatformSettings) -> None:
    """2026-01-01's events, the last ones received on 2026-01-02 with bad lines beside them."""
    on_time = _events("2026-01-01", 21, 2.5, 120)
    _ingest(spark, settings, "batch-1", {
        "producer-0": [_good(k, t, t + 2_000, 1.0 + i % 7) for i, (k, t) in enumerate(on_time)]
        + [_good("k1", _ms("2026-01-01", 23.5), _ms("2026-01-02", 0.25), 5.0)]
        + [_bad(_ms("2026-01-02", 0.5) + i, i) for i in range(3)],
        "producer-1": [_good(k, t, t + 3_000, 2.0) for k, t in on_time[::3]],
    })


def _bad_only(spark, settings: PlatformSettings, name: str, day: str, count: int) -> None:
    _ingest(spark, settings, name, {
        "producer-0": [_bad(_ms(day, 12) + i * 1_000, i) for i in range(count)]})


def _fourth_day(spark, settings: PlatformSettings) -> None:
    later = _events("2026-01-04", 10, 1, 90)
    _ingest(spark, settings, "batch-3", {
        "producer-0": [_good(k, t, t + 1_500, 3.0) for k, t in later]
        + [_good("k2", _ms("2026-01-04", 8), _ms("2026-01-04", 11.01), 9.0)],  # dropped
        "producer-1": [_good(k, t, t + 2_500, 4.0) for k, t in later[::2]]
        + [_bad(_ms("2026-01-04", 11.5), 1)],
    })


QUARANTINE_ONLY_DAYS = {"2026-01-02", "2026-01-03", "2026-01-06", "2026-01-07"}


@pytest.fixture(scope="module")
def grown(spark, tmp_path_factory) -> PlatformSettings:
    """The live job's tables, read as the log grew: after 2026-01-01 and the bad lines of
    2026-01-03; after 2026-01-04 and 2026-01-06; and once more, with no new record, after the
    bad lines of 2026-01-07."""
    home = tmp_path_factory.mktemp("quarantine-days") / "live"
    settings = settings_for(home, PIPELINES)
    stream = events(settings)
    _first_day(spark, settings)
    _bad_only(spark, settings, "batch-2", "2026-01-03", 4)
    run_live(spark, stream, max_files_per_trigger=1, **QUIET)
    _fourth_day(spark, settings)
    _bad_only(spark, settings, "batch-4", "2026-01-06", 2)
    run_live(spark, stream, max_files_per_trigger=1, **QUIET)
    _bad_only(spark, settings, "batch-5", "2026-01-07", 5)
    report = run_live(spark, stream, **QUIET)
    assert report.records == 0, "the last run had no record to read"
    return settings


@pytest.fixture(scope="module")
def backfilled(spark, grown, tmp_path_factory) -> dict[str, dict[str, pd.DataFrame]]:
    home = tmp_path_factory.mktemp("quarantine-days") / "backfill"
    settings = copy_of_log(grown, home, PIPELINES)
    frames = {}
    for name, pipeline in platform_of(settings).pipelines.items():
        run_backfill(spark, pipeline, **QUIET)
        frames[name] = output_tables(spark, pipeline)
    return frames


def _quarantined_per_day(spark, settings: PlatformSettings) -> dict[str, int]:
    """The reference: the quarantine's lines counted by the UTC day of their ingest time."""
    lines = spark.read.format("delta").load(events(settings).quarantine).toPandas()
    days = lines.ingest_time_ms.map(lambda ms: day_of(int(ms), "UTC").isoformat())
    return {day: int(n) for day, n in days.value_counts().items()}


def test_days_with_quarantined_lines_only_have_the_same_metrics_live_and_backfilled(
        spark, grown, backfilled):
    expected = _quarantined_per_day(spark, grown)
    assert set(expected) >= QUARANTINE_ONLY_DAYS, expected
    for name, pipeline in platform_of(grown).pipelines.items():
        live = output_tables(spark, pipeline)
        assert_same(backfilled[name], live)
        assert (len(live[tables.LATE_RECORDS]) == 0) == (name == "lenient"), name
        metrics = live[tables.LATE_DATA_METRICS].assign(
            day=lambda f: f.window_end_date.astype(str)).set_index("day")
        assert {d: int(metrics.quarantined.get(d, 0)) for d in expected} == expected, name
        only = metrics.loc[sorted(QUARANTINE_ONLY_DAYS)]
        assert not only[["on_time", "late_within_lateness", "dropped_late"]].any().any(), name


def test_quarantined_lines_on_days_without_windows_counted_alike_in_one_pass(
        spark, grown, backfilled, tmp_path):
    """The whole log read in one live run, a file a micro-batch, equals the backfill; and the
    days written are those the operator library's replay assigns records to windows ending on,
    and those lines were quarantined on, no other."""
    settings = copy_of_log(grown, tmp_path / "one-pass", PIPELINES)
    run_live(spark, events(settings), max_files_per_trigger=1, **QUIET)
    log = spark.read.format("delta").load(events(settings).arrival_log).toPandas()
    quarantine_days = set(_quarantined_per_day(spark, settings))
    for name, pipeline in platform_of(settings).pipelines.items():
        live = output_tables(spark, pipeline)
        assert_same(backfilled[name], live)
        replayed = replay(log, pipeline.spec)
        window_days = {day_of(end - 1, "UTC").isoformat()
                       for (_, _, end) in replayed.latest} | \
            {day_of(end - 1, "UTC").isoformat() for (_, _, _, end) in replayed.late}
        written = set(live[tables.LATE_DATA_METRICS].window_end_date.astype(str))
        assert written == window_days | quarantine_days, name
        assert metric_totals(live[tables.LATE_DATA_METRICS]) == replayed.metrics, name
