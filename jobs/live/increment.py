"""One incremental step, as the landing sensor's run and its Pipes variant take it: ingest the
new landing files, then bring the windowed tables up to date for what they changed.

Two engines give the same rows (the determinism promise): ``live`` runs the live stream over
what is new in the arrival log (``jobs.live.run_live``, available now, from its checkpoint);
``backfill`` recomputes the days the new records can have changed (:func:`first_affected_day`
on). ``auto`` is ``live``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.backfill import run_backfill
from jobs.days import day_of
from jobs.delta_io import read_table_or_none
from jobs.ingest import IngestReport, ingest
from jobs.live.stream import LiveReport, run_live
from jobs.settings import PlatformSettings
from operators.time import MIN_WATERMARK

ENGINES = ("auto", "live", "backfill")


@dataclass
class Increment:
    ingest: IngestReport
    engine: str
    """``backfill`` (affected days recomputed) or ``live`` (``jobs.live.run_live``)."""
    first_day: str | None = None
    last_day: str | None = None
    metrics: list[dict] = field(default_factory=list)
    """Late-data metrics rows of the days written, one dict per day."""
    live_report: LiveReport | None = None


def log_watermark(spark: SparkSession, settings: PlatformSettings) -> int | None:
    """``max(watermark_ms)`` of the arrival log (``None`` before the first ingest)."""
    log = read_table_or_none(spark, settings.table_path(tables.ARRIVAL_LOG))
    return None if log is None else log.agg(F.max("watermark_ms")).first()[0]


def first_affected_day(spark: SparkSession, settings: PlatformSettings, batch_id: int,
                       previous_watermark: int | None) -> dt.date | None:
    """The earliest window-end day ingest batch ``batch_id`` can have changed.

    A new record changes the windows it falls in, whose end day is at or after the day of its
    event time. The watermark it moves can fire the on-time and closing panes of windows of
    older records, whose cleanup time lies after the previous watermark, so their end day is
    at or after ``day(previous watermark - allowed lateness)``. A quarantined line counts
    toward the day of its ingest time."""
    candidates: list[int] = []
    for name, column in ((tables.ARRIVAL_LOG, "event_time_ms"),
                         (tables.QUARANTINE, "ingest_time_ms")):
        table = read_table_or_none(spark, settings.table_path(name))
        if table is not None:
            low = table.where(F.col("ingest_batch") == batch_id).agg(F.min(column)).first()[0]
            if low is not None:
                candidates.append(low)
    if previous_watermark is not None and previous_watermark != MIN_WATERMARK:
        candidates.append(previous_watermark - settings.pipeline.allowed_lateness_ms)
    return day_of(min(candidates), settings.time_zone) if candidates else None


def _metrics_rows(spark: SparkSession, settings: PlatformSettings, days: tuple[str, str] | None
                  ) -> list[dict]:
    metrics = read_table_or_none(spark, settings.table_path(tables.LATE_DATA_METRICS))
    if metrics is None or days is None:
        return []
    return [row.asDict() for row in metrics.where(F.col("window_end_date").between(*days))
            .orderBy("window_end_date").collect()]


def run_increment(spark: SparkSession, settings: PlatformSettings,
                  progress: Callable[[str], None] = print, engine: str = "auto") -> Increment:
    """Ingest, then update the windowed tables; returns what was written."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    previous = log_watermark(spark, settings)
    report = ingest(spark, settings, progress=progress)
    if engine in ("auto", "live"):
        if read_table_or_none(spark, settings.table_path(tables.ARRIVAL_LOG)) is None:
            progress("no arrival log yet: nothing to update")
            return Increment(report, "live")
        live = run_live(spark, settings, progress=progress)
        return Increment(report, "live", *(live_days(live) or (None, None)),
                         _metrics_rows(spark, settings, live_days(live)), live)
    if report.batch_id is None:
        progress("no new landing files: nothing to do")
        return Increment(report, "backfill")
    first = first_affected_day(spark, settings, report.batch_id, previous)
    if first is None:
        return Increment(report, "backfill")
    windows = run_backfill(spark, settings, first.isoformat(), None, progress=progress)
    return Increment(report, "backfill", windows.first_day, windows.last_day, windows.metrics)


def live_days(report: LiveReport) -> tuple[str, str] | None:
    """The days whose metrics the live run refreshed."""
    return report.days


__all__ = ["ENGINES", "Increment", "first_affected_day", "log_watermark", "run_increment"]
