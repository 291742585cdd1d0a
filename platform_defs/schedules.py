"""The finality schedule: re-materialise the days whose windows just became final.

A day is final once the arrival log's watermark has passed the cleanup time of its last window
(``platform_defs.partitions``). Every windowed materialisation records, per day, whether the day
was final when it was computed (``final`` metadata). On each tick the schedule reads the log's
``max(watermark_ms)`` from Delta's file statistics (no Spark in the scheduler), and asks for the
recent final days whose latest materialisation was not final yet, as one single-run backfill per
contiguous range. A run that failed is asked for again on the next ticks (a few times), not
only once the watermark moves.
"""

from datetime import date, timedelta

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DagsterRunStatus,
    RunRequest,
    RunsFilter,
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
    requests = []
    for start, end in contiguous_ranges(days):
        base = f"final-{start}-{end}-{watermark}"
        failed = failed_attempts(context.instance, base)
        if failed > MAX_RETRIES:
            context.log.warning(f"{base}: {failed} failed runs; not retried until the "
                                "watermark moves (see the runs tagged platform/final_key)")
            continue
        requests.append(RunRequest(
            run_key=base if not failed else f"{base}-retry{failed}",
            tags={ASSET_PARTITION_RANGE_START_TAG: start.isoformat(),
                  ASSET_PARTITION_RANGE_END_TAG: end.isoformat(), "platform/reason": "final",
                  FINAL_KEY_TAG: base}))
    return requests or SkipReason(f"the final days' runs failed {MAX_RETRIES + 1} times")


FINAL_KEY_TAG = "platform/final_key"
MAX_RETRIES = 3


def failed_attempts(instance: DagsterInstance, base_key: str) -> int:
    """Failed (or canceled) runs for this range at this watermark: a failed run is asked for
    again under a new run key (Dagster launches a run key once), up to ``MAX_RETRIES``
    times; a run still queued or running keeps the same key, so it is never doubled."""
    return instance.get_runs_count(RunsFilter(
        tags={FINAL_KEY_TAG: base_key},
        statuses=[DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]))
