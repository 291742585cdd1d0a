"""Checks of a command's arguments that need no data: a day range, a Dagster run's partitions.

The command line (``--from/--to``) and a Dagster partition range share them, so both refuse the
same mistakes with the same one line naming the argument, before anything runs.
"""

from __future__ import annotations

import datetime as dt

from jobs.config.errors import SettingsError


def check_day_range(first_day: str | None, last_day: str | None,
                    what: str = "--from/--to") -> None:
    """A range whose first day is after its last is empty: refuse it rather than run a
    backfill that writes nothing and looks like a success. The command line and a Dagster
    partition range share the message; ``what`` names the argument."""
    if first_day and last_day and dt.date.fromisoformat(first_day) > \
            dt.date.fromisoformat(last_day):
        raise SettingsError(f"{what}: {first_day} is after {last_day}: the range is empty "
                            "(give the earlier day first)")


def check_partition_range(start: str, end: str, first_partition: str) -> tuple[str, str]:
    """The first and last day of a Dagster run's partition range, or a :class:`SettingsError`
    for a reversed one (``--partition-range 2026-01-05...2026-01-02``, which Dagster runs as
    a range of no partitions) or one that starts before the first daily partition."""
    check_day_range(start, end, "partition range")
    if dt.date.fromisoformat(start) < dt.date.fromisoformat(first_partition):
        raise SettingsError(f"partition range: {start} is before the first daily partition "
                            f"{first_partition} (PLATFORM_PARTITIONS_START)")
    return start, end
