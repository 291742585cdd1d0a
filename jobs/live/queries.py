"""A stream's live queries: which pipeline versions run, in which cohorts, and how each cohort's
Structured Streaming query over the arrival log is planned and started.

A stream's pipelines run in *cohorts* (jobs.live.cohorts): one streaming query per cohort,
normally one per stream, each micro-batch read once and fed to every pipeline version of the
cohort (jobs.live.fanout), each version's tables written on their own (jobs.live.sink). Two
runtimes start these queries: jobs.live.catch_up (everything ingested since the last run, then
stop) and jobs.live.long_running (one process ingesting and streaming until stopped). Either
way the checkpoints make a stop at any point, or a crash, lose and duplicate nothing: Spark
re-runs the uncommitted batch and every write is idempotent.

The live versions of a pipeline are the one readers see and, after its description changed,
the new one (jobs.lifecycle.versions): the new version runs in a cohort of its own from the
beginning of the arrival log, beside the serving one, and readers switch to it once it has
caught up (:mod:`jobs.lifecycle.rollout`).

The stream groups records by *bucket* of keys (jobs.runtime.buckets): standard windows run
the backfill's closed form incrementally (jobs.live.standard), every other pipeline runs
the operator library per key (jobs.live.keyed), many keys per Python call either way.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline, platform_of
from jobs.config.streams import Stream
from jobs.lifecycle import rollout, versions
from jobs.live import cohorts
from jobs.live.cohorts import CohortRun, member_key, member_of
from jobs.live.fanout import PipelineEngines, stream_output_schema
from jobs.live.log_source import byte_count, packed_arrivals
from jobs.live.sink import PipelineSink, StreamSink, app_id_for
from jobs.runtime import INPUT_COLUMNS, check_runnable, owed_batch
from jobs.runtime.buckets import BUCKET_COLUMN, BucketProcessor, bucket_column, with_event_time
from jobs.runtime.key_runner import reads_payload
from jobs.runtime.packing import (
    PACKED_OUTPUT_SCHEMA,
    PACKED_WATERMARK,
    pack_by_bucket,
    rows_only_arrow_batches,
)
from jobs.store.delta_io import table_exists
from jobs.windows.vectorised import field_column
from operators.pipeline import PipelineSpec
from operators.process_pipeline import user_error_in

DEFAULT_BUCKETS = 16


@dataclass
class LiveReport:
    batches: list[dict] = field(default_factory=list)
    """One per micro-batch of every cohort (jobs.live.sink, ``StreamSink.batches``)."""
    ingested: int = 0
    """Records ingested by the long-running job (``run_stream``)."""
    days: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Per pipeline version (``name@version``), the first and last day whose late-data
    metrics the run refreshed."""
    pipeline_batches: dict[str, list[dict]] = field(default_factory=dict)
    """Per pipeline version, its rows of ``late_data_metrics_batches`` the run wrote."""
    versions: dict[str, Pipeline] = field(default_factory=dict)
    """``name@version`` -> the pipeline version it computed."""
    switched: list[rollout.Switched] = field(default_factory=list)
    """The versions readers switched to during the run."""
    waiting: list[rollout.Waiting] = field(default_factory=list)
    """Versions that caught up but wait to serve (``effective_from``)."""
    stream: str = ""

    def note(self, done: rollout.Switched | rollout.Waiting) -> None:
        (self.switched if isinstance(done, rollout.Switched) else self.waiting).append(done)

    @property
    def records(self) -> int:
        return sum(b["records"] for b in self.batches)

    def add(self, sink: StreamSink) -> None:
        """One cohort's query's batches and days."""
        self.batches.extend(sink.batches)
        for each in sink.sinks:
            self.versions[each.key] = each.pipeline
            self.pipeline_batches.setdefault(each.key, []).extend(each.batches)
            if each.days:
                first, last = self.days.get(each.key, each.days)
                self.days[each.key] = (min(first, each.days[0]), max(last, each.days[1]))

    def summary(self) -> str:
        said = f"live {self.stream}" if self.stream else "live"
        if not self.batches:
            text = f"{said}: nothing new in the arrival log"
        else:
            text = (f"{said}: {len(self.batches)} micro-batches, {self.records} records, "
                    f"{sum(b['panes'] for b in self.batches)} panes, "
                    f"{sum(b['late_records'] for b in self.batches)} late "
                    f"({len({v.name for v in self.versions.values()})} pipelines)")
        for done in (*self.switched, *self.waiting):
            text += f"; {done.said()}"
        return text


