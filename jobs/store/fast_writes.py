"""Small, frequent Delta writes from the driver, without a Spark job: through ``deltalake``.

The live path commits a few tables per micro-batch (the arrival log and quarantine at ingest;
panes, late records and window assignments in the sink). Through Spark each is a job or three
plus the commit, 0.3 s for a plain append and 1.5 to 2.5 s for a ``MERGE`` on a 2-core machine,
and under the stream's load appending 100,000 arrival-log rows took 6 to 9 s
(benchmarks/history.md). ``deltalake`` (delta-rs, the Delta project's Rust implementation)
writes the same Delta protocol from Arrow in the driver: the same append takes about 0.1 s and
a ``MERGE`` of 10,000 panes a few tens of milliseconds. Spark reads what it writes and writes
the same tables (backfills); both take part in Delta's optimistic concurrency, and conflicts
are retried like Spark's (:func:`jobs.store.delta_io.retry_conflicts`).

Writes keep their idempotency: appends carry a Delta transaction id (``txnAppId`` / version, as
Spark's), and merges are keep-the-latest or insert-only, so a repeated batch changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from jobs.store import delta_files, storage
from jobs.store.delta_io import retry_conflicts

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties


def delta_uri(location: str) -> str:
    """The table's location as delta-rs takes it (:func:`jobs.store.storage.object_store_uri`)."""
    return storage.object_store_uri(location)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of a table whose Spark schema is ``schema`` (timestamps in UTC µs)."""
    return to_arrow_schema(schema, timezone="UTC")


def _not_a_local_table(location: str) -> bool:
    return storage.is_local(location) and \
        not (storage.local_path(location) / "_delta_log").is_dir()


def table_exists(location: str) -> bool:
    from deltalake import DeltaTable

    return not _not_a_local_table(location) and DeltaTable.is_deltatable(delta_uri(location))


def _loaded(location: str) -> DeltaTable | None:
    """The table as of now, or ``None`` when there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    if _not_a_local_table(location):
        return None
    try:
        return DeltaTable(delta_uri(location))
    except TableNotFoundError:
        return None


def _each_attempt(location: str, data: pa.Table, partition_by: Sequence[str]
                  ) -> Callable[[], DeltaTable]:
    """The table for each attempt of a write, created (empty, with ``data``'s schema) if it
    does not exist: the table loaded here first, loaded again after a conflict."""
    from deltalake import DeltaTable

    table = _loaded(location)
    if table is None:
        append(location, data.slice(0, 0), partition_by=partition_by)
    first = [table] if table is not None else []

    def current() -> DeltaTable:
        return first.pop() if first else DeltaTable(delta_uri(location))

    return current


def applied_version(location: str, app_id: str) -> int | None:
    """The last transaction version ``app_id`` committed to the table (``None``: none)."""
    table = _loaded(location)
    return None if table is None else table.transaction_version(app_id)


def append(location: str, data: pa.Table, *, app_id: str | None = None,
           version: int | None = None, partition_by: Sequence[str] | None = None,
           encodings: delta_files.ColumnEncodings | None = None) -> bool:
    """Append ``data`` (creating the table) unless ``(app_id, version)`` already landed;
    returns whether it was written. Rows into an existing unpartitioned table of the same
    schema go as a file Arrow writes (:func:`_append_arrow_file`, its columns encoded as
    ``encodings`` says), anything else through delta-rs's own write."""
    # the table loaded once for the transaction check and the write: each load replays
    # the log since its last checkpoint, and a live job appends twice a second (three
    # loads an append took 95 ms after 2,000 commits, against 20 ms after 20)
    first = [_loaded(location)]
    if data.num_rows and not partition_by and first[0] is not None \
            and delta_files.takes_arrow_files(first[0], data):
        return _append_arrow_file(location, first[0], data, app_id, version, encodings)

    def write() -> bool:
        table = first.pop() if first else _loaded(location)
        if app_id is not None and table is not None and _applied(table, app_id, version):
            return False
        return _write_with_delta_rs(table if table is not None else delta_uri(location), data,
                                    partition_by, _transaction(app_id, version))

    return retry_conflicts(write)


