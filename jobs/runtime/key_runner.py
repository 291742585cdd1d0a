"""One key's records through the window operator, as output rows.

The live stream (keys' state in RocksDB between micro-batches, jobs.live.keyed) and the
keyed backfill (``mapInPandas`` over partitions cut at key boundaries,
jobs.runtime.key_partitions) both feed a key's records in arrival order to the same
``WindowDriver`` and turn what it emits into the same rows; this module is that shared part, so
the two runtimes cannot drift apart.

Rows are dicts over :func:`output_columns`; ``kind`` says what a row is:

- ``pane``: a window's pane with its aggregates (``agg_<name>``);
- ``late``: a record dropped for a window (the late-records table);
- ``assign``: a record added to a window, on time or late within lateness (``fate``); only when
  assignments are recorded, for late-data metrics of windows Spark cannot assign by itself;
- ``progress``: one per call with records: the arrival range and time bounds it covered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from operators.build import build_driver
from operators.numbers import SCALE, SPARK_TYPE
from operators.pipeline import PipelineSpec
from operators.standard_sessions import SessionDriver, is_standard_session
from operators.time import MIN_WATERMARK
from operators.user_functions import is_user_function, result_type
from operators.window_operator import DROPPED, WindowDriver

BASE_OUTPUT = [
    ("kind", "string"),  # pane | late | assign | progress
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
    ("fate", "string"),  # assign rows: on_time | late_within_lateness
    ("records", "long"),
    ("min_arrival_seq", "long"),
    ("min_event_ms", "long"),
    ("max_event_ms", "long"),
    ("min_ingest_ms", "long"),
    ("max_ingest_ms", "long"),
    ("emission", "long"),  # process pipelines' output rows: their number among the key's
]

_PANDAS_DTYPES = {"long": "Int64", "int": "Int32", "boolean": "boolean", "double": "Float64",
                  "string": "object"}


def aggregate_type(fn: str) -> str:
    if is_user_function(fn):
        return result_type(fn)
    return {"count": "long", "mean": "double"}.get(fn, SPARK_TYPE)


def value_columns(spec: PipelineSpec) -> list[tuple[str, str]]:
    """``(name, Spark type)`` of a pipeline's own values: its aggregates, or a process
    pipeline's output columns."""
    if spec.is_process:
        return [(c.name, c.type) for c in spec.output]
    return [(a.name, aggregate_type(a.fn)) for a in spec.aggregates]


def output_columns(spec: PipelineSpec) -> list[tuple[str, str]]:
    """``(name, Spark type)`` of every output column, the pipeline's values as
    ``agg_<name>``."""
    return BASE_OUTPUT + [(f"agg_{name}", kind) for name, kind in value_columns(spec)]


def output_schema(spec: PipelineSpec) -> str:
    """DDL of the output rows, for ``transformWithStateInPandas`` and ``applyInPandas``."""
    return ", ".join(f"{name} {kind}" for name, kind in output_columns(spec))


ARROW_TYPES = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(),
               "boolean": pa.bool_(), "double": pa.float64(), SPARK_TYPE: pa.decimal128(38, SCALE)}
"""The Arrow type of each Spark type an output column may have."""
_NULLABLE_DTYPES = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(),
                    pa.bool_(): pd.BooleanDtype(), pa.float64(): pd.Float64Dtype()}


def arrow_schema(spec: PipelineSpec) -> pa.Schema | None:
    """The output rows' Arrow schema, when every value a row holds is of its column's own
    Python type: built-in aggregates only. A user's aggregate result goes through pandas'
    typed conversion instead (``Int64`` refuses 2.5 where Arrow would truncate it, ``Float64``
    takes a ``Decimal`` Arrow refuses), in every runtime alike."""
    if spec.is_process or any(a.is_user_defined for a in spec.aggregates):
        return None
    return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in output_columns(spec)])


def reads_payload(spec: PipelineSpec) -> bool:
    """Whether :class:`KeyRunner` decodes each record's payload for ``spec``: not for session
    windows of the session driver whose aggregates read the arrival log's ``value`` or count
    records (the live stream then leaves payloads out of what it sends to Python)."""
    return not is_standard_session(spec) or any(
        a.field not in (None, "value") for a in spec.aggregates)


