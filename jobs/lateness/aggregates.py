"""The late-data metrics as Spark aggregates: counts per fate and the exact distributions of
lateness and watermark lag over (record, window) assignments, per day of window end with the
day's quarantined lines.

What the backfill computes with Spark; the live stream's driver computes the same rows without
a Spark job (jobs.lateness.metrics, jobs.lateness.day_tallies), and the tests hold the two
equal. The per-day and the per-micro-batch metrics are these aggregates grouped differently.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.tables.days import day_of_column, ingest_days
from operators.time import MIN_WATERMARK
from operators.window_operator import DROPPED, LATE_WITHIN, ON_TIME_CLASS

LATENESS_COLUMNS = ("lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms", "lateness_max_ms",
                    "watermark_lag_p50_ms", "watermark_lag_max_ms")


def lateness_aggregates() -> list[Column]:
    """Counts per fate and the lateness distribution over (record, window) assignments
    (``_class``, times); the per-day and the per-micro-batch metrics are both these, grouped
    differently.

    Lateness (watermark at arrival minus event time) is measured over the *late* assignments
    only (late within lateness and dropped): over all of them the on-time majority, most
    with no lateness at all, made every percentile 0 and the plots flat."""
    w = F.col("watermark_ms")
    known = w != MIN_WATERMARK
    late = known & (F.col("_class") != ON_TIME_CLASS)
    lateness = F.when(late, F.greatest(F.lit(0), w - F.col("event_time_ms")))
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
    """The aggregates above, finished: exact percentiles rounded to µs-of-a-ms for display
    (0 on a day without late records)."""
    return [
        *[F.round(F.coalesce(F.col("_lateness")[i], F.lit(0.0)), 3).alias(name)
          for i, name in enumerate(LATENESS_COLUMNS[:3])],
        F.coalesce(F.col("lateness_max_ms"), F.lit(0).cast("long")).alias("lateness_max_ms"),
        F.round("_lag_p50", 3).alias("watermark_lag_p50_ms"),
        F.col("watermark_lag_max_ms"),
    ]


QUARANTINE_INGEST = "quarantine.ingest_time_ms"
"""The key of the quarantine's ``(min, max)`` ingest time among a backfill's log ranges."""


def quarantine_days(quarantine: DataFrame | None, time_zone: str,
                    ranges: dict[str, tuple] | None = None) -> tuple[str, str] | None:
    """The first and last ingest day of the quarantined lines (``None``: none). A day gets
    metrics when its windows had records or lines were quarantined on it, so a full backfill
    covers these days too, windows or not, as the live job does. From
    ``ranges[QUARANTINE_INGEST]`` (Delta's file statistics) when there, else one Spark job."""
    if quarantine is None:
        return None
    if ranges is not None and QUARANTINE_INGEST in ranges:
        span = ranges[QUARANTINE_INGEST]
    else:
        row = quarantine.agg(F.min("ingest_time_ms"), F.max("ingest_time_ms")).first()
        span = (row[0], row[1])
    return ingest_days(span, time_zone)


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
