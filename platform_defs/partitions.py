"""Daily output partitions (by window end), in ``PLATFORM_TIME_ZONE`` from
``PLATFORM_PARTITIONS_START``. Which days are final is the jobs' rule (jobs.tables.days)."""

from dagster import DailyPartitionsDefinition

from jobs.config.settings import PlatformSettings

_SETTINGS = PlatformSettings.from_env(check=False)

daily_partitions = DailyPartitionsDefinition(
    start_date=_SETTINGS.partitions_start.isoformat(),
    timezone=_SETTINGS.time_zone,
    end_offset=1,
)
"""Days of window end; ``end_offset=1`` so today's (still filling) day can be materialised."""
