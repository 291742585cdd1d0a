"""A standard-window backfill's late records and late-data metrics, computed in the driver.

A full backfill writes three tables. Computed by Spark, the late records and the metrics each
read and classify every record of the range again, two more passes over the log besides the
results': in a backfill of 1 M events they took about as much of the two cores as the results
themselves (benchmarks/history.md). Both depend on each record's event time and recorded
watermark alone (:func:`jobs.windows.vectorised.classify`), and both are small beside the log.
So the driver reads the pinned snapshot of the log through ``deltalake`` in record batches
(memory stays bounded however long the range), classifies each batch with numpy as the live
sink does (jobs.lateness.metrics, ``assignments``), keeps the dropped assignments as late rows
and folds each batch into per-day tallies (jobs.lateness.day_tallies), while Spark computes the
results. The rows are those of Spark's computation: tests/test_backfill_driver_tables.py holds
the written tables equal, row for row, to Spark's.

Past :data:`DRIVER_RECORDS` records the driver would become the backfill's slowest part (it is
one core, and Spark scales out), so larger ranges stay with Spark.

The metrics of pipelines the operator library runs per key come from their
``window_assignments`` table instead (jobs.lateness.assigned).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs import tables
from jobs.lateness.day_tallies import DayCalendar, DayTally, fold, quarantined_ingest_ms, tallies
from jobs.lateness.metrics import assignments
from jobs.store.fast_writes import arrow_schema, delta_uri
from jobs.tables.days import reach_bounds
from operators.pipeline import PipelineSpec

DRIVER_RECORDS = 20_000_000
"""The most log records (by file statistics) whose late records and metrics the driver
computes; more go to Spark. 1 M records of tumbling windows took 0.33 s in the driver
(benchmarks/history.md), so the most costs it seconds, where Spark takes minutes on 2 cores."""

LOG_COLUMNS = ("key", "arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value")
_EMPTY = np.empty(0, dtype=np.int64)


@dataclass
class DriverTables:
    """The late records and the metrics of a range of days, in their tables' Arrow shapes."""

    late: pa.Table
    metrics: pa.Table


def late_and_metrics(log_path: str, version: int, quarantine_path: str, spec: PipelineSpec,
                     time_zone: str, first_day: str, last_day: str,
                     metrics_schema: pa.Schema) -> DriverTables:
    """Late rows and metrics rows of the windows ending on ``[first_day, last_day]``, from
    the log at ``version`` and the quarantine as it is now (as the Spark computation reads
    them); ``metrics_schema`` is the Spark computation's, so that either writes the same
    table."""
    from deltalake import DeltaTable

    calendar = DayCalendar(dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day),
                           time_zone)
    days = calendar.days
    held = {day: DayTally() for day in days}
    late_parts: list[pa.Table] = []
    late_schema = arrow_schema(tables.LATE_RECORDS_SCHEMA)
    day_values = np.array(days, dtype="datetime64[D]")
    low, high = reach_bounds(first_day, last_day, spec.window)
    dataset = DeltaTable(delta_uri(log_path), version=version).to_pyarrow_dataset()
    reaching = (pc.field("event_time_ms") >= low) & (pc.field("event_time_ms") <= high)
    for batch in dataset.to_batches(columns=list(LOG_COLUMNS), filter=reaching):
        if not batch.num_rows:
            continue
        event, ingest, watermark = (
            batch.column(name).to_numpy().astype(np.int64, copy=False)
            for name in ("event_time_ms", "ingest_time_ms", "watermark_ms"))
        fold(held, tallies(event, ingest, watermark, _EMPTY, spec, time_zone, days))
        late_parts.extend(_late_rows(batch, event, watermark, spec, calendar, late_schema,
                                     day_values))
    fold(held, tallies(_EMPTY, _EMPTY, _EMPTY, quarantined_ingest_ms(quarantine_path, first_day,
                                                             last_day),
                        spec, time_zone, days))
    rows = [held[day].row(day) for day in days if not held[day].empty]
    late = pa.concat_tables(late_parts) if late_parts else late_schema.empty_table()
    return DriverTables(late, pa.Table.from_pylist(rows, metrics_schema))




def _late_rows(batch: pa.RecordBatch, event: np.ndarray, watermark: np.ndarray,
               spec: PipelineSpec, calendar: DayCalendar, schema: pa.Schema,
               day_values: np.ndarray) -> list[pa.Table]:
    """The batch's dropped assignments whose window ends on one of the calendar's days, one
    table per window position, in the late-records table's shape (``schema``;
    ``day_values``: the calendar's days as ``datetime64[D]``)."""
    found = []
    for _, max_ts, dropped, _ in assignments(event, watermark, spec):
        index = calendar.index(max_ts)
        taken = np.flatnonzero(dropped & (index >= 0) & (index < len(calendar.days)))
        if not len(taken):
            continue
        rows = batch.take(pa.array(taken))
        end = max_ts[taken] + 1
        days = day_values[index[taken]]
        columns = {
            "key": rows.column("key"),
            "arrival_seq": rows.column("arrival_seq"),
            "event_time_ms": rows.column("event_time_ms"),
            "event_time": pa.array(event[taken] * 1000, pa.timestamp("us", tz="UTC")),
            "ingest_time_ms": rows.column("ingest_time_ms"),
            "watermark_ms": rows.column("watermark_ms"),
            "window_start_ms": pa.array(end - spec.window.size_ms),
            "window_end_ms": pa.array(end),
            "window_end_date": pa.array(days, pa.date32()),
            "value": rows.column("value"),
        }
        found.append(pa.Table.from_arrays(
            [columns[f.name].cast(f.type) for f in schema], schema=schema))
    return found










