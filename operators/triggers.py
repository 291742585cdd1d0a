"""Triggers: when a window emits a pane, and whether its contents are then purged.

The structure is Flink's ``Trigger`` (and Beam's ``apache_beam.transforms.trigger``): a
trigger is a stateless object shared by every key and window; everything it remembers lives in
per-window *trigger state* reached through a :class:`TriggerContext`, and everything it waits
for is a timer it registers through the same context. That is what makes a trigger
checkpointable and identical in a live stream and a backfill.

Writing your own trigger
------------------------
Subclass :class:`Trigger` and override what you need::

    class FireEveryThirdOrOnTime(Trigger):
        '''Early pane every third element, plus the on-time pane.'''

        def on_element(self, element, timestamp, window, ctx):
            n = ctx.get_state("n", 0) + 1
            ctx.set_state("n", n)
            if window.max_timestamp <= ctx.current_watermark:
                return TriggerResult.FIRE           # a late element: fire a late pane now
            ctx.register_event_time_timer(window.max_timestamp)
            return TriggerResult.FIRE if n % 3 == 0 else TriggerResult.CONTINUE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.FIRE if time == window.max_timestamp else TriggerResult.CONTINUE

        def clear(self, window, ctx):
            ctx.delete_event_time_timer(window.max_timestamp)
            ctx.clear_state("n")

Rules: keep no per-window data on ``self`` (use ``ctx.get_state``/``set_state``; values must be
JSON-able so state can be checkpointed); register timers only through ``ctx``; in ``clear``
delete the timers and state you created (the window is gone); for session windows implement
``can_merge``/``on_merge`` (merge state with ``ctx.merge_state`` and re-register timers for the
merged window). Timers fire in the order described in docs/semantics.md; a timer you register
that is already due fires before the next record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any, Protocol

from operators.time_window import TimeWindow

__all__ = [
    "CONTINUE",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountTrigger",
    "DeltaTrigger",
    "EventTimeTrigger",
    "FIRE",
    "FIRE_AND_PURGE",
    "NeverTrigger",
    "PURGE",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "Trigger",
    "TriggerContext",
    "TriggerResult",
]


class TriggerResult(IntEnum):
    """Bit 1 = fire, bit 2 = purge, as Flink's ``TriggerResult``."""

    CONTINUE = 0
    FIRE = 1
    PURGE = 2
    FIRE_AND_PURGE = 3

    @property
    def is_fire(self) -> bool:
        return bool(self & 1)

    @property
    def is_purge(self) -> bool:
        return bool(self & 2)


CONTINUE = TriggerResult.CONTINUE
FIRE = TriggerResult.FIRE
PURGE = TriggerResult.PURGE
FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE


class TriggerContext(Protocol):
    """What a trigger may see and do; the window operator provides it (one key, one window)."""

    @property
    def current_watermark(self) -> int: ...

    @property
    def current_processing_time(self) -> int: ...

    def register_event_time_timer(self, timestamp: int) -> None: ...

    def delete_event_time_timer(self, timestamp: int) -> None: ...

    def register_processing_time_timer(self, timestamp: int) -> None: ...

    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    def get_state(self, name: str, default: Any = None) -> Any: ...

    def set_state(self, name: str, value: Any) -> None: ...

    def clear_state(self, name: str) -> None: ...

    def merge_state(self, name: str, reduce: Callable[[Any, Any], Any]) -> Any:
        """In ``on_merge``: combine ``name`` over the merged windows into the result window,
        store it there and return it (``None`` when no merged window had it)."""
        ...

    def state_names(self) -> list[str]:
        """The names of this window's trigger state (in ``on_merge``: of the merged windows'
        too), for triggers whose state names are not fixed (composable triggers)."""
        ...


class Trigger:
    """Base trigger: never fires. Override the callbacks you need (see the module docs)."""

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int, window: TimeWindow,
                   ctx: TriggerContext) -> TriggerResult:
        return CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow,
                           ctx: TriggerContext) -> TriggerResult:
        return CONTINUE

    def is_finished(self, window: TimeWindow, ctx: TriggerContext) -> bool:
        """Asked after each FIRE: a finished trigger closes the window (its pane is the last,
        later records are late). Flink's triggers never finish; Beam's can
        (:mod:`operators.composable`)."""
        return False

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support merging windows")

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        return None


class NeverTrigger(Trigger):
    """Flink's ``GlobalWindows.NeverTrigger``: the global window's default."""

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        return None


class EventTimeTrigger(Trigger):
    """Fire when the watermark passes the window's max timestamp (Flink's default).

    An element arriving when the watermark is already past ``max_timestamp`` (a late element
    within allowed lateness) fires a pane at once.
    """

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int,
                   window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        max_ts = window.max_timestamp
        if max_ts <= ctx.current_watermark:
            return FIRE
        ctx.register_event_time_timer(max_ts)
        return CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return FIRE if time == window.max_timestamp else CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        # Only register a timer if the watermark is not yet past the end of the merged window;
        # otherwise the timer would fire at once for a window that may already have fired.
        if window.max_timestamp > ctx.current_watermark:
            ctx.register_event_time_timer(window.max_timestamp)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp)


class ProcessingTimeTrigger(Trigger):
    """Fire when the ingest clock passes the window's max timestamp."""

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int,
                   window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp)
        return CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow,
                           ctx: TriggerContext) -> TriggerResult:
        return FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        if window.max_timestamp > ctx.current_processing_time:
            ctx.register_processing_time_timer(window.max_timestamp)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp)


