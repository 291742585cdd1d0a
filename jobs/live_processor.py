"""The operator library inside Spark's state store: one key at a time, state in RocksDB.

``transformWithStateInPandas`` calls :class:`WindowProcessor` per key with that key's new rows
(``handleInputRows``) or when one of its timers expired (``handleExpiredTimer``). Each call
restores the key's operator state (windows, accumulators, timers, clocks) from a value state,
runs the very same ``WindowDriver`` the replay command and the tests use, and saves it back.

Watermarks: every record carries the watermark recorded in the arrival log, and that is the one
the operator uses. Spark's own watermark serves only to wake keys that get no records: the input
declares ``watermark_ms`` as its event-time column with a delay of 1 ms, so Spark's watermark is
``max recorded watermark - 1`` and never drops a row (a row's recorded watermark is never below an
earlier one); an operator timer at ``ts`` is registered with Spark at ``ts - 1``, which Spark
fires once a recorded watermark reaches ``ts`` (Spark fires a timer when its time is ``<=`` the
watermark). A woken key fires its due timers at ``Spark watermark + 1``; since every pane field
depends only on the key's own records and timers (docs/semantics.md), the batch boundary at which
that happens changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StringType, StructField, StructType

from operators.numbers import SPARK_TYPE
from operators.pipeline import PipelineSpec
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK

SPARK_DELAY = "1 millisecond"
"""Spark's watermark = max recorded watermark - 1 ms (see module docstring)."""
EVENT_TIME_KIND = 0

BASE_OUTPUT = [
    ("kind", "string"),  # pane | late | progress
    ("key", "string"),
    ("window_start_ms", "long"),
    ("window_end_ms", "long"),
    ("pane_index", "int"),
    ("timing", "string"),
    ("is_last", "boolean"),
    ("arrival_seq", "long"),
    ("event_time_ms", "long"),
    ("ingest_time_ms", "long"),
    ("watermark_ms", "long"),
    ("value", SPARK_TYPE),
    ("records", "long"),
    ("min_arrival_seq", "long"),
    ("min_event_ms", "long"),
    ("max_event_ms", "long"),
    ("min_ingest_ms", "long"),
    ("max_ingest_ms", "long"),
]


def aggregate_type(fn: str) -> str:
    return {"count": "long", "mean": "double"}.get(fn, SPARK_TYPE)


def output_schema(spec: PipelineSpec) -> str:
    """DDL of the processor's output: panes, late records and one progress row per key call,
    with the pipeline's aggregates as typed columns ``agg_<name>``."""
    columns = BASE_OUTPUT + [(f"agg_{a.name}", aggregate_type(a.fn)) for a in spec.aggregates]
    return ", ".join(f"{name} {kind}" for name, kind in columns)


_PANDAS_DTYPES = {"long": "Int64", "int": "Int32", "boolean": "boolean", "double": "Float64",
                  "string": "object"}

STATE_SCHEMA = StructType([StructField("snapshot", StringType(), True)])


def _decimal_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in key state")


