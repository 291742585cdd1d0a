"""A pipeline's assets: its windowed tables, in a group named after it.

Lineage reads as the data flows: the stream's arrival log + quarantine -> the pipeline's
windowed results, late records and late-data metrics (daily partitions by window end), keys
``<pipeline>/<table>``. The windowed assets run a whole partition range as one Spark job
(``BackfillPolicy.single_run``), and still record one materialisation per day, each with that
day's late-data numbers, so the UI plots them per partition; three partitioned checks judge
each day.
"""


from collections.abc import Iterator
from datetime import date, timedelta

from dagster import (
    AssetCheckEvaluation,
    AssetExecutionContext,
    AssetSpec,
    BackfillPolicy,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    Output,
    define_asset_job,
    multi_asset,
)
from pyspark.sql import SparkSession

from jobs import tables
from jobs.backfill import BackfillReport, run_backfill
from jobs.config.registry import Pipeline
from jobs.lifecycle import versions
from jobs.store.table_stats import max_column_value
from jobs.tables.days import check_partition_range, day_end_ms, final_flag
from jobs.views.late_detail import DayLateness, late_detail
from platform_defs import monitoring
from platform_defs.late_data_views import finality_text, human_duration
from platform_defs.partitions import daily_partitions
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.schemas import results_schema
from platform_defs.table_specs import (
    DELTA_KINDS,
    OWNERS,
    pipeline_key,
    spec_metadata,
    stream_key,
    table_path_metadata,
)
from platform_defs.version_views import results_versions_metadata, version_metadata

WINDOWED_TABLES = (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)
RESULTS_FRESHNESS = FreshnessPolicy.time_window(fail_window=timedelta(hours=26),
                                                warn_window=timedelta(hours=2))
"""Results should be refreshed at least every couple of hours (the landing sensor and the
finality schedule do that); a day without a refresh means the platform has stopped."""


def windowed_job_name(pipeline: Pipeline | str) -> str:
    return f"{pipeline if isinstance(pipeline, str) else pipeline.name}_windowed_job"


def partition_range(context: AssetExecutionContext) -> tuple[str, str]:
    """First and last day of the run's partitions (one day, or a single-run backfill range);
    an empty or reversed range fails here, before Spark, as the command line does."""
    keys = context.partition_key_range
    return check_partition_range(keys.start, keys.end, daily_partitions.start.date().isoformat())


def day_partition_metadata(pipeline: Pipeline, day: str, row: dict,
                           detail: DayLateness | None, watermark: int | None) -> dict:
    """A day's metadata: its late-data figures, and whether it is final yet."""
    lateness = pipeline.spec.allowed_lateness_ms
    final = final_flag(day, watermark, lateness, pipeline.time_zone)
    final_at = day_end_ms(date.fromisoformat(day), pipeline.time_zone) - 1 + lateness
    return {**monitoring.day_metadata(row, detail), "final": final,
            "finality": finality_text(final, final_at), **version_metadata(pipeline)}


def windowed_results(context: AssetExecutionContext, pipeline: Pipeline,
                     report: BackfillReport, thresholds: monitoring.MonitoringResource,
                     spark: SparkSession
                     ) -> Iterator[MaterializeResult | AssetCheckEvaluation | Output]:
    """Per-day metadata for every targeted partition, range metadata, then each day's
    verdicts (partitioned checks, once the days' materialisations are recorded)."""
    metrics_key = pipeline_key(pipeline, tables.LATE_DATA_METRICS)
    rows = {str(m["window_end_date"]): m for m in report.metrics}
    rows = {day: rows.get(day) or {"window_end_date": day} for day in context.partition_keys}
    detail = late_detail(spark, pipeline, report.first_day, report.last_day)
    watermark = max_column_value(pipeline.stream.arrival_log, "watermark_ms")
    for day, row in rows.items():
        context.add_asset_metadata(
            day_partition_metadata(pipeline, day, row, detail.get(day), watermark),
            asset_key=metrics_key, partition_key=day)
    summary = monitoring.summarise(report.metrics)
    about_versions = version_metadata(pipeline)
    yield MaterializeResult(asset_key=pipeline_key(pipeline, tables.WINDOW_RESULTS), metadata={
        **table_path_metadata(pipeline.table_path(tables.WINDOW_RESULTS)),
        "range_rows": report.results, "first_day": report.first_day,
        "last_day": report.last_day, **about_versions,
        **results_versions_metadata(pipeline)})
    yield MaterializeResult(asset_key=pipeline_key(pipeline, tables.LATE_RECORDS), metadata={
        **table_path_metadata(pipeline.table_path(tables.LATE_RECORDS)),
        "range_rows": report.late, **about_versions})
    yield MaterializeResult(asset_key=metrics_key, metadata={
        **table_path_metadata(pipeline.table_path(tables.LATE_DATA_METRICS)), **about_versions,
        "first_day": report.first_day, "last_day": report.last_day,
        "range_summary": MetadataValue.json(summary),
        "worst_lateness_p99": human_duration(summary.get("lateness_p99_ms_max")),
        "worst_watermark_lag": human_duration(summary.get("watermark_lag_max_ms_max")),
    })
    yield from monitoring.check_evaluations(rows.values(), thresholds, metrics_key,
                                            context.instance)
    # each day's verdicts are the evaluations above; the checks' outputs still need a value
    # (what ``AssetCheckResult`` yields for its one partition, which a range run lacks)
    for output_name in context.assets_def.check_specs_by_output_name:
        yield Output(None, output_name=output_name)


