"""The platform's tables as Dagster assets.

Lineage reads as the data flows: landing files -> arrival log + quarantine (ingest) ->
windowed results, late records and late-data metrics (daily partitions by window end). The
windowed assets run a whole partition range as one Spark job (``BackfillPolicy.single_run``),
and still record one materialisation per day, each with that day's late-data numbers, so the UI
plots them per partition.
"""

from collections.abc import Iterator
from datetime import date, timedelta

from dagster import (
    AssetCheckEvaluation,
    AssetExecutionContext,
    AssetSpec,
    BackfillPolicy,
    Config,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    Output,
    asset,
    multi_asset,
)
from pydantic import Field
from pyspark.sql import SparkSession

from jobs import tables
from jobs.backfill import BackfillReport, run_backfill
from jobs.checks import check_landing, check_partition_range
from jobs.days import day_end_ms, final_flag
from jobs.generator import GeneratorConfig, generate
from jobs.ingest import IngestReport, ingest
from jobs.late_detail import DayLateness, late_detail
from jobs.settings import PlatformSettings
from jobs.table_stats import max_column_value
from operators.time import parse_duration_ms, parse_timestamp_ms
from platform_defs import monitoring
from platform_defs.late_data_views import finality_text
from platform_defs.partitions import daily_partitions
from platform_defs.resources import DeltaSparkResource, PlatformResource
from platform_defs.table_specs import DELTA_KINDS, OWNERS, spec_metadata, table_path_metadata

__all__ = ["daily_partitions", "ingest_landing", "landing_files", "windowed_outputs"]

RESULTS_FRESHNESS = FreshnessPolicy.time_window(fail_window=timedelta(hours=26),
                                                warn_window=timedelta(hours=2))
"""Results should be refreshed at least every couple of hours (the landing sensor and the
finality schedule do that); a day without a refresh means the platform has stopped."""


class LandingConfig(Config):
    """The demo's event generator; production landing files come from collectors instead."""

    seed: int = Field(default=7)
    start: str = Field(default="2026-01-01T00:00:00Z")
    duration: str = Field(default="2d")
    events: int = Field(default=50_000)
    keys: int = Field(default=50)
    producers: int = Field(default=3)
    mean_delay_ms: float = Field(default=1_000.0,
                                 description="Every event is delayed by an exponential amount "
                                             "with this mean")
    late_fraction: float = Field(default=0.05,
                                 description="Share delayed by up to late_max_delay_ms more")
    late_max_delay_ms: int = Field(default=60_000)
    very_late_fraction: float = Field(default=0.01,
                                      description="Share delayed 10 min to 3 h: beyond any "
                                                  "sensible watermark")
    bad_fraction: float = Field(default=0.01, description="Share of bad lines of every kind")

    def generator_config(self) -> GeneratorConfig:
        return GeneratorConfig(
            seed=self.seed, start_ms=parse_timestamp_ms(self.start),
            duration_ms=parse_duration_ms(self.duration, setting="duration"),
            events=self.events, keys=self.keys, producers=self.producers,
            mean_delay_ms=self.mean_delay_ms, late_fraction=self.late_fraction,
            late_max_delay_ms=self.late_max_delay_ms,
            very_late_fraction=self.very_late_fraction, bad_fraction=self.bad_fraction)


@asset(
    group_name="ingest",
    owners=OWNERS,
    kinds={"python", "json"},
    description="JSON-lines files below <landing>/<producer>/, as collectors write them. "
                "Materialising it runs the seeded demo generator; in production the landing "
                "sensor notices new files instead.",
)
def landing_files(config: LandingConfig, platform: PlatformResource) -> MaterializeResult:
    settings = platform.settings()
    counts = generate(config.generator_config(), settings.landing_dir)
    return MaterializeResult(metadata={
        "path": MetadataValue.path(str(settings.landing)),
        "files": counts["files"], "lines": counts["lines"],
        "bad_lines": sum(v for k, v in counts.items() if k.startswith("bad_")),
    })


