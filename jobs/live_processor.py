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

from jobs.key_runner import KeyRunner, output_schema
from operators.pipeline import PipelineSpec
from operators.time import MAX_TIMESTAMP

__all__ = ["SPARK_DELAY", "WindowProcessor", "output_schema"]

SPARK_DELAY = "1 millisecond"
"""Spark's watermark = max recorded watermark - 1 ms (see module docstring)."""
EVENT_TIME_KIND = 0

STATE_SCHEMA = StructType([StructField("snapshot", StringType(), True)])


def _decimal_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in key state")


class WindowProcessor(StatefulProcessor):
    """Runs the pipeline's window operator for one key per call."""

    def __init__(self, spec: PipelineSpec, *, record_assignments: bool = False) -> None:
        self.spec = spec
        self.record_assignments = record_assignments

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("operator_state", STATE_SCHEMA)
        self.runner = KeyRunner(self.spec, record_assignments=self.record_assignments)
        self.driver = self.runner.driver

    # -- key state in and out -------------------------------------------------------------------

    def _load(self, key: str) -> None:
        """Restore the key. Its state also remembers which Spark timers it registered, so
        saving needs no ``listTimers`` call: every state-store call is a round trip to the
        JVM, and with many keys per batch they are the live job's main cost."""
        driver = self.driver
        self.runner.reset_clocks()
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
        if rows:
            yield self.runner.frame(rows)

    # -- Spark's callbacks (keyword names are part of Spark's contract) ---------------------------

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:  # noqa: N802
        (key_value,) = key
        chunks = list(rows)
        frame = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
        self._load(key_value)
        output = self.runner.process(key_value, frame)
        self._save(key_value)
        yield from self._output(output)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo  # noqa: N802
                           ) -> Iterator[pd.DataFrame]:
        (key_value,) = key
        self._load(key_value)
        self.registered.discard(expiredTimerInfo.getExpiryTimeInMs())  # Spark removed it
        output = self.runner.fire(key_value, timerValues.getCurrentWatermarkInMs() + 1)
        self._save(key_value)
        yield from self._output(output)

    def close(self) -> None:
        pass
