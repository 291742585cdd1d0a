"""The windowed tables' shapes, shared by every runtime.

Whatever computed them (the vectorised backfill, the operator library per key, the live
stream), panes, late records and (record, window) fates become rows of the same tables through
these functions (the late-data metrics' aggregates are jobs.lateness.aggregates). That is half
of what makes a backfill equal the live stream: there is only one definition of each table.
"""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs import tables
from jobs.tables.days import window_end_date
from operators.pipeline import PipelineSpec
from operators.window_operator import DROPPED


@dataclass
class WindowOutputs:
    """What a computation of a range of days gives: the three tables' rows for the days
    ``[first_day, last_day]`` and the (record, window) rows they derive from."""

    results: DataFrame
    late: DataFrame
    metrics: DataFrame
    first_day: str
    last_day: str
    assigned: DataFrame
    persisted: DataFrame | None = None
    """What the outputs were computed from, if it was persisted; see :meth:`release`."""

    @property
    def keeps_assignments(self) -> bool:
        """True when ``assigned`` is the ``window_assignments`` table's content: the operator
        decided each record's window, so metrics must be kept as a table rather than
        recomputed from the log."""
        return self.persisted is not None

    def materialise(self) -> int:
        """Compute the persisted rows now, so that the writes which reuse them can run at
        once instead of each waiting for (or repeating) their computation; how many there
        are (0 when nothing is persisted)."""
        return self.persisted.count() if self.persisted is not None else 0

    def release(self) -> None:
        if self.persisted is not None:
            self.persisted.unpersist()


# -- row shapes ---------------------------------------------------------------------------------


def pane_results(panes: DataFrame, aggregate_names: list[str], time_zone: str) -> DataFrame:
    """Pane rows (``key``, window bounds, pane fields, ``agg_<name>`` values) in the results
    table's shape (the caller keeps the latest pane)."""
    return (panes.withColumn("window_start", F.timestamp_millis("window_start_ms"))
            .withColumn("window_end", F.timestamp_millis("window_end_ms"))
            .withColumn("window_end_date", window_end_date(F.col("window_end_ms"), time_zone))
            .select("key", "window_start_ms", "window_end_ms", "window_start", "window_end",
                    "window_end_date", *tables.PANE_COLUMNS,
                    *[F.col(f"agg_{name}").alias(name) for name in aggregate_names]))


def late_rows(late: DataFrame, time_zone: str) -> DataFrame:
    """Late rows in the late-records table's shape."""
    return (late.withColumn("event_time", F.timestamp_millis("event_time_ms"))
            .withColumn("window_end_date", window_end_date(F.col("window_end_ms"), time_zone))
            .select(*tables.LATE_RECORDS_SCHEMA.fieldNames()))


def assignment_rows(emitted: DataFrame, time_zone: str) -> DataFrame:
    """Assign and late rows of a runtime's output in the ``window_assignments`` table's shape
    (late rows are the dropped assignments)."""
    fate = F.when(F.col("kind") == "late", F.lit(DROPPED)).otherwise(F.col("fate"))
    return (emitted.where(F.col("kind").isin("assign", "late"))
            .withColumn("fate", fate)
            .withColumn("window_end_date", window_end_date(F.col("window_end_ms"), time_zone))
            .select(*tables.WINDOW_ASSIGNMENTS_SCHEMA.fieldNames()))











# -- the same shapes as Arrow tables, for the live sink's driver-side writes --------------------


def results_schema(spec: PipelineSpec) -> StructType:
    """The results table: window identity, pane fields, then the pipeline's aggregates (the
    types the runtimes compute them in)."""
    from jobs.runtime.key_runner import aggregate_type

    ddl = ", ".join([
        "key string, window_start_ms long, window_end_ms long, window_start timestamp, "
        "window_end timestamp, window_end_date date, pane_index int, timing string, "
        "is_last boolean", *[f"{a.name} {aggregate_type(a.fn)}" for a in spec.aggregates]])
    return _struct(ddl)


def _struct(ddl: str) -> StructType:
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        TimestampType,
    )

    simple = {"string": StringType(), "long": LongType(), "int": IntegerType(),
              "double": DoubleType(), "boolean": BooleanType(), "date": DateType(),
              "timestamp": TimestampType()}
    fields = []
    for column in ddl.split(", "):
        name, kind = column.split(" ", 1)
        if kind.startswith("decimal"):
            precision, scale = kind[8:-1].split(",")
            spark_type = DecimalType(int(precision), int(scale))
        else:
            spark_type = simple[kind]
        fields.append(StructField(name, spark_type, True))
    return StructType(fields)


