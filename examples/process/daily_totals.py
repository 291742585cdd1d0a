"""Per key, the running total of the day, emitted when the day ends (midnight of a time zone).

Each record adds its ``value`` to its day's total (the day of its event time in
``time_zone``) and registers an event-time timer at that day's end; when the watermark passes
midnight the timer emits the day's total and clears it. A record for a day already emitted
(it arrived after the watermark passed that midnight) is left out: its day was closed, and the
late-records table lists it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo

from operators.process_function import KeyedProcessFunction, ProcessContext


class DailyTotals(KeyedProcessFunction):
    def __init__(self, time_zone: str = "UTC", field: str = "value") -> None:
        self.zone = ZoneInfo(time_zone)
        self.field = field
        self._span = (0, 0, dt.date.min)
        """The last day looked up: its first and past-last millisecond, and the day."""

    def _day(self, ms: int) -> dt.date:
        first, end, day = self._span
        if first <= ms < end:  # records of a key come mostly from one day: no time zone math
            return day
        day = dt.datetime.fromtimestamp(ms / 1000, tz=self.zone).date()
        start = dt.datetime.combine(day, dt.time(), tzinfo=self.zone)
        self._span = (int(start.timestamp() * 1000), self._midnight_after(day), day)
        return day

    def _midnight_after(self, day: dt.date) -> int:
        if day == self._span[2]:
            return self._span[1]
        start = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=self.zone)
        return int(start.timestamp() * 1000)

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        day = self._day(ctx.timestamp)
        end = self._midnight_after(day)
        if end - 1 <= ctx.current_watermark:
            return  # that day was emitted already
        days = ctx.map_state("days")
        total, events = days.get(day.isoformat(), [0.0, 0])
        value = (element or {}).get(self.field)
        days.put(day.isoformat(), [total + (float(value) if value is not None else 0.0),
                                   events + 1])
        ctx.register_event_time_timer(end - 1)

    def on_timer(self, timestamp: int, ctx: ProcessContext, out: list[Any]) -> None:
        day = self._day(timestamp).isoformat()
        days = ctx.map_state("days")
        found = days.get(day)
        if found is None:
            return
        out.append({"user": ctx.key, "day": day, "total": round(found[0], 9),
                    "events": found[1], "day_end_ms": timestamp})
        days.remove(day)
