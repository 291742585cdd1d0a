"""A spike alert: a large amount within a while after a small one, for the same key (the
pattern of Flink's fraud-detection walkthrough, on event time).

A small amount (below ``small``) sets a flag and an event-time timer ``within`` ms later that
clears it; a large amount (above ``large``) while the flag is set emits an alert and clears
the flag. The flag lives in the key's state; the timer is what keeps a stale small amount from
flagging a large one much later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.process_function import KeyedProcessFunction, ProcessContext
from operators.time import parse_duration_ms


class SpendSpike(KeyedProcessFunction):
    def __init__(self, small: float = 1.0, large: float = 500.0, within: str | int = "1m",
                 field: str = "value") -> None:
        self.small = float(small)
        self.large = float(large)
        self.within_ms = parse_duration_ms(within, setting="within")
        self.field = field

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        raw = (element or {}).get(self.field)
        if raw is None:
            return
        amount = float(raw)
        flag = ctx.value_state("small")
        if flag.value() is not None and amount > self.large:
            small_at, small_amount = flag.value()
            if ctx.timestamp - small_at <= self.within_ms:
                out.append({"user": ctx.key, "small_at_ms": small_at,
                            "large_at_ms": ctx.timestamp, "small_amount": small_amount,
                            "large_amount": amount})
            ctx.delete_event_time_timer(small_at + self.within_ms)
            flag.clear()
        if amount < self.small:
            previous = flag.value()
            if previous is not None:
                ctx.delete_event_time_timer(previous[0] + self.within_ms)
            flag.update([ctx.timestamp, amount])
            ctx.register_event_time_timer(ctx.timestamp + self.within_ms)

    def on_timer(self, timestamp: int, ctx: ProcessContext, out: list[Any]) -> None:
        flag = ctx.value_state("small")
        if flag.value() is not None and flag.value()[0] + self.within_ms == timestamp:
            flag.clear()