class WindowProcessor(StatefulProcessor):
    """Runs the pipeline's window operator for one key per call."""

    def __init__(self, spec: PipelineSpec) -> None:
        self.spec = spec

    def init(self, handle: StatefulProcessorHandle) -> None:
        from operators.build import build_driver

        self.handle = handle
        self.state = handle.getValueState("operator_state", STATE_SCHEMA)
        self.driver = build_driver(self.spec)
        columns = BASE_OUTPUT + [(f"agg_{a.name}", aggregate_type(a.fn))
                                 for a in self.spec.aggregates]
        self.columns = [name for name, _ in columns]
        self.dtypes = {name: _PANDAS_DTYPES.get(kind, "object") for name, kind in columns}

    # -- key state in and out -------------------------------------------------------------------

    def _load(self, key: str) -> None:
        """Restore the key. Its state also remembers which Spark timers it registered, so
        saving needs no ``listTimers`` call: every state-store call is a round trip to the
        JVM, and with many keys per batch they are the live job's main cost."""
        driver = self.driver
        driver.watermark = MIN_WATERMARK  # each key carries its own clock (in its snapshot)
        driver.processing_time = MIN_WATERMARK
        stored = self.state.get()
        self.registered: set[int] = set()
        if stored is not None:
            saved = json.loads(stored[0])
            driver.restore_key(key, saved["operator"])
            self.registered = set(saved["spark_timers"])

    def _save(self, key: str) -> None:
        timers = [ts for kind, ts, _ in self.driver.pending_timers(key)
                  if kind == EVENT_TIME_KIND and ts < MAX_TIMESTAMP]
        snapshot = self.driver.snapshot_key(key, evict=True)
        wanted = {ts - 1 for ts in timers}
        for ts in self.registered - wanted:
            self.handle.deleteTimer(ts)
        for ts in wanted - self.registered:
            self.handle.registerTimer(ts)
        if snapshot is None and not wanted:
            self.state.clear()
        else:
            self.state.update((json.dumps({"operator": snapshot, "spark_timers": sorted(wanted)},
                                          default=_decimal_default, separators=(",", ":")),))

    def _output(self, rows: list[dict[str, Any]]) -> Iterator[pd.DataFrame]:
        """Nullable dtypes per column: an all-null column must not turn into float NaN,
        which Arrow cannot read as a long or a decimal."""
        if rows:
            yield pd.DataFrame(rows, columns=self.columns).astype(self.dtypes)

    def _emitted(self, key: str, extras: dict[int, tuple[int, Decimal | None]]
                 ) -> list[dict[str, Any]]:
        panes, late = self.driver.take_output()
        rows: list[dict[str, Any]] = []
        for pane in panes:
            row = {"kind": "pane", "key": key, "window_start_ms": pane.window_start,
                   "window_end_ms": pane.window_end, "pane_index": pane.pane_index,
                   "timing": pane.timing, "is_last": pane.is_last}
            row.update({f"agg_{name}": value for name, value in pane.values.items()})
            rows.append(row)
        for record in late:
            ingest_time, value = extras[record.arrival_seq]
            rows.append({"kind": "late", "key": key, "window_start_ms": record.window_start,
                         "window_end_ms": record.window_end, "arrival_seq": record.arrival_seq,
                         "event_time_ms": record.event_time_ms, "ingest_time_ms": ingest_time,
                         "watermark_ms": record.watermark_ms, "value": value})
        return rows

    # -- Spark's callbacks (keyword names are part of Spark's contract) ---------------------------

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:  # noqa: N802
        (key_value,) = key
        chunks = list(rows)
        frame = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
        if not frame.arrival_seq.is_monotonic_increasing:
            frame = frame.sort_values("arrival_seq", kind="stable")
        self._load(key_value)
        extras: dict[int, tuple[int, Decimal | None]] = {}
        driver = self.driver
        for row in frame.itertuples(index=False):
            element = json.loads(row.payload, parse_float=Decimal)
            element["value"] = row.value
            extras[row.arrival_seq] = (row.ingest_time_ms, row.value)
            driver.process(key_value, row.event_time_ms, element, arrival_seq=row.arrival_seq,
                           watermark=row.watermark_ms, ingest_time=row.ingest_time_ms)
        output = self._emitted(key_value, extras)
        output.append({"kind": "progress", "key": key_value,
                       "arrival_seq": int(frame.arrival_seq.max()), "records": len(frame),
                       "min_arrival_seq": int(frame.arrival_seq.min()),
                       "min_event_ms": int(frame.event_time_ms.min()),
                       "max_event_ms": int(frame.event_time_ms.max()),
                       "min_ingest_ms": int(frame.ingest_time_ms.min()),
                       "max_ingest_ms": int(frame.ingest_time_ms.max())})
        self._save(key_value)
        yield from self._output(output)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo  # noqa: N802
                           ) -> Iterator[pd.DataFrame]:
        (key_value,) = key
        self._load(key_value)
        self.registered.discard(expiredTimerInfo.getExpiryTimeInMs())  # Spark removed it
        self.driver.advance(timerValues.getCurrentWatermarkInMs() + 1, MIN_WATERMARK)
        output = self._emitted(key_value, {})
        self._save(key_value)
        yield from self._output(output)

    def close(self) -> None:
        pass
