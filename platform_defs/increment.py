"""One incremental step of the platform, shared by the in-process live job and the Pipes
subprocess: ingest the new landing files, then bring the windowed tables up to date for the
days the new data can have changed.

When the streaming runtime (``jobs.live.run_live``) is installed it does the second part over
the arrival log with Structured Streaming; until then the vectorised backfill recomputes the
affected days, which gives the same rows (the determinism promise).
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.delta_io import read_table_or_none
from jobs.ingest import IngestReport, ingest
from jobs.settings import PlatformSettings
from jobs.windowed import run_backfill
from platform_defs.affected_days import first_affected_day, log_watermark


@dataclass
class Increment:
    ingest: IngestReport
    engine: str
    """``backfill`` (affected days recomputed) or ``live`` (``jobs.live.run_live``)."""
    first_day: str | None = None
    last_day: str | None = None
    metrics: list[dict] = field(default_factory=list)
    """Late-data metrics rows of the days written, one dict per day."""
    live_report: object | None = None


ENGINES = ("auto", "live", "backfill")


def _live_runner(engine: str) -> Callable | None:
    """``jobs.live.run_live`` for ``live`` (required) and ``auto`` (when installed)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine == "backfill":
        return None
    try:
        from jobs.live import run_live
    except ImportError:
        if engine == "live":
            raise
        return None
    return run_live


def _metrics_rows(spark: SparkSession, settings: PlatformSettings, first_day: str | None
                  ) -> list[dict]:
    metrics = read_table_or_none(spark, settings.table_path(tables.LATE_DATA_METRICS))
    if metrics is None:
        return []
    if first_day is not None:
        metrics = metrics.where(F.col("window_end_date") >= first_day)
    return [row.asDict() for row in metrics.orderBy("window_end_date").collect()]


def run_increment(spark: SparkSession, settings: PlatformSettings,
                  progress: Callable[[str], None] = print, engine: str = "auto") -> Increment:
    """Ingest, then update the windowed tables; returns what was written.

    ``engine``: ``live`` runs the streaming runtime (``jobs.live.run_live``, available-now
    trigger), ``backfill`` recomputes the affected days, ``auto`` is ``live`` when installed."""
    previous = log_watermark(spark, settings)
    report = ingest(spark, settings, progress=progress)
    run_live = _live_runner(engine)
    if report.batch_id is None and run_live is None:
        progress("no new landing files: nothing to do")
        return Increment(report, "backfill")
    first = (first_affected_day(spark, settings, report.batch_id, previous)
             if report.batch_id is not None else None)
    first_day = first.isoformat() if first else None
    if run_live is not None:
        live = run_live(spark, settings, progress=progress)  # available-now by default
        rows = _metrics_rows(spark, settings, first_day)
        return Increment(report, "live", first_day, None, rows, live)
    if first_day is None:
        return Increment(report, "backfill")
    windows = run_backfill(spark, settings, first_day, None, progress=progress)
    return Increment(report, "backfill", windows.first_day, windows.last_day, windows.metrics)
