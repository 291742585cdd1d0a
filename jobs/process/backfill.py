"""A process pipeline's backfill: every key's whole history through the per-key runner
(operators.process_pipeline) on Spark's executors, its timers fired at the log's last
watermark, then its tables replaced for the days asked.

A process function's state carries from the log's first record of a key to its last, so a
backfill always computes from the whole log (from one pinned snapshot of it); a day range only
says which days of its tables it replaces, the rest of the table left as it was.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.console.progress import heartbeat
from jobs.process import rows as process_rows
from jobs.process.tables import EVENT_DATE, OUTPUT, OUTPUT_DATE, output_schema
from jobs.runtime.key_partitions import map_keys
from jobs.store.delta_io import read_table_or_none, replace_range
from jobs.store.table_stats import rows_written
from jobs.tables.days import day_of_column
from operators.process_pipeline import ProcessRunner, user_error_in


@dataclass
class ProcessBackfillReport:
    first_day: str
    last_day: str
    results: int
    late: int
    pipeline: str = ""
    metrics: tuple = ()
    passes: int = 1

    @property
    def wrote_nothing(self) -> bool:
        return not self.results and not self.late

    def summary(self) -> str:
        return (f"backfill {self.pipeline} {self.first_day}..{self.last_day}: wrote "
                f"{self.results} output rows, {self.late} late records")


def emitted(log: DataFrame, pipeline: Pipeline) -> DataFrame:
    """Every key's output and late rows (:data:`jobs.process.rows.FLAT_SCHEMA`)."""
    spec, name = pipeline.spec, pipeline.name
    end = log.agg(F.max("watermark_ms")).first()[0]
    location = pipeline.table_path(tables.ARRIVAL_LOG)
    started = time.time()  # the ingest clock reads the log as it is from here on, once

    def run_key(key: str, history: list) -> list:
        """``history``: the key's records (map_keys converts each Arrow batch once)."""
        from jobs.runtime.ingest_clock import log_clock

        clock = log_clock(location)
        clock.fresh_after = max(clock.fresh_after, started)
        runner = ProcessRunner(spec, name, clock)
        runner.restore(key, None)
        out = runner.process(key, history)
        if end is not None:
            out += runner.fire(key, end)
        return [process_rows.output_item(e) for e in out] + \
            process_rows.late_of(key, history)

    columns = log.select("key", *process_rows.RECORD_COLUMNS)
    return map_keys(columns, "key", run_key, process_rows.flat_frame, process_rows.FLAT_SCHEMA,
                    convert=process_rows.records)


def run_process_backfill(spark: SparkSession, pipeline: Pipeline, first_day: str | None,
                         last_day: str | None, progress: Callable[[str], None] = print
                         ) -> ProcessBackfillReport:
    """Compute the pipeline over the whole log and replace its tables' days
    ``[first_day, last_day]`` (default: every day its rows fall on)."""
    log_path = pipeline.table_path(tables.ARRIVAL_LOG)
    version = DeltaTable.forPath(spark, log_path).history(1).select("version").first()[0]
    log = spark.read.format("delta").option("versionAsOf", version).load(log_path)
    zone = pipeline.time_zone
    spec = pipeline.spec
    with heartbeat(progress, f"{pipeline.name}: running the process function over the log"):
        try:
            flat = emitted(log, pipeline).localCheckpoint(eager=True)
        except Exception as failure:  # the user's error, without the JVM's frames
            user = user_error_in(str(failure))
            if user is None:
                raise
            raise user from None
    schema = output_schema(spec)
    user = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields
                     if f.name not in ("key", "emission", OUTPUT_DATE))
    output = (flat.where(F.col("kind") == "output")
              .select(F.from_json("row_json", user).alias("r"), "key", "emission")
              .select("r.*", "key", "emission")
              .withColumn(OUTPUT_DATE, day_of_column(F.col(spec.day_column), zone)))
    late = (flat.where(F.col("kind") == "late")
            .select("key", "arrival_seq", "event_time_ms",
                    F.timestamp_millis("event_time_ms").alias("event_time"), "watermark_ms",
                    "ingest_time_ms",
                    (F.col("watermark_ms") - F.col("event_time_ms")).alias("late_by_ms"))
            .withColumn(EVENT_DATE, day_of_column(F.col("event_time_ms"), zone)))
    bounds = [*output.agg(F.min(OUTPUT_DATE).cast("string"),
                          F.max(OUTPUT_DATE).cast("string")).first(),
              *late.agg(F.min(EVENT_DATE).cast("string"),
                        F.max(EVENT_DATE).cast("string")).first()]
    found = [b for b in bounds if b is not None]
    first = first_day or (min(found) if found else "1970-01-01")
    last = last_day or (max(found) if found else first)
    tag = f"backfill-{uuid.uuid4().hex}"
    counts = {}
    for table, frame, column in ((OUTPUT, output, OUTPUT_DATE),
                                 (tables.LATE_RECORDS, late, EVENT_DATE)):
        path = pipeline.table_path(table)
        replace_range(frame.where(F.col(column).between(first, last)), path, column=column,
                      first=first, last=last, partition_by=column, tag=tag)
        counts[table] = rows_written(path, tag)
        progress(f"{pipeline.name}: wrote {counts[table]} rows to {table}")
    flat.unpersist()
    report = ProcessBackfillReport(first, last, counts[OUTPUT], counts[tables.LATE_RECORDS],
                                   pipeline.name)
    progress(report.summary())
    return report


def read_output(spark: SparkSession, pipeline: Pipeline) -> DataFrame | None:
    return read_table_or_none(spark, pipeline.table_path(OUTPUT))