def _days(end_ms: pd.Series | pa.ChunkedArray, time_zone: str) -> pa.Array:
    """The day of each window's max timestamp (``end - 1``) in ``time_zone``, as ``date32``:
    in numpy, once per distinct end (a session batch has a row per record, and a Python
    ``date`` per row was a third of its assignments' table)."""
    codes, distinct = pd.factorize(np.asarray(end_ms, dtype="int64"))
    moments = pd.to_datetime(distinct - 1, unit="ms", utc=True).tz_convert(ZoneInfo(time_zone))
    # the local wall time's calendar day: datetime64 to days floors, before 1970 too
    local = moments.tz_localize(None).to_numpy().astype("datetime64[D]").astype(np.int32)
    return pa.array(local, pa.date32()).take(pa.array(codes))


def _timestamps(ms: pd.Series) -> pa.Array:
    return pa.array(ms.to_numpy(dtype="int64") * 1000, pa.timestamp("us", tz="UTC"))


def results_table(panes: pd.DataFrame, spec: PipelineSpec, time_zone: str) -> pa.Table:
    """Pane rows of a runtime's output (the latest per window) in the results table's shape."""
    from jobs.store.fast_writes import arrow_schema

    schema = arrow_schema(results_schema(spec))
    columns = {
        "key": pa.array(panes["key"].tolist(), pa.string()),
        "window_start_ms": pa.array(panes["window_start_ms"].to_numpy(dtype="int64")),
        "window_end_ms": pa.array(panes["window_end_ms"].to_numpy(dtype="int64")),
        "window_start": _timestamps(panes["window_start_ms"]),
        "window_end": _timestamps(panes["window_end_ms"]),
        "window_end_date": _days(panes["window_end_ms"], time_zone),
        "pane_index": pa.array(panes["pane_index"].to_numpy(dtype="int32")),
        "timing": pa.array(panes["timing"].tolist(), pa.string()),
        "is_last": pa.array(panes["is_last"].astype(bool).tolist(), pa.bool_()),
    }
    for aggregate in spec.aggregates:
        values = panes[f"agg_{aggregate.name}"].tolist()
        columns[aggregate.name] = pa.array(
            [None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v
             for v in values], schema.field(aggregate.name).type)
    return pa.Table.from_pydict(columns, schema=schema)


def late_table(late: pd.DataFrame, time_zone: str) -> pa.Table:
    """Late rows of a runtime's output in the late-records table's shape."""
    from jobs.store.fast_writes import arrow_schema

    columns = {
        "key": pa.array(late["key"].tolist(), pa.string()),
        "arrival_seq": pa.array(late["arrival_seq"].to_numpy(dtype="int64")),
        "event_time_ms": pa.array(late["event_time_ms"].to_numpy(dtype="int64")),
        "event_time": _timestamps(late["event_time_ms"]),
        "ingest_time_ms": pa.array(late["ingest_time_ms"].to_numpy(dtype="int64")),
        "watermark_ms": pa.array(late["watermark_ms"].to_numpy(dtype="int64")),
        "window_start_ms": pa.array(late["window_start_ms"].to_numpy(dtype="int64")),
        "window_end_ms": pa.array(late["window_end_ms"].to_numpy(dtype="int64")),
        "window_end_date": _days(late["window_end_ms"], time_zone),
        "value": pa.array(late["value"].tolist(), pa.decimal128(38, 9)),
    }
    return pa.Table.from_pydict(columns, schema=arrow_schema(tables.LATE_RECORDS_SCHEMA))


def rows_of_kind(output: pa.Table, *kinds: str) -> pa.Table:
    """The rows of a runtime's output of the given kinds (``pane``, ``late``, ``assign``,
    ``progress``, ``output``)."""
    return output.filter(pc.is_in(output.column("kind"), pa.array(kinds, pa.string())))


def assignment_table(output: pa.Table, time_zone: str) -> pa.Table:
    """The assign and late rows of a runtime's output in the ``window_assignments`` shape
    (late rows are the dropped assignments). Arrow to Arrow: a session pipeline has a row here
    per record, and through pandas each row's key and fate became Python objects and back."""
    from jobs.store.fast_writes import arrow_schema

    schema = arrow_schema(tables.WINDOW_ASSIGNMENTS_SCHEMA)
    taken = [name for name in schema.names if name != "window_end_date"]
    fates = rows_of_kind(output.select(["kind", *taken]), "assign", "late")
    late = pc.equal(fates.column("kind"), "late")
    columns = {
        "window_end_date": _days(fates.column("window_end_ms"), time_zone),
        "fate": pc.if_else(late, pa.scalar(DROPPED, pa.string()), fates.column("fate")),
    }
    return pa.Table.from_arrays(
        [(columns[field.name] if field.name in columns else fates.column(field.name))
         .cast(field.type) for field in schema], schema=schema)


def column_min(column: pa.ChunkedArray) -> str:
    """The smallest value of a column as SQL text (dates as ISO days)."""
    return str(pc.min(column).as_py())


def column_max(column: pa.ChunkedArray) -> str:
    return str(pc.max(column).as_py())
