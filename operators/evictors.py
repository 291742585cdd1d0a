"""Evictors: drop buffered elements of a window before or after the window function runs.

As Flink's ``Evictor`` (``CountEvictor``, ``TimeEvictor``, ``DeltaEvictor``): an evictor sees
the window's buffered elements in arrival order as ``(event_time, payload, arrival_seq)``
tuples and returns the ones to keep. Evicted elements are gone for good, also for later panes. An
evictor needs the elements themselves, so a window with an evictor buffers them even when its
result is an incremental aggregate (as Flink's ``EvictingWindowOperator``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from operators.windows import TimeWindow

__all__ = [
    "CountEvictor",
    "DeltaEvictor",
    "Element",
    "Evictor",
    "TimeEvictor",
]


Element = tuple[int, Mapping[str, Any] | None, int]
"""A buffered element: ``(event_time_ms, payload, arrival_seq)``; the arrival position keeps
the buffer in arrival order when session windows merge."""


class Evictor:
    """Base evictor; ``evict_after`` selects whether it runs after the window function."""

    def __init__(self, evict_after: bool = False) -> None:
        self.evict_after = evict_after

    def evict(self, elements: list[Element], window: TimeWindow) -> list[Element]:
        raise NotImplementedError

    def evict_before(self, elements: list[Element], window: TimeWindow) -> list[Element]:
        return elements if self.evict_after else self.evict(elements, window)

    def evict_after_fn(self, elements: list[Element], window: TimeWindow) -> list[Element]:
        return self.evict(elements, window) if self.evict_after else elements


class CountEvictor(Evictor):
    """Keep at most the ``max_count`` most recently added elements."""

    def __init__(self, max_count: int, evict_after: bool = False) -> None:
        super().__init__(evict_after)
        if max_count < 1:
            raise ValueError("count evictor needs a positive max_count")
        self.max_count = max_count

    def evict(self, elements: list[Element], window: TimeWindow) -> list[Element]:
        if len(elements) <= self.max_count:
            return elements
        return elements[len(elements) - self.max_count:]


class TimeEvictor(Evictor):
    """Keep the elements within ``keep_time`` of the newest element's event time: evict those
    with ``event_time <= max_event_time - keep_time`` (Flink's cut-off is inclusive)."""

    def __init__(self, keep_time: int, evict_after: bool = False) -> None:
        super().__init__(evict_after)
        if keep_time < 0:
            raise ValueError("time evictor needs keep_time >= 0")
        self.keep_time = keep_time

    def evict(self, elements: list[Element], window: TimeWindow) -> list[Element]:
        if not elements:
            return elements
        cutoff = max(item[0] for item in elements) - self.keep_time
        return [item for item in elements if item[0] > cutoff]


class DeltaEvictor(Evictor):
    """Evict the elements whose ``delta(element, newest element) >= threshold``."""

    def __init__(self, threshold: float,
                 delta: Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], float],
                 evict_after: bool = False) -> None:
        super().__init__(evict_after)
        self.threshold = threshold
        self.delta = delta

    @classmethod
    def on_field(cls, threshold: float, field: str, evict_after: bool = False) -> DeltaEvictor:
        """Delta on one numeric field; elements missing it are never evicted."""

        def delta(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> float:
            x = None if a is None else a.get(field)
            y = None if b is None else b.get(field)
            return float("-inf") if x is None or y is None else abs(x - y)

        return cls(threshold, delta, evict_after)

    def evict(self, elements: list[Element], window: TimeWindow) -> list[Element]:
        if not elements:
            return elements
        last = elements[-1][1]
        return [item for item in elements if self.delta(item[1], last) < self.threshold]
