"""Async enrichment on Spark: one event loop and one HTTP session per partition, no thread per
call, and outputs keyed by ``arrival_seq`` so a repeated batch writes the same rows once.

``mapInPandas`` hands each partition's rows (sorted by ``arrival_seq``) to
``operators.async_io.enrich_batch``, which keeps ``capacity`` calls in flight. The recorded
responses are joined onto the input first, so the very same function runs live (call, reuse a
recording when a batch is repeated), as a replay (recordings only, the service may be down) or as
a refresh (call again).

Exactly-once: the outcomes of a batch are computed once (a local checkpoint, so no output is
derived from a second round of calls), recorded in the responses table *before* anything else
is written, and only then split into enriched rows and dead letters. A batch that crashes
anywhere after the recording re-runs from the recordings with no calls and writes exactly the
same rows; one that crashes before it calls again and nothing was written yet. (With recording
switched off, a crash between the two output writes can split a record's fate; don't turn it
off for live runs.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config.streams import Stream
from jobs.store import storage
from jobs.store.delta_io import (
    append_idempotent,
    read_table_or_none,
    replace_range,
    retry_conflicts,
    table_exists,
)
from operators.async_io import AsyncEnrichConfig, EnrichMode

ENRICHED = "enriched_events"
DEAD_LETTERS = "enrichment_dead_letters"
RESPONSES = "enrichment_responses"

OUTCOME_SCHEMA = ("arrival_seq long, watermark_ms long, status string, response_json string, "
                  "error_type string, error_message string, attempts int")
RECORDING_COLUMNS = ("arrival_seq", "status", "response_json", "error_type", "error_message",
                     "attempts")
INPUT_COLUMNS = ("arrival_seq", "watermark_ms", "key")
METRICS_STATUS = "_metrics"
"""An extra outcome row per partition (negative ``arrival_seq``) carrying that task's call
counters as JSON in ``response_json``: calls, retries, timeouts, errors, ..."""


def _partition_function(service_url: str, config: AsyncEnrichConfig, token_env: str
                        ) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The function each Spark task runs; imports happen on the worker."""

    def enrich_partition(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from pyspark import TaskContext

        from jobs.runtime.worker_gc import spare_live_objects
        from operators.async_io import enrich_batch
        from operators.async_results import Recording
        from services.enrichment_client import user_lookup

        spare_live_objects()  # a task's start in the worker
        frame = pd.concat(list(batches), ignore_index=True)
        if frame.empty:
            return
        frame = frame.sort_values("arrival_seq", kind="stable")
        recorded = {}
        if "rec_status" in frame.columns:
            have = frame[frame.rec_status.notna()]
            for row in have.itertuples(index=False):
                recorded[int(row.arrival_seq)] = Recording.from_row({
                    "arrival_seq": row.arrival_seq, "status": row.rec_status,
                    "response_json": row.rec_response_json, "error_type": row.rec_error_type,
                    "error_message": row.rec_error_message, "attempts": row.rec_attempts})
        records = frame[list(INPUT_COLUMNS)].to_dict("records")
        started = time.perf_counter()
        result = enrich_batch(records, user_lookup(service_url, token_env=token_env), config,
                              recorded=recorded or None)
        call_phase_s = time.perf_counter() - started
        rows = [outcome.to_row() for outcome in result.outcomes]
        # counts, plus this task's call latencies and how long its calls took in all, from
        # the first to the last (the benchmark's per-task rate, without Spark's own stages)
        counters = {**result.metrics.counters(), "calls_timed": len(result.metrics.call_ms),
                    **result.metrics.latency_percentiles(),
                    "call_phase_s": round(call_phase_s, 3), "task_records": len(records)}
        rows.append({"arrival_seq": -1 - TaskContext.get().partitionId(), "watermark_ms": None,
                     "status": METRICS_STATUS, "response_json": json.dumps(counters),
                     "error_type": None, "error_message": None, "attempts": 0})
        yield pd.DataFrame(rows, columns=[c.split()[0] for c in OUTCOME_SCHEMA.split(", ")])

    return enrich_partition


def enrich_frame(arrivals: DataFrame, recordings: DataFrame | None, service_url: str,
                 config: AsyncEnrichConfig, partitions: int = 2,
                 token_env: str = "ENRICHMENT_SERVICE_TOKEN") -> DataFrame:
    """Outcomes (one per arrival) for ``arrivals``; ``recordings`` feed live reuse and replay."""
    frame = arrivals.select(*INPUT_COLUMNS)
    if recordings is not None and config.mode != EnrichMode.REFRESH:
        recorded = recordings.select(
            "arrival_seq", *[F.col(c).alias(f"rec_{c}") for c in RECORDING_COLUMNS[1:]])
        frame = frame.join(recorded, "arrival_seq", "left")
    frame = frame.repartitionByRange(partitions, "arrival_seq").sortWithinPartitions(
        "arrival_seq")
    return frame.mapInPandas(_partition_function(service_url, config, token_env),
                             OUTCOME_SCHEMA)


@dataclass
class EnrichReport:
    first_seq: int
    last_seq: int
    enriched: int
    dead_letters: int
    calls_made: bool
    counters: dict[str, int]
    """Summed over tasks: records, calls, retries, timeouts, errors, rejected_results,
    succeeded, dead_letters, replayed, missing_recordings; max_in_flight is the largest."""


@dataclass
class _Written:
    enriched: int
    dead_letters: int
    counters: dict[str, int]


def sum_counters(rows: list[str]) -> dict[str, int | float]:
    """Counts add up over tasks; the largest in-flight count, latency percentile, call phase
    and task size of any task are kept (a percentile of percentiles would mean nothing)."""
    total: dict[str, int | float] = {}
    for text in rows:
        for name, value in json.loads(text).items():
            if name in ("max_in_flight", "task_records") or name.startswith("call_"):
                total[name] = max(total.get(name, 0), value)
            else:
                total[name] = total.get(name, 0) + value
    return total


def run_enrichment(spark: SparkSession, stream: Stream, service_url: str,
                   config: AsyncEnrichConfig, first_seq: int | None = None,
                   last_seq: int | None = None, progress: Callable[[str], None] = print
                   ) -> EnrichReport:
    """Enrich the stream's arrival log's ``[first_seq, last_seq]`` and replace exactly that
    range in the stream's enriched and dead-letter tables; record responses unless
    replaying."""
    log = read_table_or_none(spark, stream.arrival_log)
    if log is None:
        raise FileNotFoundError("no arrival log yet: run ingest first")
    bounds = log.agg(F.min("arrival_seq"), F.max("arrival_seq")).first()
    first = bounds[0] if first_seq is None else first_seq
    last = bounds[1] if last_seq is None else last_seq
    if first is None:
        raise ValueError("the arrival log is empty")
    arrivals = log.where(F.col("arrival_seq").between(first, last))
    progress(f"enrichment: {config.mode} over arrival_seq {first}..{last}")
    written = _enrich_and_write(spark, stream, arrivals, service_url, config,
                                write=lambda name, frame: replace_range(
                                    frame, stream.table_path(name), column="arrival_seq",
                                    first=int(first), last=int(last)))
    report = EnrichReport(first, last, written.enriched, written.dead_letters,
                          config.mode != EnrichMode.REPLAY, written.counters)
    progress(f"enrichment: {report.enriched} enriched, {report.dead_letters} dead letters; "
             f"{_describe(written.counters)}")
    return report


def _describe(counters: dict[str, int]) -> str:
    names = ("calls", "retries", "timeouts", "errors", "replayed", "max_in_flight")
    return ", ".join(f"{name} {counters.get(name, 0)}" for name in names)


def _enrich_and_write(spark: SparkSession, stream: Stream, arrivals: DataFrame,
                      service_url: str, config: AsyncEnrichConfig,
                      write: Callable[[str, DataFrame], None]) -> _Written:
    """Enrich ``arrivals`` once, record the responses, then hand the enriched and dead-letter
    rows to ``write`` (which makes each write idempotent). See the module docstring for why
    in this order."""
    responses_path = stream.table_path(RESPONSES)
    recordings = read_table_or_none(spark, responses_path)
    if config.mode == EnrichMode.REPLAY and recordings is None:
        raise FileNotFoundError(f"replay needs recorded responses at {responses_path}")
    computed = enrich_frame(arrivals, recordings, service_url, config).localCheckpoint(
        eager=True)
    counters = sum_counters([row.response_json for row in computed
                              .where(F.col("status") == METRICS_STATUS)
                              .select("response_json").collect()])
    outcomes = computed.where(F.col("status") != METRICS_STATUS)
    if config.mode != EnrichMode.REPLAY and config.record:
        _merge_recordings(spark, outcomes.select(*RECORDING_COLUMNS), responses_path)
    enriched = (outcomes.where(F.col("status") == "ok")
                .join(arrivals.select("arrival_seq", "key", "event_time_ms", "value"),
                      "arrival_seq")
                .withColumn("event_time", F.timestamp_millis("event_time_ms"))
                .select("arrival_seq", "key", "event_time_ms", "event_time", "value",
                        "watermark_ms", "response_json"))
    dead = (outcomes.where(F.col("status") != "ok")
            .join(arrivals.select("arrival_seq", "key", "event_time_ms", "payload"),
                  "arrival_seq")
            .select("arrival_seq", "key", "event_time_ms", "payload", "status",
                    "error_type", "error_message", "attempts"))
    write(ENRICHED, enriched)
    write(DEAD_LETTERS, dead)
    counts = {row.ok: row["count"] for row in
              outcomes.groupBy((F.col("status") == "ok").alias("ok")).count().collect()}
    return _Written(counts.get(True, 0), counts.get(False, 0), counters)


def run_enrichment_live(spark: SparkSession, stream: Stream, service_url: str,
                        config: AsyncEnrichConfig, *, checkpoint: str | None = None,
                        max_files_per_trigger: int | None = None,
                        progress: Callable[[str], None] = print) -> list[dict]:
    """Enrich what is new in the arrival log as a stream (``Trigger.AvailableNow``).

    Each micro-batch appends under a Delta transaction id (app id of the checkpoint, version =
    batch id), so a batch repeated after a failure calls the service again (it reuses the
    recordings the first attempt made) but writes its rows once.
    """
    from jobs.live.sink import app_id_for

    checkpoint = checkpoint or storage.join(stream.checkpoints, "enrichment")
    app_id = app_id_for(checkpoint)
    reader = spark.readStream.format("delta")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    batches: list[dict] = []

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        def append(name: str, frame: DataFrame) -> None:
            append_idempotent(frame, stream.table_path(name), app_id=app_id, version=batch_id)

        written = _enrich_and_write(spark, stream, batch, service_url, config, append)
        summary = {"batch_id": batch_id, "enriched": written.enriched,
                   "dead_letters": written.dead_letters, **written.counters}
        batches.append(summary)
        progress(f"enrichment: batch {batch_id}: {summary['enriched']} enriched, "
                 f"{summary['dead_letters']} dead letters; {_describe(written.counters)}")

    query = (reader.load(stream.arrival_log).writeStream
             .foreachBatch(write_batch).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).queryName("eventtime_enrichment").start())
    query.awaitTermination()
    return batches


def _merge_recordings(spark: SparkSession, recordings: DataFrame, path: str) -> None:
    """Upsert by ``arrival_seq``: a refresh replaces what an earlier run recorded."""
    if not table_exists(spark, path):
        recordings.where(F.lit(False)).write.format("delta").save(path)
    from delta.tables import DeltaTable

    retry_conflicts(lambda: DeltaTable.forPath(spark, path).alias("t")
                    .merge(recordings.alias("s"), "t.arrival_seq = s.arrival_seq")
                    .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
