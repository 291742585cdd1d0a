"""Beam's composable triggers (``apache_beam.transforms.trigger``) inside a Flink window
operator.

Flink's triggers answer FIRE/PURGE per callback; Beam's are built from parts —
``AfterWatermark(early=..., late=...)``, ``AfterCount``, ``AfterProcessingTime``,
``AfterAny``, ``AfterAll``, ``AfterEach``, ``Repeatedly``, ``OrFinally`` — each a small state
machine that says whether it *should fire* and, once fired, whether it is *finished*. A tree of
those parts runs here behind one :class:`ComposedTrigger`, an ordinary
:class:`~operators.triggers.Trigger`, so the window operator, its snapshots and every runtime
(replay, live, keyed backfill) run them unchanged:

* every part keeps its state in the window's trigger state under its own path prefix
  (``early/count``, ``1/at``; Beam's ``NestedContext``), so state is a flat JSON-able dict and
  survives ``snapshot_key``/``restore_key``;
* after each element, event-time timer and processing-time timer of a window the root is asked
  ``should_fire``; if so ``on_fire`` runs and says whether the root is finished (Beam's
  ``GeneralTriggerDriver``);
* accumulating panes keep the window's contents after a firing, discarding panes drop them
  (Beam's ``AccumulationMode``);
* a finished root closes the window (``is_finished``): the operator emits that pane as the
  window's last (``is_last``, Beam's PaneInfo) and sends later records for the window to the
  late output, as Beam drops data for a closed window (docs/semantics.md).

Times follow this library's convention: the watermark "passes the end of the window" when it
reaches ``max_timestamp`` (Beam: ``end``), the event-time timer sits at ``max_timestamp``, and
processing time is the ingest clock. Pane timing (EARLY/ON_TIME/LATE) is decided by the
operator from what fired the pane (Beam's PaneInfo rule).

Where this follows Beam's Java state machines rather than the Python driver: a processing-time
part fires when the ingest clock reaches the time it set (its own timer, not any
processing-time timer of the window), and composite parts pass the real time domain to their
children when firing (Python passes the watermark domain, so a processing-time child of
``AfterAny`` never finishes there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from operators.time_window import TimeWindow
from operators.triggers import (
    CONTINUE,
    FIRE,
    FIRE_AND_PURGE,
    Trigger,
    TriggerContext,
    TriggerResult,
)

__all__ = [
    "AfterAll",
    "AfterAny",
    "AfterCount",
    "AfterEach",
    "AfterProcessingTime",
    "AfterWatermark",
    "ComposedTrigger",
    "ELEMENT",
    "OrFinally",
    "PROCESSING_TIME",
    "Part",
    "PartContext",
    "Repeatedly",
    "WATERMARK",
]


ELEMENT = "element"
WATERMARK = "watermark"
PROCESSING_TIME = "processing_time"
"""What a ``should_fire`` is evaluated for: an element just added, an event-time timer or a
processing-time timer (Beam's ``TimeDomain``, plus the element case)."""

_TIMERS = "~timers"
"""Trigger-state key of the timers the tree registered, ``[[kind, ts], ...]``, so that
``clear`` deletes exactly those."""


class PartContext:
    """The window's trigger context seen by one part: state names under the part's prefix
    (Beam's ``NestedContext``), timers recorded so that ``clear`` can delete them."""

    __slots__ = ("ctx", "prefix")

    def __init__(self, ctx: TriggerContext, prefix: str = "") -> None:
        self.ctx = ctx
        self.prefix = prefix

    def child(self, name: str) -> PartContext:
        return PartContext(self.ctx, f"{self.prefix}{name}/")

    @property
    def watermark(self) -> int:
        return self.ctx.current_watermark

    @property
    def now(self) -> int:
        return self.ctx.current_processing_time

    def get(self, name: str, default: Any = None) -> Any:
        return self.ctx.get_state(self.prefix + name, default)

    def set(self, name: str, value: Any) -> None:
        self.ctx.set_state(self.prefix + name, value)

    def clear(self, name: str) -> None:
        self.ctx.clear_state(self.prefix + name)

    def _track(self, kind: int, timestamp: int) -> None:
        timers = self.ctx.get_state(_TIMERS) or []
        if [kind, timestamp] not in timers:
            self.ctx.set_state(_TIMERS, [*timers, [kind, timestamp]])

    def event_time_timer(self, timestamp: int) -> None:
        self.ctx.register_event_time_timer(timestamp)
        self._track(0, timestamp)

    def processing_time_timer(self, timestamp: int) -> None:
        self.ctx.register_processing_time_timer(timestamp)
        self._track(1, timestamp)


class Part:
    """One part of a composable trigger (Beam's ``TriggerFn``)."""

    def on_element(self, window: TimeWindow, ctx: PartContext) -> None:
        return None

    def on_merge(self, window: TimeWindow, ctx: PartContext) -> None:
        """After the merged state is in place: re-register this part's timers for the merged
        window (the merged windows' timers are deleted by the operator)."""
        return None

    def should_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        raise NotImplementedError

    def on_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        """The part fired; returns whether it is now finished."""
        raise NotImplementedError

    def reset(self, window: TimeWindow, ctx: PartContext) -> None:
        return None

    def uses_processing_time(self) -> bool:
        return False


class AfterWatermark(Part):
    """Fire once the watermark passes the end of the window (its max timestamp); ``early``
    fires repeatedly before that, ``late`` repeatedly after; without ``late`` the on-time
    firing finishes the trigger (Beam's ``AfterWatermark``)."""

    def __init__(self, early: Part | None = None, late: Part | None = None) -> None:
        self.early = Repeatedly(early) if early is not None else None
        self.late = Repeatedly(late) if late is not None else None

    def _is_late(self, ctx: PartContext) -> bool:
        return self.late is not None and bool(ctx.get("late"))

    def on_element(self, window: TimeWindow, ctx: PartContext) -> None:
        if self._is_late(ctx):
            self.late.on_element(window, ctx.child("late"))  # type: ignore[union-attr]
            return
        ctx.event_time_timer(window.max_timestamp)
        if self.early is not None:
            self.early.on_element(window, ctx.child("early"))

    def on_merge(self, window: TimeWindow, ctx: PartContext) -> None:
        if self._is_late(ctx):
            self.late.on_merge(window, ctx.child("late"))  # type: ignore[union-attr]
            return
        ctx.event_time_timer(window.max_timestamp)
        if self.early is not None:
            self.early.on_merge(window, ctx.child("early"))

    def should_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        if self._is_late(ctx):
            return self.late.should_fire(domain, window, ctx.child("late"))  # type: ignore[union-attr]
        if ctx.watermark >= window.max_timestamp:
            return True
        if self.early is not None:
            return self.early.should_fire(domain, window, ctx.child("early"))
        return False

    def on_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        if self._is_late(ctx):
            return self.late.on_fire(domain, window, ctx.child("late"))  # type: ignore[union-attr]
        if ctx.watermark >= window.max_timestamp:
            if self.late is None:
                return True
            ctx.set("late", True)
            return False
        if self.early is not None:
            self.early.on_fire(domain, window, ctx.child("early"))
        return False

    def reset(self, window: TimeWindow, ctx: PartContext) -> None:
        ctx.clear("late")
        if self.early is not None:
            self.early.reset(window, ctx.child("early"))
        if self.late is not None:
            self.late.reset(window, ctx.child("late"))

    def uses_processing_time(self) -> bool:
        return any(p is not None and p.uses_processing_time() for p in (self.early, self.late))


class AfterCount(Part):
    """Fire once the pane holds ``count`` elements (Beam's ``AfterCount``)."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError("after_count needs a positive count")
        self.count = count

    def on_element(self, window: TimeWindow, ctx: PartContext) -> None:
        ctx.set("count", ctx.get("count", 0) + 1)

    def should_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        return ctx.get("count", 0) >= self.count

    def on_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        return True

    def reset(self, window: TimeWindow, ctx: PartContext) -> None:
        ctx.clear("count")


class AfterProcessingTime(Part):
    """Fire once the ingest clock is ``delay`` past the pane's first element (Beam's
    ``AfterProcessingTime``; Java's ``pastFirstElementInPane().plusDelayOf``)."""

    def __init__(self, delay: int = 0) -> None:
        if delay < 0:
            raise ValueError("after_processing_time needs a delay >= 0")
        self.delay = delay

    def on_element(self, window: TimeWindow, ctx: PartContext) -> None:
        if ctx.get("at") is None:
            at = ctx.now + self.delay
            ctx.set("at", at)
            ctx.processing_time_timer(at)

    def on_merge(self, window: TimeWindow, ctx: PartContext) -> None:
        at = ctx.get("at")
        if at is not None:
            ctx.processing_time_timer(at)

    def should_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        at = ctx.get("at")
        return domain == PROCESSING_TIME and at is not None and ctx.now >= at

    def on_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        return True

    def reset(self, window: TimeWindow, ctx: PartContext) -> None:
        ctx.clear("at")

    def uses_processing_time(self) -> bool:
        return True


class Repeatedly(Part):
    """Fire whenever the underlying part fires, resetting it each time it finishes; never
    finishes itself (Beam's ``Repeatedly``)."""

    def __init__(self, underlying: Part) -> None:
        self.underlying = underlying

    def on_element(self, window: TimeWindow, ctx: PartContext) -> None:
        self.underlying.on_element(window, ctx)

    def on_merge(self, window: TimeWindow, ctx: PartContext) -> None:
        self.underlying.on_merge(window, ctx)

    def should_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        return self.underlying.should_fire(domain, window, ctx)

    def on_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        if self.underlying.on_fire(domain, window, ctx):
            self.underlying.reset(window, ctx)
        return False

    def reset(self, window: TimeWindow, ctx: PartContext) -> None:
        self.underlying.reset(window, ctx)

    def uses_processing_time(self) -> bool:
        return self.underlying.uses_processing_time()


class _Parallel(Part):
    """Parts that all see every element; ``combine`` is ``any`` or ``all`` (Beam's
    ``_ParallelTriggerFn``)."""

    combine: Callable[[Any], bool] = any

    def __init__(self, *parts: Part) -> None:
        if not parts:
            raise ValueError(f"{type(self).__name__} needs at least one trigger")
        self.parts = parts

    def on_element(self, window: TimeWindow, ctx: PartContext) -> None:
        for index, part in enumerate(self.parts):
            part.on_element(window, ctx.child(str(index)))

    def on_merge(self, window: TimeWindow, ctx: PartContext) -> None:
        for index, part in enumerate(self.parts):
            part.on_merge(window, ctx.child(str(index)))

    def should_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        return type(self).combine(part.should_fire(domain, window, ctx.child(str(index)))
                                  for index, part in enumerate(self.parts))

    def on_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        finished = []
        for index, part in enumerate(self.parts):
            child = ctx.child(str(index))
            if part.should_fire(domain, window, child):
                finished.append(part.on_fire(domain, window, child))
        return type(self).combine(finished)

    def reset(self, window: TimeWindow, ctx: PartContext) -> None:
        for index, part in enumerate(self.parts):
            part.reset(window, ctx.child(str(index)))

    def uses_processing_time(self) -> bool:
        return any(part.uses_processing_time() for part in self.parts)


class AfterAny(_Parallel):
    """Fire when any part should fire; finished when a part that fired finished."""

    combine = any


class AfterAll(_Parallel):
    """Fire when every part should fire; finished when every part that fired finished."""

    combine = all


class OrFinally(AfterAny):
    """``main`` (usually repeated) until ``until`` fires, which finishes the trigger (Beam's
    ``OrFinally``, an ``AfterAny`` of the two)."""

    def __init__(self, main: Part, until: Part) -> None:
        super().__init__(main, until)


class AfterEach(Part):
    """The parts one after another: each fires until it finishes, then the next takes over;
    finished after the last (Beam's ``AfterEach``)."""

    def __init__(self, *parts: Part) -> None:
        if not parts:
            raise ValueError("AfterEach needs at least one trigger")
        self.parts = parts

    def on_element(self, window: TimeWindow, ctx: PartContext) -> None:
        index = ctx.get("index", 0)
        if index < len(self.parts):
            self.parts[index].on_element(window, ctx.child(str(index)))

    def on_merge(self, window: TimeWindow, ctx: PartContext) -> None:
        index = ctx.get("index", 0)
        if index < len(self.parts):
            self.parts[index].on_merge(window, ctx.child(str(index)))

    def should_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        index = ctx.get("index", 0)
        return index < len(self.parts) and self.parts[index].should_fire(
            domain, window, ctx.child(str(index)))

    def on_fire(self, domain: str, window: TimeWindow, ctx: PartContext) -> bool:
        index = ctx.get("index", 0)
        if index < len(self.parts) and self.parts[index].on_fire(domain, window,
                                                                 ctx.child(str(index))):
            index += 1
            ctx.set("index", index)
        return index >= len(self.parts)

    def reset(self, window: TimeWindow, ctx: PartContext) -> None:
        ctx.clear("index")
        for index, part in enumerate(self.parts):
            part.reset(window, ctx.child(str(index)))

    def uses_processing_time(self) -> bool:
        return any(part.uses_processing_time() for part in self.parts)


_MERGE: dict[str, Callable[[Any, Any], Any]] = {
    "count": lambda a, b: a + b,    # Beam: a CountCombineFn state
    "late": lambda a, b: a or b,    # Beam: combined with any
    "index": max,                   # Beam: AfterEach takes the furthest
    "at": min,                      # the earliest pending processing-time firing
}


class ComposedTrigger(Trigger):
    """A tree of :class:`Part` s as a window-operator trigger (see the module docs).

    ``accumulating``: a pane holds everything the window received so far; otherwise each
    pane holds what arrived since the previous one (Beam's discarding mode).
    """

    def __init__(self, root: Part, *, accumulating: bool = True) -> None:
        self.root = root
        self.accumulating = accumulating

    def _maybe_fire(self, domain: str, window: TimeWindow, ctx: TriggerContext
                    ) -> TriggerResult:
        if ctx.get_state("finished"):
            return CONTINUE
        part = PartContext(ctx)
        if not self.root.should_fire(domain, window, part):
            return CONTINUE
        if self.root.on_fire(domain, window, part):
            ctx.set_state("finished", True)
            return FIRE_AND_PURGE
        return FIRE if self.accumulating else FIRE_AND_PURGE

    def on_element(self, element: Mapping[str, Any] | None, timestamp: int, window: TimeWindow,
                   ctx: TriggerContext) -> TriggerResult:
        if ctx.get_state("finished"):
            return CONTINUE
        self.root.on_element(window, PartContext(ctx))
        return self._maybe_fire(ELEMENT, window, ctx)

    def on_event_time(self, time: int, window: TimeWindow, ctx: TriggerContext) -> TriggerResult:
        return self._maybe_fire(WATERMARK, window, ctx)

    def on_processing_time(self, time: int, window: TimeWindow,
                           ctx: TriggerContext) -> TriggerResult:
        return self._maybe_fire(PROCESSING_TIME, window, ctx)

    def is_finished(self, window: TimeWindow, ctx: TriggerContext) -> bool:
        return bool(ctx.get_state("finished"))

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: TriggerContext) -> None:
        """The merged window is a new window (docs/operators.md): Beam's combining states
        merge (counts add up, the late flag is any, AfterEach's index the furthest, a pending
        processing-time firing the earliest), then each active part sets its timers again."""
        for name in ctx.state_names():
            if name in (_TIMERS, "finished"):
                continue
            ctx.merge_state(name, _MERGE.get(name.rsplit("/", 1)[-1], lambda a, b: b))
        self.root.on_merge(window, PartContext(ctx))

    def clear(self, window: TimeWindow, ctx: TriggerContext) -> None:
        for kind, timestamp in ctx.get_state(_TIMERS) or []:
            if kind == 0:
                ctx.delete_event_time_timer(timestamp)
            else:
                ctx.delete_processing_time_timer(timestamp)
        for name in ctx.state_names():
            ctx.clear_state(name)

    def uses_processing_time(self) -> bool:
        return self.root.uses_processing_time()