def _add(a: Any, b: Any) -> Any:
    return a + b


class CountTrigger(Trigger):
    """Fire every ``max_count`` elements (the count restarts after each firing)."""

    def __init__(self, max_count: int) -> None:
        if max_count < 1:
            raise ValueError("count trigger needs a positive count")
        self.max_count = max_count

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int,
                   window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        count = ctx.get_state("count", 0) + 1
        if count >= self.max_count:
            ctx.clear_state("count")
            return FIRE
        ctx.set_state("count", count)
        return CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.merge_state("count", _add)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.clear_state("count")


class DeltaTrigger(Trigger):
    """Fire when ``delta(last_fired_element, element) > threshold`` (Flink's ``DeltaTrigger``).

    The first element is only remembered. What is remembered is ``extract(element)`` (by
    default the whole element must then be JSON-able); the built-in use extracts one numeric
    field and uses the absolute difference.
    """

    def __init__(self, threshold: float, delta: Callable[[Any, Any], float],
                 extract: Callable[[Mapping[str, Any] | None], Any] | None = None) -> None:
        self.threshold = threshold
        self.delta = delta
        self.extract = extract or (lambda element: element)

    @classmethod
    def on_field(cls, threshold: float, field: str) -> DeltaTrigger:
        return cls(threshold, lambda old, new: abs(new - old),
                   lambda element: None if element is None else element.get(field))

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int,
                   window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        value = self.extract(element)
        if value is None:
            return CONTINUE
        last = ctx.get_state("last")
        if last is None:
            ctx.set_state("last", value)
            return CONTINUE
        if self.delta(last, value) > self.threshold:
            ctx.set_state("last", value)
            return FIRE
        return CONTINUE

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        ctx.clear_state("last")


class _ContinuousTrigger(Trigger):
    """What Flink's two continuous triggers share: a ``fire_at`` timer in one time domain,
    rescheduled ``interval`` later at each firing, merged to the earliest for sessions."""

    def __init__(self, interval: int) -> None:
        if interval <= 0:
            raise ValueError("continuous trigger interval must be positive")
        self.interval = interval

    def _register(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _delete(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _schedule_next(self, time: int, window: TimeWindow, ctx: TriggerContext) -> None:
        next_fire = min(time + self.interval, window.max_timestamp)
        ctx.set_state("fire_at", next_fire)
        self._register(ctx, next_fire)

    def _fire_if_due(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        """Fire, and schedule the next firing unless this one was at the window's max
        timestamp: Flink re-registers ``min(time + interval, max_timestamp)`` there too, which
        for an ingest clock already past it is a timer due at once, again and again (an
        endless loop in a pass that fires due timers). After the last scheduled firing, a
        new element starts the schedule again (``on_element``), so each element arriving
        after the window's end still gets its pane."""
        if ctx.get_state("fire_at") == time:
            ctx.clear_state("fire_at")
            if time < window.max_timestamp:
                self._schedule_next(time, window, ctx)
            return FIRE
        return CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        fire_at = ctx.merge_state("fire_at", min)
        if fire_at is not None:
            self._register(ctx, fire_at)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        fire_at = ctx.get_state("fire_at")
        if fire_at is not None:
            self._delete(ctx, fire_at)
            ctx.clear_state("fire_at")


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fire every ``interval`` of event time (early panes) and at the window's end.

    Flink's ``ContinuousEventTimeTrigger``: the first element aligns the first firing to
    ``floor(t / interval) * interval + interval`` (floor, so negative times work), capped at
    the window's max timestamp; each firing schedules the next.
    """

    def _register(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_event_time_timer(time)

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int,
                   window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        if window.max_timestamp <= ctx.current_watermark:
            return FIRE
        ctx.register_event_time_timer(window.max_timestamp)
        if ctx.get_state("fire_at") is None:
            self._schedule_next(timestamp - timestamp % self.interval, window, ctx)
        return CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        if time == window.max_timestamp:
            return FIRE
        return self._fire_if_due(time, window, ctx)


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fire every ``interval`` of ingest clock while the window receives elements.

    Flink's ``ContinuousProcessingTimeTrigger``: the first element schedules a firing at the
    next interval boundary of the ingest clock (capped at the window's max timestamp); each
    firing schedules the next.
    """

    def _register(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int,
                   window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        if ctx.get_state("fire_at") is None:
            now = ctx.current_processing_time
            self._schedule_next(now - now % self.interval, window, ctx)
        return CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow,
                           ctx: TriggerContext) -> TriggerResult:
        return self._fire_if_due(time, window, ctx)


class PurgingTrigger(Trigger):
    """Turn every FIRE of the wrapped trigger into FIRE_AND_PURGE (panes then discard)."""

    def __init__(self, nested: Trigger) -> None:
        self.nested = nested

    @staticmethod
    def _purge(result: TriggerResult) -> TriggerResult:
        return FIRE_AND_PURGE if result.is_fire else result

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int,
                   window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return self._purge(self.nested.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return self._purge(self.nested.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: TimeWindow,
                           ctx: TriggerContext) -> TriggerResult:
        return self._purge(self.nested.on_processing_time(time, window, ctx))

    def is_finished(self, window: TimeWindow, ctx: TriggerContext) -> bool:
        return self.nested.is_finished(window, ctx)

    def can_merge(self) -> bool:
        return self.nested.can_merge()

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        self.nested.on_merge(window, ctx)

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        self.nested.clear(window, ctx)
