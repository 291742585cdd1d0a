"""The finality schedule: re-materialise each pipeline's days whose windows just became final.

A day is final once the stream's watermark has passed the cleanup time of the pipeline's last
window that day (``jobs.tables.days``). Every windowed materialisation records, per day,
whether the day was final when it was computed (``final`` metadata). On each tick the schedule
reads each stream's ``max(watermark_ms)`` from Delta's file statistics (no Spark in the
scheduler), and asks for each pipeline's recent final days whose latest materialisation was
not final yet, as one single-run backfill per pipeline and contiguous range. A failed run is
retried by Dagster's run retries (``dagster/max_retries``).
"""

from datetime import date, timedelta

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DagsterInstance,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from jobs import tables
from jobs.config.registry import Pipeline, Platform, platform_of
from jobs.config.settings import PlatformSettings
from jobs.store.table_stats import max_column_value
from jobs.tables.days import last_final_day
from platform_defs.partitions import daily_partitions
from platform_defs.resources import PlatformResource
from platform_defs.translator import DEFAULT_TRANSLATOR, WINDOWED_TABLES, PlatformTranslator

_SETTINGS = PlatformSettings.from_env(check=False)
LOOKBACK_DAYS = _SETTINGS.finality_lookback_days
FINALITY_CRON = _SETTINGS.finality_cron
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
"""Dagster's documented run tags for a single-run backfill of a partition range."""


def recorded_final(instance: DagsterInstance, metrics_asset: AssetKey, day: str) -> bool:
    """Whether the latest materialisation of ``day``'s metrics was computed once final."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=metrics_asset, asset_partitions=[day]), limit=1).records
    if not records:
        return False
    event = records[0].asset_materialization
    final = event.metadata.get("final") if event else None
    return final is not None and final.value == 1


def contiguous_ranges(days: list[date]) -> list[tuple[date, date]]:
    ranges: list[tuple[date, date]] = []
    for day in sorted(days):
        if ranges and ranges[-1][1] + timedelta(days=1) == day:
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges


def days_to_finalise(instance: DagsterInstance, pipeline: Pipeline, watermark_ms: int,
                     lookback_days: int = LOOKBACK_DAYS,
                     translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> list[date]:
    """Recent final days of the pipeline whose latest materialisation is missing or
    provisional."""
    last = last_final_day(watermark_ms, pipeline.spec.allowed_lateness_ms, pipeline.time_zone)
    first = max(last - timedelta(days=lookback_days - 1), daily_partitions.start.date())
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    metrics = translator.get_asset_key(pipeline, tables.LATE_DATA_METRICS)
    return [d for d in days if not recorded_final(instance, metrics, d.isoformat())]


def finality_requests(instance: DagsterInstance, platform: Platform,
                      translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> list[RunRequest]:
    """One single-run backfill per pipeline and contiguous range of newly final days."""
    requests = []
    for pipeline in platform.pipelines.values():
        if pipeline.spec.is_process:
            continue  # no windows to become final: its output is final when emitted
        watermark = max_column_value(pipeline.stream.arrival_log, "watermark_ms")
        if watermark is None:
            continue
        days = days_to_finalise(instance, pipeline, int(watermark), translator=translator)
        for start, end in contiguous_ranges(days):
            requests.append(RunRequest(
                run_key=f"final-{pipeline.name}-{pipeline.version}-{start}-{end}-{watermark}",
                asset_selection=[translator.get_asset_key(pipeline, t) for t in WINDOWED_TABLES],
                tags={ASSET_PARTITION_RANGE_START_TAG: start.isoformat(),
                      ASSET_PARTITION_RANGE_END_TAG: end.isoformat(),
                      "platform/reason": "final", "platform/pipeline": pipeline.name,
                      **RETRY_TAGS}))
    return requests


def finality_schedule(pipelines: list[Pipeline],
                      translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> ScheduleDefinition:
    """The schedule over every pipeline's windowed tables (its target: what its runs may
    select)."""
    keys = [translator.get_asset_key(p, t) for p in pipelines for t in WINDOWED_TABLES]

    @schedule(name="finality_schedule", target=AssetSelection.assets(*keys),
              cron_schedule=FINALITY_CRON, execution_timezone=_SETTINGS.time_zone,
              description="Re-materialises each pipeline's days whose windows just became "
                          "final (watermark past their last window's end plus allowed "
                          "lateness), one single-run backfill per pipeline and range.")
    def finality(context: ScheduleEvaluationContext, platform: PlatformResource):
        requests = finality_requests(context.instance, platform_of(platform.settings()),
                                     translator)
        if not requests:
            return SkipReason("no newly final days")
        return requests

    return finality


MAX_RETRIES = 3
RETRY_TAGS = {"dagster/max_retries": str(MAX_RETRIES),
              "dagster/retry_strategy": "ALL_STEPS"}
"""Dagster's run retries (the daemon re-launches a failed run, ``run_retries: enabled`` in
``dagster.yaml``, which ``./platform`` writes): a finality run recomputes its whole range,
so a retry runs every step again. A run key is launched once, so without retries a failed
finalisation would wait for the watermark to move."""
