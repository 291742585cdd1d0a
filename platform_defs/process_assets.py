"""A process pipeline's assets: its ``output`` and ``late_records``, in a group named after it.

Lineage: the stream's arrival log -> ``<pipeline>/output`` (daily partitions by the day of its
``day_column``) and ``<pipeline>/late_records`` (by the day of the record's event time). A
materialisation runs the process function over the whole log (its state carries from a key's
first record to its last) and replaces the days asked, a range as one Spark job
(``BackfillPolicy.single_run``), recording one materialisation per day with that day's rows.
What each asset and materialisation shows is the translator's (``platform_defs.translator``).
"""

from datetime import timedelta

from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    FreshnessPolicy,
    MaterializeResult,
    define_asset_job,
    multi_asset,
)
from pyspark.sql import functions as F

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.registry import Pipeline
from jobs.process.tables import EVENT_DATE, OUTPUT_DATE
from platform_defs.partitions import daily_partitions
from platform_defs.pipeline_assets import partition_range
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.translator import DEFAULT_TRANSLATOR, PROCESS_TABLES, PlatformTranslator

OUTPUT_FRESHNESS = FreshnessPolicy.time_window(fail_window=timedelta(hours=26),
                                               warn_window=timedelta(hours=2))


def process_job_name(pipeline: Pipeline | str) -> str:
    return f"{pipeline if isinstance(pipeline, str) else pipeline.name}_process_job"


def process_assets(pipeline: Pipeline, freshness: FreshnessPolicy = OUTPUT_FRESHNESS,
                   translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> list:
    name = pipeline.name
    log = translator.get_asset_key(pipeline.stream, tables.ARRIVAL_LOG)
    specs = [
        translator.get_asset_spec(pipeline, tables.OUTPUT, deps=[log],
                                  freshness_policy=freshness),
        translator.get_asset_spec(pipeline, tables.LATE_RECORDS, deps=[log]),
    ]

    @multi_asset(name=f"{name}_process", specs=specs, partitions_def=daily_partitions,
                 backfill_policy=BackfillPolicy.single_run())
    def processed(context: AssetExecutionContext, platform: PlatformResource,
                  spark: DeltaSparkResource):
        """Run the process function over the whole log; replace the targeted days."""
        first_day, last_day = partition_range(context)
        current = platform.pipeline(name)
        session = spark.session()
        # through run_backfill, as the windowed assets: the version is recorded and, the
        # first time, made the serving one (serving.json), before the function runs
        report = run_backfill(session, current, first_day, last_day,
                              progress=context.log.info)
        about_versions = translator.get_version_metadata(current)
        for table, column in ((tables.OUTPUT, OUTPUT_DATE), (tables.LATE_RECORDS, EVENT_DATE)):
            key = translator.get_asset_key(current, table)
            counts = dict(session.read.format("delta").load(current.table_path(table))
                          .where(F.col(column).between(first_day, last_day))
                          .groupBy(F.col(column).cast("string")).count().collect())
            for day in context.partition_keys:
                context.add_asset_metadata({"day_rows": int(counts.get(day, 0))},
                                           asset_key=key, partition_key=day)
            extra = translator.get_versions_metadata(current) if table == tables.OUTPUT else {}
            yield MaterializeResult(asset_key=key, metadata={
                **translator.get_path_metadata(current, table), "range_rows": report.results
                if table == tables.OUTPUT else report.late, "first_day": first_day,
                "last_day": last_day, **about_versions, **extra})

    return [processed]


def process_job(pipeline: Pipeline, translator: PlatformTranslator = DEFAULT_TRANSLATOR):
    return define_asset_job(
        process_job_name(pipeline),
        selection=[translator.get_asset_key(pipeline, t) for t in PROCESS_TABLES],
        description=f"Pipeline {pipeline.name}'s process function over the log, for a day or a "
                    "range of days of its tables (one Spark job per run).")
