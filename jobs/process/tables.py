"""A process pipeline's tables: ``output`` (the function's rows) and ``late_records`` (the
records that arrived behind the watermark; they reached the function too).

``output`` holds the declared columns, then ``key`` and ``emission`` (the row's number among its
key's rows: ``(key, emission)`` is its identity, so writes are idempotent), partitioned by
``output_date``, the day of the ``day_column`` in ``PLATFORM_TIME_ZONE``. ``late_records``
is partitioned by ``event_date``, the day of the record's event time.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from operators.pipeline import PipelineSpec

OUTPUT = "output"
OUTPUT_DATE = "output_date"
EVENT_DATE = "event_date"
IDENTITY = ("key", "emission")
LATE_IDENTITY = ("key", "arrival_seq")
_TYPES: dict[str, DataType] = {"long": LongType(), "double": DoubleType(),
                               "string": StringType(), "boolean": BooleanType()}

LATE_SCHEMA = StructType([
    StructField("key", StringType()), StructField("arrival_seq", LongType()),
    StructField("event_time_ms", LongType()), StructField("event_time", TimestampType()),
    StructField("watermark_ms", LongType()), StructField("ingest_time_ms", LongType()),
    StructField("late_by_ms", LongType()), StructField(EVENT_DATE, DateType())])


def output_schema(spec: PipelineSpec) -> StructType:
    """The output table's columns: the declared ones, the identity, the day partition."""
    return StructType([*(StructField(c.name, _TYPES[c.type]) for c in spec.output),
                       StructField("key", StringType()), StructField("emission", LongType()),
                       StructField(OUTPUT_DATE, DateType())])
