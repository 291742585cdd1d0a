"""The live stream: Structured Streaming over the arrival log, state in RocksDB.

``run_live(..., trigger="available_now")`` processes everything ingested since the last run and
stops (what Dagster launches after each ingest); ``trigger="10 seconds"`` keeps running as a
long-lived job. Either way the checkpoint makes a stop at any point, or a crash, lose and
duplicate nothing: Spark re-runs the uncommitted batch and every write is idempotent
(jobs/live_sink.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs import tables
from jobs.delta_io import table_exists
from jobs.keyed_windows import INPUT_COLUMNS, check_runnable
from jobs.live_processor import SPARK_DELAY, WindowProcessor, output_schema
from jobs.live_sink import BatchSink, app_id_for
from jobs.settings import PlatformSettings


@dataclass
class LiveReport:
    batches: list[dict] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(b["records"] for b in self.batches)

    def summary(self) -> str:
        return (f"live: {len(self.batches)} micro-batches, {self.records} records, "
                f"{sum(b['panes'] for b in self.batches)} panes, "
                f"{sum(b['late_records'] for b in self.batches)} late")


def default_checkpoint(settings: PlatformSettings) -> str:
    return str(settings.warehouse / "_checkpoints" / "live")


def start_live(spark: SparkSession, settings: PlatformSettings, *,
               trigger: str = "available_now", checkpoint: str | None = None,
               max_files_per_trigger: int | None = None, max_bytes_per_trigger: str | None = None,
               progress: Callable[[str], None] = print) -> tuple[StreamingQuery, BatchSink]:
    """Start the streaming query; ``trigger`` is ``available_now`` or an interval."""
    spec = settings.pipeline
    check_runnable(spec)
    source = settings.table_path(tables.ARRIVAL_LOG)
    if not table_exists(spark, source):
        raise FileNotFoundError(f"no arrival log at {source}: run ingest first")
    reader = spark.readStream.format("delta")
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    if max_bytes_per_trigger:
        reader = reader.option("maxBytesPerTrigger", max_bytes_per_trigger)
    arrivals = (reader.load(source)
                .select(*INPUT_COLUMNS)
                .withColumn("_watermark", F.timestamp_millis(F.greatest("watermark_ms", F.lit(1))))
                .withWatermark("_watermark", SPARK_DELAY))
    processor = WindowProcessor(spec, record_assignments=not spec.is_standard_window)
    panes = (arrivals.groupBy("key")
             .transformWithStateInPandas(statefulProcessor=processor,
                                         outputStructType=output_schema(spec),
                                         outputMode="Append", timeMode="EventTime"))
    checkpoint = checkpoint or default_checkpoint(settings)
    sink = BatchSink(spark, settings, app_id_for(checkpoint), progress)
    writer = panes.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
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
                             max_bytes_per_trigger=max_bytes_per_trigger, progress=progress)
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"live stream failed: {query.exception()}")
    report = LiveReport(sink.batches)
    progress(report.summary())
    return report
