"""A process pipeline's assets: its ``output`` and ``late_records``, in a group named after it.

Lineage: the stream's arrival log -> ``<pipeline>/output`` (daily partitions by the day of its
``day_column``) and ``<pipeline>/late_records`` (by the day of the record's event time). A
materialisation runs the process function over the whole log (its state carries from a key's
first record to its last) and replaces the days asked, a range as one Spark job
(``BackfillPolicy.single_run``), recording one materialisation per day with that day's rows.
"""

from datetime import timedelta

from dagster import (
    AssetExecutionContext,
    AssetSpec,
    BackfillPolicy,
    FreshnessPolicy,
    MaterializeResult,
    define_asset_job,
    multi_asset,
)
from pyspark.sql import functions as F

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.lifecycle import versions
from jobs.process.backfill import run_process_backfill
from jobs.process.tables import EVENT_DATE, LATE_SCHEMA, OUTPUT_DATE, output_schema
from platform_defs.partitions import daily_partitions
from platform_defs.pipeline_assets import partition_range
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.schemas import table_schema
from platform_defs.table_specs import (
    DELTA_KINDS,
    OWNERS,
    pipeline_key,
    stream_key,
    table_path_metadata,
)
from platform_defs.version_views import results_versions_metadata, version_metadata

PROCESS_TABLES = (tables.OUTPUT, tables.LATE_RECORDS)
OUTPUT_FRESHNESS = FreshnessPolicy.time_window(fail_window=timedelta(hours=26),
                                               warn_window=timedelta(hours=2))


def process_job_name(pipeline: Pipeline | str) -> str:
    return f"{pipeline if isinstance(pipeline, str) else pipeline.name}_process_job"


def process_assets(pipeline: Pipeline, owners: list[str] = OWNERS,
                   freshness: FreshnessPolicy = OUTPUT_FRESHNESS) -> list:
    name = pipeline.name
    log = stream_key(pipeline.stream, tables.ARRIVAL_LOG)
    about = f"{pipeline.spec.description} " if pipeline.spec.description else ""
    readers = versions.serving_pipeline(pipeline)
    tag = {"pipeline_version": pipeline.version, "pipeline_file": pipeline.path,
           "process": pipeline.spec.process}

    def metadata(table: str, schema) -> dict:
        return {"dagster/column_schema": table_schema(schema), "dagster/table_name": table,
                **table_path_metadata(readers.table_path(table)), **tag}

    specs = [
        AssetSpec(pipeline_key(name, tables.OUTPUT), group_name=name, owners=owners,
                  kinds=DELTA_KINDS, deps=[log], freshness_policy=freshness,
                  code_version=pipeline.version,
                  metadata=metadata(tables.OUTPUT, output_schema(pipeline.spec)),
                  description=f"{about}The rows {pipeline.spec.process} emits, with the key "
                              "it ran for and the row's number among that key's rows "
                              f"(emission). Partitioned by the day of "
                              f"{pipeline.spec.day_column}."),
        AssetSpec(pipeline_key(name, tables.LATE_RECORDS), group_name=name, owners=owners,
                  kinds=DELTA_KINDS, deps=[log], code_version=pipeline.version,
                  metadata=metadata(tables.LATE_RECORDS, LATE_SCHEMA),
                  description="Records that arrived at or behind the watermark (they reached "
                              "the process function too, which saw ctx.is_late). Partitioned "
                              "by the day of their event time."),
    ]

    @multi_asset(name=f"{name}_process", specs=specs, partitions_def=daily_partitions,
                 backfill_policy=BackfillPolicy.single_run())
    def processed(context: AssetExecutionContext, platform: PlatformResource,
                  spark: DeltaSparkResource):
        """Run the process function over the whole log; replace the targeted days."""
        first_day, last_day = partition_range(context)
        current = platform.pipeline(name)
        session = spark.session()
        report = run_process_backfill(session, current, first_day, last_day,
                                      progress=context.log.info)
        about_versions = version_metadata(current)
        for table, column in ((tables.OUTPUT, OUTPUT_DATE), (tables.LATE_RECORDS, EVENT_DATE)):
            path = current.table_path(table)
            counts = dict(session.read.format("delta").load(path)
                          .where(F.col(column).between(first_day, last_day))
                          .groupBy(F.col(column).cast("string")).count().collect())
            for day in context.partition_keys:
                context.add_asset_metadata({"day_rows": int(counts.get(day, 0))},
                                           asset_key=pipeline_key(name, table),
                                           partition_key=day)
            extra = results_versions_metadata(current) if table == tables.OUTPUT else {}
            yield MaterializeResult(asset_key=pipeline_key(name, table), metadata={
                **table_path_metadata(path), "range_rows": report.results
                if table == tables.OUTPUT else report.late, "first_day": first_day,
                "last_day": last_day, **about_versions, **extra})

    return [processed]


def process_job(pipeline: Pipeline):
    return define_asset_job(
        process_job_name(pipeline),
        selection=[pipeline_key(pipeline, t) for t in PROCESS_TABLES],
        description=f"Pipeline {pipeline.name}'s process function over the log, for a day or a "
                    "range of days of its tables (one Spark job per run).")
