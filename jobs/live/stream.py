"""The live stream of a stream's pipelines: Structured Streaming over its arrival log, state in
Spark's state store.

One query per stream runs every pipeline that reads it: each micro-batch is read once and fed
to every pipeline (jobs/live/fanout.py), and each pipeline's tables are written on their own
(jobs/live/sink.py). ``run_live`` processes everything ingested since the last run and stops
(what Dagster launches after an ingest); ``start_live(trigger="2 seconds")`` keeps running;
:func:`run_stream` is the long-running job: one process, one Spark, ingesting new landing files
as they finish while the stream turns them into the pipelines' tables. Either way the checkpoint
makes a stop at any point, or a crash, lose and duplicate nothing: Spark re-runs the
uncommitted batch and every write is idempotent.

The stream groups records by *bucket* of keys (jobs/runtime/buckets.py): standard windows run
the backfill's closed form incrementally (jobs/live/standard.py), every other pipeline runs
the operator library per key (jobs/live/keyed.py), many keys per Python call either way.

A checkpoint holds the state of one set of pipeline versions: its folder is named after the
set (:func:`default_checkpoint`), so adding, removing or changing a pipeline starts a new
checkpoint at the stream's next start, which computes every pipeline of the set from the
beginning of the arrival log (docs/runtime.md, "Adding a pipeline"). The tables never lose
rows meanwhile: every write keeps the latest pane or inserts what is missing.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs import storage
from jobs.checks import check_pipeline_mark, checkpoint_identity
from jobs.delta_io import table_exists
from jobs.live.fanout import PipelineEngines, stream_output_schema
from jobs.live.sink import PipelineSink, StreamSink, app_id_for
from jobs.progress import heartbeat
from jobs.registry import Pipeline
from jobs.runtime import INPUT_COLUMNS, check_runnable
from jobs.runtime.buckets import BUCKET_COLUMN, BucketProcessor, bucket_column, with_event_time
from jobs.settings import SettingsError
from jobs.storage import Files
from jobs.streams import Stream
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
    """The checkpoint belongs to other pipelines or another bucketing."""


@dataclass
class LiveReport:
    batches: list[dict] = field(default_factory=list)
    """One per micro-batch (jobs/live/sink.py, ``StreamSink.batches``)."""
    ingested: int = 0
    """Records ingested by the long-running job (``run_stream``)."""
    days: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Per pipeline, the first and last day whose late-data metrics the run refreshed."""
    pipeline_batches: dict[str, list[dict]] = field(default_factory=dict)
    """Per pipeline, its rows of ``late_data_metrics_batches`` the run wrote."""
    stream: str = ""

    @property
    def records(self) -> int:
        return sum(b["records"] for b in self.batches)

    def summary(self) -> str:
        said = f"live {self.stream}" if self.stream else "live"
        if not self.batches:
            return f"{said}: nothing new in the arrival log"
        return (f"{said}: {len(self.batches)} micro-batches, {self.records} records, "
                f"{sum(b['panes'] for b in self.batches)} panes, "
                f"{sum(b['late_records'] for b in self.batches)} late "
                f"({len(self.pipeline_batches)} pipelines)")


def default_checkpoint(stream: Stream, pipelines: list[Pipeline],
                       buckets: int = DEFAULT_BUCKETS) -> str:
    """The checkpoint of this set of pipeline versions: another set starts its own."""
    identity = json.dumps(checkpoint_identity(stream, pipelines, buckets), sort_keys=True)
    return storage.join(stream.checkpoints,
                        "live-" + hashlib.sha256(identity.encode()).hexdigest()[:12])


def stream_input(arrivals: DataFrame, specs: list[PipelineSpec], buckets: int) -> DataFrame:
    """The arrival log's columns the engines read, the payload fields the standard windows
    aggregate as exact decimals (Spark parses them, not Python), the bucket, and Spark's
    event time."""
    columns = [F.col(c) for c in INPUT_COLUMNS]
    seen = set(INPUT_COLUMNS)
    for spec in specs:
        if not spec.is_standard_window:
            continue
        from jobs.live.standard import field_input

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


