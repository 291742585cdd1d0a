"""A Delta data file written by Arrow's Parquet writer, and the add action that commits it.

delta-rs writes an append with its own Parquet encoder (arrow-rs). On the arrival log's rows
(13 columns, a JSON payload each) that cost 0.34-0.45 µs of CPU a row; Arrow's C++ writer
wrote the same rows, with Snappy and statistics for every column, in 0.19-0.20 µs
(benchmarks/history.md). Ingest appends every record it reads, so an unpartitioned table's
append writes its file with Arrow and commits it with delta-rs's own transaction
(``DeltaTable.create_write_transaction``): the same Delta protocol, the same optimistic
concurrency and transaction ids, the same file layout.

The add action carries the statistics Delta readers skip files by (the live source plans its
micro-batches by the log's ``arrival_seq`` bounds, Spark skips by any column's), taken from
the Parquet footer the writer just made. A bound is written only where it is exact at the
protocol's precision: integers, dates, timestamps in whole milliseconds, strings of at most
:data:`STRING_PREFIX` characters. Any other column has no bounds, which a reader takes as
"may hold anything": a file is then read, never wrongly skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.store import storage

if TYPE_CHECKING:
    from deltalake.transaction import AddAction

STRING_PREFIX = 32
"""Strings longer than this get no bounds (Spark's Delta writer truncates them to 32
characters, delta-rs to a prefix; a bound that is not the value is left out here instead)."""
COMPRESSION = "snappy"
"""Delta's default codec, as delta-rs and Spark write it."""
_WRITER_VERSION_WITHOUT_FEATURES = 2
"""Writer version 2 asks for append-only tables and non-null columns only; later versions
(check constraints, generated or identity columns, column mapping, row tracking) ask for what
only a full Delta writer does, so such tables keep delta-rs's own write."""


def takes_arrow_files(table: Any, data: pa.Table) -> bool:
    """Whether appending ``data`` to ``table`` (a delta-rs ``DeltaTable``) can be an
    Arrow-written file: the table is unpartitioned and asks nothing of a writer beyond non-null
    columns, ``data`` has its schema in the types Delta stores as they are (:func:`_stored_as_is`)
    and no null where the table allows none. Anything else keeps delta-rs's own write, with its
    casts, its checks and its errors."""
    from deltalake import Schema

    if not all(_stored_as_is(field.type) for field in data.schema):
        return False
    metadata = table.metadata()
    configuration = metadata.configuration or {}
    schema = table.schema()
    try:
        same_schema = Schema.from_arrow(data.schema) == schema
    except Exception:  # noqa: BLE001 - a type delta-rs's own write would cast first
        return False
    return (same_schema and not metadata.partition_columns
            and table.protocol().min_writer_version <= _WRITER_VERSION_WITHOUT_FEATURES
            and not any(key.startswith("delta.constraints.") for key in configuration)
            and configuration.get("delta.columnMapping.mode", "none") == "none"
            and not any("delta.invariants" in (field.metadata or {}) for field in schema.fields)
            and not any(data.column(field.name).null_count for field in data.schema
                        if not field.nullable))


def _stored_as_is(kind: pa.DataType) -> bool:
    """A flat type whose Parquet form is Delta's own (signed integers, not unsigned ones;
    timestamps in microseconds and UTC; no nesting): anything else delta-rs casts first."""
    return (pa.types.is_signed_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_boolean(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind) or pa.types.is_date32(kind)
            or pa.types.is_decimal128(kind)
            or (pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz == "UTC"))


