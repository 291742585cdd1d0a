"""One incremental step, as the landing sensor's run and its Pipes variant take it: ingest a
stream's new landing files, then bring its pipelines' tables up to date for what they changed.

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
from jobs.config.registry import Pipeline, platform_of
from jobs.config.streams import Stream
from jobs.live.catch_up import run_live
from jobs.live.queries import LiveReport
from jobs.store.delta_io import read_table_or_none
from jobs.streams.ingestors import ingest
from jobs.streams.report import IngestReport
from jobs.tables.days import day_of
from operators.time import MIN_WATERMARK

ENGINES = ("auto", "live", "backfill")


@dataclass
class PipelineDays:
    """What an increment wrote for one pipeline version: the days and their late-data
    metrics."""

    pipeline: Pipeline
    first_day: str | None = None
    last_day: str | None = None
    metrics: list[dict] = field(default_factory=list)
    """Late-data metrics rows of the days written, one dict per day."""


@dataclass
class Increment:
    ingest: IngestReport
    engine: str
    """``backfill`` (affected days recomputed) or ``live`` (``jobs.live.run_live``)."""
    pipelines: dict[str, PipelineDays] = field(default_factory=dict)
    """Per pipeline version written (``name@version``)."""
    live_report: LiveReport | None = None

    @property
    def first_day(self) -> str | None:
        return min((d.first_day for d in self.pipelines.values() if d.first_day), default=None)

    @property
    def last_day(self) -> str | None:
        return max((d.last_day for d in self.pipelines.values() if d.last_day), default=None)


def log_watermark(spark: SparkSession, stream: Stream) -> int | None:
    """``max(watermark_ms)`` of the stream's arrival log (``None`` before the first ingest)."""
    log = read_table_or_none(spark, stream.arrival_log)
    return None if log is None else log.agg(F.max("watermark_ms")).first()[0]


def first_affected_day(spark: SparkSession, pipeline: Pipeline, batch_ids: tuple[int, int],
                       previous_watermark: int | None) -> dt.date | None:
    """The earliest window-end day the ingest batches ``batch_ids`` (the first and the last)
    can have changed in the pipeline's tables.

    A new record changes the windows it falls in, whose end day is at or after the day of its
    event time. The watermark it moves can fire the on-time and closing panes of windows of
    older records, whose cleanup time lies after the previous watermark, so their end day is
    at or after ``day(previous watermark - allowed lateness)``. A quarantined line counts
    toward the day of its ingest time."""
    candidates: list[int] = []
    for name, column in ((tables.ARRIVAL_LOG, "event_time_ms"),
                         (tables.QUARANTINE, "ingest_time_ms")):
        table = read_table_or_none(spark, pipeline.table_path(name))
        if table is not None:
            low = (table.where(F.col("ingest_batch").between(*batch_ids))
                   .agg(F.min(column)).first()[0])
            if low is not None:
                candidates.append(low)
    if previous_watermark is not None and previous_watermark != MIN_WATERMARK:
        candidates.append(previous_watermark - pipeline.spec.allowed_lateness_ms)
    return day_of(min(candidates), pipeline.time_zone) if candidates else None


def _metrics_rows(spark: SparkSession, pipeline: Pipeline, days: tuple[str, str] | None
                  ) -> list[dict]:
    metrics = read_table_or_none(spark, pipeline.table_path(tables.LATE_DATA_METRICS))
    if metrics is None or days is None:
        return []
    return [row.asDict() for row in metrics.where(F.col("window_end_date").between(*days))
            .orderBy("window_end_date").collect()]


def run_increment(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None = None,
                  progress: Callable[[str], None] = print, engine: str = "auto") -> Increment:
    """Ingest the stream, then update its pipelines' tables (default: every pipeline that
    reads it); returns what was written."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if pipelines is None:
        pipelines = platform_of(stream.settings).pipelines_of(stream.name)
    previous = log_watermark(spark, stream)
    report = ingest(spark, stream, progress=progress)
    if engine in ("auto", "live"):
        if read_table_or_none(spark, stream.arrival_log) is None:
            progress("no arrival log yet: nothing to update")
            return Increment(report, "live")
        live = run_live(spark, stream, pipelines, progress=progress)
        days = {key: PipelineDays(live.versions[key], *span,
                                  _metrics_rows(spark, live.versions[key], span))
                for key, span in live.days.items()}
        return Increment(report, "live", days, live)
    if report.batch_id is None:
        progress("no new landing files: nothing to do")
        return Increment(report, "backfill")
    written = {}
    for pipeline in pipelines:
        first = first_affected_day(spark, pipeline, report.batch_ids, previous)
        if first is None:
            continue
        windows = run_backfill(spark, pipeline, first.isoformat(), None, progress=progress)
        written[f"{pipeline.name}@{pipeline.version}"] = PipelineDays(
            pipeline, windows.first_day, windows.last_day, windows.metrics)
    return Increment(report, "backfill", written)


__all__ = ["ENGINES", "Increment", "PipelineDays", "first_affected_day", "log_watermark",
           "run_increment"]
