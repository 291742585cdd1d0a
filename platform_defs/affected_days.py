"""Which output days an ingest batch can change, so an incremental run recomputes only those.

A new record changes the windows it falls in, whose end day is at or after the day of its
event time. The watermark it moves can fire the on-time and closing panes of windows of older
records, whose cleanup time lies after the previous watermark, so their end day is at or after
``day(previous watermark - allowed lateness)``. A quarantined line counts toward the day of its
ingest time. Everything from the earliest of these days on is recomputed.
"""

from datetime import date, datetime
from zoneinfo import ZoneInfo

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.delta_io import read_table_or_none
from jobs.settings import PlatformSettings
from operators.time import MIN_WATERMARK


def day_of(ms: int, time_zone: str) -> date:
    return datetime.fromtimestamp(ms / 1000, tz=ZoneInfo(time_zone)).date()


def log_watermark(spark: SparkSession, settings: PlatformSettings) -> int | None:
    """``max(watermark_ms)`` of the arrival log (``None`` before the first ingest)."""
    log = read_table_or_none(spark, settings.table_path(tables.ARRIVAL_LOG))
    return None if log is None else log.agg(F.max("watermark_ms")).first()[0]


def first_affected_day(spark: SparkSession, settings: PlatformSettings, batch_id: int,
                       previous_watermark: int | None) -> date | None:
    """The earliest window-end day ingest batch ``batch_id`` can have changed."""
    candidates: list[int] = []
    log = read_table_or_none(spark, settings.table_path(tables.ARRIVAL_LOG))
    if log is not None:
        low = log.where(F.col("ingest_batch") == batch_id).agg(F.min("event_time_ms")).first()[0]
        if low is not None:
            candidates.append(low)
    quarantine = read_table_or_none(spark, settings.table_path(tables.QUARANTINE))
    if quarantine is not None:
        low = (quarantine.where(F.col("ingest_batch") == batch_id)
               .agg(F.min("ingest_time_ms")).first()[0])
        if low is not None:
            candidates.append(low)
    if previous_watermark is not None and previous_watermark != MIN_WATERMARK:
        candidates.append(previous_watermark - settings.pipeline.allowed_lateness_ms)
    return day_of(min(candidates), settings.time_zone) if candidates else None
