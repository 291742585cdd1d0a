"""The late records of a range of days, as a person looks at them: how late (a histogram) and
which ones (a sample).

The late-data metrics table holds the counts and percentiles the checks judge; an operator who
sees a bad day wants next the shape of its lateness and a few of its late records, with the
window each one missed. Both come from the same (record, window) classification the metrics
are computed from (``jobs.windows.vectorised.classify`` for standard windows, the
``window_assignments`` table otherwise), so the histogram adds up to the day's late counts.
Only the late assignments are read, and only small results reach the driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.store.delta_io import read_table_or_none
from jobs.tables.days import could_reach
from operators.time import MIN_WATERMARK
from operators.window_operator import DROPPED, ON_TIME_CLASS

LATENESS_BUCKETS: tuple[tuple[str, int], ...] = (
    ("< 1 s", 1_000),
    ("1-10 s", 10_000),
    ("10 s-1 min", 60_000),
    ("1-10 min", 600_000),
    ("10 min-1 h", 3_600_000),
    ("1-6 h", 21_600_000),
)
"""Upper bounds (exclusive, ms) of the histogram's buckets, log-spaced like lateness itself
(most late records are seconds late, a few are hours late); the last bucket is open."""
OPEN_BUCKET = "≥ 6 h"
SAMPLE_SIZE = 10


@dataclass
class DayLateness:
    """One day's late records: counts per lateness bucket and fate, and the latest ones."""

    histogram: list[tuple[str, int, int]] = field(default_factory=list)
    """``(bucket, late within lateness, dropped)`` for every bucket, in order."""
    sample: list[dict] = field(default_factory=list)
    """Up to ``SAMPLE_SIZE`` late assignments, the latest first: key, arrival_seq, event,
    ingest and watermark times (ms), the window (ms) and the fate."""

    @property
    def late(self) -> int:
        return sum(within + dropped for _, within, dropped in self.histogram)


def bucket_labels() -> list[str]:
    return [label for label, _ in LATENESS_BUCKETS] + [OPEN_BUCKET]


def bucket_of(lateness_ms: int) -> str:
    """The histogram bucket of one lateness (the Python twin of :func:`_bucket_column`)."""
    for label, upper in LATENESS_BUCKETS:
        if lateness_ms < upper:
            return label
    return OPEN_BUCKET


def _bucket_column(lateness: Column) -> Column:
    column = F.lit(OPEN_BUCKET)
    for label, upper in reversed(LATENESS_BUCKETS):
        column = F.when(lateness < upper, F.lit(label)).otherwise(column)
    return column


def histograms(counts: Iterable[Mapping]) -> dict[str, list[tuple[str, int, int]]]:
    """Rows of ``(window_end_date, bucket, _class, n)`` as a full histogram per day (every
    bucket present, empty ones as zeros, so days compare at a glance)."""
    per_day: dict[str, dict[str, list[int]]] = {}
    for row in counts:
        day = per_day.setdefault(str(row["window_end_date"]),
                                 {label: [0, 0] for label in bucket_labels()})
        slot = 1 if row["_class"] == DROPPED else 0
        day[str(row["bucket"])][slot] += int(row["n"])
    return {day: [(label, *buckets[label]) for label in bucket_labels()]
            for day, buckets in per_day.items()}


def late_assignments(spark: SparkSession, pipeline: Pipeline, first_day: str,
                     last_day: str) -> DataFrame | None:
    """The late (record, window) rows whose window ends within ``[first_day, last_day]``, with
    ``lateness_ms``; ``None`` before anything was ingested."""
    spec = pipeline.spec
    if spec.is_standard_window:
        from jobs.windows.vectorised import classify

        log = read_table_or_none(spark, pipeline.table_path(tables.ARRIVAL_LOG))
        if log is None:
            return None
        assigned = classify(log.where(could_reach(first_day, last_day, spec.window)), spec,
                            pipeline.time_zone)
    else:
        assigned = read_table_or_none(spark, pipeline.table_path(tables.WINDOW_ASSIGNMENTS))
        if assigned is None:
            return None
        assigned = assigned.withColumnRenamed("fate", "_class")
    w = F.col("watermark_ms")
    return (assigned
            .where(F.col("window_end_date").between(first_day, last_day)
                   & (F.col("_class") != ON_TIME_CLASS) & (w != MIN_WATERMARK))
            .withColumn("lateness_ms", F.greatest(F.lit(0), w - F.col("event_time_ms"))))


def late_detail(spark: SparkSession, pipeline: Pipeline, first_day: str,
                last_day: str, sample_size: int = SAMPLE_SIZE) -> dict[str, DayLateness]:
    """Per day with late records: its lateness histogram and a sample of its latest late
    records (two small Spark jobs over the range)."""
    late = late_assignments(spark, pipeline, first_day, last_day)
    if late is None:
        return {}
    late = late.select("window_end_date", "_class", "key", "arrival_seq", "event_time_ms",
                       "ingest_time_ms", "watermark_ms", "window_start_ms", "window_end_ms",
                       "lateness_ms").persist()
    try:
        counts = (late.groupBy(F.date_format("window_end_date", "yyyy-MM-dd")
                               .alias("window_end_date"),
                               _bucket_column(F.col("lateness_ms")).alias("bucket"), "_class")
                  .agg(F.count(F.lit(1)).alias("n")).collect())
        order = Window.partitionBy("window_end_date").orderBy(F.col("lateness_ms").desc(),
                                                              F.col("arrival_seq"))
        sample = (late.withColumn("_rank", F.row_number().over(order))
                  .where(F.col("_rank") <= sample_size)
                  .withColumn("window_end_date", F.date_format("window_end_date", "yyyy-MM-dd"))
                  .orderBy("window_end_date", "_rank").drop("_rank").collect())
    finally:
        late.unpersist()
    detail = {day: DayLateness(histogram=rows) for day, rows in histograms(
        r.asDict() for r in counts).items()}
    for row in sample:
        record = row.asDict()
        day = record.pop("window_end_date")
        record["fate"] = record.pop("_class")  # late_within_lateness or dropped_late
        detail.setdefault(day, DayLateness()).sample.append(record)
    return detail
