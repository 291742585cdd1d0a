"""Write one micro-batch of the live stream to each pipeline's Delta tables, idempotently.

:class:`StreamSink` is the query's ``foreachBatch``: it takes the micro-batch's output to the
driver once, splits it by pipeline (jobs.live.fanout) and has each pipeline's
:class:`PipelineSink` write its tables, all pipelines at once (independent Delta tables).

A micro-batch may run again after a failure (Spark re-runs the batch that was not committed to
its checkpoint); every write below leaves the tables as if it had run once:

- panes: ``MERGE`` into the results table keeping the highest ``pane_index`` per key and
  window (a repeat replaces nothing: no pane is newer than itself);
- late records (and window assignments): inserted unless already there (an insert-only
  ``MERGE`` by record and window), so neither a repeated batch nor a backfill that covered the
  same records doubles them.

These go to their tables at once (one thread each: independent Delta commits), and the
``MERGE`` conditions name the batch's days, window ends and arrival range, so Delta reads only
the files that can match instead of a whole day. Each batch's summary goes to the pipeline's
late-data metrics (jobs.live.late_metrics), which are written beside the stream.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.config.streams import Stream
from jobs.live.fanout import pipeline_rows
from jobs.live.late_metrics import LateDataMetrics
from jobs.runtime.packing import unpack_output
from jobs.store import fast_writes, storage
from jobs.store.storage import Files
from jobs.tables.window_tables import (
    assignment_table,
    late_table,
    results_table,
    rows_of_kind,
)
from jobs.tables.window_tables import column_max as pc_max
from jobs.tables.window_tables import column_min as pc_min

BATCH_METRICS = tables.BATCH_METRICS

LATE_KEY = ("key", "arrival_seq", "window_start_ms", "window_end_ms")
ASSIGNMENT_KEY = ("arrival_seq", "window_start_ms", "window_end_ms")


def app_id_for(checkpoint: str, pipeline: str = "") -> str:
    """A Delta transaction app id per checkpoint and pipeline: a new checkpoint is a new
    writer."""
    return "live-" + hashlib.sha256(f"{checkpoint}#{pipeline}".encode()).hexdigest()[:16]



@dataclass
class PipelineSink:
    """One pipeline's tables, written from its rows of each micro-batch; its late-data metrics
    flushed beside them (:class:`~jobs.live.late_metrics.LateDataMetrics`)."""

    spark: SparkSession
    pipeline: Pipeline
    app_id: str
    progress: Callable[[str], None] = print
    checkpoint: str | None = None
    """Where unflushed batch summaries are kept (``<checkpoint>/platform/batches/<name>``)."""
    metrics_interval_s: float = 0.0
    """Flush the metrics at most this often (0: after every batch)."""
    on_flush: Callable[[list[dict]], None] | None = None
    """Called with the batch rows of each flush (the long-running job reports them)."""
    label: str = ""
    """How progress lines and batch summaries name it: the pipeline's name, or
    ``name@version`` when its cohort computes two versions of the pipeline."""

    @property
    def key(self) -> str:
        """The cohort's name of this version (jobs.live.cohorts): its rows and state."""
        return f"{self.pipeline.name}@{self.pipeline.version}"

    def __post_init__(self) -> None:
        self.label = self.label or self.pipeline.name
        self._tables_made: set[str] = set()
        self.files = Files(self.spark)
        folder = storage.join(self.checkpoint, "platform", "batches", self.key) \
            if self.checkpoint else None
        self.metrics = LateDataMetrics(self.spark, self.pipeline, self.app_id, self.files,
                                       folder, self.progress, self.label,
                                       self.metrics_interval_s, self.on_flush)

    @property
    def batches(self) -> list[dict]:
        """The flushed batches' summaries with their late-data figures."""
        return self.metrics.batches

    @property
    def days(self) -> tuple[str, str] | None:
        """The first and last day whose metrics any flush refreshed."""
        return self.metrics.days

    @property
    def pending(self) -> list[dict]:
        """The written batches whose metrics are not flushed yet."""
        return self.metrics.pending

    def after_batch(self) -> None:
        """Flush the metrics when they are due (at once, or in the background)."""
        self.metrics.after_batch()

    def flush(self) -> list[dict]:
        """Write the metrics of the batches since the last flush; their per-batch rows."""
        return self.metrics.flush()

    def close(self) -> None:
        """Wait for a background flush, then flush what is left."""
        self.metrics.close()

    # -- one micro-batch --------------------------------------------------------------------------

    def write(self, rows: pa.Table, batch_id: int) -> dict | None:
        """Write the pipeline's rows of micro-batch ``batch_id``; its summary (``None`` when
        the batch had nothing for it), kept until its metrics are flushed."""
        started = time.monotonic()
        summary = self._write(rows, batch_id)
        if summary is None:
            return None
        summary["pipeline"] = self.pipeline.name
        summary["version"] = self.pipeline.version
        summary["seconds"] = round(time.monotonic() - started, 3)
        summary["written_at"] = time.time()
        self.metrics.keep(summary)
        return summary


    def _write(self, rows: pa.Table, batch_id: int) -> dict | None:
        if not rows.num_rows:
            return None  # a batch with no output at all
        if self.pipeline.spec.is_process:
            return self._write_process(rows.to_pandas(), batch_id)
        spec = self.pipeline.spec
        zone = self.pipeline.time_zone
        # panes, late and progress rows are few, and go through pandas; a session pipeline's
        # assignments are a row per record and stay Arrow (jobs.tables.window_tables)
        panes, late, progress = (rows_of_kind(rows, name).to_pandas()
                                 for name in ("pane", "late", "progress"))
        fates = assignment_table(rows, zone) if not spec.is_standard_window else None
        writes: list[Callable[[], None]] = []
        if len(panes):
            writes.append(lambda: self._merge_panes(panes))
        if len(late) or not self._made(tables.LATE_RECORDS):
            writes.append(lambda: self._insert(late_table(late, zone), tables.LATE_RECORDS,
                                               LATE_KEY))
        if fates is not None and (fates.num_rows or not self._made(tables.WINDOW_ASSIGNMENTS)):
            writes.append(lambda: self._insert(fates, tables.WINDOW_ASSIGNMENTS,
                                               ASSIGNMENT_KEY))
        with ThreadPoolExecutor(max_workers=max(1, len(writes))) as pool:
            for future in [pool.submit(write) for write in writes]:
                future.result()
        records = int(progress["records"].sum()) if len(progress) else 0
        ends = pc.min_max(pc.filter(rows.column("window_end_ms"),
                                    pc.not_equal(rows.column("kind"), "progress"))).as_py()
        summary = {
            "batch_id": batch_id, "records": records,
            "first_arrival_seq": int(progress["min_arrival_seq"].min()) if records else None,
            "last_arrival_seq": int(progress["arrival_seq"].max()) if records else None,
            "panes": len(panes), "late_records": len(late),
            "watermark_ms": pc.max(rows.column("watermark_ms")).as_py(),
            "first_ms": None, "last_ms": None,
        }
        if records:
            # what the batch's records can touch: their windows' end days, their ingest days
            summary["first_ms"] = min([int(progress["min_event_ms"].min()),
                                       int(progress["min_ingest_ms"].min())]
                                      + ([ends["min"] - 1] if ends["min"] is not None else []))
            summary["last_ms"] = max([int(progress["max_event_ms"].max())
                                      + (spec.window.size_ms or 0),
                                      int(progress["max_ingest_ms"].max())]
                                     + ([ends["max"] - 1] if ends["max"] is not None else []))
        return summary

    def _made(self, table: str) -> bool:
        """Whether the pipeline's ``table`` exists. Until it does, a micro-batch writes it even
        with no rows for it, so that it is there, empty, as a backfill leaves it: a reader of
        a pipeline that never dropped a record finds an empty ``late_records``, not none."""
        if table not in self._tables_made and \
                fast_writes.table_exists(self.pipeline.table_path(table)):
            self._tables_made.add(table)
        return table in self._tables_made

    def _write_process(self, rows: pd.DataFrame, batch_id: int) -> dict:
        """A process pipeline's output rows (inserted unless there: ``(key, emission)`` is a
        row's identity) and late records (by key and arrival position), at once."""
        from jobs.process import rows as process_rows
        from jobs.process.tables import (
            EVENT_DATE,
            IDENTITY,
            LATE_IDENTITY,
            OUTPUT,
            OUTPUT_DATE,
        )

        spec, zone = self.pipeline.spec, self.pipeline.time_zone
        kind = rows["kind"].to_numpy()
        output, late = rows[kind == "output"], rows[kind == "late"]
        progress = rows[kind == "progress"]
        writes: list[Callable[[], None]] = []
        if len(output):
            named = output.rename(columns={f"agg_{c.name}": c.name for c in spec.output})
            data = process_rows.output_table(named, spec, zone)
            writes.append(lambda: self._insert_by(data, OUTPUT, IDENTITY, OUTPUT_DATE))
        if len(late):
            data_late = process_rows.late_table(late, zone)
            writes.append(lambda: self._insert_by(data_late, tables.LATE_RECORDS,
                                                  LATE_IDENTITY, EVENT_DATE))
        with ThreadPoolExecutor(max_workers=max(1, len(writes))) as pool:
            for future in [pool.submit(write) for write in writes]:
                future.result()
        days = []  # the days written (the increment's Dagster materialisations name them)
        if len(output):
            days += [str(pc_min(data.column(OUTPUT_DATE))), str(pc_max(data.column(OUTPUT_DATE)))]
        if len(late):
            days += [str(pc_min(data_late.column(EVENT_DATE))),
                     str(pc_max(data_late.column(EVENT_DATE)))]
        if days:
            self.metrics.note_days(min(days), max(days))
        records = int(progress["records"].sum()) if len(progress) else 0
        watermarks = rows["watermark_ms"].dropna()
        return {"batch_id": batch_id, "records": records,
                "first_arrival_seq": int(progress["min_arrival_seq"].min()) if records else None,
                "last_arrival_seq": int(progress["arrival_seq"].max()) if records else None,
                "panes": len(output), "late_records": len(late),
                "watermark_ms": int(watermarks.max()) if len(watermarks) else None,
                "first_ms": None, "last_ms": None}

    def _insert_by(self, data: pa.Table, table: str, keys: tuple[str, ...],
                   partition: str) -> None:
        days = data.column(partition)
        bounds = f"t.{partition} >= '{pc_min(days)}' AND t.{partition} <= '{pc_max(days)}'"
        fast_writes.insert_new(self.pipeline.table_path(table), data, keys=keys, bounds=bounds,
                               partition_by=[partition])

    def _merge_panes(self, panes: pd.DataFrame) -> None:
        """The latest pane per key and window replaces an older one; the condition names the
        batch's days and window ends, so only the files that can hold them are read."""
        spec = self.pipeline.spec
        latest = (panes.sort_values("pane_index", kind="stable")
                  .drop_duplicates(["key", "window_start_ms", "window_end_ms"], keep="last"))
        data = results_table(latest, spec, self.pipeline.time_zone)
        days = data.column("window_end_date")
        ends = latest["window_end_ms"]
        bounds = (f"t.window_end_date >= '{pc_min(days)}' AND t.window_end_date <= "
                  f"'{pc_max(days)}' AND t.window_end_ms >= {int(ends.min())} "
                  f"AND t.window_end_ms <= {int(ends.max())}")
        fast_writes.merge_latest(self.pipeline.table_path(tables.WINDOW_RESULTS), data,
                                 keys=tables.RESULT_KEY_COLUMNS, order="pane_index",
                                 bounds=bounds, partition_by=["window_end_date"])

    def _insert(self, data: pa.Table, table: str, keys: tuple[str, ...]) -> None:
        """Rows not yet in the table (by record and window), with the batch's days and
        arrival range named so that only the files that can match are read."""
        days = data.column("window_end_date")
        seqs = data.column("arrival_seq")
        bounds = (f"t.window_end_date >= '{pc_min(days)}' AND t.window_end_date <= "
                  f"'{pc_max(days)}' AND t.arrival_seq >= {pc_min(seqs)} "
                  f"AND t.arrival_seq <= {pc_max(seqs)}")
        fast_writes.insert_new(self.pipeline.table_path(table), data, keys=keys, bounds=bounds,
                               partition_by=["window_end_date"])