def _check_checkpoint(spark: SparkSession, checkpoint: str, stream: Stream,
                      pipelines: list[Pipeline], buckets: int) -> None:
    """A checkpoint holds state in the shape of one set of pipeline versions: refuse another
    set's, with what to do, before Spark reads it."""
    files = Files(spark)
    location = storage.join(checkpoint, "platform", "stream.json")
    wanted = checkpoint_identity(stream, pipelines, buckets)
    if files.exists(location):
        found = json.loads(files.read_text(location))
        if found != wanted:
            raise CheckpointMismatchError(
                f"the live checkpoint {checkpoint} was written for other pipelines or another "
                f"bucket count ({found}; this run: {wanted}); give a new --checkpoint (the "
                "tables are kept; a new one computes them again from the arrival log) or run "
                "the pipelines it was written for")
    elif files.exists(storage.join(checkpoint, "offsets")):
        raise CheckpointMismatchError(
            f"{checkpoint} is a checkpoint of an earlier version of the live stream; give a "
            "new --checkpoint")
    else:
        files.create(location, json.dumps(wanted))


def _pipelines_of(stream: Stream, pipelines: list[Pipeline] | None) -> list[Pipeline]:
    """The pipelines to run (default: every pipeline of the stream), each checked to read
    the stream and to be runnable, in name order (the order of the query's engines)."""
    if pipelines is None:
        pipelines = stream.settings.platform.pipelines_of(stream.name)
    if not pipelines:
        raise SettingsError(f"stream {stream.name}: no pipeline reads it (PLATFORM_PIPELINES)")
    for pipeline in pipelines:
        if pipeline.stream.name != stream.name:
            raise ValueError(f"pipeline {pipeline.name} reads stream {pipeline.stream.name}, "
                             f"not {stream.name}")
        check_runnable(pipeline.spec)
    return sorted(pipelines, key=lambda p: p.name)


def start_live(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None = None,
               *, trigger: str = "available_now", checkpoint: str | None = None,
               max_files_per_trigger: int | None = None, max_bytes_per_trigger: str | None = None,
               progress: Callable[[str], None] = print, metrics_interval_s: float = 0.0,
               buckets: int = DEFAULT_BUCKETS,
               on_flush: Callable[[list[dict]], None] | None = None,
               on_batch: Callable[[dict], None] | None = None,
               ) -> tuple[StreamingQuery, StreamSink]:
    """Start the streaming query of ``pipelines`` (default: every pipeline of the stream);
    ``trigger`` is ``available_now`` or an interval."""
    pipelines = _pipelines_of(stream, pipelines)
    source = stream.arrival_log
    if not table_exists(spark, source):
        raise FileNotFoundError(f"no arrival log at {source}: run ingest first")
    for pipeline in pipelines:
        check_pipeline_mark(pipeline, remember=True)
    checkpoint = checkpoint or default_checkpoint(stream, pipelines, buckets)
    _check_checkpoint(spark, checkpoint, stream, pipelines, buckets)
    reader = spark.readStream.format("delta")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    if max_bytes_per_trigger:
        reader = reader.option("maxBytesPerTrigger", max_bytes_per_trigger)
    names = [p.name for p in pipelines]
    specs = [p.spec for p in pipelines]
    rows = (stream_input(reader.load(source), specs, buckets)
            .groupBy(BUCKET_COLUMN)
            .transformWithStateInPandas(
                statefulProcessor=BucketProcessor(lambda: PipelineEngines(names, specs)),
                outputStructType=stream_output_schema(specs),
                outputMode="Append", timeMode="EventTime"))
    sinks = [PipelineSink(spark, pipeline, app_id_for(checkpoint, pipeline.name), progress,
                          checkpoint, metrics_interval_s, on_flush=on_flush)
             for pipeline in pipelines]
    sink = StreamSink(spark, stream, sinks, progress, on_batch=on_batch)
    writer = rows.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    if trigger == "available_now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    return writer.queryName(f"eventtime_live_{stream.name}").start(), sink


def _report(stream: Stream, sink: StreamSink, ingested: int = 0) -> LiveReport:
    return LiveReport(batches=sink.batches, ingested=ingested, stream=stream.name,
                      days={s.pipeline.name: s.days for s in sink.sinks if s.days},
                      pipeline_batches={s.pipeline.name: s.batches for s in sink.sinks})


def run_live(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None = None, *,
             checkpoint: str | None = None, max_files_per_trigger: int | None = None,
             max_bytes_per_trigger: str | None = None,
             progress: Callable[[str], None] = print) -> LiveReport:
    """Process everything in the stream's arrival log not yet processed, for ``pipelines``
    (default: every pipeline of the stream), then stop."""
    query, sink = start_live(spark, stream, pipelines, trigger="available_now",
                             checkpoint=checkpoint, max_files_per_trigger=max_files_per_trigger,
                             max_bytes_per_trigger=max_bytes_per_trigger, progress=progress,
                             metrics_interval_s=float("inf"))
    with heartbeat(progress, f"live {stream.name}", detail=lambda: query_state(query, sink)):
        query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"live stream failed: {query.exception()}")
    sink.close()
    report = _report(stream, sink)
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


