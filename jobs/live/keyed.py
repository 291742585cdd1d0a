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

import pandas as pd

from jobs.runtime.buckets import KeySnapshots, SnapshotBucket, key_slices
from jobs.runtime.key_runner import KeyRunner, progress_row
from operators.pipeline import PipelineSpec
from operators.timers import EVENT_TIME

RECORD_COLUMNS = ("arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value",
                  "payload")


class KeyedWindows(SnapshotBucket):
    """One bucket of keys for the operator library (:class:`jobs.runtime.buckets.BucketEngine`)."""

    def __init__(self, spec: PipelineSpec) -> None:
        self.runner = KeyRunner(spec, record_assignments=True)
        self.keys = KeySnapshots()

    def _restore(self, key: str) -> None:
        self.runner.reset_clocks()
        self.runner.driver.restore_key(key, self.keys.get(key))

    def _save(self, key: str) -> None:
        driver = self.runner.driver
        timers = [ts for kind, ts, _ in driver.pending_timers(key) if kind == EVENT_TIME]
        self.keys.put(key, driver.snapshot_key(key, evict=True), timers)

    def process(self, rows: pd.DataFrame) -> list[pd.DataFrame]:
        watermark = max(self.keys.watermark, int(rows.watermark_ms.max()))
        order, slices = key_slices(rows.key.to_numpy(), rows.arrival_seq.to_numpy())
        columns = [rows[name].to_numpy()[order].tolist() for name in RECORD_COLUMNS]
        records = list(zip(*columns, strict=True))
        output: list[dict[str, Any]] = []
        for key, start, end in slices:
            self._restore(key)
            output += self.runner.process_records(key, records[start:end])
            output += self.runner.fire(key, watermark)
            self._save(key)
        output += self._fire_due(watermark, skip={key for key, _, _ in slices})
        self.keys.watermark = watermark
        output.append(progress_row(rows))
        return [self.runner.frame(output)]

    def fire(self, watermark: int) -> list[pd.DataFrame]:
        watermark = max(self.keys.watermark, watermark)
        output = self._fire_due(watermark, skip=set())
        self.keys.watermark = watermark
        return [self.runner.frame(output)] if output else []

    def _fire_due(self, watermark: int, skip: set[str]) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = []
        for key in self.keys.due(watermark, skip):
            self._restore(key)
            output += self.runner.fire(key, watermark)
            self._save(key)
        return output
