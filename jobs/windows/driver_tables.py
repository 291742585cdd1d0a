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

Pipelines the operator library runs per key keep each record's fate in the
``window_assignments`` table, and their metrics are a function of it: :func:`assigned_metrics`
computes them in the driver from the table's days, for the live sink and a backfill too large
to take its assignments to the driver (once it wrote them); a smaller backfill counts them from
the very rows it writes (:func:`metrics_of_assignments`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs import tables
from jobs.lateness.day_tallies import DayCalendar, DayTally, fate_tallies, tallies
from jobs.lateness.metrics import assignments, fate_codes
from jobs.store.fast_writes import arrow_schema, delta_uri, table_exists
from jobs.tables.days import DAY_MS, day_start_utc_ms, reach_bounds
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
        _fold(held, tallies(event, ingest, watermark, _EMPTY, spec, time_zone, days))
        late_parts.extend(_late_rows(batch, event, watermark, spec, calendar, late_schema,
                                     day_values))
    _fold(held, tallies(_EMPTY, _EMPTY, _EMPTY, _quarantined(quarantine_path, first_day,
                                                             last_day),
                        spec, time_zone, days))
    rows = [held[day].row(day) for day in days if not held[day].empty]
    late = pa.concat_tables(late_parts) if late_parts else late_schema.empty_table()
    return DriverTables(late, pa.Table.from_pylist(rows, metrics_schema))


def _fold(held: dict[dt.date, DayTally], found: dict[dt.date, DayTally]) -> None:
    for day, tally in found.items():
        if not tally.empty:
            held[day] = held[day].plus(tally)


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


def _quarantined(quarantine_path: str, first_day: str, last_day: str) -> np.ndarray:
    """Ingest times of the quarantined lines that can fall on the days, in any time zone
    (a day of margin either side)."""
    if not table_exists(quarantine_path):
        return _EMPTY
    from jobs.store.fast_writes import read_columns

    start, end = day_start_utc_ms(first_day), day_start_utc_ms(last_day)
    lines = read_columns(quarantine_path, ["ingest_time_ms"],
                         (pc.field("ingest_time_ms") >= start - DAY_MS)
                         & (pc.field("ingest_time_ms") < end + 2 * DAY_MS))
    return lines.column("ingest_time_ms").to_numpy().astype(np.int64, copy=False)


ASSIGNMENT_COLUMNS = ("fate", "window_end_date", "event_time_ms", "ingest_time_ms",
                      "watermark_ms")


def assigned_metrics(assignments_path: str, version: int | None, quarantine_path: str,
                     time_zone: str, first_day: str, last_day: str,
                     metrics_schema: pa.Schema) -> pa.Table:
    """The metrics rows of ``[first_day, last_day]`` from the ``window_assignments`` table
    (at ``version``; ``None``: the newest) and the quarantine as it is now: what
    ``jobs.tables.window_tables.day_metrics`` gives over the same rows."""
    from deltalake import DeltaTable

    batches: Iterable[pa.RecordBatch] = ()
    if table_exists(assignments_path):
        dataset = DeltaTable(delta_uri(assignments_path), version=version).to_pyarrow_dataset()
        batches = dataset.to_batches(columns=list(ASSIGNMENT_COLUMNS),
                                     filter=_within(first_day, last_day))
    return metrics_of_assignments(batches, quarantine_path, time_zone, first_day, last_day,
                                  metrics_schema)


def _within(first_day: str, last_day: str) -> pc.Expression:
    day = pc.field("window_end_date")
    return (day >= dt.date.fromisoformat(first_day)) & (day <= dt.date.fromisoformat(last_day))


def metrics_of_assignments(batches: Iterable[pa.RecordBatch], quarantine_path: str,
                           time_zone: str, first_day: str, last_day: str,
                           metrics_schema: pa.Schema) -> pa.Table:
    """:func:`assigned_metrics` over assignment rows already at hand (a backfill's, before
    or while it writes them), ``batches`` holding only rows of ``[first_day, last_day]``."""
    days = DayCalendar(dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day),
                       time_zone).days
    held = {day: DayTally() for day in days}
    for batch in batches:
        if not batch.num_rows:
            continue
        fate = fate_codes(batch.column("fate"))
        event, ingest, watermark = (
            batch.column(name).to_numpy().astype(np.int64, copy=False)
            for name in ("event_time_ms", "ingest_time_ms", "watermark_ms"))
        # a partition column: dictionary-encoded as a dataset reads it
        end_day = pc.cast(batch.column("window_end_date"), pa.date32())
        _fold(held, fate_tallies(fate, end_day.to_numpy(zero_copy_only=False), event,
                                 ingest, watermark, _EMPTY, time_zone, days))
    _fold(held, fate_tallies(_EMPTY, np.empty(0, "datetime64[D]"), _EMPTY, _EMPTY, _EMPTY,
                             _quarantined(quarantine_path, first_day, last_day), time_zone,
                             days))
    rows = [held[day].row(day) for day in days if not held[day].empty]
    return pa.Table.from_pylist(rows, metrics_schema)
