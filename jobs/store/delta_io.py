"""Idempotent Delta writes: the only way jobs write tables.

Every write either carries a Delta transaction id (appends: a repeated batch is skipped by Delta
itself) or replaces exactly a range of partitions (backfills: a repeated run rewrites the same
rows). Either way a retried or repeated run leaves the table as if it had run once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from jobs.store import storage

T = TypeVar("T")


def is_conflict(error: BaseException) -> bool:
    """Delta's optimistic-concurrency failures (``delta.exceptions``, and ``deltalake``'s
    ``CommitFailedError`` for the driver's own writes, jobs.store.fast_writes): another writer
    committed first. Every write here is a pure function of its inputs (a replaced range, an
    append under a transaction id, an insert-only or keep-the-latest MERGE), so running it
    again on the new table version is safe."""
    from deltalake.exceptions import CommitFailedError

    return isinstance(error, (*CONFLICTS, CommitFailedError))


CONFLICTS = (DeltaConcurrentModificationException, ConcurrentWriteException,
             MetadataChangedException, ProtocolChangedException, ConcurrentAppendException,
             ConcurrentDeleteReadException, ConcurrentDeleteDeleteException,
             ConcurrentTransactionException)
"""``delta.exceptions`` maps each of Delta's JVM conflict errors to one of these (siblings,
not subclasses of one another)."""


def retry_conflicts(write: Callable[[], T], *, attempts: int = 6,
                    first_delay_s: float = 0.5) -> T:
    """Run ``write``; on a Delta conflict run it again (with a growing pause), up to
    ``attempts`` times, then let the conflict through."""
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except Exception as error:
            if attempt == attempts or not is_conflict(error):
                raise
            time.sleep(first_delay_s * 2 ** (attempt - 1))
    raise AssertionError("unreachable")


def table_exists(spark: SparkSession, path: str) -> bool:
    if storage.is_local(path) and not (storage.local_path(path) / "_delta_log").is_dir():
        return False  # no JVM round trip for the common case of a table not written yet
    return DeltaTable.isDeltaTable(spark, path)


def read_table_or_none(spark: SparkSession, path: str) -> DataFrame | None:
    if not table_exists(spark, path):
        return None
    return spark.read.format("delta").load(path)


def append_idempotent(frame: DataFrame, path: str, *, app_id: str, version: int,
                      partition_by: str | None = None, merge_schema: bool = False) -> None:
    """Append unless this ``(app_id, version)`` already landed in the table
    (``merge_schema``: add columns the table lacks, for tables older than their schema)."""
    writer = (frame.write.format("delta").mode("append")
              .option("txnAppId", app_id).option("txnVersion", version))
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    if partition_by:
        writer = writer.partitionBy(partition_by)
    retry_conflicts(lambda: writer.save(path))


def _literal(value: str | int) -> str:
    return str(int(value)) if isinstance(value, int) else "'" + str(value).replace("'", "") + "'"


def replace_range(frame: DataFrame, path: str, *, column: str, first: str | int,
                  last: str | int, partition_by: str | None = None,
                  tag: str | None = None) -> None:
    """Replace every row with ``first <= column <= last`` by ``frame`` (which must lie inside).

    Delta checks that ``frame`` satisfies the predicate, so a backfill can never touch rows of
    partitions it did not compute. ``tag`` goes into the commit's ``userMetadata``, so that
    :func:`jobs.store.table_stats.rows_written` finds this very commit among concurrent writers'
    ones.
    """
    predicate = f"{column} >= {_literal(first)} AND {column} <= {_literal(last)}"
    writer = (frame.write.format("delta").mode("overwrite").option("replaceWhere", predicate))
    if tag:
        writer = writer.option("userMetadata", tag)
    if partition_by:
        writer = writer.partitionBy(partition_by)
    retry_conflicts(lambda: writer.save(path))


def insert_new_rows(spark: SparkSession, frame: DataFrame, path: str, *, keys: Sequence[str],
                    days: tuple[str, str] | None, partition_by: str = "window_end_date",
                    extra_condition: str | None = None) -> None:
    """Insert the rows of ``frame`` whose ``keys`` are not in the table yet (creating it).

    Idempotent whoever wrote the rows before: a repeated micro-batch, or a backfill that
    already covered them. ``days`` (the first and last ``partition_by`` value in ``frame``)
    lets Delta read only those partitions of the table; ``extra_condition`` (on ``t.``, the
    table) narrows the files Delta reads further, by their statistics.
    """
    if not table_exists(spark, path):
        retry_conflicts(lambda: frame.where("false").write.format("delta")
                        .partitionBy(partition_by).mode("append").save(path))
    if days is None:
        return
    condition = " AND ".join(
        [f"t.{partition_by} >= '{days[0]}'", f"t.{partition_by} <= '{days[1]}'"]
        + ([extra_condition] if extra_condition else [])
        + [f"t.{k} <=> s.{k}" for k in keys])  # null-safe: a null key column matches null
    retry_conflicts(lambda: DeltaTable.forPath(spark, path).alias("t")
                    .merge(frame.alias("s"), condition).whenNotMatchedInsertAll().execute())


