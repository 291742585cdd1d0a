"""The Nexmark queries on the platform's runtimes: a backfill and a live stream over the arrival
log, writing Delta tables, identical row for row.

Nexmark events land like any other (``python -m nexmark.generator``) and ingest appends them to
the arrival log, so each record carries its arrival position and the watermark in force. A query
re-keys the log as Flink's ``keyBy`` does (Q7: one global key; Q8: the person id or the
auction's seller; Q11, Q12: the bidder; Q5: the auction) and runs its operator per key through
:class:`nexmark.per_key.QueryRunner`:

- **backfill**: each key's whole history in arrival order
  (jobs.runtime.key_partitions), its timers fired at the log's last watermark
  (``max(watermark_ms)`` over *all* records: the watermark belongs to the log, not to an
  event type; Q12's is ``ingest_time_ms - 1``);
- **live**: ``transformWithStateInPandas`` with the key's state in RocksDB, Spark's watermark
  declared on the log's watermark column *before* the query's filter (so persons still move
  Q7's windows), and each operator timer mirrored as a Spark timer at ``ts - 1``, exactly as
  the window pipelines run live: many keys per call, one state value per bucket of keys
  (jobs.runtime.buckets).

Tables, per query ``q``: ``nexmark_<q>`` (the result rows, partitioned by the day of the window's
end), ``nexmark_<q>_late`` (records that missed a window). Q5's first stage (bids per auction and
window) is ``nexmark_q5_counts``; its second stage, the auctions with the most bids per window,
is a Spark aggregation over that table, recomputed live for the windows a micro-batch touched.
Every write is idempotent: the backfill overwrites; live inserts only the rows the table does
not hold yet (a MERGE on the whole row: rows are deterministic, so a repeated micro-batch, or a
live run after a backfill of the same log, adds nothing twice); the Q5 stage-2 refresh replaces
a window range with what the counts table says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.config.streams import Stream
from jobs.runtime import owed_batch
from jobs.runtime.buckets import (
    BUCKET_COLUMN,
    SPARK_DELAY,
    BucketProcessor,
    KeySnapshots,
    SnapshotBucket,
    bucket_column,
    key_slices,
)
from jobs.runtime.key_partitions import map_keys
from jobs.store import storage
from jobs.store.delta_io import insert_new_rows, read_table_or_none, replace_range
from jobs.tables.days import window_end_date
from nexmark.queries import make_query
from operators.time import human_duration

ROW_TYPES = {"name": "string"}
"""Result columns are BIGINT but these."""

EMITTED_SCHEMA = ("kind string, row_json string, key string, arrival_seq long, "
                  "event_time_ms long, watermark_ms long, window_start long, window_end long, "
                  "side string")
LATE_COLUMNS = ("key", "arrival_seq", "event_time_ms", "watermark_ms", "window_start",
                "window_end", "side")
QUERY_BUCKETS = 16


@dataclass(frozen=True)
class QuerySpec:
    """How Spark feeds a query: which events, which key, which clock, which result table."""

    name: str
    types: tuple[str, ...]
    key: Callable[[], Column]
    end_column: str
    """The result column whose day partitions the table (the window's or session's end)."""
    ingest_clock: bool = False
    """Q12: time is ``ingest_time_ms`` and the watermark ``ingest_time_ms - 1``."""

    @property
    def rows_table(self) -> str:
        """The table the per-key rows go to (Q5: its first stage)."""
        return "nexmark_q5_counts" if self.name == "q5" else f"nexmark_{self.name}"

    def watermark(self) -> Column:
        if self.ingest_clock:
            return F.col("ingest_time_ms") - F.lit(1)
        return F.col("watermark_ms")


def _payload(field_name: str) -> Column:
    return F.get_json_object("payload", f"$.{field_name}")


SPECS = {
    "q5": QuerySpec("q5", ("bid",), lambda: F.col("key"), "window_end"),
    "q7": QuerySpec("q7", ("bid",), lambda: F.lit("*"), "window_end"),
    "q8": QuerySpec("q8", ("person", "auction"),
                    lambda: F.when(_payload("type") == "person", _payload("id"))
                    .otherwise(_payload("seller")), "window_end"),
    "q11": QuerySpec("q11", ("bid",), lambda: _payload("bidder"), "session_end"),
    "q12": QuerySpec("q12", ("bid",), lambda: _payload("bidder"), "window_end",
                     ingest_clock=True),
}


def row_schema(query) -> str:
    columns = query.columns
    return ", ".join(f"{c} {ROW_TYPES.get(c, 'long')}" for c in columns)


def _records(frame: pd.DataFrame, ordered: bool = False) -> list[dict]:
    """Query records (nexmark.arrival's shape) from arrival-log rows, in arrival order
    (``ordered``: the frame is already in the order wanted)."""
    from nexmark.arrival import record_from_arrival_row

    if not ordered:
        frame = frame.sort_values("arrival_seq", kind="stable")
    return [record_from_arrival_row(row) for row in frame.to_dict("records")]


def _emitted_frame(outputs: list[tuple[str, dict]]) -> pd.DataFrame:
    rows = []
    for kind, row in outputs:
        if kind == "row":
            rows.append({"kind": "row", "row_json": json.dumps(row)})
        else:
            rows.append({"kind": "late", **row})
    frame = pd.DataFrame(rows, columns=[c.split()[0] for c in EMITTED_SCHEMA.split(", ")])
    # nullable dtypes: an all-null column must not become float NaN, which Arrow cannot turn
    # into a string or a long
    for name in ("arrival_seq", "event_time_ms", "watermark_ms", "window_start", "window_end"):
        frame[name] = frame[name].astype("Int64")
    for name in ("kind", "row_json", "key", "side"):
        frame[name] = frame[name].astype("string")
    return frame


LOG_COLUMNS = ("arrival_seq", "source_partition", "key", "event_time_ms", "ingest_time_ms",
               "watermark_ms", "payload")


def _input(log: DataFrame, spec: QuerySpec, *extra: str) -> DataFrame:
    """The log's records of the query's event types, keyed by the query's key."""
    return (log.where(_payload("type").isin(*spec.types))
            .withColumn("query_key", spec.key())
            .select("query_key", *LOG_COLUMNS, *extra))


# -- results from emitted rows ---------------------------------------------------------------------


def result_rows(emitted: DataFrame, query, spec: QuerySpec, time_zone: str) -> DataFrame:
    parsed = F.from_json("row_json", row_schema(query))
    return (emitted.where(F.col("kind") == "row").select(parsed.alias("r")).select("r.*")
            .withColumn("window_end_date", window_end_date(F.col(spec.end_column), time_zone)))


def late_rows(emitted: DataFrame, time_zone: str) -> DataFrame:
    return (emitted.where(F.col("kind") == "late").select(*LATE_COLUMNS)
            .withColumn("window_end_date", window_end_date(F.col("window_end"), time_zone)))


def hot_items(counts: DataFrame) -> DataFrame:
    """Q5's second stage: per window, the auction(s) with the most bids (ties all kept)."""
    per_window = Window.partitionBy("window_start", "window_end")
    return (counts.withColumn("_best", F.max("bid_count").over(per_window))
            .where(F.col("bid_count") == F.col("_best")).drop("_best"))


# -- backfill ------------------------------------------------------------------------------------


@dataclass
class NexmarkReport:
    query: str
    rows: int
    late: int
    batches: list[dict] = field(default_factory=list)
    hint: str = ""
    """Why there are no rows, when the log is shorter than a window (:func:`empty_result_hint`)."""


def run_backfill(spark: SparkSession, stream: Stream, name: str,
                 parameters: dict[str, int] | None = None,
                 progress: Callable[[str], None] = print) -> NexmarkReport:
    """Recompute query ``name`` over the whole arrival log; overwrite its tables."""
    query, spec = make_query(name, parameters), SPECS[name]
    log = read_table_or_none(spark, stream.arrival_log)
    if log is None:
        raise FileNotFoundError("no arrival log: ingest the Nexmark landing files first")
    end = log.agg(F.max(spec.watermark())).first()[0]

    def run_key(key: str, records: list) -> list:
        from nexmark.per_key import QueryRunner

        runner = QueryRunner(query)
        return runner.process(key, records) + runner.fire(end)

    emitted = map_keys(_input(log, spec), "query_key", run_key, _emitted_frame,
                       EMITTED_SCHEMA, convert=lambda frame: _records(frame, ordered=True)
                       ).localCheckpoint(eager=True)
    rows = result_rows(emitted, query, spec, stream.settings.time_zone)
    late = late_rows(emitted, stream.settings.time_zone)
    _overwrite(rows, stream.table_path(spec.rows_table))
    _overwrite(late, stream.table_path(f"nexmark_{name}_late"))
    if name == "q5":
        counts = spark.read.format("delta").load(stream.table_path(spec.rows_table))
        _overwrite(hot_items(counts), stream.table_path("nexmark_q5"))
    written = spark.read.format("delta").load(stream.table_path(f"nexmark_{name}")).count()
    dropped = spark.read.format("delta").load(stream.table_path(f"nexmark_{name}_late")).count()
    progress(f"nexmark {name} backfill: {written} rows, {dropped} late"
             + (empty_result_hint(log, name, query) if written == 0 else ""))
    return NexmarkReport(name, written, dropped)


def empty_result_hint(log: DataFrame, name: str, query: object) -> str:
    """Why a query emitted nothing when the log is shorter, in event time, than one window:
    a window is emitted once the watermark passes its end, which a few seconds of events never
    reach (2,000 generated events span 0.2 s; the queries' windows are 10 s)."""
    size = getattr(query, "window_size_ms", None) or getattr(query, "session_gap_ms", None)
    if size is None:
        return ""
    first, last = log.agg(F.min("event_time_ms"), F.max("event_time_ms")).first()
    if first is None or last - first >= size:
        return ""
    return (f" (the log's events span {human_duration(last - first)} of event time and "
            f"{name}'s windows are {human_duration(size)}: a window is emitted once the "
            "watermark passes its end; land more events, or give a smaller "
            "--param window_size_ms=...)")


def _overwrite(frame: DataFrame, path: str) -> None:
    (frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
     .partitionBy("window_end_date").save(path))


# -- live ------------------------------------------------------------------------------------------

class QueryBucket(SnapshotBucket):
    """A bucket of the query's keys per call (:class:`jobs.runtime.buckets.BucketEngine`): each
    key's snapshot restored when it has records or a due timer, run through
    :class:`nexmark.per_key.QueryRunner`, and saved back."""

    def __init__(self, name: str, parameters: dict[str, int] | None) -> None:
        from nexmark.per_key import QueryRunner

        self.runner = QueryRunner(make_query(name, parameters))
        self.keys = KeySnapshots()

    def _save(self, key: str) -> None:
        timers = self.runner.event_timers(key)
        self.keys.put(key, self.runner.snapshot(key), timers)

    def process(self, rows: pd.DataFrame) -> list[pd.DataFrame]:
        order, slices = key_slices(rows.query_key.to_numpy(), rows.arrival_seq.to_numpy())
        every = _records(rows.iloc[order], ordered=True)  # once: per key, pandas costs more
        outputs: list = []
        for key, start, end in slices:
            self.runner.restore(key, self.keys.get(key))
            outputs += self.runner.process(key, every[start:end])
            self._save(key)
        return [_emitted_frame(outputs)] if outputs else []

    def fire(self, watermark: int) -> list[pd.DataFrame]:
        outputs: list = []
        for key in self.keys.due(watermark, set()):
            self.runner.restore(key, self.keys.get(key))
            outputs += self.runner.fire(watermark)
            self._save(key)
        self.keys.watermark = max(self.keys.watermark, watermark)
        return [_emitted_frame(outputs)] if outputs else []


def run_live(spark: SparkSession, stream: Stream, name: str,
             parameters: dict[str, int] | None = None, *, checkpoint: str | None = None,
             max_files_per_trigger: int | None = None,
             progress: Callable[[str], None] = print) -> NexmarkReport:
    """Process what is new in the arrival log for query ``name``, then stop (AvailableNow)."""
    query, spec = make_query(name, parameters), SPECS[name]
    source = stream.arrival_log
    reader = spark.readStream.format("delta")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    log = (reader.load(source)
           .withColumn("_watermark", F.timestamp_millis(F.greatest(spec.watermark(), F.lit(1))))
           .withWatermark("_watermark", SPARK_DELAY))  # before the filter: every record counts
    engine = BucketProcessor(lambda: QueryBucket(name, parameters))
    emitted = (_input(log, spec, "_watermark")
               .withColumn(BUCKET_COLUMN, bucket_column(QUERY_BUCKETS, "query_key"))
               .groupBy(BUCKET_COLUMN)
               .transformWithStateInPandas(statefulProcessor=engine,
                                           outputStructType=EMITTED_SCHEMA,
                                           outputMode="Append", timeMode="EventTime"))
    checkpoint = checkpoint or storage.join(stream.checkpoints, f"nexmark_{name}")
    report = NexmarkReport(name, 0, 0)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch = batch.localCheckpoint(eager=True)
        rows = result_rows(batch, query, spec, stream.settings.time_zone)
        late = late_rows(batch, stream.settings.time_zone)
        for frame, table, identity in ((rows, spec.rows_table, query.columns),
                                       (late, f"nexmark_{name}_late", LATE_COLUMNS)):
            days = frame.agg(F.min("window_end_date").cast("string"),
                             F.max("window_end_date").cast("string")).first()
            insert_new_rows(spark, frame, stream.table_path(table), keys=identity,
                            days=None if days[0] is None else (days[0], days[1]))
        if name == "q5":
            _refresh_hot_items(spark, stream, rows)
        counts = batch.groupBy("kind").count().collect()
        summary = {"batch_id": batch_id, **{r.kind: r["count"] for r in counts}}
        report.batches.append(summary)
        progress(f"nexmark {name}: batch {batch_id}: {summary.get('row', 0)} rows, "
                 f"{summary.get('late', 0)} late")

    owed_batch.run_owed_batch_again(checkpoint, progress, f"nexmark {name}",
                                    owed_batch.runs_batches_without_data(spark))
    running = (emitted.writeStream.foreachBatch(write_batch)
              .option("checkpointLocation", checkpoint).trigger(availableNow=True)
              .queryName(f"nexmark_{name}").start())
    running.awaitTermination()
    if running.exception() is not None:
        raise RuntimeError(f"nexmark {name} live stream failed: {running.exception()}")
    report.rows = spark.read.format("delta").load(
        stream.table_path(f"nexmark_{name}")).count() if _exists(spark, stream, name) else 0
    report.late = sum(b.get("late", 0) for b in report.batches)
    if report.rows == 0:
        log = read_table_or_none(spark, stream.arrival_log)
        if log is not None:
            report.hint = empty_result_hint(log, name, make_query(name, parameters))
    return report


def _exists(spark: SparkSession, stream: Stream, name: str) -> bool:
    return read_table_or_none(spark, stream.table_path(f"nexmark_{name}")) is not None


def _refresh_hot_items(spark: SparkSession, stream: Stream,
                       new_counts: DataFrame) -> None:
    """Stage 2 for the windows this batch added counts to, from the whole counts table: a
    window's counts can arrive over two batches (keys with a record fire in one, keys woken
    by Spark's watermark in the next), and the last refresh sees them all."""
    bounds = new_counts.agg(F.min("window_end"), F.max("window_end")).first()
    if bounds[0] is None:
        return
    low, high = int(bounds[0]), int(bounds[1])
    counts = (spark.read.format("delta").load(stream.table_path("nexmark_q5_counts"))
              .where(F.col("window_end").between(low, high)))
    path = stream.table_path("nexmark_q5")
    if read_table_or_none(spark, path) is None:
        hot_items(counts).write.format("delta").partitionBy("window_end_date").save(path)
    else:
        replace_range(hot_items(counts), path, column="window_end", first=low, last=high,
                      partition_by="window_end_date")
