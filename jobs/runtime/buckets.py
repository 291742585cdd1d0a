"""Operator state in Spark's state store, many keys per Python call: keys grouped in buckets.

``transformWithStateInPandas`` calls a processor once per grouping key and each state or timer
operation is a round trip to the JVM. Grouped by the record key, a micro-batch over thousands
of keys paid thousands of calls and round trips (the live stream ran at a few hundred records
per second). Here the grouping key is a *bucket* of keys (``pmod(xxhash64(key), buckets)``):
one call per bucket gets all its keys' new rows as one frame, the bucket's state is one value
(an engine-defined blob, e.g. Arrow IPC bytes), and the bucket has one Spark timer, at the
earliest moment any of its keys needs waking. Engines (jobs.live.standard,
jobs.live.keyed, the Nexmark queries) implement :class:`BucketEngine`; this module is the
bridge they share.

Timers: every record carries the watermark recorded in the arrival log, and engines fire
with it. Spark's watermark only wakes buckets that get no records: the input declares
``watermark_ms`` as its event-time column with a delay of 1 ms, so Spark's watermark is ``max
recorded watermark - 1`` and never drops a row (a row's recorded watermark is never below an
earlier one); an operator deadline at ``ts`` is registered with Spark at ``ts - 1``, which Spark
fires once a recorded watermark reaches ``ts`` (Spark fires a timer when its time is ``<=`` the
watermark), and the woken bucket fires at ``Spark watermark + 1``, a watermark some record
carried. Every pane depends only on its key's own records and timers (docs/semantics.md), so
the batch at which a timer fires changes nothing.

Packed input (jobs.runtime.packing) brings every bucket a tick in every micro-batch with data,
with the micro-batch's largest recorded watermark: the processor fires at it after the
bucket's records, so what a micro-batch's watermark makes due is written with that
micro-batch. Spark's timer then finds nothing left to fire in the batch without data after it,
and a crash before that batch leaves the tables a whole prefix of the log.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any, Protocol

import msgspec
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from jobs.runtime.worker_gc import spare_live_objects
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK

SPARK_DELAY = "1 millisecond"
"""Spark's watermark = max recorded watermark - 1 ms (see the module docstring)."""
BUCKET_COLUMN = "_bucket"
STATE_SCHEMA = StructType([StructField("blob", BinaryType(), True),
                           StructField("timer", LongType(), True)])


class BucketEngine(Protocol):
    """One bucket's operator state and logic, loaded for one call and dumped after it."""

    def load(self, blob: bytes | None) -> None:
        """Restore the bucket (``None``: a new bucket)."""

    def process(self, rows: pd.DataFrame) -> list[pd.DataFrame | pa.Table]:
        """The bucket's new rows (any key order): process them, fire what their recorded
        watermarks make due, and return the output (frames, or Arrow tables when the
        processor packs its output)."""

    def fire(self, watermark: int) -> list[pd.DataFrame | pa.Table]:
        """Fire what ``watermark`` (one a record carried) makes due."""

    def dump(self) -> bytes | None:
        """The bucket's state, ``None`` when it holds nothing."""

    def next_deadline(self) -> int | None:
        """The earliest watermark at which something of this bucket fires (``None``: never)."""


def bucket_column(buckets: int, key: str = "key") -> Column:
    """The bucket of a record's key: stable across runs and engines (Spark's xxhash64)."""
    return F.pmod(F.xxhash64(F.col(key)), F.lit(buckets)).cast("int")


def with_event_time(arrivals: DataFrame, watermark: str = "watermark_ms") -> DataFrame:
    """The input's event-time column for Spark's watermark (see the module docstring), from
    the recorded watermark (``watermark``: its column)."""
    return (arrivals.withColumn("_watermark",
                                F.timestamp_millis(F.greatest(watermark, F.lit(1))))
            .withWatermark("_watermark", SPARK_DELAY))


