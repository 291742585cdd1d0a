"""``effective_from: D``: a changed windowed pipeline whose new version owns the days from D on,
while the days before D keep the rows of the version it replaces.

Users ask for it when history was published and must not move (last month's invoices were
sent) but the pipeline must change from some day on. The new version is computed from the
arrival log as any other (all of it, so its first windows from D on see every record they
would in a full recomputation); at its switch, before readers see it, each of its
day-partitioned tables gets the replaced version's rows of the days before D instead of its
own, one Delta commit per table (:func:`carry`). Rerunning the carry gives the same tables,
so a crash between it and the switch is finished by the next run.

The switch waits until the replaced version's days before D are final (:func:`waits_for`):
its watermark has passed the end of D's previous day plus its allowed lateness, so no later
pane of those days exists that the retired version would no longer write. A version whose
``effective_from`` lies in the future therefore serves from that day (plus the lateness) on.
A backfill of such a version computes only days from D (jobs.backfill).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc

from jobs import tables
from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline
from jobs.lifecycle import versions
from jobs.store import fast_writes
from jobs.store.delta_io import retry_conflicts
from jobs.tables import days
from operators.time import human_duration, ms_to_datetime

PARTITION = "window_end_date"
"""The day column of every windowed table that is carried (the window's end, local day)."""
CARRIED = (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS,
           tables.WINDOW_ASSIGNMENTS)


def effective_day(pipeline: Pipeline) -> dt.date | None:
    return pipeline.spec.effective_from


def kept_before(pipeline: Pipeline) -> dt.date | None:
    """The day before which this version's tables hold (or will hold, once it serves) the
    rows of the version it replaces; ``None``: every day is its own (no ``effective_from``,
    or it is the pipeline's first version)."""
    day = effective_day(pipeline)
    current = versions.serving(pipeline)
    if day is None or current is None:
        return None
    if current.version != pipeline.version:
        return day
    replaced = any(s.version == pipeline.version and s.previous for s in current.switches)
    return day if replaced else None


def waits_for(day: dt.date, replaced: Pipeline, watermark_ms: int | None) -> str | None:
    """Why the switch to a version effective from ``day`` must wait (``None``: it need not):
    the days before ``day`` of the ``replaced`` version, whose watermark is ``watermark_ms``,
    are not final yet."""
    lateness = replaced.spec.allowed_lateness_ms
    before = day - dt.timedelta(days=1)
    if watermark_ms is not None and days.is_final(before, watermark_ms, lateness,
                                                  replaced.time_zone):
        return None
    needed = days.day_end_ms(before, replaced.time_zone) - 1 + lateness
    now = "no watermark yet" if watermark_ms is None else \
        f"the watermark is {_when(watermark_ms)}"
    return (f"effective_from: {day}: the switch waits until version {replaced.version}'s days "
            f"before it are final, at watermark {_when(needed)} (the end of {before} plus its "
            f"allowed lateness, {human_duration(lateness) if lateness else 'none'}); {now}")


def _when(ms: int) -> str:
    return ms_to_datetime(ms).strftime("%Y-%m-%d %H:%M:%S") + "Z"


def carry(pipeline: Pipeline, replaced: Pipeline) -> dict[str, int]:
    """Replace ``pipeline``'s rows of the days before its ``effective_from`` with
    ``replaced``'s, in each windowed table it has; rows carried per table."""
    day = effective_day(pipeline)
    if day is None:
        return {}
    carried = {}
    for name in CARRIED:
        target = pipeline.table_path(name)
        if not fast_writes.table_exists(target):
            continue
        rows = _rows_before(replaced.table_path(name), day)
        carried[name] = _replace_before(target, rows, day, name, pipeline)
    return carried


def _rows_before(location: str, day: dt.date) -> pa.Table | None:
    from deltalake import DeltaTable

    if not fast_writes.table_exists(location):
        return None
    dataset = DeltaTable(fast_writes.delta_uri(location)).to_pyarrow_dataset()
    return dataset.to_table(filter=pc.field(PARTITION) < pa.scalar(day, pa.date32()))


def _replace_before(location: str, rows: pa.Table | None, day: dt.date, name: str,
                    pipeline: Pipeline) -> int:
    from deltalake import DeltaTable, write_deltalake

    table = DeltaTable(fast_writes.delta_uri(location))
    schema = table.to_pyarrow_dataset().schema
    data = _conform(rows, schema, name, pipeline)
    partition_by = list(table.metadata().partition_columns)
    retry_conflicts(lambda: write_deltalake(
        fast_writes.delta_uri(location), data, mode="overwrite",
        predicate=f"{PARTITION} < '{day.isoformat()}'", partition_by=partition_by))
    return data.num_rows


def _conform(rows: pa.Table | None, schema: pa.Schema, name: str,
             pipeline: Pipeline) -> pa.Table:
    """The replaced version's rows in the new version's columns: a column it did not have
    (a new aggregate) is null in the carried days; one it no longer has is left out."""
    if rows is None:
        return schema.empty_table()
    columns = []
    for field in schema:
        if field.name in rows.column_names:
            try:
                columns.append(rows.column(field.name).cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise SettingsError(
                    f"{pipeline.path}: effective_from: column {field.name!r} of {name} changed "
                    f"type ({rows.schema.field(field.name).type} -> {field.type}) and the "
                    f"replaced version's rows cannot be carried ({error}); remove "
                    "effective_from to recompute every day") from None
        elif field.nullable:
            columns.append(pa.nulls(rows.num_rows, field.type))
        else:
            raise SettingsError(
                f"{pipeline.path}: effective_from: {name} gained column {field.name!r}, which "
                "the replaced version's rows do not have and which cannot be empty; remove "
                "effective_from to recompute every day")
    return pa.Table.from_arrays(columns, schema=schema)
