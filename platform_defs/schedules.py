"""The finality schedule: re-materialise the days whose windows just became final.

A day is final once the arrival log's watermark has passed the cleanup time of its last window
(``platform_defs.partitions``). Every windowed materialisation records, per day, whether the day
was final when it was computed (``final`` metadata). On each tick the schedule reads the log's
``max(watermark_ms)`` from Delta's file statistics (no Spark in the scheduler), and asks for the
recent final days whose latest materialisation was not final yet, as one single-run backfill per
contiguous range. A failed run is retried by Dagster's run retries (``dagster/max_retries``).
"""

from datetime import date, timedelta

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
)

from jobs import tables
from jobs.days import last_final_day
from jobs.settings import PlatformSettings
from jobs.table_stats import max_column_value
from platform_defs.partitions import daily_partitions
from platform_defs.resources import PlatformResource

_SETTINGS = PlatformSettings.from_env(check=False)
LOOKBACK_DAYS = _SETTINGS.finality_lookback_days
FINALITY_CRON = _SETTINGS.finality_cron
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
"""Dagster's documented run tags for a single-run backfill of a partition range."""

windowed_job = define_asset_job(
    "windowed_outputs_job",
    selection=[tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS],
    description="The windowed tables for a day or a range of days (one Spark job per run).",
)


def recorded_final(instance: DagsterInstance, day: str) -> bool:
    """Whether the latest materialisation of ``day``'s metrics was computed once final."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(tables.LATE_DATA_METRICS), asset_partitions=[day]),
        limit=1).records
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


def days_to_finalise(instance: DagsterInstance, settings: PlatformSettings, watermark_ms: int,
                     lookback_days: int = LOOKBACK_DAYS) -> list[date]:
    """Recent final days whose latest materialisation is missing or provisional."""
    last = last_final_day(watermark_ms, settings.pipeline.allowed_lateness_ms,
                          settings.time_zone)
    first = max(last - timedelta(days=lookback_days - 1), daily_partitions.start.date())
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    return [d for d in days if not recorded_final(instance, d.isoformat())]


@schedule(job=windowed_job, cron_schedule=FINALITY_CRON,
          execution_timezone=_SETTINGS.time_zone,
          description="Re-materialises the days whose windows just became final (watermark "
                      "past their last window's end plus allowed lateness).")
def finality_schedule(context: ScheduleEvaluationContext, platform: PlatformResource):
    settings = platform.settings()
    watermark = max_column_value(settings.table_path(tables.ARRIVAL_LOG), "watermark_ms")
    if watermark is None:
        return SkipReason("no arrival log (or no statistics) yet")
    days = days_to_finalise(context.instance, settings, int(watermark))
    if not days:
        return SkipReason(f"no newly final days at watermark {watermark}")
    return [RunRequest(
        run_key=f"final-{start}-{end}-{watermark}",
        tags={ASSET_PARTITION_RANGE_START_TAG: start.isoformat(),
              ASSET_PARTITION_RANGE_END_TAG: end.isoformat(), "platform/reason": "final",
              **RETRY_TAGS})
        for start, end in contiguous_ranges(days)]


MAX_RETRIES = 3
RETRY_TAGS = {"dagster/max_retries": str(MAX_RETRIES),
              "dagster/retry_strategy": "ALL_STEPS"}
"""Dagster's run retries (the daemon re-launches a failed run, ``run_retries: enabled`` in
``dagster.yaml``, which ``./platform`` writes): a finality run recomputes its whole range,
so a retry runs every step again. A run key is launched once, so without retries a failed
finalisation would wait for the watermark to move."""
