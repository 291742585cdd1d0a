"""A process pipeline's rows, between the per-key runner (operators.process_pipeline) and
Delta: records from arrival-log rows, and output and late rows as Arrow tables or, for the
backfill's Spark job, as one flat frame (the user's row as JSON, which round-trips every
declared type exactly)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from jobs.process.tables import EVENT_DATE, LATE_SCHEMA, OUTPUT_DATE, output_schema
from jobs.store import fast_writes
from operators.pipeline import PipelineSpec
from operators.process_pipeline import Emitted, Record

RECORD_COLUMNS = ("arrival_seq", "event_time_ms", "watermark_ms", "ingest_time_ms", "payload")
FLAT_SCHEMA = ("kind string, key string, emission long, row_json string, arrival_seq long, "
               "event_time_ms long, watermark_ms long, ingest_time_ms long")
"""The backfill's per-key output: ``output`` rows (the user's row as JSON) and ``late``
rows (the record that arrived behind the watermark)."""


def records(frame: pd.DataFrame) -> list[Record]:
    """A key's arrival-log rows (in arrival order) as the function's records; each record's
    fields are its landing line's JSON (numbers with a fraction as floats)."""
    columns = [frame[name].tolist() for name in RECORD_COLUMNS]
    return [Record(int(seq), int(event), int(watermark), int(ingest), _fields(payload))
            for seq, event, watermark, ingest, payload in zip(*columns, strict=True)]


_decode = msgspec.json.Decoder().decode


def _fields(payload: str | None) -> Any:
    """The payload's JSON: msgspec's decoder (a third of the json module's time per record),
    the json module for what msgspec refuses (``NaN``, integers beyond 64 bits), so the
    values are the json module's either way."""
    if not payload:
        return None
    try:
        return _decode(payload)
    except msgspec.DecodeError:
        return json.loads(payload)


def late_of(key: str, history: Sequence[Record]) -> list[dict[str, Any]]:
    """The key's records at or behind the watermark in force when they arrived."""
    return [{"kind": "late", "key": key, "arrival_seq": r.arrival_seq,
             "event_time_ms": r.event_time_ms, "watermark_ms": r.watermark_ms,
             "ingest_time_ms": r.ingest_time_ms}
            for r in history if r.event_time_ms <= r.watermark_ms]


def flat_frame(items: list[dict[str, Any]]) -> pd.DataFrame:
    """Items of :data:`FLAT_SCHEMA` (``output`` ones from :func:`output_item`) as a frame."""
    names = [c.split()[0] for c in FLAT_SCHEMA.split(", ")]
    frame = pd.DataFrame(items, columns=names)
    for name in ("emission", "arrival_seq", "event_time_ms", "watermark_ms", "ingest_time_ms"):
        frame[name] = frame[name].astype("Int64")
    for name in ("kind", "key", "row_json"):
        frame[name] = frame[name].astype("string")
    return frame


def output_item(emitted: Emitted) -> dict[str, Any]:
    return {"kind": "output", "key": emitted.key, "emission": emitted.emission,
            "row_json": json.dumps(emitted.row)}


def _days(ms: np.ndarray, time_zone: str) -> list:
    return list(pd.to_datetime(ms, unit="ms", utc=True).tz_convert(ZoneInfo(time_zone)).date)


def output_table(rows: pd.DataFrame, spec: PipelineSpec, time_zone: str) -> pa.Table:
    """Output rows (the declared columns, ``key``, ``emission``) in the output table's
    schema, with their day partition."""
    schema = fast_writes.arrow_schema(output_schema(spec))
    columns: dict[str, Any] = {}
    for column in spec.output:
        values = rows[column.name].tolist()
        columns[column.name] = [None if v is None or v is pd.NA or v != v else v
                                for v in values]
    columns["key"] = rows["key"].tolist()
    columns["emission"] = [int(v) for v in rows["emission"].tolist()]
    day_ms = np.asarray(columns[spec.day_column], dtype="int64")
    columns[OUTPUT_DATE] = _days(day_ms, time_zone)
    return pa.Table.from_pydict(columns, schema=schema)


def late_table(rows: pd.DataFrame, time_zone: str) -> pa.Table:
    """Late rows (``key``, ``arrival_seq``, ``event_time_ms``, ``watermark_ms``,
    ``ingest_time_ms``) in the late-records table's schema."""
    event = rows["event_time_ms"].to_numpy(dtype="int64")
    watermark = rows["watermark_ms"].to_numpy(dtype="int64")
    return pa.Table.from_pydict({
        "key": rows["key"].tolist(), "arrival_seq": rows["arrival_seq"].astype("int64").tolist(),
        "event_time_ms": event.tolist(),
        "event_time": pa.array(event * 1000, pa.timestamp("us", tz="UTC")),
        "watermark_ms": watermark.tolist(),
        "ingest_time_ms": rows["ingest_time_ms"].astype("int64").tolist(),
        "late_by_ms": (watermark - event).tolist(), EVENT_DATE: _days(event, time_zone),
    }, schema=fast_writes.arrow_schema(LATE_SCHEMA))
