"""The ingest clock of a stream's arrival log for process functions' processing-time timers
(operators.ingest_clock), read from the Delta table by the Python process that needs it:
a live engine on an executor, or a backfill's per-key function.

It is read only when a function registers a processing-time timer, and then incrementally:
the files whose statistics say they hold records after the last one read, three columns each.
One clock per log and Python process serves every engine there (Spark reuses its Python
workers), so the log is read once per worker, not per bucket or micro-batch.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from jobs.runtime.log_files import read_log_file
from jobs.store.fast_writes import delta_uri
from operators.ingest_clock import IngestClock

COLUMNS = ("arrival_seq", "ingest_time_ms", "watermark_ms")
_CLOCKS: dict[str, IngestClock] = {}
_TABLES: dict = {}
_TABLE_IDS: dict[str, str] = {}


def log_clock(location: str) -> IngestClock:
    """The ingest clock of the arrival log at ``location``, shared in this process."""
    clock = _CLOCKS.get(location)
    if clock is None:
        clock = _CLOCKS[location] = IngestClock(lambda after: _read_after(location, after))
    return clock


def _read_after(location: str, after_seq: int) -> tuple | None:
    table = _table(location)
    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return None
    highs = actions.column("max.arrival_seq").to_pylist() \
        if "max.arrival_seq" in actions.column_names else [None] * actions.num_rows
    paths = [path for path, high in zip(actions.column("path").to_pylist(), highs,
                                         strict=True) if high is None or high > after_seq]
    parts = [_read_file(location, path, after_seq) for path in paths]
    if not parts:
        return None
    found = pa.concat_tables(parts)
    return tuple(found.column(name).to_numpy() for name in COLUMNS)


def _table(location: str):
    """The log's Delta table at its newest version: loaded once, then brought up to date
    from the commits since (a live stream reads it every micro-batch)."""
    from deltalake import DeltaTable

    table = _TABLES.get(location)
    if table is None:
        table = _TABLES[location] = DeltaTable(delta_uri(location))
    else:
        try:
            table.update_incremental()
        except Exception:  # noqa: BLE001 - gone or rewritten: load it afresh
            table = _TABLES[location] = DeltaTable(delta_uri(location))
    table_id = table.metadata().id
    if _TABLE_IDS.setdefault(location, table_id) != table_id:
        # another log at the same place (deleted and ingested again): start over
        _TABLE_IDS[location] = table_id
        _CLOCKS[location] = IngestClock(lambda after: _read_after(location, after))
        raise RuntimeError(f"the arrival log at {location} was replaced while it was read; "
                           "run again")
    return table


def _read_file(location: str, path: str, after_seq: int) -> pa.Table:
    return read_log_file(location, path, COLUMNS).filter(pc.field("arrival_seq") > after_seq)
