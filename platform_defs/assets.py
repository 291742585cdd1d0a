"""The platform's tables as Dagster assets.

Lineage reads as the data flows: landing files -> arrival log + quarantine (ingest) ->
windowed results, late records and late-data metrics (daily partitions by window end). The
windowed assets run a whole partition range as one Spark job (``BackfillPolicy.single_run``).
"""


import os
from datetime import timedelta

from dagster import (
    AssetExecutionContext,
    AssetSpec,
    BackfillPolicy,
    Config,
    DailyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
    multi_asset,
)
from pydantic import Field

from jobs import tables
from jobs.generator import GeneratorConfig, generate
from jobs.ingest import ingest
from jobs.windowed import run_backfill
from operators.time import parse_duration_ms, parse_timestamp_ms
from platform_defs.resources import DeltaSparkResource, PlatformResource

OWNERS = ["team:data-platform"]
DELTA_KINDS = {"spark", "delta"}

daily_partitions = DailyPartitionsDefinition(
    start_date=os.environ.get("PLATFORM_PARTITIONS_START", "2026-01-01"),
    timezone=os.environ.get("PLATFORM_TIME_ZONE", "UTC"),
    end_offset=1,
)


def _table_metadata(platform: PlatformResource, name: str) -> dict:
    return {"dagster/uri": MetadataValue.path(platform.settings().table_path(name))}


class LandingConfig(Config):
    """The demo's event generator; production landing files come from collectors instead."""

    seed: int = Field(default=7)
    start: str = Field(default="2026-01-01T00:00:00Z")
    duration: str = Field(default="2d")
    events: int = Field(default=50_000)
    keys: int = Field(default=50)
    producers: int = Field(default=3)


@asset(
    group_name="ingest",
    owners=OWNERS,
    kinds={"python", "json"},
    description="JSON-lines files below <landing>/<producer>/, as collectors write them. "
                "Materialising it runs the seeded demo generator.",
)
def landing_files(config: LandingConfig, platform: PlatformResource) -> MaterializeResult:
    settings = platform.settings()
    counts = generate(GeneratorConfig(
        seed=config.seed, start_ms=parse_timestamp_ms(config.start),
        duration_ms=parse_duration_ms(config.duration, setting="duration"), events=config.events,
        keys=config.keys, producers=config.producers), settings.landing)
    return MaterializeResult(metadata={
        "path": MetadataValue.path(str(settings.landing)),
        "files": counts["files"], "lines": counts["lines"],
        "bad_lines": sum(v for k, v in counts.items() if k.startswith("bad_")),
    })


@multi_asset(
    specs=[
        AssetSpec("arrival_log", group_name="ingest", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=["landing_files"],
                  description="Bronze: every good record with its ingest_time, arrival_seq and "
                              "the watermark in force at its arrival (SEMANTICS §1-2)."),
        AssetSpec("quarantine", group_name="ingest", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=["landing_files"],
                  description="Bad lines with the reason they never reached an operator."),
    ],
)
def ingest_landing(context: AssetExecutionContext, platform: PlatformResource,
                   spark: DeltaSparkResource):
    settings = platform.settings()
    report = ingest(spark.session(), settings, progress=context.log.info)
    yield MaterializeResult(asset_key="arrival_log", metadata={
        **_table_metadata(platform, tables.ARRIVAL_LOG),
        "batch_records": report.records, "batch_files": report.files,
        "watermark_ms": report.watermark_ms,
    })
    yield MaterializeResult(asset_key="quarantine", metadata={
        **_table_metadata(platform, tables.QUARANTINE),
        "batch_quarantined": report.quarantined,
        "reasons": MetadataValue.json(report.reasons),
    })


@multi_asset(
    specs=[
        AssetSpec("window_results", group_name="windows", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=["arrival_log"],
                  description="Latest pane per key and window: window, pane index, timing, "
                              "last-pane flag and the pipeline's aggregates."),
        AssetSpec("late_records", group_name="windows", owners=OWNERS, kinds=DELTA_KINDS,
                  deps=["arrival_log"],
                  description="Records that missed a window: one row per (record, window)."),
        AssetSpec("late_data_metrics", group_name="monitoring", owners=OWNERS,
                  kinds=DELTA_KINDS, deps=["arrival_log", "quarantine"],
                  description="Per day: on-time, late within lateness, dropped, quarantined, "
                              "lateness percentiles and watermark lag."),
    ],
    partitions_def=daily_partitions,
    backfill_policy=BackfillPolicy.single_run(),
)
def windowed_outputs(context: AssetExecutionContext, platform: PlatformResource,
                     spark: DeltaSparkResource):
    window = context.partition_time_window
    first_day = window.start.date().isoformat()
    last_day = (window.end - timedelta(days=1)).date().isoformat()
    report = run_backfill(spark.session(), platform.settings(), first_day, last_day,
                          progress=context.log.info)
    totals = {name: sum(int(m[name] or 0) for m in report.metrics)
              for name in ("on_time", "late_within_lateness", "dropped_late", "quarantined")}
    yield MaterializeResult(asset_key="window_results", metadata={
        **_table_metadata(platform, tables.WINDOW_RESULTS), "rows": report.results,
        "first_day": first_day, "last_day": last_day})
    yield MaterializeResult(asset_key="late_records", metadata={
        **_table_metadata(platform, tables.LATE_RECORDS), "rows": report.late})
    worst = max(report.metrics, key=lambda m: m["lateness_p99_ms"] or 0, default={})
    yield MaterializeResult(asset_key="late_data_metrics", metadata={
        **_table_metadata(platform, tables.LATE_DATA_METRICS), **totals,
        "lateness_p99_ms": float(worst.get("lateness_p99_ms") or 0.0),
        "watermark_lag_max_ms": max((int(m["watermark_lag_max_ms"] or 0)
                                     for m in report.metrics), default=0),
        "per_day": MetadataValue.json([{k: str(v) for k, v in m.items()}
                                       for m in report.metrics]),
    })
