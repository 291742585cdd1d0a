"""What the UI shows about each table before anything runs: description, owners, kinds, group,
column schema and where it lives.

Paths come from the ``PLATFORM_*`` environment at load time (the same defaults the
``platform`` resource uses); each materialisation records the path it actually wrote too, in
case the resource was configured differently for that run.
"""

from __future__ import annotations

from dagster import AssetKey, MetadataValue
from pyspark.sql.types import StructType

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.enrichment import DEAD_LETTERS, ENRICHED, RESPONSES
from platform_defs import schemas

OWNERS = ["team:data-platform"]
DELTA_KINDS = {"spark", "delta"}


def load_settings() -> PlatformSettings:
    """The settings the definitions are built from (``PLATFORM_*``); a wrong one fails the
    code location's load with the message naming it."""
    return PlatformSettings.from_env(check=False)


def _fixed_schema(name: str) -> StructType:
    return {
        tables.ARRIVAL_LOG: tables.ARRIVAL_LOG_SCHEMA,
        tables.QUARANTINE: tables.QUARANTINE_SCHEMA,
        tables.LATE_RECORDS: tables.LATE_RECORDS_SCHEMA,
        tables.LATE_DATA_METRICS: schemas.METRICS_SCHEMA,
        tables.BATCH_METRICS: schemas.BATCH_METRICS_SCHEMA,
        tables.WINDOW_ASSIGNMENTS: tables.WINDOW_ASSIGNMENTS_SCHEMA,
        RESPONSES: schemas.RESPONSES_SCHEMA,
        ENRICHED: schemas.ENRICHED_SCHEMA,
        DEAD_LETTERS: schemas.DEAD_LETTERS_SCHEMA,
    }[name]


def stream_key(stream: Stream | str, table: str) -> AssetKey:
    """``<stream>/<table>``: a stream's tables, grouped under its name."""
    return AssetKey([stream if isinstance(stream, str) else stream.name, table])


def pipeline_key(pipeline: Pipeline | str, table: str) -> AssetKey:
    """``<pipeline>/<table>``: a pipeline's tables, grouped under its name."""
    return AssetKey([pipeline if isinstance(pipeline, str) else pipeline.name, table])


def table_path_metadata(path: str) -> dict:
    """``dagster/uri`` (the UI links it) and a plain ``table_path`` for the Delta folder."""
    return {"dagster/uri": MetadataValue.path(path), "table_path": MetadataValue.path(path)}


def spec_metadata(name: str, path: str, schema: StructType | None = None) -> dict:
    """Definition-time metadata of a table asset: schema, name, storage kind and path."""
    return {
        "dagster/column_schema": schemas.table_schema(schema or _fixed_schema(name)),
        "dagster/table_name": name,
        **table_path_metadata(path),
    }