class KeyRunner:
    """A window driver for one key at a time, and the rows its output becomes.

    Session windows with the event-time trigger and built-in aggregates run on
    :class:`~operators.standard_sessions.SessionDriver`, which emits what the window operator
    emits at a fraction of its cost and keeps a key's state in the same snapshot format; their
    records' payloads are decoded only when an aggregate reads a field of it."""

    def __init__(self, spec: PipelineSpec, *, record_assignments: bool = False) -> None:
        standard = is_standard_session(spec)
        self.driver: WindowDriver | SessionDriver = (SessionDriver(spec) if standard
                                                     else build_driver(spec))
        self.reads_payload = reads_payload(spec)
        if record_assignments:
            self.driver.record_assignments()
        columns = output_columns(spec)
        self.columns = [name for name, _ in columns]
        self.dtypes = {name: _PANDAS_DTYPES.get(kind, "object") for name, kind in columns}
        self.arrow_schema = arrow_schema(spec)

    def reset_clocks(self) -> None:
        """Each key carries its own clocks (in its snapshot); the driver's global ones must not
        leak from one key to the next."""
        self.driver.watermark = MIN_WATERMARK
        self.driver.processing_time = MIN_WATERMARK

    def raise_clocks(self, watermark: int, processing_time: int) -> None:
        """Raise the driver's clocks to what a key's earlier records in the same call left."""
        self.driver.watermark = max(self.driver.watermark, watermark)
        self.driver.processing_time = max(self.driver.processing_time, processing_time)

    def process(self, key: str, frame: pd.DataFrame) -> list[dict[str, Any]]:
        """Feed the key's records (a frame of the arrival log's columns) in arrival order;
        the rows it emitted, and a progress row."""
        frame = _in_arrival_order(frame)
        rows = self.process_records(key, _records(frame))
        rows.append(progress_row(frame, key))
        return rows

    def history(self, key: str, frame: pd.DataFrame, watermark: int) -> list[dict[str, Any]]:
        """A key's whole history (a backfill): its records, then its timers fired at
        ``watermark`` (the log's last), where the live stream's final batch fires them. Of
        each window's panes only the latest is a row, as the results table keeps only it."""
        extras = self._feed(key, _records(_in_arrival_order(frame)))
        self.driver.advance(watermark, MIN_WATERMARK)
        return self.emitted(key, extras, latest_panes=True)

    def process_records(self, key: str, records: Iterable[tuple]) -> list[dict[str, Any]]:
        """Feed the key's records, ``(arrival_seq, event_time_ms, ingest_time_ms, watermark_ms,
        value, payload)`` in arrival order; the rows it emitted."""
        return self.emitted(key, self._feed(key, records))

    def _feed(self, key: str, records: Iterable[tuple]
              ) -> dict[int, tuple[int, int, int, Decimal | None]]:
        """Process the records; the arrival-log columns of each (for late and assign rows)."""
        driver = self.driver
        reads_payload = self.reads_payload
        extras: dict[int, tuple[int, int, int, Decimal | None]] = {}
        for arrival_seq, event_time, ingest_time, watermark, value, payload in records:
            element = json.loads(payload, parse_float=Decimal) if reads_payload else {}
            element["value"] = value
            extras[arrival_seq] = (event_time, ingest_time, watermark, value)
            driver.process(key, event_time, element, arrival_seq=arrival_seq,
                           watermark=watermark, ingest_time=ingest_time)
        return extras

    def fire(self, key: str, watermark: int) -> list[dict[str, Any]]:
        """Fire the key's event-time timers due at ``watermark`` (one that a record carried)."""
        self.driver.advance(watermark, MIN_WATERMARK)
        return self.emitted(key, {})

    def emitted(self, key: str, extras: dict[int, tuple[int, int, int, Decimal | None]], *,
                latest_panes: bool = False) -> list[dict[str, Any]]:
        """Rows for what the driver emitted since the last call; ``extras`` has the
        arrival-log columns of the records processed meanwhile (late and assign rows).
        ``latest_panes``: only each window's last pane among them."""
        driver = self.driver
        panes, late = driver.take_output()
        if latest_panes:  # panes come in pane_index order per window
            panes = list({(pane.window_start, pane.window_end): pane for pane in panes}.values())
        rows: list[dict[str, Any]] = []
        for pane in panes:
            row = {"kind": "pane", "key": key, "window_start_ms": pane.window_start,
                   "window_end_ms": pane.window_end, "pane_index": pane.pane_index,
                   "timing": pane.timing, "is_last": pane.is_last}
            row.update({f"agg_{name}": value for name, value in pane.values.items()})
            rows.append(row)
        for record in late:
            _, ingest_time, _, value = extras[record.arrival_seq]
            rows.append({"kind": "late", "key": key, "window_start_ms": record.window_start,
                         "window_end_ms": record.window_end, "arrival_seq": record.arrival_seq,
                         "event_time_ms": record.event_time_ms, "ingest_time_ms": ingest_time,
                         "watermark_ms": record.watermark_ms, "value": value})
        for arrival_seq, start, end, fate in driver.take_assignments():
            if fate == DROPPED:
                continue  # a late row already
            event_time, ingest_time, watermark, _ = extras[arrival_seq]
            rows.append({"kind": "assign", "key": key, "window_start_ms": start,
                         "window_end_ms": end, "arrival_seq": arrival_seq,
                         "event_time_ms": event_time, "ingest_time_ms": ingest_time,
                         "watermark_ms": watermark, "fate": fate})
        return rows

    def output(self, rows: list[dict[str, Any]], computed: Sequence[pa.RecordBatch] = ()
               ) -> pa.Table | pd.DataFrame:
        """The rows as an Arrow table where :func:`arrow_schema` allows (the live stream packs
        them as they are, jobs.runtime.packing), else as :meth:`frame`. ``computed``:
        rows already in Arrow (of :func:`arrow_schema`), put before ``rows``."""
        if self.arrow_schema is None:
            return self.frame(rows, computed)
        batch = pa.RecordBatch.from_pylist(rows, schema=self.arrow_schema)
        return pa.Table.from_batches([*computed, batch], schema=self.arrow_schema)

    def frame(self, rows: list[dict[str, Any]], computed: Sequence[pa.RecordBatch] = ()
              ) -> pd.DataFrame:
        """Nullable dtypes per column: an all-null column must not turn into float NaN, which
        Arrow cannot read as a long or a decimal. Through Arrow where :func:`arrow_schema`
        allows: half the cost of pandas reading a list of dicts, the same frame. ``computed``:
        rows already in Arrow (of :func:`arrow_schema`), put before ``rows``."""
        if self.arrow_schema is not None:
            return as_frame(self.output(rows, computed))
        if computed:
            raise ValueError("rows in Arrow need the runner's Arrow schema")
        # column by column: a frame of the dicts would hold a long column with nulls as
        # float64 first and round its values beyond 2**53
        return pd.DataFrame({name: pd.array([row.get(name) for row in rows], dtype=dtype)
                             for name, dtype in self.dtypes.items()})