def _append_arrow_file(location: str, table: DeltaTable, data: pa.Table, app_id: str | None,
                       version: int | None,
                       encodings: delta_files.ColumnEncodings | None = None) -> bool:
    """:func:`append` as a file Arrow writes and a commit delta-rs makes
    (jobs.store.delta_files). The file is written once. After a conflict the table is loaded
    again: a transaction that landed meanwhile ends the append (the file is left to VACUUM, as
    a failed write's is: the commit that landed may be this one, its answer lost), and a table
    that changed so that it no longer takes such files gets delta-rs's own write."""
    from deltalake import DeltaTable

    if app_id is not None and _applied(table, app_id, version):
        return False
    name, size, footer = delta_files.write_file(location, data, encodings)
    action = delta_files.add_action(name, size, footer, data.schema)
    properties = _transaction(app_id, version)
    attempts = [table]

    def commit() -> bool:
        if attempts:
            current = attempts.pop()  # checked above
        else:
            current = DeltaTable(delta_uri(location))
            if app_id is not None and _applied(current, app_id, version):
                return False
        if not delta_files.takes_arrow_files(current, data):
            return _write_with_delta_rs(current, data, None, properties)
        current.create_write_transaction([action], "append", current.schema(),
                                         commit_properties=properties)
        return True

    return retry_conflicts(commit)


def _write_with_delta_rs(table: DeltaTable | str, data: pa.Table,
                         partition_by: Sequence[str] | None,
                         properties: CommitProperties | None) -> bool:
    from deltalake import write_deltalake

    write_deltalake(table, data, mode="append",
                    partition_by=list(partition_by) if partition_by else None,
                    commit_properties=properties)
    return True


def _transaction(app_id: str | None, version: int | None) -> CommitProperties | None:
    """The commit's transaction id, which makes an append idempotent."""
    from deltalake.transaction import CommitProperties, Transaction

    return CommitProperties(app_transactions=[Transaction(app_id, version)]) \
        if app_id is not None else None


def _applied(table: DeltaTable, app_id: str, version: int | None) -> bool:
    done = table.transaction_version(app_id)
    return done is not None and version is not None and done >= version


def merge_latest(location: str, data: pa.Table, *, keys: Sequence[str], order: str,
                 bounds: str, partition_by: Sequence[str]) -> None:
    """Insert the rows of ``data`` that are new by ``keys``, replace those whose ``order``
    column is larger than the table's (keep the latest); ``bounds`` is a condition on ``t``
    naming what the rows can touch, so that only those files are read."""
    table = _each_attempt(location, data, partition_by)
    condition = " AND ".join([bounds, *[f"t.{k} = s.{k}" for k in keys]])

    def merge() -> None:
        (table()
         .merge(data, condition, source_alias="s", target_alias="t")
         .when_matched_update_all(predicate=f"s.{order} > t.{order}")
         .when_not_matched_insert_all()
         .execute())

    retry_conflicts(merge)


def insert_new(location: str, data: pa.Table, *, keys: Sequence[str], bounds: str,
               partition_by: Sequence[str]) -> None:
    """Insert the rows of ``data`` not in the table yet by ``keys`` (null-safe), creating the
    table; whoever wrote them before (a repeated batch, a backfill) nothing doubles."""
    table = _each_attempt(location, data, partition_by)
    if not data.num_rows:
        return
    condition = " AND ".join([bounds, *[f"(t.{k} = s.{k} OR (t.{k} IS NULL AND s.{k} IS NULL))"
                                        for k in keys]])

    def merge() -> None:
        (table()
         .merge(data, condition, source_alias="s", target_alias="t")
         .when_not_matched_insert_all()
         .execute())

    retry_conflicts(merge)


def replace_range(location: str, data: pa.Table, *, column: str, first: str, last: str,
                  partition_by: Sequence[str]) -> None:
    """Replace the rows with ``first <= column <= last`` by ``data`` (creating the table), in
    one commit; delta-rs refuses ``data`` outside the range, as Spark's ``replaceWhere``."""
    from deltalake import write_deltalake

    table = _each_attempt(location, data, partition_by)
    predicate = f"{column} >= '{first}' AND {column} <= '{last}'"
    retry_conflicts(lambda: write_deltalake(table(), data, mode="overwrite",
                                            predicate=predicate,
                                            partition_by=list(partition_by)))


def read_columns(location: str, columns: Sequence[str] | None, filter_expression=None
                 ) -> pa.Table:
    """Some columns (``None``: all) of a table, optionally filtered (with file and row-group
    skipping by statistics), read in the driver without a Spark job; empty when there is no
    table."""
    table = _loaded(location)
    if table is None:
        return pa.table({name: pa.array([], pa.int64()) for name in columns or ()})
    dataset = table.to_pyarrow_dataset()
    return dataset.to_table(columns=list(columns) if columns is not None else None,
                            filter=filter_expression)
