"""A tumbling-window equi-join of two inputs, built on ``KeyedProcessFunction`` and timers.

The operator library has windows over one input but no two-input join (Flink's
``DataStream.join(...).window(TumblingEventTimeWindows)``), so Q8 gets one here, without
touching ``operators``. The two inputs arrive as one arrival-ordered stream, each element
tagged with its side and keyed by the join key. Per key and window both sides are buffered in
map state; an event-time timer at the window's ``max_timestamp`` emits the join and clears it.

Lateness is the platform's rule (docs/semantics.md) with allowed lateness 0: an element whose
window's ``max_timestamp <= watermark`` (the key's clock, i.e. the element's watermark) is
late; it joins nothing and is reported as a ``late`` output item, one per element.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from operators.process_function import KeyedProcessFunction, ProcessContext
from operators.windows import window_start

LEFT = "left"
RIGHT = "right"

JoinFunction = Callable[[str, int, int, list[dict[str, Any]], list[dict[str, Any]]],
                        list[dict[str, Any]]]
"""``(key, window_start, window_end, lefts, rights) -> rows``; called once per key and window
that has at least one element on either side."""


class TumblingWindowJoin(KeyedProcessFunction):
    """Elements are ``{"side": "left"|"right", "row": {...}}``; output items are
    ``{"kind": "joined", "row": {...}}`` or ``{"kind": "late", ...}``."""

    def __init__(self, size_ms: int, join: JoinFunction, offset_ms: int = 0) -> None:
        if size_ms <= 0:
            raise ValueError("join window size must be positive")
        self.size_ms = size_ms
        self.offset_ms = offset_ms
        self.join = join

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        assert element is not None
        start = window_start(ctx.timestamp, self.offset_ms, self.size_ms)
        max_ts = start + self.size_ms - 1
        if max_ts <= ctx.current_watermark:
            out.append({"kind": "late", "key": ctx.key, "side": element["side"],
                        "arrival_seq": element.get("arrival_seq"),
                        "event_time_ms": ctx.timestamp, "watermark_ms": ctx.current_watermark,
                        "window_start": start, "window_end": start + self.size_ms})
            return
        side = ctx.map_state(element["side"])
        rows = side.get(str(start)) or []
        rows.append(dict(element["row"]))
        side.put(str(start), rows)
        ctx.register_event_time_timer(max_ts)

    def on_timer(self, timestamp: int, ctx: ProcessContext, out: list[Any]) -> None:
        start = timestamp + 1 - self.size_ms
        slot = str(start)
        lefts = ctx.map_state(LEFT).get(slot) or []
        rights = ctx.map_state(RIGHT).get(slot) or []
        ctx.map_state(LEFT).remove(slot)
        ctx.map_state(RIGHT).remove(slot)
        for row in self.join(ctx.key, start, start + self.size_ms, lefts, rights):
            out.append({"kind": "joined", "row": row})
