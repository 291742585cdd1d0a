"""The per-micro-batch late-data metrics, computed without Spark (jobs.lateness.metrics).
Of standard windows: equal to a record-by-record reference built on the operator library's
window assigners for any records, batches, windows and lateness, and to Spark's own aggregates
(the ones the per-day metrics use) on a generated log. Of the operator library's pipelines,
from their recorded window assignments: equal to a row-by-row reference and to Spark's
aggregates over the same rows."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.lateness.day_tallies import day_lateness
from jobs.lateness.metrics import assigned_batch_lateness, batch_lateness
from operators.build import build_assigner
from operators.pipeline import parse_pipeline
from operators.time import MIN_WATERMARK
from tests.depth import examples

SECOND = 1_000


def _spec(window: dict, lateness_s: int):
    return parse_pipeline({"source": "events", "window": window,
                           "allowed_lateness": lateness_s * SECOND,
                           "aggregates": [{"name": "events", "fn": "count"}]})


WINDOWS = st.one_of(
    st.builds(lambda size, offset: {"type": "tumbling", "size": size * SECOND,
                                    "offset": offset % size * SECOND},
              st.integers(1, 120), st.integers(0, 5)),
    st.builds(lambda slide, size: {"type": "sliding", "size": size * SECOND,
                                   "slide": slide * SECOND},
              st.integers(1, 30), st.integers(1, 90)).filter(
        lambda w: w["size"] >= w["slide"]))


@st.composite
def logs(draw):
    """Records in arrival order with non-decreasing recorded watermarks (some unknown at the
    start), cut into consecutive batches."""
    count = draw(st.integers(1, 50))
    rows, watermark = [], MIN_WATERMARK
    for seq in range(count):
        event = draw(st.integers(0, 600)) * SECOND + draw(st.integers(0, 999))
        ingest = draw(st.integers(0, 900)) * SECOND
        if draw(st.booleans()):  # often right at a window's last moment or its cleanup
            second = draw(st.integers(0, 700)) * SECOND
            watermark = max(watermark, second + draw(st.sampled_from([-1, 0, 1, 499])))
        rows.append((seq, event, ingest, watermark))
    cuts = sorted(set(draw(st.lists(st.integers(1, count), max_size=6)))) + [count]
    ranges, start = [], 0
    for batch_id, end in enumerate(cuts):
        if end > start:
            ranges.append((batch_id * 3, start, end - 1))  # ids need not be consecutive
            start = end
    return rows, ranges


def _percentile(values: list[int], p: float) -> float:
    """Linear between the two closest ranks of the sorted values (Spark's exact percentile)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * p
    lower, higher = math.floor(position), math.ceil(position)
    if ordered[lower] == ordered[higher]:
        return float(ordered[lower])
    return (higher - position) * ordered[lower] + (position - lower) * ordered[higher]


def _rounded(value: float) -> float:
    return float(Decimal(repr(value)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def reference(rows, ranges, spec) -> dict:
    """Record by record, window by window, as docs/semantics.md classifies them."""
    assigner = build_assigner(spec.window)
    found = {}
    for batch_id, first, last in ranges:
        counts = {"on_time": 0, "late_within_lateness": 0, "dropped_late": 0}
        lateness, lags = [], []
        for _seq, event, ingest, watermark in rows[first:last + 1]:
            for window in assigner.assign(event, None):
                max_ts = window.end - 1
                if max_ts + spec.allowed_lateness_ms <= watermark:
                    fate = "dropped_late"
                elif watermark < max_ts:
                    fate = "on_time"
                else:
                    fate = "late_within_lateness"
                counts[fate] += 1
                if watermark != MIN_WATERMARK:
                    lags.append(ingest - watermark)
                    if fate != "on_time":
                        lateness.append(max(0, watermark - event))
        found[batch_id] = _figures(counts, lateness, lags)
    return found


def _figures(counts: dict[str, int], lateness: list[int], lags: list[int]) -> dict:
    """A batch's metrics row from its fates' counts, its late assignments' lateness and its
    assignments' watermark lags."""
    return {
        **counts,
        **{f"lateness_p{round(p * 100)}_ms": _rounded(_percentile(lateness, p))
           if lateness else 0.0 for p in (0.5, 0.95, 0.99)},
        "lateness_max_ms": max(lateness, default=0),
        "watermark_lag_p50_ms": _rounded(_percentile(lags, 0.5)) if lags else None,
        "watermark_lag_max_ms": max(lags, default=None),
    }


def _table(rows) -> pa.Table:
    seq, event, ingest, watermark = zip(*rows, strict=True)
    return pa.table({"arrival_seq": pa.array(seq, pa.int64()),
                     "event_time_ms": pa.array(event, pa.int64()),
                     "ingest_time_ms": pa.array(ingest, pa.int64()),
                     "watermark_ms": pa.array(watermark, pa.int64())})


@settings(max_examples=examples(300), deadline=None)
@given(logs(), WINDOWS, st.integers(0, 60), st.randoms(use_true_random=False))
def test_each_batch_equals_the_record_by_record_reference(log, window, lateness_s, rng):
    rows, ranges = log
    spec = _spec(window, lateness_s)
    shuffled = list(rows)
    rng.shuffle(shuffled)  # files come back from the log in any order
    assert batch_lateness(_table(shuffled), ranges, spec) == reference(rows, ranges, spec)


@pytest.mark.spark
def test_equal_to_sparks_aggregates_over_a_generated_log(spark):
    """Spark's classification and exact percentiles, grouped by batch as the live sink grouped
    them before: the very same rows."""
    import random

    from pyspark.sql import functions as F

    from jobs.lateness.aggregates import lateness_aggregates, lateness_columns
    from jobs.windows.vectorised import classify

    rng = random.Random(5)
    rows, watermark, seen = [], MIN_WATERMARK, 0
    for seq in range(3_000):
        event = rng.randrange(0, 3_600_000)
        seen = max(seen, event)
        if rng.random() < 0.3:
            watermark = max(watermark, seen - rng.randrange(0, 300_000))
        rows.append((seq, event, event + rng.randrange(0, 120_000), watermark))
    ranges = [(batch_id, start, min(start + 299, 2_999))
              for batch_id, start in enumerate(range(0, 3_000, 300))]
    frame = spark.createDataFrame(rows, "arrival_seq long, event_time_ms long, "
                                        "ingest_time_ms long, watermark_ms long")
    bounds = spark.createDataFrame(ranges, "batch_id long, first long, last long")
    for window, lateness_s in (({"type": "tumbling", "size": 60_000}, 30),
                               ({"type": "sliding", "size": 300_000, "slide": 60_000}, 0)):
        spec = _spec(window, lateness_s)
        expected = (classify(frame, spec)
                    .join(F.broadcast(bounds),
                          F.col("arrival_seq").between(F.col("first"), F.col("last")))
                    .groupBy("batch_id").agg(*lateness_aggregates())
                    .select("batch_id", "on_time", "late_within_lateness", "dropped_late",
                            *lateness_columns()))
        spark_rows = {r.batch_id: {k: v for k, v in r.asDict().items() if k != "batch_id"}
                      for r in expected.collect()}
        assert batch_lateness(_table(rows), ranges, spec) == spark_rows, window


@pytest.mark.spark
def test_days_equal_the_backfills_day_metrics(spark):
    """``standard_day_metrics``, which the backfill writes, over a log of three days around
    Europe's change to summer time, with quarantined lines on the days and past them."""
    import datetime as dt
    import random

    from jobs.tables.days import day_of
    from jobs.windows.vectorised import standard_day_metrics

    rng = random.Random(11)
    start = 1_774_656_000_000  # 2026-03-28 00:00 UTC; Europe changes clocks on the 29th
    rows, watermark, seen = [], MIN_WATERMARK, 0
    for seq in range(4_000):
        event = start + rng.randrange(0, 3 * 86_400_000)
        seen = max(seen, event)
        if rng.random() < 0.3:
            watermark = max(watermark, seen - rng.randrange(0, 3_600_000))
        rows.append((seq, event, event + rng.randrange(0, 600_000), watermark))
    rows.sort(key=lambda r: r[3])
    rows = [(seq, *rest) for seq, (_, *rest) in enumerate(rows)]
    ingested = [start + rng.randrange(-86_400_000, 4 * 86_400_000) for _ in range(200)]
    log = spark.createDataFrame(rows, "arrival_seq long, event_time_ms long, "
                                      "ingest_time_ms long, watermark_ms long")
    quarantine = spark.createDataFrame([(ms,) for ms in ingested], "ingest_time_ms long")
    for zone in ("UTC", "Europe/Berlin", "America/Los_Angeles", "Asia/Kolkata"):
        first = str(day_of(start, zone) + dt.timedelta(days=1))
        last = str(day_of(start, zone) + dt.timedelta(days=2))
        for window, lateness_s in (({"type": "tumbling", "size": 3_600_000}, 600),
                                   ({"type": "sliding", "size": 7_200_000,
                                     "slide": 1_800_000}, 0)):
            spec = _spec(window, lateness_s)
            expected = sorted((r.asDict() for r in standard_day_metrics(
                log, quarantine, spec, zone, first, last).collect()),
                key=lambda r: r["window_end_date"])
            got = day_lateness(_table(rows), ingested, spec, zone, first, last)
            assert got == expected, (zone, window)


FATES = ("on_time", "late_within_lateness", "dropped_late")


@st.composite
def assignment_logs(draw):
    """Window assignments as the operator library records them (any number per record, in
    any order, watermarks unknown at times), and consecutive batches of arrival positions,
    some with no assignment."""
    count = draw(st.integers(1, 40))
    rows = []
    for seq in range(count):
        watermark = draw(st.one_of(st.just(MIN_WATERMARK), st.integers(0, 900_000)))
        event, ingest = draw(st.integers(0, 900_000)), draw(st.integers(0, 900_000))
        for _ in range(draw(st.integers(0, 3))):
            rows.append((seq, draw(st.sampled_from(FATES)), event, ingest, watermark))
    cuts = sorted(set(draw(st.lists(st.integers(1, count), max_size=6)))) + [count]
    ranges, start = [], 0
    for batch_id, end in enumerate(cuts):
        if end > start:
            ranges.append((batch_id * 5, start, end - 1))
            start = end
    return draw(st.permutations(rows)), ranges


def assigned_reference(rows, ranges) -> dict:
    """Row by row: what Spark's aggregates give per batch over the assignments in its range."""
    found = {}
    for batch_id, first, last in ranges:
        mine = [row for row in rows if first <= row[0] <= last]
        if not mine:
            continue
        lateness = [max(0, w - e) for _, fate, e, _, w in mine
                    if w != MIN_WATERMARK and fate != "on_time"]
        lags = [i - w for _, _, _, i, w in mine if w != MIN_WATERMARK]
        found[batch_id] = _figures({fate: sum(1 for row in mine if row[1] == fate)
                                    for fate in FATES}, lateness, lags)
    return found


def _assigned_table(rows) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [()] * 5
    return pa.table({"arrival_seq": pa.array(columns[0], pa.int64()),
                     "fate": pa.array(columns[1], pa.string()),
                     "event_time_ms": pa.array(columns[2], pa.int64()),
                     "ingest_time_ms": pa.array(columns[3], pa.int64()),
                     "watermark_ms": pa.array(columns[4], pa.int64())})


@settings(max_examples=examples(300), deadline=None)
@given(assignment_logs())
def test_each_batch_of_assignments_equals_the_row_by_row_reference(log):
    rows, ranges = log
    assert assigned_batch_lateness(_assigned_table(rows), ranges) == assigned_reference(
        rows, ranges)


def test_no_assignments_table_yet_gives_no_batch_figures():
    """Before the first assignment is written the table does not exist, and the driver's
    reader gives empty columns of no particular type."""
    empty = pa.table({name: pa.array([], pa.int64()) for name in
                      ("arrival_seq", "fate", "event_time_ms", "ingest_time_ms",
                       "watermark_ms")})
    assert assigned_batch_lateness(empty, [(0, 0, 10)]) == {}


@pytest.mark.spark
def test_assignments_equal_to_sparks_aggregates(spark):
    """The Spark job the live sink ran before over the same rows: the very same figures."""
    import random

    from pyspark.sql import functions as F

    from jobs.lateness.aggregates import lateness_aggregates, lateness_columns

    rng = random.Random(7)
    rows = []
    for seq in range(3_000):
        watermark = MIN_WATERMARK if seq < 40 else rng.randrange(0, 3_600_000)
        event, ingest = rng.randrange(0, 3_600_000), rng.randrange(0, 3_600_000)
        for _ in range(rng.choice((0, 1, 1, 1, 2, 4))):
            rows.append((seq, rng.choice(FATES), event, ingest, watermark))
    ranges = [(batch_id, start, min(start + 299, 2_999))
              for batch_id, start in enumerate(range(0, 3_000, 300))]
    bounds = spark.createDataFrame(ranges, "batch_id long, first long, last long")
    classified = spark.createDataFrame(rows, "arrival_seq long, _class string, "
                                             "event_time_ms long, ingest_time_ms long, "
                                             "watermark_ms long")
    expected = (classified.join(F.broadcast(bounds),
                                F.col("arrival_seq").between(F.col("first"), F.col("last")))
                .groupBy("batch_id").agg(*lateness_aggregates())
                .select("batch_id", *[F.coalesce(F.col(c), F.lit(0)).alias(c) for c in FATES],
                        *lateness_columns()))
    spark_rows = {r.batch_id: {k: v for k, v in r.asDict().items() if k != "batch_id"}
                  for r in expected.collect()}
    assert assigned_batch_lateness(_assigned_table(rows), ranges) == spark_rows
