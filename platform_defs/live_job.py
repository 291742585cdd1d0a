"""The incremental ("live") run the landing sensor launches (``platform_defs.increment``).

It is an op job rather than an asset job because the days it touches are only known after
ingest; it records what it wrote as asset materialisations (one per day for the partitioned
tables, the metrics ones with that day's late-data numbers), so the asset pages show live and
backfilled partitions alike.
"""

from collections.abc import Iterable, Iterator, Mapping

from dagster import (
    AssetCheckEvaluation,
    AssetMaterialization,
    Config,
    DagsterInstance,
    OpExecutionContext,
    job,
    op,
)
from pydantic import Field

from jobs import tables
from jobs.ingest import IngestReport
from jobs.late_detail import DayLateness, late_detail
from jobs.live.increment import run_increment
from jobs.settings import PlatformSettings
from jobs.table_stats import max_column_value
from platform_defs import monitoring
from platform_defs.assets import day_partition_metadata
from platform_defs.partitions import daily_partitions
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.table_specs import table_path_metadata

WINDOWED_TABLES = (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)


def ingest_materializations(settings: PlatformSettings, report: IngestReport
                            ) -> Iterator[AssetMaterialization]:
    if report.batch_id is None:
        return
    for name, metadata in ((tables.ARRIVAL_LOG, {"batch_records": report.records,
                                                 "watermark_ms": report.watermark_ms}),
                           (tables.QUARANTINE, {"batch_quarantined": report.quarantined})):
        yield AssetMaterialization(asset_key=name, metadata={
            **table_path_metadata(settings, name), **metadata, "batch_id": report.batch_id})


def day_materializations(settings: PlatformSettings, metrics: Iterable[dict],
                         detail: Mapping[str, DayLateness] | None = None
                         ) -> Iterator[AssetMaterialization]:
    """One materialisation per windowed table and day, the metrics ones with its numbers (and
    its late records, when ``detail`` has them)."""
    watermark = max_column_value(settings.table_path(tables.ARRIVAL_LOG), "watermark_ms")
    first_partition = daily_partitions.start.date().isoformat()
    for row in metrics:
        day = str(row["window_end_date"])
        if day < first_partition:
            continue  # written, but before the first Dagster partition
        for name in WINDOWED_TABLES:
            metadata = dict(table_path_metadata(settings, name))
            if name == tables.LATE_DATA_METRICS:
                metadata.update(day_partition_metadata(settings, day, row,
                                                       (detail or {}).get(day), watermark))
            yield AssetMaterialization(asset_key=name, partition=day, metadata=metadata)


def day_events(settings: PlatformSettings, metrics: list[dict],
               thresholds: monitoring.MonitoringResource, instance: DagsterInstance,
               detail: Mapping[str, DayLateness] | None = None
               ) -> Iterator[AssetMaterialization | AssetCheckEvaluation]:
    """The days' materialisations, then each day's verdicts: the late-data checks judge live
    days as they judge backfilled ones. Yielded from an op, so each materialisation is stored
    before the verdicts that point at it are made. (An op cannot block its downstream the
    way the asset's blocking checks do; the run logs the failure.)"""
    yield from day_materializations(settings, metrics, detail)
    yield from monitoring.check_evaluations(metrics, thresholds, instance)


class IncrementConfig(Config):
    """Which engine updates the windowed tables after ingest."""

    engine: str = Field(
        default=PlatformSettings.from_env(check=False).live_engine,
        description="live (jobs.live.run_live, Structured Streaming), backfill (recompute the "
                    "affected days) or auto (live when installed); PLATFORM_LIVE_ENGINE")


@op(description="Ingest new landing files, then update the windowed tables for the days "
                "they can change.", out={})
def live_increment(context: OpExecutionContext, config: IncrementConfig,
                   platform: PlatformResource, spark: DeltaSparkResource,
                   monitoring_thresholds: monitoring.MonitoringResource
                   ) -> Iterator[AssetMaterialization | AssetCheckEvaluation]:
    settings = platform.settings()
    session = spark.session()
    step = run_increment(session, settings, progress=context.log.info, engine=config.engine)
    context.log.info(f"increment ({step.engine}): days {step.first_day} .. {step.last_day}")
    detail = (late_detail(session, settings, step.first_day, step.last_day)
              if step.first_day and step.last_day else {})
    yield from ingest_materializations(settings, step.ingest)
    yield from day_events(settings, step.metrics, monitoring_thresholds, context.instance,
                          detail)


@job(description="Incremental run: ingest new landing files and update the windowed tables "
                 "for the days they touch. Launched by the landing sensor.")
def live_job():
    live_increment()
