"""A Nexmark query for one key at a time: what the Spark runtimes (backfill and live) run.

Spark groups the arrival log by the query's key and hands each key's records to a
:class:`QueryRunner`, in arrival order; the live stream also restores the key's state before and
snapshots it after (JSON, in its state store) and wakes the key when the watermark passes one
of its timers. The runner turns what the query's operator emits into plain rows:

- ``("row", {...})``: a result row in the query's columns (Q5: its first stage, the count per
  auction and window, which stage 2 turns into the hot items in Spark);
- ``("late", {...})``: a record that missed a window (``key``, ``arrival_seq``,
  ``event_time_ms``, ``watermark_ms``, ``window_start``, ``window_end``; Q8 adds ``side``).

Allowed lateness is 0 in every query, so each window emits exactly one pane, final when it is
emitted: rows can be appended as they come. Nothing here imports Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nexmark.queries import Q5, Q7, Q8, Q11, Q12
from nexmark.runner import Row, WindowQuery, late_row
from operators.process_function import KeyedProcessDriver
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.timers import EVENT_TIME
from operators.window_operator import WindowDriver

Output = tuple[str, Row]


class QueryRunner:
    """Per-key execution of one query (Q5's first stage, Q7, Q8, Q11 or Q12)."""

    def __init__(self, query: Q5 | Q7 | Q8 | Q11 | Q12) -> None:
        self.query = query
        self.windowed = isinstance(query, WindowQuery)
        self.driver: WindowDriver | KeyedProcessDriver = (
            WindowDriver(query.window_operator()) if self.windowed
            else KeyedProcessDriver(query.process_function()))

    # -- state between calls (the live stream's state store) -----------------------------------

    def restore(self, key: str, snapshot: Mapping[str, Any] | None) -> None:
        """Load the key (a fresh driver clock: each key carries its own in its snapshot)."""
        self.driver.watermark = MIN_WATERMARK
        self.driver.processing_time = MIN_WATERMARK
        self.driver.restore_key(key, snapshot)

    def event_timers(self, key: str) -> list[int]:
        """The key's pending event-time timers (a live runtime mirrors them as its own)."""
        flat = self.driver.timers.export_key(key)
        return [flat[i + 1] for i in range(0, len(flat), 4)
                if flat[i] == EVENT_TIME and flat[i + 1] < MAX_TIMESTAMP]

    def snapshot(self, key: str) -> dict[str, Any] | None:
        """The key's state and timers, JSON-able, and the key dropped from the driver."""
        return self.driver.snapshot_key(key, evict=True)

    # -- records and timers --------------------------------------------------------------------

    def process(self, key: str, records: Iterable[Mapping[str, Any]]) -> list[Output]:
        """The key's records (query records, :mod:`nexmark.arrival`) in arrival order."""
        query = self.query
        driver = self.driver
        for record in records:
            if self.windowed:
                driver.process(key, query.timestamp_of(record), query.element_of(record),
                               arrival_seq=int(record["arrival_seq"]),
                               watermark=query.watermark_of(record),
                               ingest_time=int(record["ingest_time_ms"]))
            else:
                driver.process(key, int(record["event_time_ms"]), query.element_of(record),
                               watermark=int(record["watermark_ms"]),
                               ingest_time=int(record["ingest_time_ms"]))
        return self.output()

    def fire(self, watermark: int) -> list[Output]:
        """Fire the timers due at ``watermark`` (one a record of the log carried)."""
        self.driver.advance(watermark, MIN_WATERMARK)
        return self.output()

    def output(self) -> list[Output]:
        if self.windowed:
            panes, late = self.driver.take_output()
            rows: list[Output] = [("row", row) for pane in panes
                                  for row in self.query.rows_of(pane)]
            return rows + [("late", _late(late_row(item))) for item in late]
        items = self.driver.take_output()
        return [("row", item["row"]) if item["kind"] == "joined"
                else ("late", _late({k: v for k, v in item.items() if k != "kind"}))
                for item in items]


def _late(row: Row) -> Row:
    """Late rows in one shape for every query: the window as ``window_start/_end``."""
    return {"key": row["key"], "arrival_seq": row.get("arrival_seq"),
            "event_time_ms": row["event_time_ms"], "watermark_ms": row["watermark_ms"],
            "window_start": row["window_start"], "window_end": row["window_end"],
            "side": row.get("side")}