@dataclass
class StreamSink:
    """The live query's ``foreachBatch``: one micro-batch of a stream's output, split by
    pipeline, each pipeline's rows written to its own tables (all at once)."""

    spark: SparkSession
    stream: Stream
    sinks: list[PipelineSink]
    """One per pipeline, in the order of the query's engines."""
    output_schema: pa.Schema
    """The stream's output rows, which come packed (jobs.runtime.packing)."""
    progress: Callable[[str], None] = print
    batches: list[dict] = field(default_factory=list)
    """One per micro-batch written: its id, records, arrival range, per pipeline its panes
    and late rows, and its time (``seconds``; ``spark_seconds`` of it until Spark handed the
    output to the driver, the rest unpacking and writing the tables)."""
    written_through: int | None = None
    """The last arrival position a micro-batch of this process has written (``None``: none
    yet)."""
    arrival_end: Callable[[], int] | None = None
    """The next arrival position ingest will give (the long-running job's ingest knows it):
    the progress line says how far the stream is behind the arrival log."""
    on_batch: Callable[[dict], None] | None = None
    """Called with each micro-batch's summary once every pipeline's panes and late rows are
    written."""

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        # the batch's output (panes, late rows, window assignments, progress rows) comes to
        # the driver once, in packs (jobs.runtime.packing), and is written from there
        # (jobs.store.fast_writes)
        packed = batch.toArrow()  # runs the micro-batch's stages
        computed = time.monotonic()  # Spark's part ends here; unpacking is the driver's
        rows = unpack_output(packed, self.output_schema)
        if not rows.num_rows:
            return  # a batch with no output at all
        parts = [pipeline_rows(rows, index, sink.key, sink.pipeline.spec)
                 for index, sink in enumerate(self.sinks)]
        with ThreadPoolExecutor(max_workers=len(self.sinks),
                                thread_name_prefix="pipeline-sink") as pool:
            futures = [pool.submit(sink.write, part, batch_id)
                       for sink, part in zip(self.sinks, parts, strict=True)]
            summaries = [future.result() for future in futures]
        written = {sink.label: summary
                   for sink, summary in zip(self.sinks, summaries, strict=True) if summary}
        if not written:
            return
        first = next(iter(written.values()))
        batch = {"batch_id": batch_id, "records": first["records"],
                 "first_arrival_seq": first["first_arrival_seq"],
                 "last_arrival_seq": first["last_arrival_seq"],
                 "watermark_ms": max((s["watermark_ms"] for s in written.values()
                                      if s["watermark_ms"] is not None), default=None),
                 "panes": sum(s["panes"] for s in written.values()),
                 "late_records": sum(s["late_records"] for s in written.values()),
                 "seconds": round(time.monotonic() - started, 3), "written_at": time.time(),
                 "spark_seconds": round(computed - started, 3),
                 "pipelines": {name: {k: s[k] for k in ("panes", "late_records")}
                               for name, s in written.items()}}
        self.batches.append(batch)
        if batch["last_arrival_seq"] is not None:  # positions only grow, batch after batch
            self.written_through = batch["last_arrival_seq"]
        if self.on_batch is not None:
            self.on_batch(batch)
        behind = ""
        if self.arrival_end is not None and batch["records"]:
            behind = (f", {max(0, self.arrival_end() - 1 - batch['last_arrival_seq']):,} "
                      "records behind the arrival log")
        each = "; ".join(f"{name} {s['panes']} panes, {s['late_records']} late"
                         for name, s in written.items())
        self.progress(f"live {self.stream.name}: batch {batch_id}: {batch['records']} records, "
                      f"watermark {batch['watermark_ms']}, {batch['seconds']:.1f} s (Spark "
                      f"{batch['spark_seconds']:.1f} s, tables "
                      f"{batch['seconds'] - batch['spark_seconds']:.1f} s){behind}: "
                      f"{each}")
        for sink in self.sinks:
            sink.after_batch()

    def close(self) -> None:
        """Wait for the pipelines' background flushes, then flush what is left."""
        errors = []
        for sink in self.sinks:
            try:
                sink.close()
            except RuntimeError as error:
                errors.append(error)
        if errors:
            raise errors[0]

    @property
    def pending(self) -> int:
        return max((len(sink.pending) for sink in self.sinks), default=0)
