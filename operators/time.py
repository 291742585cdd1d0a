"""Time representation shared by every operator: integer epoch milliseconds, UTC.

Integers keep comparisons exact and cheap and serialise compactly; Flink does the same with
``long`` milliseconds, and its sentinels are reproduced here.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal

__all__ = [
    "MAX_TIMESTAMP",
    "MIN_WATERMARK",
    "datetime_to_ms",
    "human_duration",
    "ms_to_datetime",
    "parse_duration_ms",
    "parse_timestamp_ms",
]


MIN_WATERMARK = -(2**63)
"""The watermark before anything is known (Flink's ``Long.MIN_VALUE``)."""

MAX_TIMESTAMP = 2**63 - 1
"""The end of time: the global window's max timestamp (Flink's ``Long.MAX_VALUE``)."""

_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(-?\d+)\s*(ms|s|min|m|h|d)?\s*$")


def parse_duration_ms(value: int | str, *, setting: str = "duration") -> int:
    """Turn ``250``, ``"250ms"``, ``"10s"``, ``"5m"``, ``"1h"`` or ``"1d"`` into milliseconds.

    Configuration is written by people, so units are accepted; a bare number means ms.
    """
    if isinstance(value, bool):
        raise ValueError(f"{setting}: expected a duration like '10s' or 250, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return int(match.group(1)) * _UNIT_MS[match.group(2) or "ms"]
    raise ValueError(
        f"{setting}: expected a duration like '250ms', '10s', '5m', '1h', '1d' or a number of "
        f"milliseconds, got {value!r}"
    )


def ms_to_datetime(ms: int) -> datetime:
    """Epoch milliseconds to an aware UTC datetime (for display and Spark timestamps)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def datetime_to_ms(value: datetime) -> int:
    """Aware datetime to epoch milliseconds; naive datetimes are taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400_000) + (delta.seconds * 1000) + (delta.microseconds // 1000)


def parse_timestamp_ms(value: object) -> int:
    """Parse an event time: epoch milliseconds (int) or an ISO-8601 string.

    ISO strings without an offset are taken as UTC. Raises ``ValueError`` with the reason, which
    ingest records in the quarantine table.
    """
    if isinstance(value, bool):
        raise ValueError("event time is a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal):
        if not math.isfinite(value):
            raise ValueError("event time is not a finite number")
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z") or text.endswith("z"):
            text = text[:-1] + "+00:00"
        try:
            return datetime_to_ms(datetime.fromisoformat(text))
        except ValueError as error:
            raise ValueError(f"event time {value!r} is not ISO-8601: {error}") from None
    raise ValueError(f"event time has type {type(value).__name__}")


def human_duration(ms: float | int | None) -> str:
    """``83_000`` -> ``"1 min 23 s"``: raw milliseconds stay in the plotted metadata, this is
    what sits beside them."""
    if ms is None:
        return "-"
    ms = float(ms)
    if ms < 1_000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1_000:.1f} s"
    seconds = round(ms / 1_000)
    hours, rest = divmod(seconds, 3_600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
