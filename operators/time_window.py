"""The window itself: a half-open interval of event time, ``[start, end)``.

Its own module because both the assigners (:mod:`operators.windows`, which create windows and
name their default trigger) and the triggers (:mod:`operators.triggers`, which fire them) need
it; with the window here, ``windows`` imports ``triggers`` and never the other way round.
"""

from __future__ import annotations

from typing import NamedTuple

from operators.time import MAX_TIMESTAMP, MIN_WATERMARK

__all__ = [
    "TimeWindow",
]


class TimeWindow(NamedTuple):
    """``[start, end)``: a tuple, so it hashes, sorts as ``(start, end)`` and serialises."""

    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        """``end - 1``, also for a window that ends exactly at ``MAX_TIMESTAMP`` (Flink's
        ``TimeWindow.maxTimestamp``); only the global window ``[MIN_WATERMARK,
        MAX_TIMESTAMP)`` has the end of time itself (Flink's ``GlobalWindow``)."""
        if self.end == MAX_TIMESTAMP and self.start == MIN_WATERMARK:
            return MAX_TIMESTAMP
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """Flink's rule: windows that touch (``end == other.start``) also intersect, so two
        session windows exactly one gap apart merge."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))
