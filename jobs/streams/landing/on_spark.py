"""Ingest's reading and parsing on Spark's executors, for batches bigger than one driver.

Only two things in ingest are sequential: the order of arrival and the watermark each record
carries, and both need a handful of numbers per line (its ingest clock, place, source
partition, event time and parse verdict), not its bytes. So the work is split:

1. executors read the planned file parts (through the same ``LandingFolder`` the driver uses:
   local disk, or an object store through Apache Arrow) and parse every line with the same
   functions as the driver path (``part_lines``), keeping the parsed rows in Spark;
2. the driver collects the small columns and walks them once (``arrive``, the same function
   the driver path uses), assigning arrival positions, ingest times and watermarks;
3. executors join those back to the parsed rows and append the arrival log and quarantine
   with the batch's Delta transaction id, as the driver path does.

The rows are therefore the very same as the driver path's, which the tests check row for row.
File facts for planning (hash, lines, whether a known file only grew) are read on executors
too, so the driver never reads a landed byte.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.store import fast_writes
from jobs.streams.landing.batch import (
    QUARANTINE_COLUMNS,
    RAW_LINE_LIMIT,
    IngestRules,
    Line,
    arrive,
    part_lines,
)
from jobs.streams.landing.folder import FileFacts, LandingFolder
from jobs.streams.landing.folder import file_facts as read_file_facts
from jobs.streams.landing.log import Plan
from jobs.streams.landing.parsing import ParsedEvent, Rejection
from jobs.tables.days import day_of_column
from operators.time import MIN_WATERMARK

_FACTS = pa.schema([("name", pa.string()), ("sha256", pa.string()), ("lines", pa.int64()),
                    ("complete", pa.bool_()), ("prefix_sha256", pa.string()),
                    ("missing", pa.bool_()), ("errno", pa.int32()), ("strerror", pa.string()),
                    ("filename", pa.string())])
_FACTS_SCHEMA = ("name string, sha256 string, lines long, complete boolean, "
                 "prefix_sha256 string, missing boolean, errno int, strerror string, "
                 "filename string")
_LINES = pa.schema([("part", pa.int32()), ("source_file", pa.string()),
                    ("source_partition", pa.string()), ("line_number", pa.int32()),
                    ("clock_ms", pa.int64()), ("reason", pa.string()), ("detail", pa.string()),
                    ("event_time_ms", pa.int64()), ("marker", pa.string()),
                    ("key", pa.string()), ("value", pa.decimal128(38, 9)),
                    ("text", pa.string())])
_LINES_SCHEMA = ("part int, source_file string, source_partition string, line_number int, "
                 "clock_ms long, reason string, detail string, event_time_ms long, "
                 "marker string, key string, value decimal(38,9), text string")
_BROADCAST_LINES = 2_000_000
"""Up to this many lines the driver's assignment (about 40 bytes a line) is broadcast to the
executors; beyond, it is joined by a shuffle."""
_DRIVER_QUARANTINE_ROWS = 200_000
"""Up to this many bad lines a batch's quarantine rows are collected and appended by the
driver, as the driver path does (one Spark commit less)."""
_SMALL_COLUMNS = ["part", "source_file", "source_partition", "line_number", "clock_ms",
                  "reason", "detail", "event_time_ms", "marker"]


def _spread(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    """A small driver-side list as a DataFrame with one task per row (up to the cluster's
    slots), so each executor reads its own files."""
    slots = max(1, spark.sparkContext.defaultParallelism)
    frame = spark.createDataFrame(rows, schema)
    return frame.repartition(min(max(len(rows), 1), slots))


def file_facts(spark: SparkSession, landing: str,
               requests: list[tuple[str, int, int | None]]) -> dict[str, FileFacts]:
    """``(name, size, size when last planned)`` -> the facts of each file, read on the
    executors; a file removed meanwhile is left out, an unreadable one raises ``OSError``
    with the executor's own errno and message."""

    def facts_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        folder = LandingFolder(landing)
        for batch in batches:
            out = []
            for name, size, known in zip(*batch.to_pydict().values(), strict=True):
                row = {"name": name, "missing": False}
                try:
                    facts = read_file_facts(folder, name, size, known)
                    row.update(sha256=facts.sha256, lines=facts.lines,
                               complete=facts.complete, prefix_sha256=facts.prefix_sha256)
                except FileNotFoundError:
                    row["missing"] = True
                except OSError as error:
                    row.update(errno=error.errno, strerror=error.strerror or str(error),
                               filename=str(error.filename or name))
                out.append(row)
            yield pa.RecordBatch.from_pylist(out, schema=_FACTS)

    frame = _spread(spark, requests, "name string, size long, known_size long")
    found = frame.mapInArrow(facts_of, _FACTS_SCHEMA).toArrow().to_pylist()
    return facts_from_executors(found, LandingFolder(landing).has, landing)


