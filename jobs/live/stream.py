"""The live stream: Structured Streaming over the arrival log, state in Spark's state store.

``run_live`` processes everything ingested since the last run and stops (what Dagster launches
after an ingest); ``start_live(trigger="2 seconds")`` keeps running; :func:`run_stream` is the
long-running job: one process, one Spark, ingesting new landing files as they finish while the
stream turns them into the windowed tables. Either way the checkpoint makes a stop at any
point, or a crash, lose and duplicate nothing: Spark re-runs the uncommitted batch and every
write is idempotent (jobs/live/sink.py).

The stream groups records by *bucket* of keys (jobs/runtime/buckets.py): standard windows run
the backfill's closed form incrementally (jobs/live/standard.py), every other pipeline runs
the operator library per key (jobs/live/keyed.py), many keys per Python call either way.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs import storage, tables
from jobs.checks import fingerprint
from jobs.delta_io import table_exists
from jobs.live.sink import BatchSink, app_id_for
from jobs.progress import heartbeat
from jobs.runtime import INPUT_COLUMNS, check_runnable
from jobs.runtime.buckets import BUCKET_COLUMN, BucketProcessor, bucket_column, with_event_time
from jobs.runtime.key_runner import output_schema
from jobs.settings import PlatformSettings, SettingsError
from jobs.storage import Files
from jobs.windows.vectorised import field_column
from operators.pipeline import PipelineSpec

DEFAULT_BUCKETS = 16
STREAM_SETTINGS = {
    # adaptive query execution re-plans every small micro-batch job and Delta MERGE: measured
    # 2.3 s against 1.7 s per results MERGE on 2 cores (benchmarks/RESULTS.md)
    "spark.sql.adaptive.enabled": "false",
}
"""Session settings of the long-running job (its own process): none changes a result."""


class CheckpointMismatchError(SettingsError):
    """The checkpoint belongs to another pipeline or another bucketing."""


@dataclass
class LiveReport:
    batches: list[dict] = field(default_factory=list)
    ingested: int = 0
    """Records ingested by the long-running job (``run_stream``)."""
    days: tuple[str, str] | None = None
    """The first and last day whose late-data metrics the run refreshed."""

    @property
    def records(self) -> int:
        return sum(b["records"] for b in self.batches)

    def summary(self) -> str:
        if not self.batches:
            return "live: nothing new in the arrival log"
        return (f"live: {len(self.batches)} micro-batches, {self.records} records, "
                f"{sum(b['panes'] for b in self.batches)} panes, "
                f"{sum(b['late_records'] for b in self.batches)} late")


def default_checkpoint(settings: PlatformSettings) -> str:
    return storage.join(settings.warehouse, "_checkpoints", "live")


def make_engine(spec: PipelineSpec):
    """The bucket engine for the pipeline (built on the executors, from the pickled spec)."""
    if spec.is_standard_window:
        from jobs.live.standard import StandardWindows

        return lambda: StandardWindows(spec)
    from jobs.live.keyed import KeyedWindows

    return lambda: KeyedWindows(spec)


def stream_input(arrivals: DataFrame, spec: PipelineSpec, buckets: int) -> DataFrame:
    """The arrival log's columns the engines read, the aggregated payload fields as exact
    decimals (Spark parses them, not Python), the bucket, and Spark's event time."""
    columns = [F.col(c) for c in INPUT_COLUMNS]
    if spec.is_standard_window:
        from jobs.live.standard import field_input

        seen = set(INPUT_COLUMNS)
        for aggregate in spec.aggregates:
            name = field_input(aggregate)
            if name is None or name in seen:
                continue
            seen.add(name)
            if name.startswith("_present_"):
                present = F.col("value").isNotNull() if aggregate.field == "value" else \
                    F.get_json_object("payload", f"$.{aggregate.field}").isNotNull()
                columns.append(present.alias(name))
            else:
                columns.append(field_column(aggregate.field).alias(name))
    return with_event_time(arrivals.select(*columns).withColumn(BUCKET_COLUMN,
                                                                bucket_column(buckets)))


