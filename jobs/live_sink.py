"""Write one micro-batch of the live stream to the Delta tables, idempotently.

A micro-batch may run again after a failure (Spark re-runs the batch that was not committed to
the checkpoint); every write below leaves the tables as if it had run once:

- panes: ``MERGE`` into the results table keeping the highest ``pane_index`` per key and
  window (a repeat replaces nothing: no pane is newer than itself);
- late records (and window assignments): inserted unless already there (an insert-only
  ``MERGE`` by record and window), so neither a repeated batch nor a backfill that covered the
  same records doubles them; per-batch metrics: an append under the same transaction id;
- per-day metrics: recomputed for exactly the days the batch touched, by the function the
  backfill runs: from the arrival log for standard windows, from the ``window_assignments``
  table (written first) for pipelines the operator library runs per key
  (jobs/keyed_windows.py).

Delta's conflict errors (another writer, say a backfill, committed first) are retried: every
write is a pure function of its inputs, so running it again on the new version is safe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs import tables
from jobs.delta_io import (
    append_idempotent,
    insert_new_rows,
    read_table_or_none,
    replace_range,
    retry_conflicts,
    table_exists,
)
from jobs.keyed_windows import assignment_rows, late_rows, pane_results
from jobs.settings import PlatformSettings
from jobs.windowed import (
    classify,
    compute_windows,
    day_metrics,
    lateness_aggregates,
    lateness_columns,
    window_end_date,
)

BATCH_METRICS = "late_data_metrics_batches"
LATE_KEY = ("key", "arrival_seq", "window_start_ms", "window_end_ms")
ASSIGNMENT_KEY = ("arrival_seq", "window_start_ms", "window_end_ms")


def app_id_for(checkpoint: str) -> str:
    """A Delta transaction app id per checkpoint: a new checkpoint is a new writer."""
    return "live-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]


@dataclass
class BatchSink:
    spark: SparkSession
    settings: PlatformSettings
    app_id: str
    progress: Callable[[str], None] = print
    batches: list[dict] = field(default_factory=list)
    """One summary per micro-batch written: arrival range, panes, late rows and the batch's
    late-data figures (as in ``late_data_metrics_batches``)."""
    days: tuple[str, str] | None = None
    """The first and last day whose metrics any batch refreshed."""

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            self._write(batch, batch_id)
        finally:
            batch.unpersist()

    def _write(self, batch: DataFrame, batch_id: int) -> None:
        spec = self.settings.pipeline
        keyed = not spec.is_standard_window
        zone = self.settings.time_zone
        end_day = window_end_date(F.col("window_end_ms"), zone)
        stats = (batch.groupBy("kind")
                 .agg(F.count(F.lit(1)).alias("rows"), F.sum("records").alias("records"),
                      F.min(end_day).cast("string").alias("first_day"),
                      F.max(end_day).cast("string").alias("last_day"),
                      F.max("arrival_seq").alias("max_seq"),
                      F.min("min_arrival_seq").alias("min_seq"),
                      F.least(F.min("min_event_ms"), F.min("min_ingest_ms"),
                              F.min("window_end_ms") - F.lit(1)).alias("first_ms"),
                      F.greatest(F.max("max_event_ms") + F.lit(spec.window.size_ms or 0),
                                 F.max("max_ingest_ms"),
                                 F.max("window_end_ms") - F.lit(1)).alias("last_ms")).collect())
        by_kind = {row.kind: row for row in stats}
        if not by_kind:
            return  # a batch with no output at all
        self._merge_panes(batch.where(F.col("kind") == "pane"), batch_id)
        late = by_kind.get("late")
        insert_new_rows(self.spark, late_rows(batch.where(F.col("kind") == "late"), zone),
                        self.settings.table_path(tables.LATE_RECORDS), keys=LATE_KEY,
                        days=(late.first_day, late.last_day) if late else None)
        if keyed:
            fates = [by_kind[k] for k in ("assign", "late") if k in by_kind]
            days = (min(r.first_day for r in fates), max(r.last_day for r in fates)) \
                if fates else None
            insert_new_rows(self.spark, assignment_rows(batch, zone),
                            self.settings.table_path(tables.WINDOW_ASSIGNMENTS),
                            keys=ASSIGNMENT_KEY, days=days)
        progress = by_kind.get("progress")
        if progress is not None:
            touched = [by_kind[k] for k in ("progress", "assign", "late") if k in by_kind]
            first_ms = min(r.first_ms for r in touched if r.first_ms is not None)
            last_ms = max(r.last_ms for r in touched if r.last_ms is not None)
            self._refresh_day_metrics(first_ms, last_ms)
        summary = {
            "batch_id": batch_id,
            "records": int(progress.records) if progress else 0,
            "first_arrival_seq": int(progress.min_seq) if progress else None,
            "last_arrival_seq": int(progress.max_seq) if progress else None,
            "panes": int(by_kind["pane"].rows) if "pane" in by_kind else 0,
            "late_records": int(by_kind["late"].rows) if "late" in by_kind else 0,
        }
        figures = self._batch_metrics(summary, batch if keyed else None).withColumn(
            "quarantined", F.lit(self._quarantined(summary)).cast("long"))
        row = figures.first()  # one row: computed once, appended as a literal
        append_idempotent(self.spark.createDataFrame([row], figures.schema),
                          self.settings.table_path(BATCH_METRICS), app_id=self.app_id,
                          version=batch_id, merge_schema=True)  # tables from before quarantined
        summary.update({k: v for k, v in row.asDict().items() if k not in summary})
        self.batches.append(summary)
        self.progress(f"live: batch {batch_id}: {summary['records']} records, "
                      f"{summary['panes']} panes, {summary['late_records']} late")

    def _quarantined(self, summary: dict) -> int:
        """Quarantined lines of the ingest batches this micro-batch finished reading: those
        after the ingest batch of the record just before its first one, up to the ingest
        batch of its last record. An ingest batch split over two micro-batches counts in the
        first; one with no good line at all counts with the next micro-batch that reads
        records (the per-day metrics count every line, by ingest day)."""
        first, last = summary["first_arrival_seq"], summary["last_arrival_seq"]
        quarantine = read_table_or_none(self.spark,
                                        self.settings.table_path(tables.QUARANTINE))
        if first is None or quarantine is None:
            return 0
        log = self.spark.read.format("delta").load(self.settings.table_path(tables.ARRIVAL_LOG))
        bounds = dict(log.where(F.col("arrival_seq").isin(first - 1, last))
                      .select("arrival_seq", "ingest_batch").collect())
        after, upto = bounds.get(first - 1, -1), bounds[last]
        return quarantine.where(F.col("ingest_batch") > after) \
            .where(F.col("ingest_batch") <= upto).count()

    def _batch_metrics(self, summary: dict, batch: DataFrame | None) -> DataFrame:
        """The micro-batch's own row: its arrival range, what it emitted, and the lateness of
        the records it consumed (the same aggregates as the per-day metrics), classified from
        the log for standard windows, or as the operator assigned them in this ``batch``."""
        header = self.spark.createDataFrame(
            [summary], "batch_id long, records long, first_arrival_seq long, "
                       "last_arrival_seq long, panes long, late_records long")
        if batch is not None:
            classified = assignment_rows(batch, self.settings.time_zone) \
                .withColumnRenamed("fate", "_class")
        else:
            log = self.spark.read.format("delta").load(
                self.settings.table_path(tables.ARRIVAL_LOG))
            first, last = summary["first_arrival_seq"], summary["last_arrival_seq"]
            consumed = log.where(F.col("arrival_seq").between(
                first if first is not None else 0, last if last is not None else -1))
            classified = classify(consumed, self.settings.pipeline, self.settings.time_zone)
        lateness = (classified.agg(*lateness_aggregates())
                    .select(*[F.coalesce(F.col(c), F.lit(0)).alias(c) for c in
                              ("on_time", "late_within_lateness", "dropped_late")],
                            *lateness_columns()))
        return header.crossJoin(lateness)

    def _merge_panes(self, panes: DataFrame, batch_id: int) -> None:
        spec = self.settings.pipeline
        latest = Window.partitionBy("key", "window_start_ms", "window_end_ms") \
            .orderBy(F.col("pane_index").desc())
        rows = pane_results(panes.withColumn("_rank", F.row_number().over(latest))
                            .where(F.col("_rank") == 1), spec, self.settings.time_zone)
        path = self.settings.table_path(tables.WINDOW_RESULTS)
        if not table_exists(self.spark, path):
            rows.where(F.lit(False)).write.format("delta").partitionBy("window_end_date") \
                .save(path)
        days = rows.agg(F.min("window_end_date"), F.max("window_end_date")).first()
        if days[0] is None:
            return
        # name the batch's days in the condition: Delta then prunes the target to those
        # partitions instead of scanning the whole history on every micro-batch
        condition = (f"t.window_end_date >= '{days[0]}' AND t.window_end_date <= '{days[1]}' "
                     "AND t.key = s.key AND t.window_start_ms = s.window_start_ms "
                     "AND t.window_end_ms = s.window_end_ms")
        # idempotent by its own condition (a pane only replaces an older one), so no
        # transaction id: Delta reads that from the session's settings, which any other job of
        # this session (a backfill in another thread) would then carry too
        retry_conflicts(lambda: DeltaTable.forPath(self.spark, path).alias("t")
                        .merge(rows.alias("s"), condition)
                        .whenMatchedUpdateAll(condition="s.pane_index > t.pane_index")
                        .whenNotMatchedInsertAll()
                        .execute())

    def _refresh_day_metrics(self, first_ms: int, last_ms: int) -> None:
        """The days this batch's records can touch (their windows' end days and their ingest
        days, where quarantine counts go), recomputed as the backfill computes them, so live
        and backfill metrics are the same function of the same log."""
        spec = self.settings.pipeline
        zone = self.settings.time_zone
        day = F.to_date(F.from_utc_timestamp(F.timestamp_millis(F.lit(first_ms)), zone))
        last = F.to_date(F.from_utc_timestamp(F.timestamp_millis(F.lit(last_ms)), zone))
        first_day, last_day = (str(v) for v in self.spark.range(1).select(day, last).first())
        self.days = (first_day, last_day) if self.days is None else (
            min(self.days[0], first_day), max(self.days[1], last_day))
        quarantine = read_table_or_none(self.spark, self.settings.table_path(tables.QUARANTINE))
        if spec.is_standard_window:
            # the whole log, not just what this batch has seen: a backfill running at the same
            # time writes these days from the whole log, and no writer may leave them older
            log = self.spark.read.format("delta").load(
                self.settings.table_path(tables.ARRIVAL_LOG))
            metrics = compute_windows(log, quarantine, spec, zone, first_day, last_day).metrics
        else:
            assigned = (self.spark.read.format("delta")
                        .load(self.settings.table_path(tables.WINDOW_ASSIGNMENTS))
                        .where(F.col("window_end_date").between(first_day, last_day))
                        .withColumnRenamed("fate", "_class"))
            metrics = day_metrics(assigned, quarantine, zone, first_day, last_day)
        replace_range(metrics, self.settings.table_path(tables.LATE_DATA_METRICS),
                      column="window_end_date", first=first_day, last=last_day,
                      partition_by="window_end_date")
