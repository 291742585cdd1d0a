"""Names and schemas of the platform's Delta tables: one place, so every job and asset agrees."""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jobs.store.delta_files import ColumnEncodings

ARRIVAL_LOG = "arrival_log"
QUARANTINE = "quarantine"
WINDOW_RESULTS = "window_results"
OUTPUT = "output"
"""A process pipeline's rows (jobs.process.tables)."""
LATE_RECORDS = "late_records"
LATE_DATA_METRICS = "late_data_metrics"
WINDOW_ASSIGNMENTS = "window_assignments"
BATCH_METRICS = "late_data_metrics_batches"

ARRIVAL_LOG_SCHEMA = StructType([
    StructField("arrival_seq", LongType(), False),
    StructField("ingest_batch", LongType(), False),
    StructField("source_partition", StringType(), False),
    StructField("source_file", StringType(), False),
    StructField("line_number", IntegerType(), False),
    StructField("key", StringType(), False),
    StructField("event_time_ms", LongType(), False),
    StructField("event_time", TimestampType(), False),
    StructField("ingest_time_ms", LongType(), False),
    StructField("ingest_time", TimestampType(), False),
    StructField("watermark_ms", LongType(), False),
    StructField("watermark", TimestampType(), True),
    StructField("value", DecimalType(38, 9), True),
    StructField("payload", StringType(), False),
])

ARRIVAL_LOG_ENCODINGS = ColumnEncodings(
    plain=frozenset({"value", "payload"}),
    deltas=frozenset({"arrival_seq", "line_number", "event_time_ms", "event_time",
                      "kafka_offset", "kafka_timestamp"}))
"""The arrival log's values that rarely repeat without a dictionary, its rising positions and
times as deltas (jobs.store.delta_files); the rest (keys, files, ingest times, watermarks) keep
Parquet's dictionaries."""
ENCODINGS: dict[str, ColumnEncodings] = {ARRIVAL_LOG: ARRIVAL_LOG_ENCODINGS}
"""The tables whose columns are not all encoded Parquet's default way, by name."""

QUARANTINE_SCHEMA = StructType([
    StructField("ingest_batch", LongType(), False),
    StructField("source_partition", StringType(), False),
    StructField("source_file", StringType(), False),
    StructField("line_number", IntegerType(), False),
    StructField("ingest_time_ms", LongType(), False),
    StructField("ingest_time", TimestampType(), False),
    StructField("ingest_date", DateType(), False),
    StructField("reason", StringType(), False),
    StructField("detail", StringType(), False),
    StructField("event_time_ms", LongType(), True),
    StructField("raw_line", StringType(), False),
])


LATE_RECORDS_SCHEMA = StructType([
    StructField("key", StringType(), False),
    StructField("arrival_seq", LongType(), False),
    StructField("event_time_ms", LongType(), False),
    StructField("event_time", TimestampType(), False),
    StructField("ingest_time_ms", LongType(), False),
    StructField("watermark_ms", LongType(), False),
    StructField("window_start_ms", LongType(), False),
    StructField("window_end_ms", LongType(), False),
    StructField("window_end_date", DateType(), False),
    StructField("value", DecimalType(38, 9), True),
])

WINDOW_ASSIGNMENTS_SCHEMA = StructType([
    StructField("key", StringType(), False),
    StructField("arrival_seq", LongType(), False),
    StructField("event_time_ms", LongType(), False),
    StructField("ingest_time_ms", LongType(), False),
    StructField("watermark_ms", LongType(), False),
    StructField("window_start_ms", LongType(), False),
    StructField("window_end_ms", LongType(), False),
    StructField("window_end_date", DateType(), False),
    StructField("fate", StringType(), False),  # on_time | late_within_lateness | dropped_late
])
"""Every (record, window) decision of the operator library, kept for pipelines whose windows
Spark cannot assign by itself (jobs.windows.keyed): the per-day metrics are computed from it."""

RESULT_KEY_COLUMNS = ("key", "window_start_ms", "window_end_ms")
PANE_COLUMNS = ("pane_index", "timing", "is_last")

METRICS_COLUMNS = (
    "window_end_date", "on_time", "late_within_lateness", "dropped_late", "quarantined",
    "lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms", "lateness_max_ms",
    "watermark_lag_p50_ms", "watermark_lag_max_ms",
)

__all__ = [name for name in dir() if name.isupper()] + [
    "BooleanType",  # re-exported for result schemas built from aggregates
]