def repeated(text: str, count: int) -> pa.Array:
    """``text`` ``count`` times, as Arrow strings (output rows of one kind)."""
    return pa.array([text], pa.string()).take(pa.array(np.zeros(count, dtype=np.int64)))


def shaped(columns: dict[str, pa.Array], count: int, schema: pa.Schema) -> pa.RecordBatch:
    """Every column of ``schema``, of its type; the ones a row kind lacks are null."""
    return pa.RecordBatch.from_arrays(
        [columns[f.name].cast(f.type) if f.name in columns else pa.nulls(count, f.type)
         for f in schema], schema=schema)


def as_frame(table: pa.Table) -> pd.DataFrame:
    """Output rows in Arrow as the frame :meth:`KeyRunner.frame` builds (nullable dtypes)."""
    return table.to_pandas(types_mapper=_NULLABLE_DTYPES.get)


def _in_arrival_order(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.arrival_seq.is_monotonic_increasing:
        return frame
    return frame.sort_values("arrival_seq", kind="stable")


def _records(frame: pd.DataFrame) -> Iterable[tuple]:
    return zip(frame.arrival_seq.tolist(), frame.event_time_ms.tolist(),
               frame.ingest_time_ms.tolist(), frame.watermark_ms.tolist(), frame.value.tolist(),
               frame.payload.tolist(), strict=True)


def progress_row(frame: pd.DataFrame, key: str | None = None) -> dict[str, Any]:
    """What a call consumed: its arrival range, record count and time bounds (the live sink
    derives the micro-batch's range and the days it touched from these)."""
    return {"kind": "progress", "key": key, "arrival_seq": int(frame.arrival_seq.max()),
            "records": len(frame), "min_arrival_seq": int(frame.arrival_seq.min()),
            "min_event_ms": int(frame.event_time_ms.min()),
            "max_event_ms": int(frame.event_time_ms.max()),
            "min_ingest_ms": int(frame.ingest_time_ms.min()),
            "max_ingest_ms": int(frame.ingest_time_ms.max())}
