"""Build the runtime objects of a window operator from a pipeline description.

One function per spec section, so the replay command, the Spark runtime and the tests all turn
the same :class:`~operators.pipeline.PipelineSpec` into the same assigner, trigger, evictor and
aggregates; no engine builds its own variant.
"""

from __future__ import annotations

from operators.aggregates import NamedAggregates, ProcessWindowFunction
from operators.composable import (
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    ComposedTrigger,
    OrFinally,
    Part,
    Repeatedly,
)
from operators.evictors import CountEvictor, DeltaEvictor, Evictor, TimeEvictor
from operators.pipeline import EvictorSpec, PipelineSpec, TriggerSpec, WindowSpec
from operators.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EventTimeTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
)
from operators.window_operator import WindowDriver, WindowOperator
from operators.windows import (
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowAssigner,
)

__all__ = [
    "build_assigner",
    "build_driver",
    "build_evictor",
    "build_part",
    "build_trigger",
    "build_window_operator",
]


def build_assigner(spec: WindowSpec) -> WindowAssigner:
    if spec.type == "tumbling":
        return TumblingWindows(spec.size_ms or 0, spec.offset_ms)
    if spec.type == "sliding":
        return SlidingWindows(spec.size_ms or 0, spec.slide_ms or 0, spec.offset_ms)
    if spec.type == "session":
        if spec.gap_field is not None:
            return SessionWindows(gap_field=spec.gap_field)
        return SessionWindows(spec.gap_ms)
    if spec.type == "global":
        return GlobalWindows()
    raise ValueError(f"unknown window type {spec.type!r}")


def build_part(spec: TriggerSpec) -> Part:
    """One part of a composable trigger, with its nested parts."""
    if spec.type == "after_watermark":
        return AfterWatermark(early=build_part(spec.early) if spec.early else None,
                              late=build_part(spec.late) if spec.late else None)
    if spec.type == "after_count":
        return AfterCount(spec.count or 0)
    if spec.type == "after_processing_time":
        return AfterProcessingTime(spec.delay_ms or 0)
    if spec.type in ("after_any", "after_all", "after_each"):
        parts = [build_part(t) for t in spec.triggers or ()]
        return {"after_any": AfterAny, "after_all": AfterAll,
                "after_each": AfterEach}[spec.type](*parts)
    if spec.type == "repeatedly" and spec.trigger is not None:
        return Repeatedly(build_part(spec.trigger))
    if spec.type == "or_finally" and spec.main is not None and spec.finally_ is not None:
        return OrFinally(build_part(spec.main), build_part(spec.finally_))
    raise ValueError(f"trigger type {spec.type!r} is not a complete composable trigger")


def build_trigger(spec: TriggerSpec | None, assigner: WindowAssigner) -> Trigger:
    """The configured trigger, or the assigner's default; ``purging`` wraps it."""
    if spec is None:
        return assigner.default_trigger()
    if spec.is_composable:
        return ComposedTrigger(build_part(spec),
                               accumulating=spec.accumulation != "discarding")
    trigger: Trigger
    if spec.type == "event_time":
        trigger = EventTimeTrigger()
    elif spec.type == "processing_time":
        trigger = ProcessingTimeTrigger()
    elif spec.type == "count":
        trigger = CountTrigger(spec.count or 0)
    elif spec.type == "delta":
        trigger = DeltaTrigger.on_field(float(spec.threshold or 0), spec.field or "")
    elif spec.type == "continuous_event_time":
        trigger = ContinuousEventTimeTrigger(spec.interval_ms or 0)
    elif spec.type == "continuous_processing_time":
        trigger = ContinuousProcessingTimeTrigger(spec.interval_ms or 0)
    else:
        raise ValueError(f"unknown trigger type {spec.type!r}")
    return PurgingTrigger(trigger) if spec.purging else trigger


def build_evictor(spec: EvictorSpec | None) -> Evictor | None:
    if spec is None:
        return None
    if spec.type == "count":
        return CountEvictor(spec.max_count or 0, spec.evict_after)
    if spec.type == "time":
        return TimeEvictor(spec.keep_time_ms or 0, spec.evict_after)
    if spec.type == "delta":
        return DeltaEvictor.on_field(float(spec.threshold or 0), spec.field or "",
                                     spec.evict_after)
    raise ValueError(f"unknown evictor type {spec.type!r}")


def build_window_operator(spec: PipelineSpec,
                          process_function: ProcessWindowFunction | None = None
                          ) -> WindowOperator:
    """The window operator a pipeline describes (its aggregates unless a process function is
    given)."""
    assigner = build_assigner(spec.window)
    return WindowOperator(
        assigner,
        build_trigger(spec.trigger, assigner),
        aggregate=None if process_function else NamedAggregates.from_specs(spec.aggregates),
        process_function=process_function,
        evictor=build_evictor(spec.evictor),
        allowed_lateness=spec.allowed_lateness_ms,
    )


def build_driver(spec: PipelineSpec) -> WindowDriver:
    """A many-key driver for the pipeline's window operator."""
    return WindowDriver(build_window_operator(spec))