def ingest_results(settings: PlatformSettings, report: IngestReport
                   ) -> Iterator[MaterializeResult]:
    """Materialisation metadata of one ingest batch (shared with the live job)."""
    yield MaterializeResult(asset_key=tables.ARRIVAL_LOG, metadata={
        **table_path_metadata(settings, tables.ARRIVAL_LOG),
        "batch_id": -1 if report.batch_id is None else report.batch_id,
        "batch_records": report.records, "batch_files": report.files,
        "watermark_ms": report.watermark_ms,
    })
    yield MaterializeResult(asset_key=tables.QUARANTINE, metadata={
        **table_path_metadata(settings, tables.QUARANTINE),
        "batch_quarantined": report.quarantined,
        "reasons": MetadataValue.json(report.reasons),
    })


@multi_asset(
    specs=[
        AssetSpec(tables.ARRIVAL_LOG, group_name="ingest", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=["landing_files"], metadata=spec_metadata(tables.ARRIVAL_LOG),
                  description="Bronze: every good record with its ingest_time, arrival_seq and "
                              "the watermark in force at its arrival (SEMANTICS §1-2). Append "
                              "only; everything downstream is a pure function of it."),
        AssetSpec(tables.QUARANTINE, group_name="ingest", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=["landing_files"], metadata=spec_metadata(tables.QUARANTINE),
                  description="Bad lines with the reason they never reached an operator."),
    ],
)
def ingest_landing(context: AssetExecutionContext, platform: PlatformResource,
                   spark: DeltaSparkResource):
    """Append the landing files not yet ingested, as one batch (a no-op when there are none);
    a landing folder that does not exist fails the run with the command line's message."""
    settings = platform.settings()
    check_landing(settings)
    report = ingest(spark.session(), settings, progress=context.log.info)
    yield from ingest_results(settings, report)


def partition_range(context: AssetExecutionContext) -> tuple[str, str]:
    """First and last day of the run's partitions (one day, or a single-run backfill range);
    an empty or reversed range fails here, before Spark, as the command line does."""
    keys = context.partition_key_range
    return check_partition_range(keys.start, keys.end, daily_partitions.start.date().isoformat())


def day_partition_metadata(settings: PlatformSettings, day: str, row: dict,
                           detail: DayLateness | None, watermark: int | None) -> dict:
    """A day's metadata: its late-data figures, and whether it is final yet."""
    lateness = settings.pipeline.allowed_lateness_ms
    final = final_flag(day, watermark, lateness, settings.time_zone)
    final_at = day_end_ms(date.fromisoformat(day), settings.time_zone) - 1 + lateness
    return {**monitoring.day_metadata(row, detail), "final": final,
            "finality": finality_text(final, final_at)}


def windowed_results(context: AssetExecutionContext, settings: PlatformSettings,
                     report: BackfillReport, thresholds: monitoring.MonitoringResource,
                     spark: SparkSession
                     ) -> Iterator[MaterializeResult | AssetCheckEvaluation | Output]:
    """Per-day metadata for every targeted partition, range metadata, then each day's
    verdicts (partitioned checks, once the days' materialisations are recorded)."""
    rows = {str(m["window_end_date"]): m for m in report.metrics}
    rows = {day: rows.get(day) or {"window_end_date": day} for day in context.partition_keys}
    detail = late_detail(spark, settings, report.first_day, report.last_day)
    watermark = max_column_value(settings.table_path(tables.ARRIVAL_LOG), "watermark_ms")
    for day, row in rows.items():
        context.add_asset_metadata(
            day_partition_metadata(settings, day, row, detail.get(day), watermark),
            asset_key=tables.LATE_DATA_METRICS, partition_key=day)
    summary = monitoring.summarise(report.metrics)
    yield MaterializeResult(asset_key=tables.WINDOW_RESULTS, metadata={
        **table_path_metadata(settings, tables.WINDOW_RESULTS),
        "range_rows": report.results, "first_day": report.first_day,
        "last_day": report.last_day})
    yield MaterializeResult(asset_key=tables.LATE_RECORDS, metadata={
        **table_path_metadata(settings, tables.LATE_RECORDS), "range_rows": report.late})
    yield MaterializeResult(asset_key=tables.LATE_DATA_METRICS, metadata={
        **table_path_metadata(settings, tables.LATE_DATA_METRICS),
        "first_day": report.first_day, "last_day": report.last_day,
        "range_summary": MetadataValue.json(summary),
    })
    yield from monitoring.check_evaluations(rows.values(), thresholds, context.instance)
    # each day's verdicts are the evaluations above; the checks' outputs still need a value
    # (what ``AssetCheckResult`` yields for its one partition, which a range run lacks)
    for output_name in context.assets_def.check_specs_by_output_name:
        yield Output(None, output_name=output_name)


