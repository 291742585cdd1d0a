"""Daily output partitions (by window end) and which of them are final.

A day's windows are final once the arrival log's watermark has passed the cleanup time of the
last window ending that day: ``day_end - 1 ms + allowed_lateness`` (docs/semantics.md,
"Windows and panes"). Before that a late record within lateness can still change a pane, so a
materialisation of that day is provisional; the finality schedule re-materialises each day
once, after it becomes final.
"""

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from dagster import DailyPartitionsDefinition

from platform_defs.env_settings import env_date, env_time_zone


def partitions_time_zone() -> str:
    """``PLATFORM_TIME_ZONE`` (default UTC): the same setting the jobs partition by."""
    return env_time_zone("PLATFORM_TIME_ZONE")


daily_partitions = DailyPartitionsDefinition(
    start_date=env_date("PLATFORM_PARTITIONS_START", "2026-01-01"),
    timezone=partitions_time_zone(),
    end_offset=1,
)
"""Days of window end; ``end_offset=1`` so today's (still filling) day can be materialised."""


def day_end_ms(day: date, time_zone: str) -> int:
    """Start of the next day in ``time_zone``, in ms since the epoch (UTC)."""
    start = datetime.combine(day + timedelta(days=1), time(), tzinfo=ZoneInfo(time_zone))
    return int(start.timestamp() * 1000)


def is_final(day: date, watermark_ms: int, allowed_lateness_ms: int, time_zone: str) -> bool:
    """Whether every window ending on ``day`` has fired its last pane at this watermark."""
    return watermark_ms >= day_end_ms(day, time_zone) - 1 + allowed_lateness_ms


def last_final_day(watermark_ms: int, allowed_lateness_ms: int, time_zone: str) -> date:
    """The latest day that is final at ``watermark_ms``."""
    moment = datetime.fromtimestamp((watermark_ms - allowed_lateness_ms + 1) / 1000,
                                    tz=ZoneInfo(time_zone))
    day = moment.date() - timedelta(days=1)
    while is_final(day + timedelta(days=1), watermark_ms, allowed_lateness_ms, time_zone):
        day += timedelta(days=1)
    while not is_final(day, watermark_ms, allowed_lateness_ms, time_zone):
        day -= timedelta(days=1)
    return day


def final_flag(day: str, watermark_ms: int | None, allowed_lateness_ms: int,
               time_zone: str) -> int:
    """1 if ``day`` (ISO date) is final at ``watermark_ms`` (``None``: no log yet), else 0;
    recorded as ``final`` metadata on each day's materialisation for the finality schedule."""
    if watermark_ms is None:
        return 0
    return int(is_final(date.fromisoformat(day), int(watermark_ms), allowed_lateness_ms,
                        time_zone))