def _check_checkpoint(spark: SparkSession, checkpoint: str, spec: PipelineSpec,
                      buckets: int) -> None:
    """A checkpoint holds state in one pipeline's shape: refuse another pipeline's, with what
    to do, before Spark reads it."""
    files = Files(spark)
    location = storage.join(checkpoint, "platform", "stream.json")
    wanted = {"pipeline": fingerprint(spec), "buckets": buckets}
    if files.exists(location):
        found = json.loads(files.read_text(location))
        if found != wanted:
            raise CheckpointMismatchError(
                f"the live checkpoint {checkpoint} was written for another pipeline or bucket "
                f"count ({found}; this run: {wanted}); give a new --checkpoint (the tables are "
                "kept; a backfill recomputes them) or restore the pipeline it was written for")
    elif files.exists(storage.join(checkpoint, "offsets")):
        raise CheckpointMismatchError(
            f"{checkpoint} is a checkpoint of an earlier version of the live stream; give a "
            "new --checkpoint")
    else:
        files.create(location, json.dumps(wanted))


def start_live(spark: SparkSession, settings: PlatformSettings, *,
               trigger: str = "available_now", checkpoint: str | None = None,
               max_files_per_trigger: int | None = None, max_bytes_per_trigger: str | None = None,
               progress: Callable[[str], None] = print, metrics_interval_s: float = 0.0,
               buckets: int = DEFAULT_BUCKETS,
               on_flush: Callable[[list[dict]], None] | None = None,
               on_batch: Callable[[dict], None] | None = None,
               ) -> tuple[StreamingQuery, BatchSink]:
    """Start the streaming query; ``trigger`` is ``available_now`` or an interval."""
    spec = settings.pipeline
    check_runnable(spec)
    source = settings.table_path(tables.ARRIVAL_LOG)
    if not table_exists(spark, source):
        raise FileNotFoundError(f"no arrival log at {source}: run ingest first")
    checkpoint = checkpoint or default_checkpoint(settings)
    _check_checkpoint(spark, checkpoint, spec, buckets)
    reader = spark.readStream.format("delta")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    if max_bytes_per_trigger:
        reader = reader.option("maxBytesPerTrigger", max_bytes_per_trigger)
    rows = (stream_input(reader.load(source), spec, buckets)
            .groupBy(BUCKET_COLUMN)
            .transformWithStateInPandas(statefulProcessor=BucketProcessor(make_engine(spec)),
                                        outputStructType=output_schema(spec),
                                        outputMode="Append", timeMode="EventTime"))
    sink = BatchSink(spark, settings, app_id_for(checkpoint), progress, checkpoint,
                     metrics_interval_s, on_flush=on_flush, on_batch=on_batch)
    writer = rows.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    if trigger == "available_now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    return writer.queryName("eventtime_live").start(), sink


def run_live(spark: SparkSession, settings: PlatformSettings, *,
             checkpoint: str | None = None, max_files_per_trigger: int | None = None,
             max_bytes_per_trigger: str | None = None,
             progress: Callable[[str], None] = print) -> LiveReport:
    """Process everything in the arrival log not yet processed, then stop."""
    query, sink = start_live(spark, settings, trigger="available_now", checkpoint=checkpoint,
                             max_files_per_trigger=max_files_per_trigger,
                             max_bytes_per_trigger=max_bytes_per_trigger, progress=progress,
                             metrics_interval_s=float("inf"))
    with heartbeat(progress, "live", detail=lambda: query_state(query, sink)):
        query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"live stream failed: {query.exception()}")
    sink.close()
    report = LiveReport(sink.batches, days=sink.days)
    progress(report.summary())
    return report


def _drain(query: StreamingQuery, timeout_s: float = 30.0) -> None:
    """Before a polite stop, let the stream run the batch without data that fires what the
    last batch's watermark made due: Spark keeps a batch's watermark only in the next batch's
    offsets, so a stop right after a data batch would leave those timers for whenever new data
    comes (a restart with nothing new runs no batch at all)."""
    deadline = time.monotonic() + timeout_s
    seen = (query.lastProgress or {}).get("batchId", -1)
    while query.isActive and time.monotonic() < deadline:
        progress = query.lastProgress or {}
        if progress.get("batchId", -1) > seen and not progress.get("numInputRows"):
            return  # a batch without input ran: the timers it could fire have fired
        if progress.get("batchId", -1) > seen:
            seen = progress["batchId"]
        time.sleep(0.2)


