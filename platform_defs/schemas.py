"""Column schemas of the platform's tables as Dagster ``TableSchema``s, from the Spark schemas.

The Spark schemas in ``jobs.tables`` (and the enrichment and results shapes the jobs build)
are the source of truth; this module only translates them, so the UI's column lists can never
drift from what the jobs write.
"""

from dagster import TableColumn, TableColumnConstraints, TableSchema
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jobs import tables
from jobs.enrichment import OUTCOME_SCHEMA
from operators.pipeline import PipelineSpec
from operators.user_functions import result_type

COLUMN_DOCS = {
    "arrival_seq": "Total arrival order, fixed once at ingest (docs/contract.md §1)",
    "watermark_ms": "Watermark in force when the record arrived (ms since epoch, UTC)",
    "event_time_ms": "Event time (ms since epoch, UTC)",
    "ingest_time_ms": "Ingest clock at arrival (ms since epoch, UTC)",
    "window_end_date": "Output partition: day of the window's max_timestamp",
    "pane_index": "0, 1, ... per key and window, in emission order",
    "timing": "EARLY, ON_TIME or LATE",
    "is_last": "True for the pane emitted by the window's cleanup timer",
    "reason": "Why the line never reached an operator",
    "dropped_late": "(record, window) pairs past allowed lateness (the late_records table)",
    "late_within_lateness": "(record, window) pairs that updated a window after its on-time pane",
    "quarantined": "Bad lines, counted on the day of their ingest time",
}


def _column(field: StructField) -> TableColumn:
    return TableColumn(
        name=field.name, type=field.dataType.simpleString(),
        description=COLUMN_DOCS.get(field.name),
        constraints=TableColumnConstraints(nullable=field.nullable))


def table_schema(schema: StructType) -> TableSchema:
    """A Dagster ``TableSchema`` with the same columns, types and nullability."""
    return TableSchema(columns=[_column(f) for f in schema.fields])


_SIMPLE_TYPES: dict[str, type[DataType]] = {
    "long": LongType, "int": IntegerType, "string": StringType, "double": DoubleType,
    "date": DateType, "timestamp": TimestampType, "boolean": BooleanType}


def _ddl(text: str) -> StructType:
    """``"name type, ..."`` with simple types; Spark's own parser needs a running JVM, and
    definitions must load without one."""
    fields = []
    for column in text.split(","):
        name, kind = column.split()
        fields.append(StructField(name, _SIMPLE_TYPES[kind](), True))
    return StructType(fields)


METRICS_SCHEMA = _ddl(
    "window_end_date date, on_time long, late_within_lateness long, dropped_late long, "
    "quarantined long, lateness_p50_ms double, lateness_p95_ms double, lateness_p99_ms double, "
    "lateness_max_ms long, watermark_lag_p50_ms double, watermark_lag_max_ms long")
assert tuple(METRICS_SCHEMA.fieldNames()) == tables.METRICS_COLUMNS

BATCH_METRICS_SCHEMA = _ddl(
    "batch_id long, records long, first_arrival_seq long, last_arrival_seq long, panes long, "
    "late_records long, on_time long, late_within_lateness long, dropped_late long, "
    "lateness_p50_ms double, lateness_p95_ms double, lateness_p99_ms double, "
    "lateness_max_ms long, watermark_lag_p50_ms double, watermark_lag_max_ms long, "
    "quarantined long")

RESPONSES_SCHEMA = _ddl(
    "arrival_seq long, status string, response_json string, error_type string, "
    "error_message string, attempts int")
ENRICHED_SCHEMA = _ddl(
    "arrival_seq long, key string, event_time_ms long, event_time timestamp, value double, "
    "watermark_ms long, response_json string")
DEAD_LETTERS_SCHEMA = _ddl(
    "arrival_seq long, key string, event_time_ms long, payload string, status string, "
    "error_type string, error_message string, attempts int")
assert set(RESPONSES_SCHEMA.fieldNames()) <= set(_ddl(OUTCOME_SCHEMA).fieldNames())


def _aggregate_type(spec) -> str:
    if spec.is_user_defined:
        return result_type(spec.fn)
    return "long" if spec.fn == "count" else "double"


def results_schema(pipeline: PipelineSpec | None) -> StructType:
    """The results table: window identity, pane fields, then the pipeline's aggregates."""
    base = ("key string, window_start_ms long, window_end_ms long, window_start timestamp, "
            "window_end timestamp, window_end_date date, pane_index int, timing string, "
            "is_last boolean")
    aggregates = [] if pipeline is None else [
        f"{a.name} {_aggregate_type(a)}" for a in pipeline.aggregates]
    return _ddl(", ".join([base, *aggregates]))