@multi_asset(
    specs=[
        AssetSpec(tables.WINDOW_RESULTS, group_name="windows", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=[tables.ARRIVAL_LOG], metadata=spec_metadata(tables.WINDOW_RESULTS),
                  freshness_policy=RESULTS_FRESHNESS,
                  description="Latest pane per key and window: window, pane index, timing, "
                              "last-pane flag and the pipeline's aggregates. Partitioned by "
                              "day of window end."),
        AssetSpec(tables.LATE_RECORDS, group_name="windows", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=[tables.ARRIVAL_LOG], metadata=spec_metadata(tables.LATE_RECORDS),
                  description="Records that missed a window past allowed lateness: one row per "
                              "(record, window), with the watermark that made them late."),
        AssetSpec(tables.LATE_DATA_METRICS, group_name="monitoring", owners=OWNERS,
                  kinds=DELTA_KINDS, deps=[tables.ARRIVAL_LOG, tables.QUARANTINE],
                  metadata=spec_metadata(tables.LATE_DATA_METRICS),
                  description="Per day: on-time, late within lateness, dropped, quarantined, "
                              "lateness percentiles (over the late records) and watermark "
                              "lag. Each day's materialisation carries these as numbers the "
                              "UI plots, a lateness histogram and a sample of the day's late "
                              "records; the partitioned dropped_late_rate, quarantine_rate "
                              "and watermark_lag checks judge each day."),
    ],
    check_specs=monitoring.CHECK_SPECS,
    partitions_def=daily_partitions,
    backfill_policy=BackfillPolicy.single_run(),
)
def windowed_outputs(context: AssetExecutionContext, platform: PlatformResource,
                     spark: DeltaSparkResource,
                     monitoring_thresholds: monitoring.MonitoringResource):
    """Recompute the targeted days from the arrival log and replace exactly those partitions."""
    first_day, last_day = partition_range(context)
    settings = platform.settings()
    session = spark.session()
    report = run_backfill(session, settings, first_day, last_day, progress=context.log.info)
    yield from windowed_results(context, settings, report, monitoring_thresholds, session)


LIVE_TABLES = [
    AssetSpec(tables.BATCH_METRICS, group_name="monitoring", owners=OWNERS, kinds=DELTA_KINDS,
              deps=[tables.ARRIVAL_LOG], metadata=spec_metadata(tables.BATCH_METRICS),
              description="One row per live micro-batch: its arrival range, panes, late rows "
                          "and the late-data figures of the records it consumed. Written by "
                          "the live stream (jobs/live.py), which Dagster runs (live_job, "
                          "live_stream_job) but does not materialise as an asset; "
                          "live_stream_job records each batch as an observation of "
                          "late_data_metrics as it is written."),
    AssetSpec(tables.WINDOW_ASSIGNMENTS, group_name="windows", owners=OWNERS,
              kinds=DELTA_KINDS, deps=[tables.ARRIVAL_LOG],
              metadata=spec_metadata(tables.WINDOW_ASSIGNMENTS),
              description="Every (record, window) with its fate (on time, late within "
                          "lateness, dropped), for pipelines the operator library runs per key "
                          "(sessions, count/delta/continuous triggers, evictors): their "
                          "late-data metrics are computed from it. Written with the windowed "
                          "tables by backfills and the live stream."),
]
"""Tables the runtimes write besides the materialisable assets: external assets, shown with
their schemas and lineage."""
