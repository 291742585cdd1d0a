"""The windowed tables' shapes and the late-data metrics, shared by every runtime.

Whatever computed them (the vectorised backfill, the operator library per key, the live
stream), panes, late records and (record, window) fates become rows of the same tables through
these functions, and the per-day and per-micro-batch metrics are the same aggregates grouped
differently. That is half of what makes a backfill equal the live stream: there is only one
definition of each table.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import tables
from jobs.days import day_of_column, window_end_date
from operators.time import MIN_WATERMARK
from operators.window_operator import DROPPED, LATE_WITHIN, ON_TIME_CLASS


@dataclass
class WindowOutputs:
    """What a computation of a range of days gives: the three tables' rows for the days
    ``[first_day, last_day]`` and the (record, window) rows they derive from."""

    results: DataFrame
    late: DataFrame
    metrics: DataFrame
    first_day: str
    last_day: str
    assigned: DataFrame
    persisted: DataFrame | None = None
    """What the outputs were computed from, if it was persisted; see :meth:`release`."""

    @property
    def keeps_assignments(self) -> bool:
        """True when ``assigned`` is the ``window_assignments`` table's content: the operator
        decided each record's window, so metrics must be kept as a table rather than
        recomputed from the log."""
        return self.persisted is not None

    def release(self) -> None:
        if self.persisted is not None:
            self.persisted.unpersist()


# -- row shapes ---------------------------------------------------------------------------------


def pane_results(panes: DataFrame, aggregate_names: list[str], time_zone: str) -> DataFrame:
    """Pane rows (``key``, window bounds, pane fields, ``agg_<name>`` values) in the results
    table's shape (the caller keeps the latest pane)."""
    return (panes.withColumn("window_start", F.timestamp_millis("window_start_ms"))
            .withColumn("window_end", F.timestamp_millis("window_end_ms"))
            .withColumn("window_end_date", window_end_date(F.col("window_end_ms"), time_zone))
            .select("key", "window_start_ms", "window_end_ms", "window_start", "window_end",
                    "window_end_date", *tables.PANE_COLUMNS,
                    *[F.col(f"agg_{name}").alias(name) for name in aggregate_names]))


def late_rows(late: DataFrame, time_zone: str) -> DataFrame:
    """Late rows in the late-records table's shape."""
    return (late.withColumn("event_time", F.timestamp_millis("event_time_ms"))
            .withColumn("window_end_date", window_end_date(F.col("window_end_ms"), time_zone))
            .select(*tables.LATE_RECORDS_SCHEMA.fieldNames()))


def assignment_rows(emitted: DataFrame, time_zone: str) -> DataFrame:
    """Assign and late rows of a runtime's output in the ``window_assignments`` table's shape
    (late rows are the dropped assignments)."""
    fate = F.when(F.col("kind") == "late", F.lit(DROPPED)).otherwise(F.col("fate"))
    return (emitted.where(F.col("kind").isin("assign", "late"))
            .withColumn("fate", fate)
            .withColumn("window_end_date", window_end_date(F.col("window_end_ms"), time_zone))
            .select(*tables.WINDOW_ASSIGNMENTS_SCHEMA.fieldNames()))


# -- late-data metrics --------------------------------------------------------------------------

LATENESS_COLUMNS = ("lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms", "lateness_max_ms",
                    "watermark_lag_p50_ms", "watermark_lag_max_ms")


def lateness_aggregates() -> list[Column]:
    """Counts per fate and the lateness distribution over (record, window) assignments
    (``_class``, times); the per-day and the per-micro-batch metrics are both these, grouped
    differently."""
    w = F.col("watermark_ms")
    known = w != MIN_WATERMARK
    lateness = F.when(known, F.greatest(F.lit(0), w - F.col("event_time_ms"))).otherwise(0)
    lag = F.when(known, F.col("ingest_time_ms") - w)

    def count(kind: str) -> Column:
        return F.sum(F.when(F.col("_class") == kind, 1).otherwise(0)).cast("long")

    return [
        count(ON_TIME_CLASS).alias("on_time"),
        count(LATE_WITHIN).alias("late_within_lateness"),
        count(DROPPED).alias("dropped_late"),
        F.percentile(lateness, [0.5, 0.95, 0.99]).alias("_lateness"),
        F.max(lateness).cast("long").alias("lateness_max_ms"),
        F.percentile(lag, 0.5).alias("_lag_p50"),
        F.max(lag).cast("long").alias("watermark_lag_max_ms"),
    ]


def lateness_columns() -> list[Column]:
    """The aggregates above, finished: exact percentiles rounded to µs-of-a-ms for display."""
    return [
        *[F.round(F.col("_lateness")[i], 3).alias(name) for i, name in
          enumerate(LATENESS_COLUMNS[:3])],
        F.col("lateness_max_ms"),
        F.round("_lag_p50", 3).alias("watermark_lag_p50_ms"),
        F.col("watermark_lag_max_ms"),
    ]


def quarantined_per_day(quarantine: DataFrame, time_zone: str, first_day: str,
                        last_day: str) -> DataFrame:
    """Quarantined lines per day of their ingest time (``window_end_date`` for the join)."""
    return (quarantine.withColumn("window_end_date",
                                  day_of_column(F.col("ingest_time_ms"), time_zone))
            .where(F.col("window_end_date").between(first_day, last_day))
            .groupBy("window_end_date").agg(F.count(F.lit(1)).alias("quarantined")))


def day_metrics(assigned: DataFrame, quarantine: DataFrame | None, time_zone: str,
                first_day: str, last_day: str) -> DataFrame:
    """Per day of window end: the fates of the (record, window) rows in ``assigned``
    (``_class``, ``window_end_date``, times) and the quarantined records of the day."""
    per_day = assigned.groupBy("window_end_date").agg(*lateness_aggregates())
    if quarantine is not None:
        per_day = per_day.join(quarantined_per_day(quarantine, time_zone, first_day, last_day),
                               "window_end_date", "full_outer")
    else:
        per_day = per_day.withColumn("quarantined", F.lit(0).cast("long"))
    return per_day.select(
        "window_end_date",
        *[F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c)
          for c in ("on_time", "late_within_lateness", "dropped_late", "quarantined")],
        *lateness_columns(),
    )