@dataclass(frozen=True)
class ColumnEncodings:
    """How a table's columns are encoded where Parquet's default (a dictionary for every
    column, falling back to plain values) costs more than it saves: a column of values that
    rarely repeat (a line's text, a decimal) builds a dictionary it then drops, and a column of
    rising integers (positions, times) is smaller and quicker to write and read as deltas.

    On the arrival log's rows (benchmarks/history.md, "Landing lines read flat"), writing
    took 239-265 ns a row against 337-384 with the defaults, reading six columns back 55-71
    against 78-98, and the file was 8 % smaller."""

    plain: frozenset[str] = frozenset()
    """Columns written without a dictionary."""
    deltas: frozenset[str] = frozenset()
    """Integer or timestamp columns written as ``DELTA_BINARY_PACKED`` (no dictionary)."""

    def writer_options(self, names: list[str]) -> dict[str, Any]:
        """``pyarrow.parquet.write_table``'s options for a table of these columns (any column
        named here that the table lacks is left out)."""
        present = set(names)
        deltas = self.deltas & present
        if not (self.plain & present or deltas):
            return {}
        dictionary = [name for name in names if name not in self.plain and name not in deltas]
        return {"use_dictionary": dictionary,
                "column_encoding": dict.fromkeys(sorted(deltas), "DELTA_BINARY_PACKED")}


def write_file(location: str, data: pa.Table, encodings: ColumnEncodings | None = None
               ) -> tuple[str, int, pq.FileMetaData]:
    """``data`` as a new Parquet file in the table's folder: its name (relative to the
    table), its size in bytes and its footer."""
    name = f"part-00000-{uuid.uuid4()}-c000.{COMPRESSION}.parquet"
    full = storage.join(location, name)
    if storage.is_local(full):
        sink = pa.OSFile(str(storage.local_path(full)), "wb")
    else:
        filesystem, path = storage.arrow_filesystem(full)
        sink = filesystem.open_output_stream(path)
    collected: list[pq.FileMetaData] = []
    with sink:
        options = encodings.writer_options(data.schema.names) if encodings else {}
        pq.write_table(data, sink, compression=COMPRESSION, metadata_collector=collected,
                       **options)
        size = sink.tell()
    return name, size, collected[0]


def add_action(name: str, size: int, footer: pq.FileMetaData, schema: pa.Schema
               ) -> AddAction:
    """The add action of a file :func:`write_file` wrote."""
    from deltalake.transaction import AddAction

    return AddAction(name, size, {}, int(time.time() * 1000), True,
                     json.dumps(file_statistics(footer, schema), separators=(",", ":")))


def file_statistics(footer: pq.FileMetaData, schema: pa.Schema) -> dict[str, Any]:
    """Delta's per-file statistics from a Parquet footer: the row count, each top-level
    column's null count, and its bounds where :func:`_bound` can state them exactly."""
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    if footer.num_columns != len(schema) or not all(map(_stored_as_is, schema.types)):
        # a nested column has several Parquet leaves, and the leaves no longer follow the
        # fields one to one: the row count only
        return {"numRecords": footer.num_rows}
    for index, field in enumerate(schema):
        chunks = [footer.row_group(group).column(index) for group in
                  range(footer.num_row_groups)]
        statistics = [chunk.statistics for chunk in chunks]
        if any(stat is None or not stat.has_null_count for stat in statistics):
            continue
        nulls[field.name] = sum(stat.null_count for stat in statistics)
        if any(not stat.has_min_max and stat.null_count < chunk.num_values
               for stat, chunk in zip(statistics, chunks, strict=True)):
            continue  # a chunk with values but no bounds (too long to keep, say)
        with_values = [stat for stat in statistics if stat.has_min_max]
        if not with_values:
            continue  # every value null
        try:
            low = _bound(field.type, min(stat.min for stat in with_values))
            high = _bound(field.type, max(stat.max for stat in with_values))
        except (ValueError, OverflowError):  # a time beyond Python's datetime
            continue
        if low is not None and high is not None:
            minimum[field.name], maximum[field.name] = low, high
    return {"numRecords": footer.num_rows, "minValues": minimum, "maxValues": maximum,
            "nullCount": nulls}


def _bound(kind: pa.DataType, value: Any) -> Any:
    """A footer's bound in Delta's JSON form, or ``None`` where it would not be exact."""
    if pa.types.is_integer(kind):
        return int(value)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return value if len(value) <= STRING_PREFIX else None
    if pa.types.is_date32(kind):
        return value.isoformat()
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        if value.microsecond % 1000:
            return None  # the protocol's bounds are milliseconds
        return value.astimezone(dt.UTC).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")
    return None
