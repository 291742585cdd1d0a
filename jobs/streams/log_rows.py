"""A batch's records as the arrival log's and the quarantine's rows, whichever source read them.

Both ingestors hand their good records and bad lines here as columns, so a landing folder's
batch and a Kafka topic's have the same positions, timestamps and day of ingest, and the two
tables one schema (:mod:`jobs.tables`).
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa

from jobs import tables
from jobs.store import fast_writes
from jobs.streams.landing.log import (
    Plan,
)
from operators.time import MIN_WATERMARK


def _timestamps(ms: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """Epoch milliseconds as UTC microsecond timestamps (null where not ``valid``)."""
    ms = np.asarray(ms, dtype="int64")
    mask = None if valid is None else ~valid
    return pa.array(np.where(valid, ms, 0) * 1000 if valid is not None else ms * 1000,
                    pa.timestamp("us", tz="UTC"), mask=mask)


def _arrow(column: Any, kind: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A column ingest kept as Arrow (the fast paths) or as a list."""
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column
    return pa.array(column, kind)


def arrival_table(good: dict[str, Any], plan: Plan) -> pa.Table:
    """The batch's good records (columns) in the arrival log's schema, positions assigned."""
    count = len(good["key"])
    event = np.asarray(good["event_time_ms"], dtype="int64")
    ingest = np.asarray(good["ingest_time_ms"], dtype="int64")
    watermark = np.asarray(good["watermark_ms"], dtype="int64")
    columns = {
        "arrival_seq": pa.array(np.arange(plan.first_seq, plan.first_seq + count,
                                          dtype="int64")),
        "ingest_batch": pa.array(np.full(count, plan.batch_id, dtype="int64")),
        "source_partition": _arrow(good["source_partition"], pa.string()),
        "source_file": _arrow(good["source_file"], pa.string()),
        "line_number": pa.array(np.asarray(good["line_number"], dtype="int32")),
        "key": _arrow(good["key"], pa.string()),
        "event_time_ms": pa.array(event), "event_time": _timestamps(event),
        "ingest_time_ms": pa.array(ingest), "ingest_time": _timestamps(ingest),
        "watermark_ms": pa.array(watermark),
        "watermark": _timestamps(watermark, watermark != MIN_WATERMARK),
        "value": _arrow(good["value"], pa.decimal128(38, 9)),
        "payload": _arrow(good["payload"], pa.string()),
    }
    return pa.Table.from_pydict(columns, schema=ARRIVAL_SCHEMA)


def quarantine_table(bad: dict[str, Any], plan: Plan, time_zone: str) -> pa.Table:
    """The batch's bad lines (columns) in the quarantine's schema; ``ingest_date`` is the day
    of the ingest time in the partitions' time zone, as the metrics count it."""
    count = len(bad["reason"])
    ingest = np.asarray(bad["ingest_time_ms"], dtype="int64")
    days = pd.to_datetime(ingest, unit="ms", utc=True).tz_convert(ZoneInfo(time_zone)).date
    columns = {
        "ingest_batch": pa.array(np.full(count, plan.batch_id, dtype="int64")),
        "source_partition": pa.array(bad["source_partition"], pa.string()),
        "source_file": pa.array(bad["source_file"], pa.string()),
        "line_number": pa.array(np.asarray(bad["line_number"], dtype="int32")),
        "ingest_time_ms": pa.array(ingest), "ingest_time": _timestamps(ingest),
        "ingest_date": pa.array(list(days), pa.date32()),
        "reason": pa.array(bad["reason"], pa.string()),
        "detail": pa.array(bad["detail"], pa.string()),
        "event_time_ms": pa.array(bad["event_time_ms"], pa.int64()),
        "raw_line": pa.array(bad["raw_line"], pa.string()),
    }
    return pa.Table.from_pydict(columns, schema=QUARANTINE_SCHEMA)


ARRIVAL_SCHEMA = fast_writes.arrow_schema(tables.ARRIVAL_LOG_SCHEMA)


QUARANTINE_SCHEMA = fast_writes.arrow_schema(tables.QUARANTINE_SCHEMA)
