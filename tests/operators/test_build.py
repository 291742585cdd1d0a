"""Building runtime objects from a pipeline description."""

from __future__ import annotations

from operators.build import build_window_operator
from operators.evictors import CountEvictor, DeltaEvictor, TimeEvictor
from operators.pipeline import parse_pipeline
from operators.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
)
from operators.windows import GlobalWindows, SessionWindows, SlidingWindows, TumblingWindows

WM = {"strategy": "monotonous"}


def build(**raw):
    return build_window_operator(parse_pipeline({"watermark": WM, **raw}))


def test_assigners_and_default_triggers() -> None:
    op = build(window={"type": "tumbling", "size": "1m", "offset": "10s"})
    assert isinstance(op.assigner, TumblingWindows) and op.assigner.offset == 10_000
    assert isinstance(op.trigger, EventTimeTrigger)
    op = build(window={"type": "sliding", "size": "1m", "slide": "10s"})
    assert isinstance(op.assigner, SlidingWindows) and op.assigner.slide == 10_000
    op = build(window={"type": "session", "gap_field": "gap"})
    assert isinstance(op.assigner, SessionWindows) and op.assigner.gap_field == "gap"
    op = build(window={"type": "global"}, trigger={"type": "count", "count": 3})
    assert isinstance(op.assigner, GlobalWindows) and isinstance(op.trigger, CountTrigger)
    assert isinstance(build(window={"type": "global"}).trigger, NeverTrigger)


def test_triggers_evictors_lateness_aggregates() -> None:
    tumbling = {"type": "tumbling", "size": 10}
    cases = [({"type": "processing_time"}, ProcessingTimeTrigger),
             ({"type": "delta", "threshold": 2, "field": "v"}, DeltaTrigger),
             ({"type": "continuous_event_time", "interval": 5}, ContinuousEventTimeTrigger),
             ({"type": "continuous_processing_time", "interval": 5},
              ContinuousProcessingTimeTrigger)]
    for trigger, cls in cases:
        assert isinstance(build(window=tumbling, trigger=trigger).trigger, cls)
    op = build(window=tumbling, trigger={"type": "count", "count": 2, "purging": True})
    assert isinstance(op.trigger, PurgingTrigger) and isinstance(op.trigger.nested, CountTrigger)
    for evictor, cls in [({"type": "count", "max_count": 2}, CountEvictor),
                         ({"type": "time", "keep_time": "1s"}, TimeEvictor),
                         ({"type": "delta", "threshold": 1.5, "field": "v",
                           "evict_after": True}, DeltaEvictor)]:
        op = build(window=tumbling, evictor=evictor)
        assert isinstance(op.evictor, cls) and op.buffered
    op = build(window=tumbling, allowed_lateness="2s",
               aggregates=[{"name": "m", "fn": "mean", "field": "v"}])
    assert op.allowed_lateness == 2000 and op.aggregate.names == ["m"] and not op.buffered
