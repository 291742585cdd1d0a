"""The incremental ("live") run the landing sensor launches (``platform_defs.increment``).

It is an op job rather than an asset job because the days it touches are only known after
ingest; it records what it wrote as asset materialisations (one per day for the partitioned
tables, the metrics ones with that day's late-data numbers), so the asset pages show live and
backfilled partitions alike.
"""

from collections.abc import Iterable, Iterator

from dagster import AssetMaterialization, Config, OpExecutionContext, job, op
from pydantic import Field

from jobs import tables
from jobs.days import final_flag
from jobs.ingest import IngestReport
from jobs.live.increment import run_increment
from jobs.settings import PlatformSettings
from jobs.table_stats import max_column_value
from platform_defs import monitoring
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


def day_materializations(settings: PlatformSettings, metrics: Iterable[dict]
                         ) -> Iterator[AssetMaterialization]:
    """One materialisation per windowed table and day, the metrics ones with its numbers."""
    watermark = max_column_value(settings.table_path(tables.ARRIVAL_LOG), "watermark_ms")
    first_partition = daily_partitions.start.date().isoformat()
    for row in metrics:
        day = str(row["window_end_date"])
        if day < first_partition:
            continue  # written, but before the first Dagster partition
        for name in WINDOWED_TABLES:
            metadata = dict(table_path_metadata(settings, name))
            if name == tables.LATE_DATA_METRICS:
                metadata.update(monitoring.day_metadata(row))
                metadata["final"] = final_flag(day, watermark,
                                               settings.pipeline.allowed_lateness_ms,
                                               settings.time_zone)
            yield AssetMaterialization(asset_key=name, partition=day, metadata=metadata)


class IncrementConfig(Config):
    """Which engine updates the windowed tables after ingest."""

    engine: str = Field(
        default=PlatformSettings.from_env(check=False).live_engine,
        description="live (jobs.live.run_live, Structured Streaming), backfill (recompute the "
                    "affected days) or auto (live when installed); PLATFORM_LIVE_ENGINE")


@op(description="Ingest new landing files, then update the windowed tables for the days "
                "they can change.")
def live_increment(context: OpExecutionContext, config: IncrementConfig,
                   platform: PlatformResource, spark: DeltaSparkResource,
                   monitoring_thresholds: monitoring.MonitoringResource) -> None:
    settings = platform.settings()
    step = run_increment(spark.session(), settings, progress=context.log.info,
                         engine=config.engine)
    context.log.info(f"increment ({step.engine}): days {step.first_day} .. {step.last_day}")
    for event in ingest_materializations(settings, step.ingest):
        context.log_event(event)
    for event in day_materializations(settings, step.metrics):
        context.log_event(event)
    if step.metrics:  # the late-data checks judge live days as they judge backfilled ones
        for evaluation in monitoring.check_evaluations(step.metrics, monitoring_thresholds):
            context.log_event(evaluation)


@job(description="Incremental run: ingest new landing files and update the windowed tables "
                 "for the days they touch. Launched by the landing sensor.")
def live_job():
    live_increment()