def live_pipelines(stream: Stream, pipelines: list[Pipeline] | None = None,
                   progress: Callable[[str], None] = print) -> list[Pipeline]:
    """The versions to compute live of ``pipelines`` (default: every pipeline of the stream),
    each checked to read the stream and to be runnable: the version readers see and, while one
    is pending, the file's version too (jobs.lifecycle.versions, which records a file's version and
    lets the first one serve, or a restored one serve again, here)."""
    if pipelines is None:
        pipelines = platform_of(stream.settings).pipelines_of(stream.name)
    if not pipelines:
        raise SettingsError(f"stream {stream.name}: no pipeline reads it (PLATFORM_PIPELINES)")
    found: list[Pipeline] = []
    for pipeline in sorted(pipelines, key=lambda p: p.name):
        if pipeline.stream.name != stream.name:
            raise ValueError(f"pipeline {pipeline.name} reads stream {pipeline.stream.name}, "
                             f"not {stream.name}")
        check_runnable(pipeline.spec)
        if not pipeline.recorded:
            said = versions.reconcile(pipeline, first_serves_at_once=False).said(pipeline)
            if said:
                progress(said)
        found.extend(versions.live_versions(pipeline))
    return found


def all_live(stream: Stream) -> list[Pipeline]:
    """Every live version of every pipeline of the stream, read only (nothing recorded): what
    keeps a cohort's member from being dropped."""
    found = []
    for pipeline in platform_of(stream.settings).pipelines_of(stream.name):
        try:
            found.extend(versions.live_versions(pipeline))
        except SettingsError:
            found.append(pipeline)
    return found


def plan_runs(stream: Stream, pipelines: list[Pipeline] | None, buckets: int,
              checkpoint: str | None, progress: Callable[[str], None] = print
              ) -> list[CohortRun]:
    """The cohorts' queries that compute ``pipelines`` (default: every pipeline of the
    stream): with an explicit ``checkpoint``, that one cohort with all their live versions."""
    selected = None if pipelines is None else {p.name for p in pipelines}
    wanted = live_pipelines(stream, pipelines, progress)
    if checkpoint is not None:
        return [CohortRun(checkpoint, wanted, cohorts.read_record(checkpoint) is None)]
    others = [p for p in all_live(stream) if selected is not None and p.name not in selected]
    runs = cohorts.plan(stream, [*wanted, *others], buckets, selected)
    return runs


def ships_payload(specs: list[PipelineSpec]) -> bool:
    """Whether some engine reads records' payloads in Python: process functions, the general
    window operator, sessions aggregating a payload field. The standard windows' fields are
    parsed by Spark (:func:`stream_input`)."""
    return any(not spec.is_standard_window and reads_payload(spec) for spec in specs)


def input_columns(specs: list[PipelineSpec]) -> dict[str, Column]:
    """The arrival log's columns the engines read (the payload only where an engine reads it
    in Python, :func:`ships_payload`) and the payload fields the standard windows aggregate as
    exact decimals (Spark parses them, not Python)."""
    columns = {name: F.col(name) for name in INPUT_COLUMNS}
    if not ships_payload(specs):
        del columns["payload"]
    for spec in specs:
        if not spec.is_standard_window:
            continue
        from jobs.live.standard import field_input

        for aggregate in spec.aggregates:
            name = field_input(aggregate)
            if name is None or name in columns:
                continue
            if name.startswith("_present_"):
                present = F.col("value").isNotNull() if aggregate.field == "value" else \
                    F.get_json_object("payload", f"$.{aggregate.field}").isNotNull()
                columns[name] = present.alias(name)
            else:
                columns[name] = field_column(aggregate.field).alias(name)
    return columns