def run_stream(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None = None,
               *, trigger: str = "1 second", poll_s: float = 0.5, duration_s: float = 0.0,
               max_batches: int = 0, metrics_interval_s: float = 60.0,
               checkpoint: str | None = None, stop: threading.Event | None = None,
               progress: Callable[[str], None] = print,
               on_ingest: Callable[[object], None] | None = None,
               on_flush: Callable[[list[dict]], None] | None = None,
               on_batch: Callable[[dict], None] | None = None,
               buckets: int = DEFAULT_BUCKETS) -> LiveReport:
    """The long-running live job of a stream: ingest its new landing files every ``poll_s``
    while the stream runs ``pipelines`` (default: every pipeline of the stream), until
    ``stop`` is set, ``duration_s`` passed or ``max_batches`` micro-batches were written; the
    checkpoint keeps the place for the next start."""
    stop = stop or threading.Event()
    pipelines = _pipelines_of(stream, pipelines)
    previous = {key: spark.conf.get(key, None) for key in STREAM_SETTINGS}
    for key, value in STREAM_SETTINGS.items():
        spark.conf.set(key, value)
    try:
        return _run_stream(spark, stream, pipelines, trigger, poll_s, duration_s, max_batches,
                           metrics_interval_s, checkpoint, stop, progress, on_ingest, on_flush,
                           on_batch, buckets)
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _run_stream(spark: SparkSession, stream: Stream, pipelines: list[Pipeline], trigger: str,
                poll_s: float, duration_s: float, max_batches: int, metrics_interval_s: float,
                checkpoint: str | None, stop: threading.Event,
                progress: Callable[[str], None], on_ingest: Callable[[object], None] | None,
                on_flush: Callable[[list[dict]], None] | None,
                on_batch: Callable[[dict], None] | None, buckets: int) -> LiveReport:
    from jobs.streams.landing import Ingestor

    quiet_since = [time.monotonic()]

    def ingest_progress(message: str) -> None:
        # an idle ingest says so every 10 s, not every poll
        if "no new landing files" not in message or time.monotonic() - quiet_since[0] >= 10:
            progress(message)
            quiet_since[0] = time.monotonic()

    ingestor = Ingestor(spark, stream, ingest_progress)
    report = LiveReport(stream=stream.name)
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
    while not table_exists(spark, stream.arrival_log):
        if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
            progress(f"live {stream.name} stopped: nothing landed in {stream.landing}")
            return report
        if time.monotonic() - said >= 10:
            progress(f"live {stream.name}: waiting for the first landing file in "
                     f"{stream.landing}")
            said = time.monotonic()
        stop.wait(poll_s)
        ingest_once()
    query, sink = start_live(spark, stream, pipelines, trigger=trigger, checkpoint=checkpoint,
                             progress=progress, metrics_interval_s=metrics_interval_s,
                             on_flush=on_flush, on_batch=on_batch, buckets=buckets)
    if not arrival_end[0]:  # restarted over a log ingested before
        from jobs.table_stats import max_column_value

        last = max_column_value(stream.arrival_log, "arrival_seq")
        arrival_end[0] = int(last) + 1 if last is not None else 0
    sink.arrival_end = lambda: arrival_end[0]
    try:
        while query.isActive and not stop.is_set():
            if max_batches and len(sink.batches) >= max_batches:
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
    result = _report(stream, sink, report.ingested)
    progress(f"live {stream.name} stopped: {result.summary()}; {result.ingested} records "
             "ingested")
    return result


def query_state(query: StreamingQuery, sink: StreamSink) -> str:
    """What the stream is doing now, for the progress lines between micro-batches: the
    micro-batch running, its input rows, the event-time watermark, batches written."""
    last = query.lastProgress or {}
    status = (query.status or {}).get("message", "")
    watermark = (last.get("eventTime") or {}).get("watermark", "-")
    return (f"{status}; last micro-batch {last.get('batchId', '-')}: "
            f"{last.get('numInputRows', 0)} input rows, watermark {watermark}; "
            f"{len(sink.batches)} micro-batches written")
