"""The live stream's engine for pipelines the operator library runs per key (sessions, count,
delta and continuous triggers, evictors, composable triggers, user aggregates).

A bucket's state is the operator's JSON snapshot of each key (its windows, accumulators,
trigger state, timers and clocks) with the key's next event-time timer
(:class:`~jobs.runtime.buckets.KeySnapshots`). A call restores only the keys it needs (those
with rows, and those whose timer is due), runs each key's records in arrival order through
:class:`~jobs.runtime.key_runner.KeyRunner` (the very runtime the keyed backfill runs), fires
the key's timers at the watermark reached, and saves the keys back; untouched keys stay
serialised. Many keys per call and one state value per bucket replace a Python call and
several JVM round trips per key.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from jobs.live.session_growth import SessionGrowth
from jobs.runtime.buckets import KeySnapshots, SnapshotBucket, key_slices
from jobs.runtime.key_runner import KeyRunner, progress_row
from jobs.runtime.packing import decimals_of_units
from jobs.runtime.plain_sessions import computes_plain_groups
from operators.pipeline import PipelineSpec
from operators.standard_sessions import SessionDriver
from operators.timers import EVENT_TIME

RECORD_COLUMNS = ("arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value",
                  "payload")


class KeyedWindows(SnapshotBucket):
    """One bucket of keys for the operator library (:class:`jobs.runtime.buckets.BucketEngine`).
    ``closed_form``: sessions whose keys only grow skip the driver
    (jobs.live.session_growth)."""

    def __init__(self, spec: PipelineSpec, *, closed_form: bool = True) -> None:
        self.runner = KeyRunner(spec, record_assignments=True)
        self.keys = KeySnapshots()
        driver, schema = self.runner.driver, self.runner.arrow_schema
        self.growth = (SessionGrowth(spec, driver, schema)
                       if closed_form and computes_plain_groups(spec)
                       and isinstance(driver, SessionDriver) and schema is not None else None)

    def _restore(self, key: str) -> None:
        self.runner.reset_clocks()
        self.runner.driver.restore_key(key, self.keys.get(key))

    def _save(self, key: str) -> None:
        driver = self.runner.driver
        timers = [ts for kind, ts, _ in driver.pending_timers(key) if kind == EVENT_TIME]
        self.keys.put(key, driver.snapshot_key(key, evict=True), timers)

    def process(self, rows: pd.DataFrame) -> list[pa.Table | pd.DataFrame]:
        watermark = max(self.keys.watermark, int(rows.watermark_ms.max()))
        order, slices = key_slices(rows.key.to_numpy(), rows.arrival_seq.to_numpy())
        computed: list[pa.RecordBatch] = []
        driven = slices
        grown_before: dict[str, tuple[int, int]] = {}
        if self.growth is not None:
            grown = self.growth.grow(rows, order, slices, self.keys, watermark)
            for key, session in grown.sessions.items():  # a driven key restores it below
                self.keys.put(key, *self.runner.driver.session_snapshot(session),
                              without_floats=True)
            if grown.rows is not None:
                computed.append(grown.rows)
            driven = [(slices[index][0], slices[index][1] + done, slices[index][2])
                      for index, done in grown.driven]
            grown_before = _clocks_of_prefixes(rows, order, slices, grown.driven)
            order, driven = _only(order, driven)
        # no payload column when no engine of the stream reads one (jobs.live.queries)
        columns = [_values(rows[name], order) if name in rows else [None] * len(order)
                   for name in RECORD_COLUMNS]
        records = list(zip(*columns, strict=True))
        output: list[dict[str, Any]] = []
        for key, start, end in driven:
            self._restore(key)
            if key in grown_before:  # the driver's clocks as if it had run the grown records
                self.runner.raise_clocks(*grown_before[key])
            output += self.runner.process_records(key, records[start:end])
            output += self.runner.fire(key, watermark)
            self._save(key)
        output += self._fire_due(watermark, skip={key for key, _, _ in slices})
        self.keys.watermark = watermark
        output.append(progress_row(rows))
        return [self.runner.output(output, computed)]

    def fire(self, watermark: int) -> list[pa.Table | pd.DataFrame]:
        watermark = max(self.keys.watermark, watermark)
        output = self._fire_due(watermark, skip=set())
        self.keys.watermark = watermark
        return [self.runner.output(output)] if output else []

    def _fire_due(self, watermark: int, skip: set[str]) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = []
        for key in self.keys.due(watermark, skip):
            self._restore(key)
            output += self.runner.fire(key, watermark)
            self._save(key)
        return output


def _values(column: pd.Series, order: np.ndarray) -> list[Any]:
    """A column's values at ``order``, for the driver: exact decimals unpacked as
    nanounits (jobs.runtime.packing) become the ``Decimal`` values the operators take."""
    if isinstance(column.dtype, pd.Int64Dtype):
        present = column.notna().to_numpy()[order]
        units = column.to_numpy(dtype=np.int64, na_value=0)[order]
        return decimals_of_units(units, present).to_pylist()
    return column.to_numpy()[order].tolist()


def _clocks_of_prefixes(rows: pd.DataFrame, order: np.ndarray,
                        slices: list[tuple[str, int, int]], driven: list[tuple[int, int]]
                        ) -> dict[str, tuple[int, int]]:
    """The largest watermark and ingest time of each driven key's grown records, by key: what
    the driver's clocks would hold had it run them in this call. The key's saved clocks alone
    are not that: a record the driver runs after them may empty the key's state and start it
    again from the driver's clocks."""
    watermarks = rows["watermark_ms"].to_numpy(dtype=np.int64)
    ingests = rows["ingest_time_ms"].to_numpy(dtype=np.int64)
    clocks = {}
    for index, done in driven:
        if done:
            key, start, _ = slices[index]
            grown = order[start:start + done]
            clocks[key] = (int(watermarks[grown].max()), int(ingests[grown].max()))
    return clocks


def _only(order: np.ndarray, slices: list[tuple[str, int, int]]
          ) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """The rows of ``slices`` alone: their part of ``order`` and their slices of that."""
    parts, kept, at = [], [], 0
    for key, start, end in slices:
        parts.append(order[start:end])
        kept.append((key, at, at + end - start))
        at += end - start
    return (np.concatenate(parts) if parts else order[:0]), kept