def log_columns(specs: list[PipelineSpec]) -> list[str] | None:
    """The log's columns the engines read when that is all they read, which the source by
    arrival position can pack (jobs.live.log_source); ``None`` when Spark computes some
    of their input (a payload field a standard window aggregates)."""
    columns = input_columns(specs)
    return list(columns) if set(columns) <= set(INPUT_COLUMNS) else None


def stream_input(arrivals: DataFrame, specs: list[PipelineSpec], buckets: int) -> DataFrame:
    """The engines' input (:func:`input_columns`) from Spark's Delta source, packed by bucket
    (jobs.runtime.packing), with Spark's event time."""
    records = arrivals.select(*input_columns(specs).values()).withColumn(
        BUCKET_COLUMN, bucket_column(buckets))
    return with_event_time(pack_by_bucket(records, BUCKET_COLUMN, buckets), PACKED_WATERMARK)


def start_live(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None = None,
               *, trigger: str = "available_now", checkpoint: str | None = None,
               max_files_per_trigger: int | None = None, max_bytes_per_trigger: str | None = None,
               progress: Callable[[str], None] = print, metrics_interval_s: float = 0.0,
               buckets: int = DEFAULT_BUCKETS,
               on_flush: Callable[[list[dict]], None] | None = None,
               on_batch: Callable[[dict], None] | None = None,
               ) -> tuple[StreamingQuery, StreamSink]:
    """Start the one streaming query of ``pipelines`` (default: every pipeline of the stream):
    the cohort at ``checkpoint``, or the one cohort that runs their live versions (when they
    need several, :func:`run_live` and :func:`run_stream` run them all); ``trigger`` is
    ``available_now`` or an interval."""
    runs = plan_runs(stream, pipelines, buckets, checkpoint, progress)
    if len(runs) != 1:
        raise ValueError(f"stream {stream.name}: these pipelines run in {len(runs)} cohorts "
                         f"({', '.join(r.checkpoint for r in runs)}); use run_live or "
                         "run_stream, which run them all")
    return start_cohort(spark, stream, runs[0], trigger=trigger,
                        max_files_per_trigger=max_files_per_trigger,
                        max_bytes_per_trigger=max_bytes_per_trigger, progress=progress,
                        metrics_interval_s=metrics_interval_s, buckets=buckets,
                        on_flush=on_flush, on_batch=on_batch)


def trigger_limits(stream: Stream, max_files_per_trigger: int | None,
                   max_bytes_per_trigger: str | int | None) -> tuple[int | None, str | int]:
    """How much of the log a micro-batch takes: the limits given, and the stream's
    ``max_bytes_per_micro_batch`` when no byte limit is (whichever is reached first)."""
    return (max_files_per_trigger,
            max_bytes_per_trigger or int(stream.spec.max_bytes_per_micro_batch))


