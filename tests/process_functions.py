"""Process functions the tests name in pipelines (``tests.process_functions:FailsWhile``):
importable by Spark's Python workers, as the project's code is."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from operators.process_function import KeyedProcessFunction, ProcessContext
from operators.timers import PROCESSING_TIME


class FailsWhile(KeyedProcessFunction):
    """Emits each record's position; raises on the record at ``at_seq`` while the file
    ``marker`` exists (the bug; deleting the file is the fix, the version unchanged)."""

    def __init__(self, marker: str, at_seq: int) -> None:
        self.marker = Path(marker)
        self.at_seq = at_seq

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        if ctx.arrival_seq == self.at_seq and self.marker.exists():
            raise ValueError("a bug in the user's code")
        out.append({"seq": ctx.arrival_seq, "at_ms": ctx.timestamp})


class Timeouts(KeyedProcessFunction):
    """Both kinds of timers, used so that their order shows in the rows: each element counts
    and re-arms an inactivity timeout on the ingest clock (Flink's pattern: delete the armed
    timer, register a new one) and sets an event-time timer; each firing emits its kind, time,
    the count so far and how many firings preceded it; a processing-time firing also sets an
    event-time timer 1 ms after its own time."""

    def __init__(self, idle_ms: int = 1_000, event_ms: int = 500) -> None:
        self.idle_ms = idle_ms
        self.event_ms = event_ms

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        count = ctx.value_state("count")
        count.update((count.value() or 0) + 1)
        armed = ctx.value_state("armed")
        if armed.value() is not None:
            ctx.delete_processing_time_timer(armed.value())
        due = ctx.current_processing_time + self.idle_ms
        ctx.register_processing_time_timer(due)
        armed.update(due)
        ctx.register_event_time_timer(ctx.timestamp + self.event_ms)

    def on_timer(self, timestamp: int, ctx: ProcessContext, out: list[Any]) -> None:
        fired = ctx.value_state("fired")
        number = (fired.value() or 0) + 1
        fired.update(number)
        processing = ctx.time_domain == PROCESSING_TIME
        out.append({"domain": "processing" if processing else "event", "at_ms": timestamp,
                    "count": ctx.value_state("count").value() or 0, "fired": number})
        if processing:
            ctx.value_state("armed").clear()
            ctx.register_event_time_timer(timestamp + 1)
