"""Days: the daily partitions of the output tables, in ``PLATFORM_TIME_ZONE``.

Every windowed table is partitioned by the day of its window's ``max_timestamp`` (``end - 1``)
in the configured time zone, quarantined lines count toward the day of their ingest time, and a
day is *final* once the watermark has passed the cleanup time of the last window ending that
day (docs/semantics.md, "Windows and panes"). These rules live here once, as Spark columns for
the jobs and as Python for Dagster's schedule, so no two places can disagree on a day.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from pyspark.sql import Column
from pyspark.sql import functions as F

from operators.pipeline import WindowSpec

DAY_MS = 86_400_000


# -- Spark columns ------------------------------------------------------------------------------


def day_of_column(ms: Column, time_zone: str) -> Column:
    """The calendar day (a DATE) of epoch milliseconds ``ms`` in ``time_zone``."""
    return F.to_date(F.from_utc_timestamp(F.timestamp_millis(ms), time_zone))


def window_end_date(end_ms: Column, time_zone: str) -> Column:
    """The output partition: the day of the window's ``max_timestamp`` in ``time_zone``."""
    return day_of_column(end_ms - F.lit(1), time_zone)


def could_reach(first_day: str, last_day: str, window: WindowSpec) -> Column:
    """Records whose windows can end within ``[first_day, last_day]`` (a day of margin either
    side for any time zone). Only a filter for speed: the exact day test comes after window
    assignment; this one lets Delta skip the log's files (each ingest batch is one file, with
    event-time statistics) that a range backfill or a live metrics refresh cannot need."""
    if window.gap_field:  # a dynamic session gap: no bound on how far a record reaches
        return F.lit(True)
    return F.col("event_time_ms").between(*reach_bounds(first_day, last_day, window))


def reach_bounds(first_day: str, last_day: str, window: WindowSpec) -> tuple[int, int]:
    """The event times (inclusive) of the records :func:`could_reach` keeps, for a window
    with a fixed size or gap."""
    first, last = day_start_utc_ms(first_day), day_start_utc_ms(last_day)
    size = window.size_ms or window.gap_ms or 0
    return first - DAY_MS - size, last + 2 * DAY_MS


# -- Python -------------------------------------------------------------------------------------


def day_of(ms: int, time_zone: str) -> dt.date:
    """The calendar day of epoch milliseconds ``ms`` in ``time_zone``."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=ZoneInfo(time_zone)).date()


def day_start_utc_ms(day: str | dt.date) -> int:
    """Midnight UTC of ``day``, in epoch milliseconds (for bounds with a day of margin)."""
    return (dt.date.fromisoformat(str(day)) - dt.date(1970, 1, 1)).days * DAY_MS


def day_end_ms(day: dt.date, time_zone: str) -> int:
    """Start of the next day in ``time_zone``, in ms since the epoch (UTC)."""
    start = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(),
                                tzinfo=ZoneInfo(time_zone))
    return int(start.timestamp() * 1000)


def is_final(day: dt.date, watermark_ms: int, allowed_lateness_ms: int, time_zone: str) -> bool:
    """Whether every window ending on ``day`` has fired its last pane at this watermark."""
    return watermark_ms >= day_end_ms(day, time_zone) - 1 + allowed_lateness_ms


def last_final_day(watermark_ms: int, allowed_lateness_ms: int, time_zone: str) -> dt.date:
    """The latest day that is final at ``watermark_ms``."""
    day = day_of(watermark_ms - allowed_lateness_ms + 1, time_zone) - dt.timedelta(days=1)
    while is_final(day + dt.timedelta(days=1), watermark_ms, allowed_lateness_ms, time_zone):
        day += dt.timedelta(days=1)
    while not is_final(day, watermark_ms, allowed_lateness_ms, time_zone):
        day -= dt.timedelta(days=1)
    return day


def final_flag(day: str, watermark_ms: int | None, allowed_lateness_ms: int,
               time_zone: str) -> int:
    """1 if ``day`` (ISO date) is final at ``watermark_ms`` (``None``: no log yet), else 0;
    recorded as ``final`` metadata on each day's materialisation for the finality schedule."""
    if watermark_ms is None:
        return 0
    return int(is_final(dt.date.fromisoformat(day), int(watermark_ms), allowed_lateness_ms,
                        time_zone))


def days_between(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


NO_DAYS = ("1970-01-01", "1970-01-01")
"""The range of an empty log: one day on which nothing can be."""


def spanning(*ranges: tuple[str, str] | None) -> tuple[str, str]:
    """The smallest ``(first, last)`` day range holding every given one (``None``: none), or
    :data:`NO_DAYS` when none is given. A full backfill's days are those its windows end on
    spanned with those its quarantined lines were ingested on (docs/contract.md, section 6)."""
    given = [r for r in ranges if r is not None]
    if not given:
        return NO_DAYS
    return min(first for first, _ in given), max(last for _, last in given)


def ingest_days(ingest_range: tuple[int | None, int | None] | None,
                time_zone: str) -> tuple[str, str] | None:
    """The days of the first and last ingest time in ``(min_ms, max_ms)`` (``None``: no
    line)."""
    if ingest_range is None or ingest_range[0] is None or ingest_range[1] is None:
        return None
    return (day_of(int(ingest_range[0]), time_zone).isoformat(),
            day_of(int(ingest_range[1]), time_zone).isoformat())
