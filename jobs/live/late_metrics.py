"""A live pipeline's late-data metrics, written beside the stream rather than in its way.

The micro-batches' tables are written by jobs.live.sink; their late-data metrics are a pure
function of the arrival log and those tables, so they are written here after a number of
batches or seconds (every batch when the interval is 0) and when the stream stops:

- per micro-batch: one row per batch (its arrival range, panes, late rows, the lateness of the
  records it consumed, the quarantined lines of the ingest batches it finished), computed for
  all the batches since the last flush at once (for standard windows from the batches'
  records in the arrival log, for the others from their window assignments, both with
  numpy in the driver, jobs.lateness.metrics), appended unless already there. Each batch's
  summary is kept in a small file in the checkpoint until it is flushed, so a crash between two
  flushes loses none;
- per day: the days the batches touched, recomputed as the backfill computes them (from the
  arrival log for standard windows, by running tallies, jobs.lateness.day_tallies; from the
  ``window_assignments`` table for pipelines the operator library runs per key), so live and
  backfill metrics are the same function of the same log.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, LongType, StructField, StructType

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.lateness import metrics as lateness
from jobs.lateness.aggregates import LATENESS_COLUMNS, day_metrics
from jobs.lateness.assigned import assigned_metrics
from jobs.lateness.day_tallies import DayTallies
from jobs.store import fast_writes, storage
from jobs.store.delta_io import append_idempotent, read_table_or_none
from jobs.store.storage import Files
from jobs.store.table_stats import column_ranges
from jobs.tables.days import day_of
from jobs.windows.vectorised import standard_day_metrics

BATCH_METRICS = tables.BATCH_METRICS

FLUSH_SHARE = 5
"""A background flush starts at most every ``FLUSH_SHARE`` times its last duration: the day
metrics are recomputed from the day's whole log, which grows through the day, and may take at
most a fifth of the machine beside the stream."""
BATCH_HEADER_COLUMNS = ("batch_id", "records", "first_arrival_seq", "last_arrival_seq", "panes",
                        "late_records")
BATCH_METRICS_SCHEMA = StructType(
    [StructField(name, LongType(), True) for name in BATCH_HEADER_COLUMNS]
    + [StructField(name, LongType(), False)
       for name in ("on_time", "late_within_lateness", "dropped_late")]
    + [StructField(name, DoubleType(), True)
       for name in ("lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms")]
    + [StructField("lateness_max_ms", LongType(), True),
       StructField("watermark_lag_p50_ms", DoubleType(), True),
       StructField("watermark_lag_max_ms", LongType(), True),
       StructField("quarantined", LongType(), False)])
"""``late_data_metrics_batches``: the header of each micro-batch, the fates and lateness of the
records it consumed, the quarantined lines of the ingest batches it finished."""
NO_RECORDS = {"on_time": 0, "late_within_lateness": 0, "dropped_late": 0,
              **{name: None for name in LATENESS_COLUMNS}}
"""The lateness of a batch that consumed no record (it only fired timers)."""


class LateDataMetrics:
    """One pipeline version's late-data metrics in a live query: the summaries of the batches
    written since the last flush, and their flush (at once, or in a background thread)."""

    def __init__(self, spark: SparkSession, pipeline: Pipeline, app_id: str, files: Files,
                 folder: str | None, progress: Callable[[str], None], label: str,
                 metrics_interval_s: float = 0.0,
                 on_flush: Callable[[list[dict]], None] | None = None) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.app_id = app_id
        self.files = files
        self.folder = folder
        """Where unflushed batch summaries are kept (``<checkpoint>/platform/batches/<key>``)."""
        self.progress = progress
        self.label = label
        self.key = f"{pipeline.name}@{pipeline.version}"
        self.metrics_interval_s = metrics_interval_s
        """Flush the metrics at most this often (0: after every batch)."""
        self.on_flush = on_flush
        """Called with the batch rows of each flush (the long-running job reports them)."""
        self.batches: list[dict] = []
        """One summary per micro-batch whose metrics were flushed: arrival range, panes, late
        rows and the batch's late-data figures (as in ``late_data_metrics_batches``)."""
        self.days: tuple[str, str] | None = None
        """The first and last day whose metrics any flush (or process output) refreshed."""
        self.pending: list[dict] = []
        self._lock = threading.Lock()
        self.flush_seconds = 0.0
        self._day_schemas: dict[bool | tuple[str, bool], pa.Schema] = {}
        self._day_tallies: DayTallies | None = None
        self._flusher: threading.Thread | None = None
        self._flush_error: BaseException | None = None
        self._quarantine_covered: int | None = None
        """The last ingest batch whose quarantined lines' days a flush of this run refreshed
        (``None``: none yet)."""
        # the first batch with output is flushed at once: the metrics show up as the stream
        # starts, and the per-day tallies (jobs.lateness.day_tallies) read the days whole
        # while the log is at its smallest
        self.last_flush = float("-inf")
        if self.folder:  # batches a crash left unflushed
            for name in self.files.names(self.folder, ".json"):
                self.pending.append(json.loads(self.files.read_text(
                    storage.join(self.folder, name))))
            self.pending.sort(key=lambda s: s["batch_id"])

    def note_days(self, first: str, last: str) -> None:
        """Days a process pipeline's batch wrote (their output has no day metrics to flush)."""
        self.days = (first, last) if self.days is None else (
            min(self.days[0], first), max(self.days[1], last))

    def after_batch(self) -> None:
        """Flush the metrics when they are due (at once, or in the background)."""
        if self._flush_error is not None:
            raise RuntimeError(f"writing the late-data metrics of {self.key} "
                               "failed") from self._flush_error
        if not self.metrics_interval_s:
            self.flush()
        elif time.monotonic() - self.last_flush >= max(self.metrics_interval_s,
                                                       FLUSH_SHARE * self.flush_seconds):
            self._flush_in_background()

    def _flush_in_background(self) -> None:
        """The metrics are written beside the stream, not in its way: a micro-batch does not
        wait for them (they are a pure function of the log and the tables, and each batch's
        summary is kept in the checkpoint until they are written)."""
        if self._flusher is not None and self._flusher.is_alive():
            return
        self.last_flush = time.monotonic()

        def run() -> None:
            try:
                self.flush()
            except BaseException as error:  # reported by the next batch, and by close()
                self._flush_error = error

        self._flusher = threading.Thread(target=run, name="late-data-metrics", daemon=True)
        self._flusher.start()

    def close(self) -> None:
        """Wait for a background flush, then flush what is left."""
        if self._flusher is not None:
            self._flusher.join()
        if self._flush_error is not None:
            raise RuntimeError(f"writing the late-data metrics of {self.key} "
                               "failed") from self._flush_error
        self.flush(final=True)

    def keep(self, summary: dict) -> None:
        """A written batch's summary, kept (in the checkpoint too) until its metrics are
        flushed."""
        with self._lock:
            self.pending = [s for s in self.pending if s["batch_id"] != summary["batch_id"]]
            self.pending.append(summary)
        if self.folder:
            location = storage.join(self.folder, f"{summary['batch_id']:020d}.json")
            self.files.delete(location)  # a repeated batch writes the same summary again
            self.files.create(location, json.dumps(summary))

    def flush(self, final: bool = False) -> list[dict]:
        """Write the late-data metrics of the batches since the last flush; returns their
        per-batch rows. The ``final`` flush, as the stream stops, also writes the days of lines
        quarantined since the last flush when no batch is left to flush (an ingest batch of
        bad lines only, after the last micro-batch)."""
        self.last_flush = time.monotonic()
        with self._lock:
            pending = list(self.pending)
        if not pending:
            if final and not self.pipeline.spec.is_process:
                self._refresh_quarantine_days()
            return []
        started = time.monotonic()
        if self.pipeline.spec.is_process:  # no windows: each batch's counts, as they are
            self._append_process_batches(pending)
            self.batches.extend(pending)
            self._forget(pending)
            if self.on_flush is not None:
                self.on_flush(pending)
            return pending
        # a flush of batches that only fired timers counts no quarantined line: no read
        lines = self._quarantine_lines() if any(s["records"] for s in pending) else None
        rows, first_after = self._batch_metrics(pending, lines)
        per_batch = time.monotonic() - started
        with_records = [s for s in pending if s["records"]]
        if with_records:
            spans = [(min(s["first_ms"] for s in with_records),
                      max(s["last_ms"] for s in with_records))]
            if self._quarantine_covered is None:
                self._quarantine_covered = first_after
            spans.append(self._uncovered_quarantine(lines))
            given = [span for span in spans if span is not None]
            self._refresh_day_metrics(min(low for low, _ in given),
                                      max(high for _, high in given))
        by_id = {r["batch_id"]: r for r in rows}
        flushed = [{**s, **by_id.get(s["batch_id"], {})} for s in pending]
        self.batches.extend(flushed)
        self._forget(pending)
        self.flush_seconds = time.monotonic() - started
        days = f" and days {self.days[0]} .. {self.days[1]}" if self.days else ""
        self.progress(f"live {self.label}: late-data metrics of {len(pending)} "
                      f"batches{days} written "
                      f"({self.flush_seconds:.1f} s: per batch {per_batch:.1f} s, per day "
                      f"{self.flush_seconds - per_batch:.1f} s)")
        if self.on_flush is not None:
            self.on_flush(flushed)
        return flushed

    def _forget(self, summaries: list[dict]) -> None:
        if self.folder:
            for summary in summaries:
                self.files.delete(storage.join(self.folder, f"{summary['batch_id']:020d}.json"))
        done = {s["batch_id"] for s in summaries}
        with self._lock:
            self.pending = [s for s in self.pending if s["batch_id"] not in done]

    def _batch_metrics(self, pending: list[dict],
                       lines: pa.Table | None) -> tuple[list[dict], int]:
        """One row per batch: the header, the lateness of the records it consumed, and the
        quarantined lines of the ingest batches it finished; appended unless already there.
        Also the last ingest batch before the first of them (see :meth:`_quarantined`)."""
        consumed = [s for s in pending if s["records"]]
        if self.pipeline.spec.is_standard_window:
            fates = self._standard_lateness(consumed)
        else:
            fates = self._assigned_lateness(consumed)
        quarantined, first_after = self._quarantined(pending, lines)
        rows = []
        for summary in pending:
            row = {name: summary[name] for name in BATCH_HEADER_COLUMNS}
            row.update(fates.get(summary["batch_id"], NO_RECORDS))
            row["quarantined"] = quarantined.get(summary["batch_id"], 0)
            rows.append(row)
        path = self.pipeline.table_path(BATCH_METRICS)
        first, last = pending[0]["batch_id"], pending[-1]["batch_id"]
        existing = set(fast_writes.read_columns(
            path, ["batch_id"], (pc.field("batch_id") >= first) & (pc.field("batch_id") <= last)
        ).column("batch_id").to_pylist())
        new = [r for r in rows if r["batch_id"] not in existing]
        if new:
            self._append_batch_rows(new, path)
        return rows, first_after

    def _standard_lateness(self, consumed: list[dict]) -> dict[int, dict]:
        """The batches' lateness, from their records in the arrival log, without Spark
        (jobs.lateness.metrics)."""
        if not consumed:
            return {}
        low = min(s["first_arrival_seq"] for s in consumed)
        high = max(s["last_arrival_seq"] for s in consumed)
        records = fast_writes.read_columns(
            self.pipeline.table_path(tables.ARRIVAL_LOG), lateness.COLUMNS,
            (pc.field("arrival_seq") >= low) & (pc.field("arrival_seq") <= high))
        return lateness.batch_lateness(
            records, [(s["batch_id"], s["first_arrival_seq"], s["last_arrival_seq"])
                      for s in consumed], self.pipeline.spec)

    def _assigned_lateness(self, consumed: list[dict]) -> dict[int, dict]:
        """The batches' lateness, from the window assignments the operator library wrote for
        their records, without Spark (jobs.lateness.metrics)."""
        if not consumed:
            return {}
        low = min(s["first_arrival_seq"] for s in consumed)
        high = max(s["last_arrival_seq"] for s in consumed)
        assigned = fast_writes.read_columns(
            self.pipeline.table_path(tables.WINDOW_ASSIGNMENTS), lateness.ASSIGNED_COLUMNS,
            (pc.field("arrival_seq") >= low) & (pc.field("arrival_seq") <= high))
        return lateness.assigned_batch_lateness(
            assigned, [(s["batch_id"], s["first_arrival_seq"], s["last_arrival_seq"])
                       for s in consumed])

    def _append_process_batches(self, pending: list[dict]) -> None:
        """A process pipeline's ``late_data_metrics_batches``: per micro-batch its arrival
        range, output rows (``panes``) and late records; appended under the last batch's id."""
        path = self.pipeline.table_path(BATCH_METRICS)
        names = ("batch_id", "records", "first_arrival_seq", "last_arrival_seq", "panes",
                 "late_records")
        data = pa.table({name: pa.array([s[name] for s in pending], pa.int64())
                         for name in names})
        fast_writes.append(path, data, app_id=self.app_id, version=pending[-1]["batch_id"])

    def _append_batch_rows(self, new: list[dict], path: str) -> None:
        """One small append with the batch id as Delta transaction; a table from an older
        version of the platform, without some of these columns, gets them through Spark."""
        schema = BATCH_METRICS_SCHEMA
        if fast_writes.table_exists(path) and \
                not set(schema.fieldNames()) <= self._columns_of(path):
            append_idempotent(self.spark.createDataFrame(new, schema), path, app_id=self.app_id,
                              version=new[-1]["batch_id"], merge_schema=True)
            return
        data = pa.Table.from_pylist(new, fast_writes.arrow_schema(schema))
        fast_writes.append(path, data, app_id=self.app_id, version=new[-1]["batch_id"])

    def _standard_day_metrics(self, first_day: str, last_day: str) -> pa.Table:
        """The days' metrics of a standard-window pipeline, as the backfill computes them, from
        the whole log (not just what the stream has seen: a backfill running at the same time
        writes these days from the whole log, and no writer may leave them older), from
        running per-day tallies (jobs.lateness.day_tallies: each flush reads only what the log
        gained since the last one); in the schema of Spark's computation."""
        if self._day_tallies is None:
            self._day_tallies = DayTallies(self.pipeline.spec, self.pipeline.time_zone,
                                           self.pipeline.table_path(tables.ARRIVAL_LOG),
                                           self.pipeline.table_path(tables.QUARANTINE))
        rows = self._day_tallies.rows(first_day, last_day)
        exists = fast_writes.table_exists(self.pipeline.table_path(tables.QUARANTINE))
        return pa.Table.from_pylist(rows, self._day_metrics_schema(exists))

    def _day_metrics_schema(self, with_quarantine: bool) -> pa.Schema:
        """The Arrow schema of the backfill's day metrics (``standard_day_metrics``), from its
        Spark plan, planned once per sink (no job runs)."""
        if with_quarantine not in self._day_schemas:
            quarantine_path = self.pipeline.table_path(tables.QUARANTINE)
            planned = standard_day_metrics(
                self.spark.read.format("delta").load(
                    self.pipeline.table_path(tables.ARRIVAL_LOG)),
                read_table_or_none(self.spark, quarantine_path) if with_quarantine else None,
                self.pipeline.spec, self.pipeline.time_zone, "1970-01-01", "1970-01-01")
            self._day_schemas[with_quarantine] = fast_writes.arrow_schema(planned.schema)
        return self._day_schemas[with_quarantine]

    def _assigned_metrics_schema(self) -> pa.Schema:
        """The Arrow schema of the metrics Spark computes from the assignments table
        (``day_metrics``), planned once per sink and quarantine (no job runs)."""
        quarantine_path = self.pipeline.table_path(tables.QUARANTINE)
        with_quarantine = fast_writes.table_exists(quarantine_path)
        key = ("assigned", with_quarantine)
        if key not in self._day_schemas:
            assigned = (self.spark.read.format("delta")
                        .load(self.pipeline.table_path(tables.WINDOW_ASSIGNMENTS))
                        .withColumnRenamed("fate", "_class"))
            planned = day_metrics(
                assigned, read_table_or_none(self.spark, quarantine_path)
                if with_quarantine else None, self.pipeline.time_zone, "1970-01-01",
                "1970-01-01")
            self._day_schemas[key] = fast_writes.arrow_schema(planned.schema)
        return self._day_schemas[key]

    @staticmethod
    def _columns_of(path: str) -> set[str]:
        from deltalake import DeltaTable

        return set(DeltaTable(fast_writes.delta_uri(path)).schema().to_arrow().names)

    def _quarantine_lines(self) -> pa.Table | None:
        """Every quarantined line's ingest batch and ingest time (``None``: no quarantine)."""
        quarantine = self.pipeline.table_path(tables.QUARANTINE)
        if not fast_writes.table_exists(quarantine):
            return None
        return fast_writes.read_columns(quarantine, ["ingest_batch", "ingest_time_ms"])

    def _uncovered_quarantine(self, lines: pa.Table | None) -> tuple[int, int] | None:
        """The first and last ingest time of the lines quarantined after the last ingest batch
        whose days a flush refreshed (``None``: none), which becomes the newest one. A day
        whose only lines were quarantined gets its metrics so, as the backfill writes them
        (jobs.lateness.aggregates.quarantine_days), even when no record's windows end on it
        and no micro-batch's records were ingested on it."""
        if lines is None or self._quarantine_covered is None:
            return None
        newer = lines.filter(pc.field("ingest_batch") > self._quarantine_covered)
        if not newer.num_rows:
            return None
        self._quarantine_covered = pc.max(newer.column("ingest_batch")).as_py()
        bounds = pc.min_max(newer.column("ingest_time_ms")).as_py()
        return bounds["min"], bounds["max"]

    def _refresh_quarantine_days(self) -> None:
        """The days of the lines quarantined since the last flush, with no batch to flush. A
        run that flushed none starts after the log's last ingest batch: the lines before it
        are covered by the micro-batch that reads the records after them."""
        if self._quarantine_covered is None:
            ranges = column_ranges(self.pipeline.table_path(tables.ARRIVAL_LOG),
                                   ("ingest_batch",))
            self._quarantine_covered = ranges["ingest_batch"][1] if ranges else -1
        span = self._uncovered_quarantine(self._quarantine_lines())
        if span is not None:
            self._refresh_day_metrics(*span)

    def _quarantined(self, pending: list[dict],
                     lines: pa.Table | None) -> tuple[dict[int, int], int]:
        """Quarantined lines of the ingest batches each micro-batch finished reading: those
        after the ingest batch of the record just before its first one, up to the ingest
        batch of its last record. An ingest batch split over two micro-batches counts in the
        first; one with no good line at all counts with the next micro-batch that reads
        records (the per-day metrics count every line, by ingest day). Also the ingest batch
        of the record just before the first batch's first (-1: none)."""
        pending = [s for s in pending if s["records"]]
        if lines is None or not pending:
            return {}, -1
        positions = {s["first_arrival_seq"] - 1 for s in pending} | \
            {s["last_arrival_seq"] for s in pending}
        found = fast_writes.read_columns(
            self.pipeline.table_path(tables.ARRIVAL_LOG), ["arrival_seq", "ingest_batch"],
            pc.field("arrival_seq").isin(sorted(positions)))
        batch_of = dict(zip(found.column("arrival_seq").to_pylist(),
                            found.column("ingest_batch").to_pylist(), strict=True))
        counted = lines.group_by("ingest_batch").aggregate([("ingest_batch", "count")])
        per_ingest = dict(zip(counted.column("ingest_batch").to_pylist(),
                              counted.column("ingest_batch_count").to_pylist(), strict=True))
        result = {}
        for s in pending:
            after = batch_of.get(s["first_arrival_seq"] - 1, -1)
            upto = batch_of[s["last_arrival_seq"]]
            result[s["batch_id"]] = sum(n for b, n in per_ingest.items() if after < b <= upto)
        return result, batch_of.get(pending[0]["first_arrival_seq"] - 1, -1)

    def _refresh_day_metrics(self, first_ms: int, last_ms: int) -> None:
        """The days the batches' records can touch (their windows' end days and their ingest
        days, where quarantine counts go), recomputed as the backfill computes them."""
        spec = self.pipeline.spec
        zone = self.pipeline.time_zone
        first_day, last_day = str(day_of(first_ms, zone)), str(day_of(last_ms, zone))
        self.days = (first_day, last_day) if self.days is None else (
            min(self.days[0], first_day), max(self.days[1], last_day))
        if spec.is_standard_window:
            data = self._standard_day_metrics(first_day, last_day)
        else:  # from the assignments table, in the driver as the backfill computes them
            data = assigned_metrics(self.pipeline.table_path(tables.WINDOW_ASSIGNMENTS), None,
                                    self.pipeline.table_path(tables.QUARANTINE), zone,
                                    first_day, last_day, self._assigned_metrics_schema())
        fast_writes.replace_range(self.pipeline.table_path(tables.LATE_DATA_METRICS), data,
                                  column="window_end_date", first=first_day, last=last_day,
                                  partition_by=["window_end_date"])