def facts_from_executors(found: list[dict], driver_has: Callable[[str], bool],
                         landing: str) -> dict[str, FileFacts]:
    """The executors' rows as facts. A file they did not find is left out only if the driver
    no longer finds it either (removed meanwhile); one the driver still sees means the
    executors read other storage than the driver (a local folder on a cluster), and taking it
    as removed would ingest nothing and report success, so it is an error."""
    facts: dict[str, FileFacts] = {}
    unseen = []
    for row in found:
        if row["strerror"] is not None:
            raise OSError(row["errno"], row["strerror"], row["filename"])
        if not row["missing"]:
            facts[row["name"]] = FileFacts(row["sha256"], row["lines"], row["complete"],
                                           row["prefix_sha256"])
        elif driver_has(row["name"]):
            unseen.append(row["name"])
    if unseen:
        raise OSError(f"Spark's executors do not find {len(unseen)} landing files the driver "
                      f"lists (first: {sorted(unseen)[0]}): PLATFORM_LANDING ({landing}) must "
                      "be storage every node reaches (an object store, or the same mount on "
                      "every node), or set PLATFORM_INGEST_READER=driver")
    return facts


@dataclass
class SparkBatch:
    """What a batch appended, for the ingest log's commit and the report."""

    records: int
    quarantined: int
    reasons: dict[str, int]
    end_state: dict
    watermark_ms: int
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent reading and parsing (executors), ordering (driver), appending."""


def _marker(parsed: ParsedEvent, rules: IngestRules) -> str | None:
    """The one field a punctuated watermark reads, as text the driver turns back into the
    value the strategy would have seen (``true`` or an integer; anything else is no marker)."""
    field = rules.punctuation_field
    value = parsed.fields.get(field) if field else None
    if value is True or (isinstance(value, int) and not isinstance(value, bool)):
        return json.dumps(value)
    return None


def _parsed_lines(spark: SparkSession, landing: str, plan: Plan,
                  rules: IngestRules) -> DataFrame:
    """Every line of the plan, read and parsed on the executors."""

    def lines_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        folder = LandingFolder(landing)
        for batch in batches:
            for index in batch.column("part").to_pylist():
                rows = []
                for line in part_lines(folder, plan, plan.files[int(index)], rules):
                    parsed = line.parsed
                    good = isinstance(parsed, ParsedEvent)
                    rows.append((int(index), line.source_file, line.source_partition,
                                 line.line_number, line.clock_ms,
                                 None if good else parsed.reason,
                                 None if good else parsed.detail, parsed.event_time_ms,
                                 _marker(parsed, rules) if good else None,
                                 parsed.key if good else None,
                                 parsed.value if good else None, line.text or ""))
                yield pa.RecordBatch.from_arrays(
                    [pa.array(column, field.type) for column, field in
                     zip(zip(*rows, strict=True), _LINES, strict=True)] if rows else
                    [pa.array([], field.type) for field in _LINES], schema=_LINES)

    parts = _spread(spark, [(i,) for i in range(len(plan.files))], "part int")
    return parts.mapInArrow(lines_of, _LINES_SCHEMA)


def _line_of(row: dict, punctuation_field: str | None) -> Line:
    """A parsed line rebuilt from its small columns: what ``arrive`` needs, without text."""
    if row["reason"] is None:
        fields = {}
        if punctuation_field and row["marker"] is not None:
            fields[punctuation_field] = json.loads(row["marker"])
        parsed: ParsedEvent | Rejection = ParsedEvent("", row["event_time_ms"], None, fields)
    else:
        parsed = Rejection(row["reason"], row["detail"], row["event_time_ms"])
    return Line(row["source_file"], row["source_partition"], row["line_number"],
                row["clock_ms"], None, parsed)


def _arrivals_table(lines: list[Line], plan: Plan, rules: IngestRules
                    ) -> tuple[pa.Table, SparkBatch]:
    """The driver's sequential walk, as a table keyed by ``(part, line_number)``."""
    arrivals = arrive(lines, plan, rules)
    parts = {part.name: index for index, part in enumerate(plan.files)}
    columns: dict[str, list] = {name: [] for name in (
        "part", "line_number", "arrival_seq", "ingest_time_ms", "watermark_ms",
        "reason", "detail", "bad_event_time_ms")}
    seq = plan.first_seq
    reasons: dict[str, int] = {}
    for line, clock, verdict in arrivals.ordered:
        columns["part"].append(parts[line.source_file])
        columns["line_number"].append(line.line_number)
        columns["ingest_time_ms"].append(clock)
        if isinstance(verdict, Rejection):
            for name, value in (("arrival_seq", None), ("watermark_ms", None),
                                ("reason", verdict.reason), ("detail", verdict.detail),
                                ("bad_event_time_ms", verdict.event_time_ms)):
                columns[name].append(value)
            reasons[verdict.reason] = reasons.get(verdict.reason, 0) + 1
            continue
        for name, value in (("arrival_seq", seq), ("watermark_ms", verdict), ("reason", None),
                            ("detail", None), ("bad_event_time_ms", None)):
            columns[name].append(value)
        seq += 1
    table = pa.table({
        "part": pa.array(columns["part"], pa.int32()),
        "arrival_index": pa.array(range(len(columns["part"])), pa.int64()),
        "line_number": pa.array(columns["line_number"], pa.int32()),
        "arrival_seq": pa.array(columns["arrival_seq"], pa.int64()),
        "ingest_time_ms": pa.array(columns["ingest_time_ms"], pa.int64()),
        "watermark_ms": pa.array(columns["watermark_ms"], pa.int64()),
        "reason": pa.array(columns["reason"], pa.string()),
        "detail": pa.array(columns["detail"], pa.string()),
        "bad_event_time_ms": pa.array(columns["bad_event_time_ms"], pa.int64()),
    })
    quarantined = sum(reasons.values())
    summary = SparkBatch(seq - plan.first_seq, quarantined, dict(sorted(reasons.items())),
                         arrivals.end_state, arrivals.watermark_ms)
    return table, summary


