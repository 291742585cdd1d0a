"""What the UI shows about each table before anything runs: description, owners, kinds, group,
column schema and where it lives.

Paths come from the ``PLATFORM_*`` environment at load time (the same defaults the
``platform`` resource uses); each materialisation records the path it actually wrote too, in
case the resource was configured differently for that run.
"""

from dagster import MetadataValue
from pyspark.sql.types import StructType

from jobs import tables
from jobs.enrichment import DEAD_LETTERS, ENRICHED, RESPONSES
from jobs.settings import PlatformSettings, SettingsError
from platform_defs import schemas

OWNERS = ["team:data-platform"]
DELTA_KINDS = {"spark", "delta"}


def _load_settings() -> PlatformSettings | None:
    try:
        return PlatformSettings.from_env(check=False)
    except SettingsError:
        return None  # the resource reports the wrong setting when a run starts


_SETTINGS = _load_settings()

SCHEMAS: dict[str, StructType] = {
    tables.ARRIVAL_LOG: tables.ARRIVAL_LOG_SCHEMA,
    tables.QUARANTINE: tables.QUARANTINE_SCHEMA,
    tables.WINDOW_RESULTS: schemas.results_schema(_SETTINGS.pipeline if _SETTINGS else None),
    tables.LATE_RECORDS: tables.LATE_RECORDS_SCHEMA,
    tables.LATE_DATA_METRICS: schemas.METRICS_SCHEMA,
    tables.BATCH_METRICS: schemas.BATCH_METRICS_SCHEMA,
    tables.WINDOW_ASSIGNMENTS: tables.WINDOW_ASSIGNMENTS_SCHEMA,
    RESPONSES: schemas.RESPONSES_SCHEMA,
    ENRICHED: schemas.ENRICHED_SCHEMA,
    DEAD_LETTERS: schemas.DEAD_LETTERS_SCHEMA,
}


def table_path_metadata(settings: PlatformSettings | None, name: str) -> dict:
    """``dagster/uri`` (the UI links it) and a plain ``table_path`` for the Delta folder."""
    if settings is None:
        return {}
    path = settings.table_path(name)
    return {"dagster/uri": MetadataValue.path(path), "table_path": MetadataValue.path(path)}


def spec_metadata(name: str) -> dict:
    """Definition-time metadata of a table asset: schema, name, storage kind and path."""
    return {
        "dagster/column_schema": schemas.table_schema(SCHEMAS[name]),
        "dagster/table_name": name,
        **table_path_metadata(_SETTINGS, name),
    }
