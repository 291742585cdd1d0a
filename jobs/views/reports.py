"""What the tables hold, for people: the day range a log reaches, and each table's row count.

Read by the demo's summary and by anything else that reports on the warehouse, so the Dagster
layer needs no Spark query of its own.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.store.delta_io import read_table_or_none
from jobs.tables.days import window_end_date


def log_day_range(spark: SparkSession, pipeline: Pipeline) -> tuple[str, str] | None:
    """First and last day of the pipeline's window ends its stream's events reach, in the
    configured time zone (``None`` for an empty log).

    For tumbling and sliding windows the last day is exact: the day of the last window that
    holds the latest event (an over-estimate would name a trailing day with no window, and
    that empty day would become the metrics' latest materialisation, all zeros). A session
    may end a gap after its last event; a dynamic gap's span is unknown, so a day is allowed."""
    log = read_table_or_none(spark, pipeline.table_path(tables.ARRIVAL_LOG))
    if log is None:
        return None
    window = pipeline.spec.window
    if window is None:  # a process function: its rows fall on the days of the events
        first, last = log.agg(
            F.date_format(window_end_date(F.min("event_time_ms") + 1, pipeline.time_zone),
                          "yyyy-MM-dd"),
            F.date_format(window_end_date(F.max("event_time_ms") + 1, pipeline.time_zone),
                          "yyyy-MM-dd")).first()
        return None if first is None else (first, last)
    latest = F.max("event_time_ms")
    if window.type in ("tumbling", "sliding"):
        slide = window.slide_ms if window.type == "sliding" else window.size_ms
        last_end = (latest - F.pmod(latest - F.lit(window.offset_ms), F.lit(slide))
                    + F.lit(window.size_ms))
    else:
        last_end = latest + F.lit(window.gap_ms or 86_400_000)
    first, last = log.agg(
        F.date_format(window_end_date(F.min("event_time_ms") + 1, pipeline.time_zone),
                      "yyyy-MM-dd"),
        F.date_format(window_end_date(last_end, pipeline.time_zone), "yyyy-MM-dd")).first()
    return None if first is None else (first, last)


def table_counts(spark: SparkSession, paths: dict[str, str]) -> dict[str, int | None]:
    """Rows per table, by name -> location (``None``: not written yet)."""
    counts: dict[str, int | None] = {}
    for name, path in paths.items():
        table = read_table_or_none(spark, path)
        counts[name] = None if table is None else table.count()
    return counts


def metric_totals(spark: SparkSession, pipeline: Pipeline) -> dict[str, int]:
    """On time, late within lateness, dropped and quarantined over every day."""
    names = ("on_time", "late_within_lateness", "dropped_late", "quarantined")
    metrics = read_table_or_none(spark, pipeline.table_path(tables.LATE_DATA_METRICS))
    if metrics is None:
        return dict.fromkeys(names, 0)
    row = metrics.agg(*[F.sum(n).alias(n) for n in names]).first()
    return {n: int(row[n] or 0) for n in names}
