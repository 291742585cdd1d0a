"""Vectorised windows on Spark equal a record-by-record simulation of the stream."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from jobs import tables
from jobs.backfill import run_backfill
from jobs.generator import GeneratorConfig, generate
from jobs.streams.landing.ingestor import ingest
from jobs.windows import compute_windows
from operators.pipeline import parse_pipeline
from operators.time import MIN_WATERMARK
from tests.output_tables import assert_same, output_tables
from tests.platform_home import PER_MINUTE, events, only_pipeline, settings_for
from tests.window_reference import Arrival, simulate

pytestmark = pytest.mark.spark

BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
ARRIVAL_COLUMNS = ("arrival_seq long, key string, event_time_ms long, watermark_ms long, "
                   "ingest_time_ms long, value decimal(38,9), payload string")


def _pipeline(window: dict, lateness: int):
    return parse_pipeline({
        "watermark": {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": 0},
        "window": window, "allowed_lateness": lateness,
        "aggregates": [{"name": "events", "fn": "count"},
                       {"name": "value_sum", "fn": "sum", "field": "value"}],
    })


def _arrivals_frame(spark, arrivals: list[Arrival]):
    rows = [(a.arrival_seq, a.key, a.event_time_ms, a.watermark_ms, a.arrival_seq, a.value, "{}")
            for a in arrivals]
    frame = spark.createDataFrame(rows, ARRIVAL_COLUMNS)
    return frame.withColumn("event_time", F.timestamp_millis("event_time_ms"))


def _check_against_reference(spark, arrivals: list[Arrival], spec) -> None:
    window = spec.window
    slide = window.slide_ms or window.size_ms
    latest, late, classes = simulate(arrivals, window.size_ms, slide, window.offset_ms,
                                     spec.allowed_lateness_ms)
    outputs = compute_windows(_arrivals_frame(spark, arrivals), None, spec)
    got = {(r.key, r.window_start_ms, r.window_end_ms): {
        "pane_index": r.pane_index, "timing": r.timing, "is_last": r.is_last,
        "events": r.events,
        "value_sum": r.value_sum} for r in outputs.results.collect()}
    assert got == latest
    got_late = sorted((r.key, r.arrival_seq, r.window_start_ms, r.window_end_ms)
                      for r in outputs.late.collect())
    assert got_late == sorted(late)
    counts = pd.Series([c[3] for c in classes], dtype="object").value_counts()
    metrics = outputs.metrics.agg(F.sum("on_time"), F.sum("late_within_lateness"),
                                  F.sum("dropped_late")).first()
    assert [int(x or 0) for x in metrics] == [int(counts.get(name, 0)) for name in
                                              ("on_time", "late_within", "dropped")]


@st.composite
def streams(draw):
    """Small adversarial logs: times on a coarse grid ±1 ms so that boundaries are hit
    exactly, watermarks that stall, creep and jump, several keys."""
    size = draw(st.sampled_from([10_000, 30_000]))
    kind = draw(st.sampled_from(["tumbling", "sliding"]))
    window = {"type": kind, "size": size}
    if kind == "sliding":
        window["slide"] = draw(st.sampled_from([size // 2, size // 5]))
    lateness = draw(st.sampled_from([0, 5_000, 20_000]))
    count = draw(st.integers(1, 30))
    watermark = MIN_WATERMARK
    arrivals = []
    for seq in range(count):
        step = draw(st.sampled_from(["hold", "creep", "jump", "start"]))
        if watermark == MIN_WATERMARK and step != "hold":
            watermark = BASE + draw(st.integers(0, 6)) * 5_000 + draw(st.sampled_from([-1, 0]))
        elif step == "creep":
            watermark += draw(st.sampled_from([1, 999, 1_000]))
        elif step == "jump":
            watermark += draw(st.integers(1, 8)) * 5_000 + draw(st.sampled_from([-1, 0, 1]))
        t = BASE + draw(st.integers(0, 20)) * 5_000 + draw(st.sampled_from([-1, 0, 1]))
        arrivals.append(Arrival(seq, draw(st.sampled_from(["a", "b", "c"])), t, watermark,
                                Decimal(draw(st.integers(-10**6, 10**6))).scaleb(-3)))
    return arrivals, _pipeline(window, lateness)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(streams())
def test_vectorised_windows_equal_the_stream_simulation(spark, case):
    arrivals, spec = case
    _check_against_reference(spark, arrivals, spec)


def test_a_record_exactly_at_the_watermark_with_zero_lateness(spark):
    # window [0, 10s) of BASE: max_timestamp = BASE + 9_999
    spec = _pipeline({"type": "tumbling", "size": "10s"}, 0)
    on_time = Arrival(0, "k", BASE + 9_999, BASE + 9_998, Decimal(1))
    at_watermark = Arrival(1, "k", BASE + 9_999, BASE + 9_999, Decimal(2))  # max_ts <= W: late
    closer = Arrival(2, "k", BASE + 30_000, BASE + 20_000, Decimal(4))
    _check_against_reference(spark, [on_time, at_watermark, closer], spec)
    outputs = compute_windows(_arrivals_frame(spark, [on_time, at_watermark, closer]), None, spec)
    assert [r.arrival_seq for r in outputs.late.collect()] == [1]
    (pane,) = outputs.results.where(F.col("window_start_ms") == BASE).collect()
    assert (pane.events, pane.timing, pane.is_last, pane.pane_index) == (1, "ON_TIME", True, 0)


@pytest.fixture(scope="module")
def generated_log(spark, tmp_path_factory):
    """A realistic log written by the real generator and ingest, shared by this module."""
    home = tmp_path_factory.mktemp("windows") / "platform"
    settings = settings_for(home, {"per_minute": PER_MINUTE})
    generate(GeneratorConfig(events=4_000, duration_ms=2 * 86_400_000 // 8, keys=10,
                             start_ms=BASE + 86_400_000 - 3 * 3_600_000),
             events(settings).landing)
    ingest(spark, events(settings), progress=lambda _: None)
    return only_pipeline(settings)


def test_generated_log_matches_the_simulation(spark, generated_log):
    log = spark.read.format("delta").load(generated_log.table_path(tables.ARRIVAL_LOG))
    arrivals = [Arrival(r.arrival_seq, r.key, r.event_time_ms, r.watermark_ms, r.value)
                for r in log.collect()]
    spec = generated_log.spec
    window = spec.window
    latest, late, _ = simulate(arrivals, window.size_ms, window.size_ms, window.offset_ms,
                               spec.allowed_lateness_ms)
    outputs = compute_windows(log, None, spec)
    got = {(r.key, r.window_start_ms, r.window_end_ms): (r.pane_index, r.timing, r.is_last,
                                                          r.events)
           for r in outputs.results.collect()}
    assert got == {k: (v["pane_index"], v["timing"], v["is_last"], v["events"])
                   for k, v in latest.items()}
    assert len(late) == outputs.late.count() > 0


def test_backfills_of_separate_ranges_and_reruns_equal_one_backfill(spark, generated_log,
                                                                    tmp_path: Path):
    quiet = {"progress": lambda _: None}
    run_backfill(spark, generated_log, **quiet)
    whole = output_tables(spark, generated_log)
    assert len(whole[tables.LATE_DATA_METRICS]) == 2  # the log spans two days

    for name in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS):
        spark.sql(f"DELETE FROM delta.`{generated_log.table_path(name)}`")
    run_backfill(spark, generated_log, "2026-01-02", "2026-01-02", **quiet)
    run_backfill(spark, generated_log, "2026-01-01", "2026-01-01", **quiet)
    assert_same(whole, output_tables(spark, generated_log))

    run_backfill(spark, generated_log, "2026-01-01", "2026-01-02", **quiet)  # a repeat
    assert_same(whole, output_tables(spark, generated_log))

    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        run_backfill(spark, generated_log, **quiet)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    assert_same(whole, output_tables(spark, generated_log))