def _timestamp(ms: str) -> F.Column:
    return F.timestamp_millis(F.col(ms))


def _arrival_log(joined: DataFrame, batch_id: int) -> DataFrame:
    good = joined.where(F.col("arrival_seq").isNotNull())
    return good.select(
        F.col("arrival_seq"), F.lit(batch_id).cast("long").alias("ingest_batch"),
        "source_partition", "source_file", "line_number", "key", "event_time_ms",
        _timestamp("event_time_ms").alias("event_time"), "ingest_time_ms",
        _timestamp("ingest_time_ms").alias("ingest_time"), "watermark_ms",
        F.when(F.col("watermark_ms") != F.lit(MIN_WATERMARK), _timestamp("watermark_ms"))
        .alias("watermark"),
        "value", F.col("text").alias("payload"),
    ).repartition(1).sortWithinPartitions("arrival_seq")


def _bad_lines(joined: DataFrame) -> DataFrame:
    """The quarantined lines in the quarantine's columns, with their place in arrival order."""
    return joined.where(F.col("arrival_seq").isNull()).select(
        "source_partition", "source_file", "line_number", "ingest_time_ms",
        F.col("a_reason").alias("reason"), F.col("a_detail").alias("detail"),
        F.col("bad_event_time_ms").alias("event_time_ms"),
        F.substring("text", 1, RAW_LINE_LIMIT).alias("raw_line"), "arrival_index")


