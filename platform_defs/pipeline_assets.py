"""A pipeline's assets: its windowed tables, in a group named after it.

Lineage reads as the data flows: the stream's arrival log + quarantine -> the pipeline's
windowed results, late records and late-data metrics (daily partitions by window end), keys
``<pipeline>/<table>``. The windowed assets run a whole partition range as one Spark job
(``BackfillPolicy.single_run``), and still record one materialisation per day, each with that
day's late-data numbers, so the UI plots them per partition; three partitioned checks judge
each day. What each asset and materialisation shows is the translator's
(``platform_defs.translator``).
"""


from collections.abc import Iterator
from datetime import timedelta

from dagster import (
    AssetCheckEvaluation,
    AssetExecutionContext,
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
from jobs.config.arguments import check_partition_range
from jobs.config.registry import Pipeline
from jobs.store.table_stats import max_column_value
from jobs.views.late_detail import late_detail
from platform_defs import monitoring
from platform_defs.partitions import daily_partitions
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.translator import DEFAULT_TRANSLATOR, WINDOWED_TABLES, PlatformTranslator

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


def windowed_results(context: AssetExecutionContext, pipeline: Pipeline,
                     report: BackfillReport, thresholds: monitoring.MonitoringResource,
                     spark: SparkSession, translator: PlatformTranslator = DEFAULT_TRANSLATOR
                     ) -> Iterator[MaterializeResult | AssetCheckEvaluation | Output]:
    """Per-day metadata for every targeted partition, range metadata, then each day's
    verdicts (partitioned checks, once the days' materialisations are recorded)."""
    def key(table: str):
        return translator.get_asset_key(pipeline, table)

    def written(table: str) -> dict:
        return translator.get_path_metadata(pipeline, table)

    rows = {str(m["window_end_date"]): m for m in report.metrics}
    rows = {day: rows.get(day) or {"window_end_date": day} for day in context.partition_keys}
    detail = late_detail(spark, pipeline, report.first_day, report.last_day)
    watermark = max_column_value(pipeline.stream.arrival_log, "watermark_ms")
    for day, row in rows.items():
        context.add_asset_metadata(
            monitoring.day_partition_metadata(pipeline, day, row, detail.get(day), watermark,
                                              translator),
            asset_key=key(tables.LATE_DATA_METRICS), partition_key=day)
    summary = monitoring.summarise(report.metrics)
    about_versions = translator.get_version_metadata(pipeline)
    yield MaterializeResult(asset_key=key(tables.WINDOW_RESULTS), metadata={
        **written(tables.WINDOW_RESULTS),
        "range_rows": report.results, "first_day": report.first_day,
        "last_day": report.last_day, **about_versions,
        **translator.get_versions_metadata(pipeline)})
    yield MaterializeResult(asset_key=key(tables.LATE_RECORDS), metadata={
        **written(tables.LATE_RECORDS), "range_rows": report.late, **about_versions})
    yield MaterializeResult(asset_key=key(tables.LATE_DATA_METRICS), metadata={
        **written(tables.LATE_DATA_METRICS), **about_versions,
        "first_day": report.first_day, "last_day": report.last_day,
        "range_summary": MetadataValue.json(summary),
        "worst_lateness_p99": translator.duration_text(summary.get("lateness_p99_ms_max")),
        "worst_watermark_lag": translator.duration_text(
            summary.get("watermark_lag_max_ms_max")),
    })
    yield from monitoring.check_evaluations(rows.values(), thresholds,
                                            key(tables.LATE_DATA_METRICS), context.instance,
                                            translator)
    # each day's verdicts are the evaluations above; the checks' outputs still need a value
    # (what ``AssetCheckResult`` yields for its one partition, which a range run lacks)
    for output_name in context.assets_def.check_specs_by_output_name:
        yield Output(None, output_name=output_name)


def pipeline_assets(pipeline: Pipeline, freshness: FreshnessPolicy = RESULTS_FRESHNESS,
                    translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> list:
    """The pipeline's windowed multi-asset (with its checks) and the tables its runtimes
    write besides (external assets), all in a group named after it."""
    name = pipeline.name
    log = translator.get_asset_key(pipeline.stream, tables.ARRIVAL_LOG)
    quarantine = translator.get_asset_key(pipeline.stream, tables.QUARANTINE)
    metrics_key = translator.get_asset_key(pipeline, tables.LATE_DATA_METRICS)
    specs = [
        translator.get_asset_spec(pipeline, tables.WINDOW_RESULTS, deps=[log],
                                  freshness_policy=freshness),
        translator.get_asset_spec(pipeline, tables.LATE_RECORDS, deps=[log]),
        translator.get_asset_spec(pipeline, tables.LATE_DATA_METRICS, deps=[log, quarantine]),
    ]

    @multi_asset(
        name=f"{name}_windowed",
        specs=specs,
        check_specs=monitoring.check_specs(metrics_key),
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
        yield from windowed_results(context, current, report, monitoring_thresholds, session,
                                    translator)

    external = [tables.BATCH_METRICS]
    if not pipeline.spec.is_standard_window:
        external.append(tables.WINDOW_ASSIGNMENTS)
    return [windowed, *(translator.get_asset_spec(pipeline, table, deps=[log])
                        for table in external)]


def windowed_job(pipeline: Pipeline, translator: PlatformTranslator = DEFAULT_TRANSLATOR):
    """The pipeline's windowed tables for a day or a range of days (one Spark job per run)."""
    return define_asset_job(
        windowed_job_name(pipeline),
        selection=[translator.get_asset_key(pipeline, t) for t in WINDOWED_TABLES],
        description=f"Pipeline {pipeline.name}'s windowed tables for a day or a range of days "
                    "(one Spark job per run).")