def run_stream(spark: SparkSession, settings: PlatformSettings, *, trigger: str = "1 second",
               poll_s: float = 0.5, duration_s: float = 0.0, max_batches: int = 0,
               metrics_interval_s: float = 60.0, checkpoint: str | None = None,
               stop: threading.Event | None = None, progress: Callable[[str], None] = print,
               on_ingest: Callable[[object], None] | None = None,
               on_flush: Callable[[list[dict]], None] | None = None,
               on_batch: Callable[[dict], None] | None = None,
               buckets: int = DEFAULT_BUCKETS) -> LiveReport:
    """The long-running live job: ingest new landing files every ``poll_s`` while the stream
    runs, until ``stop`` is set, ``duration_s`` passed or ``max_batches`` micro-batches were
    written; the checkpoint keeps the place for the next start."""
    stop = stop or threading.Event()
    previous = {key: spark.conf.get(key, None) for key in STREAM_SETTINGS}
    for key, value in STREAM_SETTINGS.items():
        spark.conf.set(key, value)
    try:
        return _run_stream(spark, settings, trigger, poll_s, duration_s, max_batches,
                           metrics_interval_s, checkpoint, stop, progress, on_ingest, on_flush,
                           on_batch, buckets)
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _run_stream(spark: SparkSession, settings: PlatformSettings, trigger: str, poll_s: float,
                duration_s: float, max_batches: int, metrics_interval_s: float,
                checkpoint: str | None, stop: threading.Event,
                progress: Callable[[str], None], on_ingest: Callable[[object], None] | None,
                on_flush: Callable[[list[dict]], None] | None,
                on_batch: Callable[[dict], None] | None, buckets: int) -> LiveReport:
    from jobs.ingest import Ingestor

    quiet_since = [time.monotonic()]

    def ingest_progress(message: str) -> None:
        # an idle ingest says so every 10 s, not every poll
        if "no new landing files" not in message or time.monotonic() - quiet_since[0] >= 10:
            progress(message)
            quiet_since[0] = time.monotonic()

    ingestor = Ingestor(spark, settings, ingest_progress)
    report = LiveReport()
    arrival_end = [0]

    def ingest_once() -> None:
        result = ingestor.run_once()
        if result.batch_id is not None:
            arrival_end[0] = max(arrival_end[0], result.first_seq + result.records)
            report.ingested += result.records
            if on_ingest is not None:
                on_ingest(result)

    ingest_once()  # the stream needs an arrival log: wait for the first landing file
    deadline = time.monotonic() + duration_s if duration_s else None
    said = time.monotonic() - 10
    while not table_exists(spark, settings.table_path(tables.ARRIVAL_LOG)):
        if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
            progress(f"live stream stopped: nothing landed in {settings.landing}")
            return report
        if time.monotonic() - said >= 10:
            progress(f"live: waiting for the first landing file in {settings.landing}")
            said = time.monotonic()
        stop.wait(poll_s)
        ingest_once()
    query, sink = start_live(spark, settings, trigger=trigger, checkpoint=checkpoint,
                             progress=progress, metrics_interval_s=metrics_interval_s,
                             on_flush=on_flush, on_batch=on_batch, buckets=buckets)
    if not arrival_end[0]:  # restarted over a log ingested before
        from jobs.table_stats import max_column_value

        last = max_column_value(settings.table_path(tables.ARRIVAL_LOG), "arrival_seq")
        arrival_end[0] = int(last) + 1 if last is not None else 0
    sink.arrival_end = lambda: arrival_end[0]
    try:
        while query.isActive and not stop.is_set():
            if max_batches and len(sink.batches) + len(sink.pending) >= max_batches:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            ingest_once()  # an idle ingest says so every 10 s (ingest_progress)
            stop.wait(poll_s)
        if query.exception() is not None:
            raise RuntimeError(f"live stream failed: {query.exception()}")
        _drain(query)
    finally:
        query.stop()  # between micro-batches or not, the checkpoint keeps the position
        sink.close()
    report.batches = sink.batches
    report.days = sink.days
    progress(f"live stream stopped: {report.summary()}; {report.ingested} records ingested")
    return report


def query_state(query: StreamingQuery, sink: BatchSink) -> str:
    """What the stream is doing now, for the progress lines between micro-batches: the
    micro-batch running, its input rows, the event-time watermark, batches written."""
    last = query.lastProgress or {}
    status = (query.status or {}).get("message", "")
    watermark = (last.get("eventTime") or {}).get("watermark", "-")
    return (f"{status}; last micro-batch {last.get('batchId', '-')}: "
            f"{last.get('numInputRows', 0)} input rows, watermark {watermark}; "
            f"{len(sink.batches)} micro-batches written")