def pipeline_assets(pipeline: Pipeline, owners: list[str] = OWNERS,
                    freshness: FreshnessPolicy = RESULTS_FRESHNESS) -> list:
    """The pipeline's windowed multi-asset (with its checks) and the tables its runtimes
    write besides (external assets), all in a group named after it."""
    name = pipeline.name
    group = name
    log, quarantine = (stream_key(pipeline.stream, tables.ARRIVAL_LOG),
                       stream_key(pipeline.stream, tables.QUARANTINE))
    about = f"{pipeline.spec.description} " if pipeline.spec.description else ""
    tag = {"pipeline_version": pipeline.version, "pipeline_file": pipeline.path}
    readers = versions.serving_pipeline(pipeline)  # the tables readers see, when loaded

    def table_metadata(table: str, **schema) -> dict:
        return {**spec_metadata(table, readers.table_path(table), **schema), **tag}

    specs = [
        AssetSpec(pipeline_key(name, tables.WINDOW_RESULTS), group_name=group, owners=owners,
                  kinds=DELTA_KINDS, deps=[log], freshness_policy=freshness,
                  metadata=table_metadata(tables.WINDOW_RESULTS,
                                          schema=results_schema(pipeline.spec)),
                  code_version=pipeline.version,
                  description=f"{about}Latest pane per key and window: window, pane index, "
                              "timing, last-pane flag and the pipeline's aggregates. "
                              "Partitioned by day of window end."),
        AssetSpec(pipeline_key(name, tables.LATE_RECORDS), group_name=group, owners=owners,
                  kinds=DELTA_KINDS, deps=[log], code_version=pipeline.version,
                  metadata=table_metadata(tables.LATE_RECORDS),
                  description="Records that missed a window past allowed lateness: one row "
                              "per (record, window), with the watermark that made them late."),
        AssetSpec(pipeline_key(name, tables.LATE_DATA_METRICS), group_name=group,
                  owners=owners, kinds=DELTA_KINDS, deps=[log, quarantine],
                  code_version=pipeline.version,
                  metadata=table_metadata(tables.LATE_DATA_METRICS),
                  description="Per day: on-time, late within lateness, dropped, quarantined, "
                              "lateness percentiles (over the late records) and watermark "
                              "lag. Each day's materialisation carries these as numbers the "
                              "UI plots, a lateness histogram and a sample of the day's late "
                              "records; the partitioned dropped_late_rate, quarantine_rate "
                              "and watermark_lag checks judge each day."),
    ]

    @multi_asset(
        name=f"{name}_windowed",
        specs=specs,
        check_specs=monitoring.check_specs(pipeline_key(name, tables.LATE_DATA_METRICS)),
        partitions_def=daily_partitions,
        backfill_policy=BackfillPolicy.single_run(),
    )
    def windowed(context: AssetExecutionContext, platform: PlatformResource,
                 spark: DeltaSparkResource, monitoring_thresholds: monitoring.MonitoringResource):
        """Recompute the targeted days from the arrival log and replace exactly those
        partitions."""
        first_day, last_day = partition_range(context)
        current = platform.pipeline(name)
        session = spark.session()
        report = run_backfill(session, current, first_day, last_day, progress=context.log.info)
        yield from windowed_results(context, current, report, monitoring_thresholds, session)

    external = [
        AssetSpec(pipeline_key(name, tables.BATCH_METRICS), group_name=group, owners=owners,
                  kinds=DELTA_KINDS, deps=[log], metadata=table_metadata(tables.BATCH_METRICS),
                  description="One row per live micro-batch: its arrival range, panes, late "
                              "rows and the late-data figures of the records it consumed. "
                              "Written by the stream's live job (live_job, live_stream_job), "
                              "which Dagster runs but does not materialise as an asset; "
                              "live_stream_job records each batch as an observation of "
                              "late_data_metrics as it is written.")]
    if not pipeline.spec.is_standard_window:
        external.append(AssetSpec(
            pipeline_key(name, tables.WINDOW_ASSIGNMENTS), group_name=group, owners=owners,
            kinds=DELTA_KINDS, deps=[log], metadata=table_metadata(tables.WINDOW_ASSIGNMENTS),
            description="Every (record, window) with its fate (on time, late within "
                        "lateness, dropped): the pipeline's windows are assigned per key by "
                        "the operator library, and its late-data metrics are computed from "
                        "it. Written with the windowed tables by backfills and the live job."))
    return [windowed, *external]


def windowed_job(pipeline: Pipeline):
    """The pipeline's windowed tables for a day or a range of days (one Spark job per run)."""
    return define_asset_job(
        windowed_job_name(pipeline),
        selection=[pipeline_key(pipeline, t) for t in WINDOWED_TABLES],
        description=f"Pipeline {pipeline.name}'s windowed tables for a day or a range of days "
                    "(one Spark job per run).")

