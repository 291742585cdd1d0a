"""What a Delta table's transaction log says, read without Spark: file statistics, versions,
commit metrics.

Schedules and sensors run inside Dagster's code server on every tick; starting a JVM there to
read one number (the arrival log's ``max(watermark_ms)``) would cost seconds of CPU on a
2-core machine each time. Delta records per-file min/max statistics in its transaction log;
``deltalake`` (the Delta project's Rust implementation) reads them from the log, on the local
disk or an object store alike. When a live file has no statistics the answer is unknown
(``None``) rather than guessed. A backfill's own bookkeeping (which version it pins, what its
commits wrote) is read the same way: through Spark each was a job or three, a second or more
of a 2-core machine per backfill (benchmarks/history.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.store.fast_writes import delta_uri

if TYPE_CHECKING:
    from deltalake import DeltaTable


def max_column_value(table_path: str, column: str) -> int | float | None:
    """``max(column)`` over the table's live files, or ``None`` (no table, no rows, or a file
    without statistics)."""
    ranges = column_ranges(table_path, (column,))
    return ranges[column][1] if ranges else None


def file_bounds(table_path: str, column: str) -> list[tuple] | None:
    """``(min, max)`` of ``column`` in each live file that holds rows (``[]``: no table or
    no rows), or ``None`` when a file has no statistics for it (the bounds are unknown)."""
    actions = _actions(table_path)
    if actions is None:
        return []
    if f"min.{column}" not in actions.column_names:
        return None if actions.num_rows else []
    return _bounds(actions, column)


def partition_values(table_path: str, column: str) -> set | None:
    """The values of partition ``column`` among the live files that hold rows (empty: no
    table), or ``None`` if the table is not partitioned by it."""
    actions = _actions(table_path)
    if actions is None:
        return set()
    name = f"partition.{column}"
    if name not in actions.column_names:
        return None if actions.num_rows else set()
    return {value for records, value in zip(actions.column("num_records").to_pylist(),
                                            actions.column(name).to_pylist(), strict=True)
            if records != 0}


def rows_meeting(table_path: str, column: str, low: int, high: int,
                 version: int | None = None) -> int | None:
    """Rows of the live files (at ``version``) whose ``column`` range meets ``[low, high]``:
    at least as many as the rows inside it. ``None``: no table, or a file without
    statistics for the column (the count is unknown)."""
    actions = _actions(table_path, version)
    files = None if actions is None else _file_stats(actions, column)
    if files is None:
        return None
    return sum(records for records, lowest, highest in files
               if lowest <= high and highest >= low)


def row_count(table_path: str) -> int | None:
    """Rows of a Delta table from its file statistics (``None``: no table)."""
    actions = _actions(table_path)
    if actions is None:
        return None
    if "num_records" not in actions.column_names:
        return 0
    return int(sum(n or 0 for n in actions.column("num_records").to_pylist()))


def latest_version(table_path: str) -> int | None:
    """The table's newest version (``None``: no table)."""
    table = _table(table_path)
    return None if table is None else table.version()


HISTORY_SEARCH = 50
"""Commits :func:`rows_written` looks back through (other writers' commits in between)."""


def rows_written(table_path: str, tag: str) -> int:
    """Rows the commit tagged ``tag`` (``userMetadata``, jobs.store.delta_io ``replace_range``)
    wrote, from Delta's own commit metrics (no re-read). Never the newest commit's figure:
    that may be another writer's (the live stream, a concurrent backfill) or, when this write
    replaced an empty range with nothing and so committed nothing, the previous run's;
    neither is this run's to report."""
    commit = _tagged(table_path, tag)
    if commit is None:  # replacing nothing with nothing makes no commit at all
        return 0
    return int((commit.get("operationMetrics") or {}).get("numOutputRows", 0))


def tagged_version(table_path: str, tag: str) -> int | None:
    """The version the commit tagged ``tag`` made (``None``: it made none, or the table has
    none)."""
    commit = _tagged(table_path, tag)
    return None if commit is None else int(commit["version"])


def _tagged(table_path: str, tag: str) -> dict | None:
    table = _table(table_path)
    for commit in table.history(HISTORY_SEARCH) if table is not None else []:
        if commit.get("userMetadata") == tag:
            return commit
    return None


def column_ranges(table_path: str, columns: tuple[str, ...],
                  version: int | None = None) -> dict[str, tuple] | None:
    """``{column: (min, max)}`` over the live files of the table (at ``version``), or ``None``
    when it has no rows or a file lacks statistics for one of them (then ask Spark)."""
    return ranges_in(_actions(table_path, version), columns)


def ranges_in(actions: pa.Table | None, columns: tuple[str, ...]) -> dict[str, tuple] | None:
    """:func:`column_ranges` from a snapshot's add actions already read
    (``DeltaTable.get_add_actions(flatten=True)``)."""
    if actions is None or not actions.num_rows:
        return None
    ranges = {}
    for column in columns:
        bounds = _bounds(actions, column)
        if not bounds:
            return None
        ranges[column] = (min(low for low, _ in bounds), max(high for _, high in bounds))
    return ranges


def _bounds(actions: pa.Table, column: str) -> list[tuple] | None:
    files = _file_stats(actions, column)
    return None if files is None else [(low, high) for _, low, high in files]


def _file_stats(actions: pa.Table, column: str) -> list[tuple] | None:
    """``(rows, min, max)`` of ``column`` per live file that holds rows, or ``None`` when a
    file has no statistics for it."""
    if f"min.{column}" not in actions.column_names:
        return None
    files = []
    for records, low, high in zip(actions.column("num_records").to_pylist(),
                                  actions.column(f"min.{column}").to_pylist(),
                                  actions.column(f"max.{column}").to_pylist(), strict=True):
        if records == 0:
            continue
        if records is None or low is None or high is None:
            return None
        files.append((records, low, high))
    return files


def _actions(table_path: str, version: int | None = None) -> pa.Table | None:
    table = _table(table_path, version)
    return None if table is None else pa.table(table.get_add_actions(flatten=True))


def _table(table_path: str, version: int | None = None) -> DeltaTable | None:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        return DeltaTable(delta_uri(table_path), version=version)
    except (TableNotFoundError, DeltaError, FileNotFoundError, OSError):
        return None