def _quarantine(bad: DataFrame, batch_id: int, time_zone: str) -> DataFrame:
    """The quarantine's rows written by the executors (the driver path's ``quarantine_table``
    in Spark's words: ``ingest_date`` is the day the metrics count, ``days.day_of_column``)."""
    return bad.select(
        F.lit(batch_id).cast("long").alias("ingest_batch"), "source_partition", "source_file",
        "line_number", "ingest_time_ms", _timestamp("ingest_time_ms").alias("ingest_time"),
        day_of_column(F.col("ingest_time_ms"), time_zone).alias("ingest_date"), "reason",
        "detail", "event_time_ms", "raw_line", "arrival_index",
    ).repartition(1).sortWithinPartitions("arrival_index").drop("arrival_index")


def _append(frame: DataFrame, location: str, schema: pa.Schema, app_id: str,
            batch_id: int) -> None:
    """Append with the batch's transaction id (the same ``app_id`` as the driver path, so a
    batch re-run after a crash is skipped by Delta whichever path wrote it first)."""
    if not fast_writes.table_exists(location):
        # created with the exact schema (non-null columns), as the driver path creates it
        fast_writes.append(location, schema.empty_table())
    (frame.write.format("delta").mode("append").option("txnAppId", app_id)
     .option("txnVersion", batch_id).save(location))


def ingest_batch(spark: SparkSession, landing: str, plan: Plan, rules: IngestRules,
                 time_zone: str, arrival_log: str, quarantine: str) -> SparkBatch:
    """Read, parse, order and append one planned batch with Spark doing the bulk."""
    from jobs.streams.log_rows import ARRIVAL_SCHEMA, QUARANTINE_SCHEMA, quarantine_table

    started = time.monotonic()
    parsed = _parsed_lines(spark, landing, plan, rules).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        small = parsed.select(*_SMALL_COLUMNS).toArrow().to_pylist()
        read = time.monotonic()
        lines = [_line_of(row, rules.punctuation_field) for row in small]
        del small
        arrivals, summary = _arrivals_table(lines, plan, rules)
        ordered = time.monotonic()
        assigned = spark.createDataFrame(arrivals).withColumnsRenamed(
            {"reason": "a_reason", "detail": "a_detail"})
        if arrivals.num_rows <= _BROADCAST_LINES:  # no shuffle of the parsed rows
            assigned = F.broadcast(assigned)
        del lines
        joined = parsed.join(assigned, ["part", "line_number"])
        if summary.records or not fast_writes.table_exists(arrival_log):
            _append(_arrival_log(joined, plan.batch_id), arrival_log, ARRIVAL_SCHEMA,
                    "ingest-arrival-log", plan.batch_id)
        if summary.quarantined <= _DRIVER_QUARANTINE_ROWS:
            # a Delta commit from Spark costs about 1.5 s; few bad lines go through deltalake
            found = _bad_lines(joined).toArrow().sort_by("arrival_index")
            # Python values, not float64 (event times beyond 2**53 stay exact)
            bad = {name: found.column(name).to_pylist() for name in QUARANTINE_COLUMNS}
            if bad["reason"] or not fast_writes.table_exists(quarantine):
                fast_writes.append(quarantine, quarantine_table(bad, plan, time_zone),
                                   app_id="ingest-quarantine", version=plan.batch_id)
        else:
            _append(_quarantine(_bad_lines(joined), plan.batch_id, time_zone), quarantine,
                    QUARANTINE_SCHEMA, "ingest-quarantine", plan.batch_id)
    finally:
        parsed.unpersist()
    summary.timings = {"read and parse": read - started, "order": ordered - read,
                       "append": time.monotonic() - ordered}
    return summary


