"""Idempotent Delta writes: the only way jobs write tables.

Every write either carries a Delta transaction id (appends: a repeated batch is skipped by Delta
itself) or replaces exactly a range of partitions (backfills: a repeated run rewrites the same
rows). Either way a retried or repeated run leaves the table as if it had run once.
"""

from __future__ import annotations

from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession


def table_exists(spark: SparkSession, path: str) -> bool:
    return (Path(path) / "_delta_log").is_dir() and DeltaTable.isDeltaTable(spark, path)


def read_table_or_none(spark: SparkSession, path: str) -> DataFrame | None:
    if not table_exists(spark, path):
        return None
    return spark.read.format("delta").load(path)


def append_idempotent(frame: DataFrame, path: str, *, app_id: str, version: int,
                      partition_by: str | None = None) -> None:
    """Append unless this ``(app_id, version)`` already landed in the table."""
    writer = (frame.write.format("delta").mode("append")
              .option("txnAppId", app_id).option("txnVersion", version))
    if partition_by:
        writer = writer.partitionBy(partition_by)
    writer.save(path)


def _literal(value: str | int) -> str:
    return str(int(value)) if isinstance(value, int) else "'" + str(value).replace("'", "") + "'"


def replace_range(frame: DataFrame, path: str, *, column: str, first: str | int,
                  last: str | int, partition_by: str | None = None) -> None:
    """Replace every row with ``first <= column <= last`` by ``frame`` (which must lie inside).

    Delta checks that ``frame`` satisfies the predicate, so a backfill can never touch rows of
    partitions it did not compute.
    """
    predicate = f"{column} >= {_literal(first)} AND {column} <= {_literal(last)}"
    writer = (frame.write.format("delta").mode("overwrite").option("replaceWhere", predicate))
    if partition_by:
        writer = writer.partitionBy(partition_by)
    writer.save(path)


def rows_written(spark: SparkSession, path: str) -> int:
    """Rows the table's last commit wrote, from Delta's own commit metrics (no re-read)."""
    metrics = DeltaTable.forPath(spark, path).history(1).select("operationMetrics").first()[0]
    return int((metrics or {}).get("numOutputRows", 0))
