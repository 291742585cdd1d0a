"""The late-data metrics of pipelines the operator library runs per key, from their
``window_assignments`` table, in the driver.

Such a pipeline keeps each (record, window) fate the operator decided in its assignments
table, and its per-day metrics are a function of those rows and the day's quarantined lines:
:func:`assigned_metrics` computes them from the table's days, for the live sink and for a
backfill too large to take its assignments to the driver (once it wrote them); a smaller
backfill counts them from the very rows it writes (:func:`metrics_of_assignments`). The rows
are what Spark's ``jobs.lateness.aggregates.day_metrics`` gives over the same rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.lateness.day_tallies import (
    DayCalendar,
    DayTally,
    fate_tallies,
    fold,
    quarantined_ingest_ms,
)
from jobs.lateness.metrics import fate_codes
from jobs.store.fast_writes import delta_uri, table_exists

_EMPTY = np.empty(0, dtype=np.int64)

ASSIGNMENT_COLUMNS = ("fate", "window_end_date", "event_time_ms", "ingest_time_ms",
                      "watermark_ms")


def assigned_metrics(assignments_path: str, version: int | None, quarantine_path: str,
                     time_zone: str, first_day: str, last_day: str,
                     metrics_schema: pa.Schema) -> pa.Table:
    """The metrics rows of ``[first_day, last_day]`` from the ``window_assignments`` table
    (at ``version``; ``None``: the newest) and the quarantine as it is now: what
    ``jobs.lateness.aggregates.day_metrics`` gives over the same rows."""
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
        fold(held, fate_tallies(fate, end_day.to_numpy(zero_copy_only=False), event,
                                 ingest, watermark, _EMPTY, time_zone, days))
    fold(held, fate_tallies(_EMPTY, np.empty(0, "datetime64[D]"), _EMPTY, _EMPTY, _EMPTY,
                             quarantined_ingest_ms(quarantine_path, first_day, last_day), time_zone,
                             days))
    rows = [held[day].row(day) for day in days if not held[day].empty]
    return pa.Table.from_pylist(rows, metrics_schema)
