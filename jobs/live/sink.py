"""Write one micro-batch of the live stream to the Delta tables, idempotently, and the late-data
metrics every so often.

A micro-batch may run again after a failure (Spark re-runs the batch that was not committed to
its checkpoint); every write below leaves the tables as if it had run once:

- panes: ``MERGE`` into the results table keeping the highest ``pane_index`` per key and
  window (a repeat replaces nothing: no pane is newer than itself);
- late records (and window assignments): inserted unless already there (an insert-only
  ``MERGE`` by record and window), so neither a repeated batch nor a backfill that covered the
  same records doubles them.

These go to their tables at once (one thread each: independent Delta commits), and the
``MERGE`` conditions name the batch's days, window ends and arrival range, so Delta reads only
the files that can match instead of a whole day.

The late-data metrics are written by :meth:`BatchSink.flush`, after a number of batches or
seconds (every batch when the interval is 0) and when the stream stops:

- per micro-batch: one row per batch (its arrival range, panes, late rows, the lateness of the
  records it consumed, the quarantined lines of the ingest batches it finished), computed for
  all the batches since the last flush in one job, appended unless already there. Each batch's
  summary is kept in a small file in the checkpoint until it is flushed, so a crash between two
  flushes loses none;
- per day: the days the batches touched, recomputed as the backfill computes them (from the
  arrival log for standard windows, from the ``window_assignments`` table for pipelines the
  operator library runs per key), so live and backfill metrics are the same function of the
  same log.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs import storage, tables
from jobs.days import could_reach, window_end_date
from jobs.delta_io import (
    append_idempotent,
    insert_new_rows,
    read_table_or_none,
    replace_range,
    retry_conflicts,
    table_exists,
)
from jobs.settings import PlatformSettings
from jobs.storage import Files
from jobs.window_tables import (
    assignment_rows,
    day_metrics,
    late_rows,
    lateness_aggregates,
    lateness_columns,
    pane_results,
)
from jobs.windows.vectorised import classify, compute_standard_windows

BATCH_METRICS = tables.BATCH_METRICS
LATE_KEY = ("key", "arrival_seq", "window_start_ms", "window_end_ms")
ASSIGNMENT_KEY = ("arrival_seq", "window_start_ms", "window_end_ms")
BATCH_HEADER = ("batch_id long, records long, first_arrival_seq long, last_arrival_seq long, "
                "panes long, late_records long")


def app_id_for(checkpoint: str) -> str:
    """A Delta transaction app id per checkpoint: a new checkpoint is a new writer."""
    return "live-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]


@dataclass
class BatchSink:
    spark: SparkSession
    settings: PlatformSettings
    app_id: str
    progress: Callable[[str], None] = print
    checkpoint: str | None = None
    """Where unflushed batch summaries are kept (``<checkpoint>/platform/batches``)."""
    metrics_interval_s: float = 0.0
    """Flush the metrics at most this often (0: after every batch)."""
    batches: list[dict] = field(default_factory=list)
    """One summary per micro-batch whose metrics were flushed: arrival range, panes, late rows
    and the batch's late-data figures (as in ``late_data_metrics_batches``)."""
    days: tuple[str, str] | None = None
    """The first and last day whose metrics any flush refreshed."""
    pending: list[dict] = field(default_factory=list)
    on_flush: Callable[[list[dict]], None] | None = None
    """Called with the batch rows of each flush (the long-running job reports them)."""
    on_batch: Callable[[dict], None] | None = None
    """Called with each batch's summary once its panes and late rows are written."""

    def __post_init__(self) -> None:
        self.files = Files(self.spark)
        self.folder = storage.join(self.checkpoint, "platform", "batches") \
            if self.checkpoint else None
        self.last_flush = time.monotonic()
        if self.folder:  # batches a crash left unflushed
            for name in self.files.names(self.folder, ".json"):
                self.pending.append(json.loads(self.files.read_text(
                    storage.join(self.folder, name))))
            self.pending.sort(key=lambda s: s["batch_id"])

    # -- one micro-batch --------------------------------------------------------------------------

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        batch = batch.persist()
        try:
            summary = self._write(batch, batch_id)
        finally:
            batch.unpersist()
        if summary is None:
            return
        summary["seconds"] = round(time.monotonic() - started, 3)
        summary["written_at"] = time.time()
        self._keep(summary)
        if self.on_batch is not None:
            self.on_batch(summary)
        self.progress(
            f"live: batch {batch_id}: {summary['records']} records, {summary['panes']} panes, "
            f"{summary['late_records']} late, watermark {summary['watermark_ms']}, "
            f"{summary['seconds']:.1f} s")
        if time.monotonic() - self.last_flush >= self.metrics_interval_s:
            self.flush()

    def _write(self, batch: DataFrame, batch_id: int) -> dict | None:
        spec = self.settings.pipeline
        keyed = not spec.is_standard_window
        zone = self.settings.time_zone
        end_day = window_end_date(F.col("window_end_ms"), zone)
        stats = (batch.groupBy("kind")
                 .agg(F.count(F.lit(1)).alias("rows"), F.sum("records").alias("records"),
                      F.min(end_day).cast("string").alias("first_day"),
                      F.max(end_day).cast("string").alias("last_day"),
                      F.min("window_end_ms").alias("first_end"),
                      F.max("window_end_ms").alias("last_end"),
                      F.max("arrival_seq").alias("max_seq"),
                      F.min(F.coalesce("min_arrival_seq", "arrival_seq")).alias("min_seq"),
                      F.max("watermark_ms").alias("watermark"),
                      F.min("min_event_ms").alias("min_event"),
                      F.max("max_event_ms").alias("max_event"),
                      F.min("min_ingest_ms").alias("min_ingest"),
                      F.max("max_ingest_ms").alias("max_ingest")).collect())
        by_kind = {row.kind: row for row in stats}
        if not by_kind:
            return None  # a batch with no output at all
        writes: list[Callable[[], None]] = []
        if "pane" in by_kind:
            writes.append(lambda: self._merge_panes(batch.where(F.col("kind") == "pane"),
                                                    by_kind["pane"]))
        if "late" in by_kind:
            late = by_kind["late"]
            writes.append(lambda: self._insert(
                late_rows(batch.where(F.col("kind") == "late"), zone), tables.LATE_RECORDS,
                LATE_KEY, late))
        if keyed and ("assign" in by_kind or "late" in by_kind):
            fates = [by_kind[k] for k in ("assign", "late") if k in by_kind]
            writes.append(lambda: self._insert(assignment_rows(batch, zone),
                                               tables.WINDOW_ASSIGNMENTS, ASSIGNMENT_KEY,
                                               *fates))
        with ThreadPoolExecutor(max_workers=max(1, len(writes))) as pool:
            for future in [pool.submit(write) for write in writes]:
                future.result()
        progress = by_kind.get("progress")
        touched = [r for r in by_kind.values() if r.kind in ("progress", "assign", "late")]
        ends = [r for r in by_kind.values() if r.first_end is not None]
        return {
            "batch_id": batch_id,
            "records": int(progress.records) if progress else 0,
            "first_arrival_seq": int(progress.min_seq) if progress else None,
            "last_arrival_seq": int(progress.max_seq) if progress else None,
            "panes": int(by_kind["pane"].rows) if "pane" in by_kind else 0,
            "late_records": int(by_kind["late"].rows) if "late" in by_kind else 0,
            "watermark_ms": max((int(r.watermark) for r in touched if r.watermark is not None),
                                default=None),
            # what the batch's records can touch: their windows' end days, their ingest days
            "first_ms": min([int(progress.min_event), int(progress.min_ingest)]
                            + [int(r.first_end) - 1 for r in ends]) if progress else None,
            "last_ms": max([int(progress.max_event) + (spec.window.size_ms or 0),
                            int(progress.max_ingest)]
                           + [int(r.last_end) - 1 for r in ends]) if progress else None,
        }

    def _merge_panes(self, panes: DataFrame, bounds) -> None:
        """The latest pane per key and window replaces an older one."""
        spec = self.settings.pipeline
        latest = Window.partitionBy("key", "window_start_ms", "window_end_ms") \
            .orderBy(F.col("pane_index").desc())
        rows = pane_results(panes.withColumn("_rank", F.row_number().over(latest))
                            .where(F.col("_rank") == 1), [a.name for a in spec.aggregates],
                            self.settings.time_zone)
        path = self.settings.table_path(tables.WINDOW_RESULTS)
        if not table_exists(self.spark, path):
            retry_conflicts(lambda: rows.where(F.lit(False)).write.format("delta")
                            .partitionBy("window_end_date").mode("append").save(path))
        # name the batch's days and window ends in the condition: Delta then reads only the
        # files that can hold these windows instead of the whole history
        condition = (f"t.window_end_date >= '{bounds.first_day}' "
                     f"AND t.window_end_date <= '{bounds.last_day}' "
                     f"AND t.window_end_ms >= {int(bounds.first_end)} "
                     f"AND t.window_end_ms <= {int(bounds.last_end)} "
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

    def _insert(self, frame: DataFrame, table: str, keys: tuple[str, ...], *bounds) -> None:
        """Rows not yet in the table (by record and window), with the batch's days and
        arrival range named so that Delta reads only the files that can match."""
        first_day = min(b.first_day for b in bounds)
        last_day = max(b.last_day for b in bounds)
        low = min(int(b.min_seq) for b in bounds)
        high = max(int(b.max_seq) for b in bounds)
        insert_new_rows(self.spark, frame, self.settings.table_path(table), keys=keys,
                        days=(first_day, last_day),
                        extra_condition=f"t.arrival_seq >= {low} AND t.arrival_seq <= {high}")

    # -- metrics ----------------------------------------------------------------------------------

    def _keep(self, summary: dict) -> None:
        self.pending = [s for s in self.pending if s["batch_id"] != summary["batch_id"]]
        self.pending.append(summary)
        if self.folder:
            location = storage.join(self.folder, f"{summary['batch_id']:020d}.json")
            self.files.delete(location)  # a repeated batch writes the same summary again
            self.files.create(location, json.dumps(summary))

    def flush(self) -> list[dict]:
        """Write the late-data metrics of the batches since the last flush; returns their
        per-batch rows."""
        self.last_flush = time.monotonic()
        pending = list(self.pending)
        if not pending:
            return []
        started = time.monotonic()
        rows = self._batch_metrics(pending)
        with_records = [s for s in pending if s["records"]]
        if with_records:
            self._refresh_day_metrics(min(s["first_ms"] for s in with_records),
                                      max(s["last_ms"] for s in with_records))
        by_id = {r["batch_id"]: r for r in rows}
        flushed = [{**s, **by_id.get(s["batch_id"], {})} for s in pending]
        self.batches.extend(flushed)
        self._forget(self.pending)
        days = f" and days {self.days[0]} .. {self.days[1]}" if self.days else ""
        self.progress(f"live: late-data metrics of {len(pending)} batches{days} written "
                      f"({time.monotonic() - started:.1f} s)")
        if self.on_flush is not None:
            self.on_flush(flushed)
        return flushed

    def _forget(self, summaries: list[dict]) -> None:
        if self.folder:
            for summary in summaries:
                self.files.delete(storage.join(self.folder, f"{summary['batch_id']:020d}.json"))
        done = {s["batch_id"] for s in summaries}
        self.pending = [s for s in self.pending if s["batch_id"] not in done]

    def _batch_metrics(self, pending: list[dict]) -> list[dict]:
        """One row per batch: the header, the lateness of the records it consumed, and the
        quarantined lines of the ingest batches it finished; appended unless already there."""
        log = self.spark.read.format("delta").load(self.settings.table_path(tables.ARRIVAL_LOG))
        consumed = [s for s in pending if s["records"]]
        low = min((s["first_arrival_seq"] for s in consumed), default=0)
        high = max((s["last_arrival_seq"] for s in consumed), default=-1)
        ranges = self.spark.createDataFrame(
            [(s["batch_id"], s["first_arrival_seq"], s["last_arrival_seq"]) for s in consumed],
            "batch_id long, first long, last long")
        if self.settings.pipeline.is_standard_window:
            consumed = log.where(F.col("arrival_seq").between(low, high))
            classified = classify(consumed, self.settings.pipeline, self.settings.time_zone)
        else:
            classified = (self.spark.read.format("delta")
                          .load(self.settings.table_path(tables.WINDOW_ASSIGNMENTS))
                          .where(F.col("arrival_seq").between(low, high))
                          .withColumnRenamed("fate", "_class"))
        per_batch = (classified.join(F.broadcast(ranges),
                                     F.col("arrival_seq").between(F.col("first"), F.col("last")))
                     .groupBy("batch_id").agg(*lateness_aggregates())
                     .select("batch_id",
                             *[F.coalesce(F.col(c), F.lit(0)).alias(c) for c in
                               ("on_time", "late_within_lateness", "dropped_late")],
                             *lateness_columns()))
        quarantined = self._quarantined(log, pending)
        header = self.spark.createDataFrame(
            [{k: s[k] for k in ("batch_id", "records", "first_arrival_seq", "last_arrival_seq",
                                "panes", "late_records")} for s in pending], BATCH_HEADER)
        rows = (header.join(per_batch, "batch_id", "left")
                .join(self.spark.createDataFrame(list(quarantined.items()),
                                                 "batch_id long, quarantined long"),
                      "batch_id", "left")
                .withColumn("quarantined", F.coalesce("quarantined", F.lit(0)).cast("long"))
                .orderBy("batch_id"))
        for name in ("on_time", "late_within_lateness", "dropped_late"):
            rows = rows.withColumn(name, F.coalesce(F.col(name), F.lit(0)).cast("long"))
        collected = rows.collect()
        path = self.settings.table_path(BATCH_METRICS)
        existing = set()
        if table_exists(self.spark, path):
            existing = {r[0] for r in self.spark.read.format("delta").load(path)
                        .where(F.col("batch_id").between(pending[0]["batch_id"],
                                                         pending[-1]["batch_id"]))
                        .select("batch_id").collect()}
        new = [r for r in collected if r.batch_id not in existing]
        if new:
            append_idempotent(self.spark.createDataFrame(new, rows.schema), path,
                              app_id=self.app_id, version=new[-1].batch_id, merge_schema=True)
        return [r.asDict() for r in collected]

    def _quarantined(self, log: DataFrame, pending: list[dict]) -> dict[int, int]:
        """Quarantined lines of the ingest batches each micro-batch finished reading: those
        after the ingest batch of the record just before its first one, up to the ingest
        batch of its last record. An ingest batch split over two micro-batches counts in the
        first; one with no good line at all counts with the next micro-batch that reads
        records (the per-day metrics count every line, by ingest day)."""
        quarantine = read_table_or_none(self.spark, self.settings.table_path(tables.QUARANTINE))
        if quarantine is None:
            return {}
        pending = [s for s in pending if s["records"]]
        if not pending:
            return {}
        positions = {s["first_arrival_seq"] - 1 for s in pending} | \
            {s["last_arrival_seq"] for s in pending}
        batch_of = dict(log.where(F.col("arrival_seq").isin(sorted(positions)))
                        .select("arrival_seq", "ingest_batch").collect())
        per_ingest = dict(quarantine.groupBy("ingest_batch").count().collect())
        result = {}
        for s in pending:
            after = batch_of.get(s["first_arrival_seq"] - 1, -1)
            upto = batch_of[s["last_arrival_seq"]]
            result[s["batch_id"]] = sum(n for b, n in per_ingest.items() if after < b <= upto)
        return result

    def _refresh_day_metrics(self, first_ms: int, last_ms: int) -> None:
        """The days the batches' records can touch (their windows' end days and their ingest
        days, where quarantine counts go), recomputed as the backfill computes them."""
        from jobs.days import day_of

        spec = self.settings.pipeline
        zone = self.settings.time_zone
        first_day, last_day = str(day_of(first_ms, zone)), str(day_of(last_ms, zone))
        self.days = (first_day, last_day) if self.days is None else (
            min(self.days[0], first_day), max(self.days[1], last_day))
        quarantine = read_table_or_none(self.spark, self.settings.table_path(tables.QUARANTINE))
        if spec.is_standard_window:
            # the whole log, not just what the stream has seen: a backfill running at the same
            # time writes these days from the whole log, and no writer may leave them older
            log = self.spark.read.format("delta").load(
                self.settings.table_path(tables.ARRIVAL_LOG))
            log = log.where(could_reach(first_day, last_day, spec.window))
            metrics = compute_standard_windows(log, quarantine, spec, zone, first_day,
                                               last_day).metrics
        else:
            assigned = (self.spark.read.format("delta")
                        .load(self.settings.table_path(tables.WINDOW_ASSIGNMENTS))
                        .where(F.col("window_end_date").between(first_day, last_day))
                        .withColumnRenamed("fate", "_class"))
            metrics = day_metrics(assigned, quarantine, zone, first_day, last_day)
        replace_range(metrics, self.settings.table_path(tables.LATE_DATA_METRICS),
                      column="window_end_date", first=first_day, last=last_day,
                      partition_by="window_end_date")
