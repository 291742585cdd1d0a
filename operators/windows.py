"""Window assigners: tumbling, sliding, session (static or dynamic gap) and global windows.

As in Flink (``TumblingEventTimeWindows``, ``SlidingEventTimeWindows``,
``EventTimeSessionWindows``, ``GlobalWindows``) and Beam (``apache_beam.transforms.window``): an
assigner maps an element's event time to the windows it belongs to; a *merging* assigner
(sessions) additionally says which windows merge. A window is a half-open interval ``[start,
end)`` with ``max_timestamp = end - 1``, the last instant it covers (docs/semantics.md,
"Windows").

Window starts use floor modulo, ``start = t - ((t - offset) mod size)``, unlike Flink's Java
``%`` which truncates toward zero and so misplaces negative times; Python's ``%`` is floor
modulo already.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.time_window import TimeWindow
from operators.triggers import EventTimeTrigger, NeverTrigger, Trigger

__all__ = [
    "GLOBAL_WINDOW",
    "GlobalWindows",
    "SessionWindows",
    "SlidingWindows",
    "TimeWindow",
    "TumblingWindows",
    "WindowAssigner",
    "window_start",
]


GLOBAL_WINDOW = TimeWindow(MIN_WATERMARK, MAX_TIMESTAMP)
"""The single window of :class:`GlobalWindows`. Its end is ``MAX_TIMESTAMP`` and, like Flink's
``GlobalWindow.maxTimestamp()``, its max timestamp is taken as ``MAX_TIMESTAMP`` too."""


def window_start(timestamp: int, offset: int, size: int) -> int:
    """Start of the aligned window of ``size`` containing ``timestamp`` (floor modulo)."""
    return timestamp - (timestamp - offset) % size


class WindowAssigner:
    """Assigns an element (its event time and payload) to windows."""

    is_merging = False

    def assign(self, timestamp: int, element: Mapping[str, Any] | None) -> list[TimeWindow]:
        raise NotImplementedError

    def default_trigger(self) -> Trigger:
        """Flink's ``getDefaultTrigger``: fire when the watermark passes the window's end."""
        return EventTimeTrigger()


class TumblingWindows(WindowAssigner):
    """Fixed-size, non-overlapping windows aligned to ``offset``."""

    def __init__(self, size: int, offset: int = 0) -> None:
        if size <= 0:
            raise ValueError("tumbling window size must be positive")
        if abs(offset) >= size:
            raise ValueError("tumbling window offset must be smaller than its size")
        self.size = size
        self.offset = offset

    def assign(self, timestamp: int, element: Mapping[str, Any] | None) -> list[TimeWindow]:
        start = timestamp - (timestamp - self.offset) % self.size
        return [TimeWindow(start, start + self.size)]


class SlidingWindows(WindowAssigner):
    """Windows of ``size`` starting every ``slide``; an element is in ``ceil(size/slide)`` of
    them (fewer when size is not a multiple of slide). Returned latest start first, as Flink."""

    def __init__(self, size: int, slide: int, offset: int = 0) -> None:
        if size <= 0 or slide <= 0:
            raise ValueError("sliding window size and slide must be positive")
        if abs(offset) >= slide:
            raise ValueError("sliding window offset must be smaller than its slide")
        self.size = size
        self.slide = slide
        self.offset = offset

    def assign(self, timestamp: int, element: Mapping[str, Any] | None) -> list[TimeWindow]:
        last_start = timestamp - (timestamp - self.offset) % self.slide
        windows = []
        start = last_start
        while start > timestamp - self.size:
            windows.append(TimeWindow(start, start + self.size))
            start -= self.slide
        return windows


class SessionWindows(WindowAssigner):
    """Session windows: each element opens ``[t, t + gap)``; overlapping or touching windows
    merge (Flink's ``MergingWindowAssigner`` with ``TimeWindow.mergeWindows``).

    The gap is static, or dynamic: ``gap_fn(element)`` or the integer field ``gap_field`` of the
    element (Flink's ``DynamicEventTimeSessionWindows``). A dynamic gap must be positive.
    """

    is_merging = True

    def __init__(self, gap: int | None = None, *, gap_field: str | None = None,
                 gap_fn: Callable[[Mapping[str, Any] | None], int] | None = None) -> None:
        given = sum(x is not None for x in (gap, gap_field, gap_fn))
        if given != 1:
            raise ValueError("session windows need exactly one of gap, gap_field, gap_fn")
        if gap is not None and gap <= 0:
            raise ValueError("session gap must be positive")
        self.gap = gap
        self.gap_field = gap_field
        self.gap_fn = gap_fn

    def gap_for(self, element: Mapping[str, Any] | None) -> int:
        if self.gap is not None:
            return self.gap
        if self.gap_fn is not None:
            gap = self.gap_fn(element)
        else:
            gap = None if element is None else element.get(self.gap_field)  # type: ignore[arg-type]
        if not isinstance(gap, int) or isinstance(gap, bool) or gap <= 0:
            raise ValueError(f"dynamic session gap must be a positive integer (ms), got {gap!r}")
        return gap

    def assign(self, timestamp: int, element: Mapping[str, Any] | None) -> list[TimeWindow]:
        return [TimeWindow(timestamp, timestamp + self.gap_for(element))]

    @staticmethod
    def merge_windows(windows: Iterable[TimeWindow]) -> list[tuple[TimeWindow, list[TimeWindow]]]:
        """Groups of two or more windows that merge, with the window covering each group.

        Sort by start and sweep, exactly Flink's ``TimeWindow.mergeWindows``.
        """
        merged: list[tuple[TimeWindow, list[TimeWindow]]] = []
        current: TimeWindow | None = None
        members: list[TimeWindow] = []
        for window in sorted(windows):
            if current is None:
                current, members = window, [window]
            elif current.intersects(window):
                current = current.cover(window)
                members.append(window)
            else:
                if len(members) > 1:
                    merged.append((current, members))
                current, members = window, [window]
        if current is not None and len(members) > 1:
            merged.append((current, members))
        return merged


class GlobalWindows(WindowAssigner):
    """One window for everything; it never ends, so it needs a trigger (count, delta, ...).

    Its default trigger never fires, as Flink's ``GlobalWindows.NeverTrigger``.
    """

    def assign(self, timestamp: int, element: Mapping[str, Any] | None) -> list[TimeWindow]:
        return [GLOBAL_WINDOW]

    def default_trigger(self) -> Trigger:
        return NeverTrigger()