def start_cohort(spark: SparkSession, stream: Stream, run: CohortRun, *,
                 trigger: str = "available_now", max_files_per_trigger: int | None = None,
                 max_bytes_per_trigger: str | None = None,
                 progress: Callable[[str], None] = print, metrics_interval_s: float = 0.0,
                 buckets: int = DEFAULT_BUCKETS,
                 on_flush: Callable[[list[dict]], None] | None = None,
                 on_batch: Callable[[dict], None] | None = None,
                 ) -> tuple[StreamingQuery, StreamSink]:
    """Start one cohort's query: its record claimed (jobs.live.cohorts), each version
    recorded (jobs.lifecycle.versions) before anything of it is written."""
    source = stream.arrival_log
    if not table_exists(spark, source):
        raise FileNotFoundError(f"no arrival log at {source}: run ingest first")
    pipelines = run.pipelines
    specs = [p.spec for p in pipelines]
    packable = log_columns(specs)
    still_live = [member_of(p) for p in all_live(stream)]
    record = cohorts.claim(run.checkpoint, stream, pipelines, buckets, still_live,
                           source="delta" if packable is None else "arrival_positions")
    for pipeline in pipelines:
        versions.record(pipeline)
    max_files_per_trigger, max_bytes_per_trigger = trigger_limits(
        stream, max_files_per_trigger, max_bytes_per_trigger)
    if record.source == "arrival_positions":
        if packable is None:  # a cohort's versions only ever leave it: it cannot happen
            raise SettingsError(f"--checkpoint ({run.checkpoint}): its query reads the log by "
                                "arrival position, which these versions' input cannot be "
                                "read by; give a new --checkpoint")
        packs = with_event_time(
            packed_arrivals(spark, source, packable, buckets,
                            max_files_per_trigger=max_files_per_trigger,
                            max_bytes_per_trigger=max_bytes_per_trigger),
            PACKED_WATERMARK)
    else:
        reader = spark.readStream.format("delta")
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
        if max_bytes_per_trigger:  # in bytes: Delta's parser and ours agree on a number
            reader = reader.option("maxBytesPerTrigger", str(byte_count(max_bytes_per_trigger)))
        packs = stream_input(reader.load(source), specs, buckets)
    keys = [member_key(member_of(p)) for p in pipelines]
    output_schema = stream_output_schema(specs)
    rows = (packs
            .groupBy(BUCKET_COLUMN)
            .transformWithStateInPandas(
                statefulProcessor=BucketProcessor(
                    lambda: PipelineEngines(keys, specs, source), packed=True,
                    decimals_as_units=not any(spec.is_process for spec in specs),
                    packed_output=output_schema),
                outputStructType=PACKED_OUTPUT_SCHEMA,
                outputMode="Append", timeMode="EventTime"))
    names = [p.name for p in pipelines]

    def label(pipeline: Pipeline, key: str) -> str:
        """A version that will replace a serving one, or one of two in the cohort, is named
        with its version."""
        current = None if pipeline.recorded else versions.serving(pipeline)
        replacing = current is not None and current.version != pipeline.version
        return key if replacing or names.count(pipeline.name) > 1 else pipeline.name

    sinks = [PipelineSink(spark, pipeline, app_id_for(run.checkpoint, key), progress,
                          run.checkpoint, metrics_interval_s, on_flush=on_flush,
                          label=label(pipeline, key))
             for pipeline, key in zip(pipelines, keys, strict=True)]
    sink = StreamSink(spark, stream, sinks, output_schema, progress, on_batch=on_batch)
    writer = rows.writeStream.foreachBatch(sink).option("checkpointLocation", run.checkpoint)
    if trigger == "available_now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    name = run.checkpoint.rstrip("/").rsplit("/", 1)[-1]
    owed_batch.run_owed_batch_again(
        run.checkpoint, progress, f"live {stream.name} ({name})",
        batches_without_data=owed_batch.runs_batches_without_data(spark),
        fires_due_from_batch=record.fires_due_from_batch)
    with rows_only_arrow_batches(spark, narrow=not ships_payload(specs)):
        query = writer.queryName(f"eventtime_live_{stream.name}_{name}").start()
    return query, sink








def raise_failure(query: StreamingQuery, what: str = "live stream") -> None:
    """A failed query's error: a process function's own (the key, the record, the user's
    traceback, without the JVM's frames), or the query's."""
    failure = query.exception()
    if failure is None:
        return
    user = user_error_in(str(failure))
    if user is not None:
        raise user
    raise RuntimeError(f"{what} failed: {failure}")












def query_state(query: StreamingQuery, sink: StreamSink) -> str:
    """What the stream is doing now, for the progress lines between micro-batches: the
    micro-batch running, its input rows, the event-time watermark, batches written."""
    last = query.lastProgress or {}
    status = (query.status or {}).get("message", "")
    watermark = (last.get("eventTime") or {}).get("watermark", "-")
    return (f"{status}; last micro-batch {last.get('batchId', '-')}: "
            f"{last.get('numInputRows', 0)} input rows, watermark {watermark}; "
            f"{len(sink.batches)} micro-batches written")