class BucketProcessor(StatefulProcessor):
    """Runs an engine per bucket and call; keeps its blob and its one timer in Spark.
    ``packed``: the input rows are packs of records; ``packed_output``: the Arrow schema of
    the engine's output rows, which then leave each call packed (jobs.runtime.packing)."""

    def __init__(self, make_engine: Callable[[], BucketEngine], packed: bool = False,
                 decimals_as_units: bool = False, packed_output: pa.Schema | None = None
                 ) -> None:
        self.make_engine = make_engine
        self.packed = packed
        self.packed_output = packed_output
        # packed exact decimals as integers of nanounits where they fit (``unpack``): only
        # for engines that take them (the standard and keyed windows', not a user's process
        # function)
        self.decimals_as_units = decimals_as_units

    def init(self, handle: StatefulProcessorHandle) -> None:
        spare_live_objects()  # a task's start in the worker
        self.handle = handle
        self.state = handle.getValueState("bucket", STATE_SCHEMA)
        self.engine = self.make_engine()

    def _load(self) -> int | None:
        stored = self.state.get()
        self.engine.load(None if stored is None else stored[0])
        return None if stored is None else stored[1]

    def _save(self, timer: int | None, output: list[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        deadline = self.engine.next_deadline()
        wanted = deadline - 1 if deadline is not None and deadline < MAX_TIMESTAMP else None
        if timer != wanted:
            if timer is not None:
                self.handle.deleteTimer(timer)
            if wanted is not None:
                self.handle.registerTimer(wanted)
        blob = self.engine.dump()
        if blob is None and wanted is None:
            self.state.clear()
        else:
            self.state.update((blob, wanted))
        if self.packed_output is not None:
            from jobs.runtime.packing import PACKED_OUTPUT, pack_output

            packs = pack_output(output, self.packed_output)
            if packs:
                yield pd.DataFrame({PACKED_OUTPUT: packs})
            return
        for frame in output:
            if len(frame):
                yield frame

    # -- Spark's callbacks (keyword names are part of Spark's contract) ---------------------------

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:  # noqa: N802
        chunks = list(rows)
        frame = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
        timer = self._load()
        if not self.packed:
            yield from self._save(timer, self.engine.process(frame))
            return
        yield from self._save(timer, self._process_packed(frame))

    def _process_packed(self, packs: pd.DataFrame) -> list[pd.DataFrame | pa.Table]:
        """A micro-batch's packs of this bucket, ticks included (jobs.runtime.packing): its
        records processed, then what the micro-batch's watermark makes due fired, so that
        the panes it makes due are written with this micro-batch even for a bucket whose
        own records carried a lower watermark, or that had none."""
        from jobs.runtime.packing import PACKED_COLUMN, PACKED_WATERMARK, is_tick, unpack

        ticks = packs[PACKED_COLUMN].map(is_tick).to_numpy(dtype=bool)
        watermark = int(packs[PACKED_WATERMARK].max())
        records = packs[~ticks]
        if not len(records):
            return self.engine.fire(watermark)
        output = self.engine.process(unpack(records, self.decimals_as_units))
        if watermark > int(records[PACKED_WATERMARK].max()):
            output += self.engine.fire(watermark)
        return output

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo  # noqa: N802
                           ) -> Iterator[pd.DataFrame]:
        self._load()
        # Spark removed the timer that expired
        output = self.engine.fire(timerValues.getCurrentWatermarkInMs() + 1)
        yield from self._save(None, output)

    def close(self) -> None:
        # the task's end: the engine and its state were made after the task's freeze
        # (jobs.runtime.worker_gc); nothing of them outlives it
        self.engine = self.state = self.handle = None


def _decimal_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in key state")


_META_WATERMARK = b"watermark"
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class KeySnapshots:
    """A bucket's keys for engines that keep a JSON snapshot per key (the operator library's
    ``snapshot_key``): one Arrow table of key, snapshot and next event-time timer, so a call
    parses only the keys it touches; untouched keys stay text."""

    def __init__(self) -> None:
        self.snapshots: dict[str, str] = {}
        self.timers: dict[str, int] = {}
        self.watermark = MIN_WATERMARK
        """The largest recorded watermark the bucket has fired at."""

    def load(self, blob: bytes | None) -> None:
        self.snapshots, self.timers, self.watermark = {}, {}, MIN_WATERMARK
        if blob is None:
            return
        table = pa.ipc.open_stream(io.BytesIO(blob)).read_all()
        keys = table.column("key").to_pylist()
        self.snapshots = dict(zip(keys, table.column("snapshot").to_pylist(), strict=True))
        self.timers = {k: t for k, t in zip(keys, table.column("timer").to_pylist(),
                                            strict=True) if t is not None}
        self.watermark = int((table.schema.metadata or {}).get(_META_WATERMARK, MIN_WATERMARK))

    def dump(self) -> bytes | None:
        if not self.snapshots:
            return None
        keys = list(self.snapshots)
        table = pa.table({"key": pa.array(keys, pa.string()),
                          "snapshot": pa.array([self.snapshots[k] for k in keys], pa.string()),
                          "timer": pa.array([self.timers.get(k) for k in keys], pa.int64())})
        table = table.replace_schema_metadata({_META_WATERMARK: str(self.watermark)})
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue()

    def next_deadline(self) -> int | None:
        return min(self.timers.values()) if self.timers else None

    def get(self, key: str) -> dict[str, Any] | None:
        stored = self.snapshots.get(key)
        if stored is None:
            return None
        try:  # msgspec reads what json.dumps wrote, faster; NaN and huge ints: json
            return _decode(stored)
        except msgspec.DecodeError:
            return json.loads(stored)

    def holds(self, key: str) -> bool:
        """Whether the key has state."""
        return key in self.snapshots

    def put(self, key: str, snapshot: dict[str, Any] | None, event_timers: list[int], *,
            without_floats: bool = False) -> None:
        """Keep a key's snapshot (``None``: the key holds nothing) and its next timer.
        ``without_floats``: the snapshot holds only integers, strings, ``None``, lists and
        dicts, which msgspec writes as json does at a tenth of the cost (a float it would
        not: NaN becomes null)."""
        if snapshot is None:
            self.snapshots.pop(key, None)
            self.timers.pop(key, None)
            return
        self.snapshots[key] = (_encode(snapshot).decode() if without_floats else
                               json.dumps(snapshot, default=_decimal_default,
                                          separators=(",", ":")))
        due = [ts for ts in event_timers if ts < MAX_TIMESTAMP]
        if due:
            self.timers[key] = min(due)
        else:
            self.timers.pop(key, None)

    def due(self, watermark: int, skip: set[str]) -> list[str]:
        """Keys with a timer due at ``watermark`` (sorted), except ``skip``."""
        return sorted(k for k, t in self.timers.items() if t <= watermark and k not in skip)


def key_slices(keys: Any, order_by: Any) -> tuple[Any, list[tuple[str, int, int]]]:
    """The row order that groups ``keys`` together in ``order_by`` (arrival) order, and each
    key's ``(key, start, end)`` slice of it."""
    import numpy as np

    # keys as numbers in key order first: sorting strings by comparing them took a tenth of
    # the live sessions' Python
    codes, names = pd.factorize(keys, sort=True, use_na_sentinel=False)
    order = np.lexsort((order_by, codes))
    sorted_codes = codes[order]
    if not len(sorted_codes):
        return order, []
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    ends = [*starts[1:].tolist(), len(sorted_codes)]
    return order, [(str(names[code]), a, b) for code, a, b in
                   zip(sorted_codes[starts].tolist(), starts.tolist(), ends, strict=True)]


class SnapshotBucket:
    """The state calls of a bucket engine whose keys live in :class:`KeySnapshots` (the keyed
    windows, process functions and Nexmark queries): its state blob and next deadline are the
    snapshots' own. Subclasses set ``self.keys`` and add ``process`` and ``fire``."""

    keys: KeySnapshots

    def load(self, blob: bytes | None) -> None:
        self.keys.load(blob)

    def dump(self) -> bytes | None:
        return self.keys.dump()

    def next_deadline(self) -> int | None:
        return self.keys.next_deadline()
