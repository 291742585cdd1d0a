"""Streams: where records come from, ingested once into their own arrival log and quarantine.

A stream is described once, in ``<PLATFORM_STREAMS>/<name>.yaml``; every pipeline that reads it
names it (``source: events``). Its watermark strategy belongs to it, as in Flink, where the
strategy is assigned at the source: ingest computes each record's watermark once and records
it in the arrival log, so however many pipelines read the stream, their tables are functions of
one log. Today a stream is a landing folder of JSON-lines files (``kind: landing``)::

    kind: landing                 # the only kind so far
    landing: s3a://bucket/events  # optional; default <PLATFORM_LANDING>/<name>
    description: Clicks from the web collectors   # optional, in words
    watermark:                    # how ingest computes the watermark (docs/operators.md)
      strategy: bounded_out_of_orderness
      max_out_of_orderness: 5s
      idle_timeout: 1m

Each stream's tables live under ``<warehouse>/streams/<name>/``: ``arrival_log``,
``quarantine``, the ingest log (``_ingest``) and the live stream's checkpoints
(``_checkpoints``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from jobs import storage, tables
from jobs.errors import SettingsError
from operators.pipeline import PipelineConfigError, WatermarkSpec, parse_watermark

if TYPE_CHECKING:
    from jobs.settings import PlatformSettings

STREAM_TABLES = (tables.ARRIVAL_LOG, tables.QUARANTINE)
"""The tables a stream's ingest writes (every other table belongs to a pipeline)."""


class StreamSpec(BaseModel):
    """A stream's description, as its file gives it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["landing"] = "landing"
    landing: str | None = None
    """A folder or a Hadoop URI; default ``<PLATFORM_LANDING>/<name>``."""
    description: str | None = None
    watermark: WatermarkSpec

    @field_validator("watermark", mode="before")
    @classmethod
    def _watermark(cls, value: Any) -> Any:
        if isinstance(value, WatermarkSpec):
            return value
        try:
            return parse_watermark(value)
        except PipelineConfigError as error:
            raise ValueError(str(error)) from None

    @field_validator("landing")
    @classmethod
    def _landing(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not storage.is_uri(value) and not Path(value).is_absolute():
            raise ValueError(f"must be an absolute folder or a URI (s3a://, gs://, abfss://, "
                             f"hdfs://), got {value!r}")
        return storage.normalise(value)


def describe_errors(error: ValidationError) -> str:
    """A description's validation errors, one per problem, each naming its setting."""
    messages = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "is not a setting"
        elif problem["type"] == "missing":
            message = "is required"
        elif problem["type"] == "literal_error":
            message = f"{message}; got {problem.get('input')!r}"
        if message.startswith(f"{where}"):
            messages.append(message)  # the watermark's own messages name the setting
        else:
            messages.append(f"{where}: {message}" if where else message)
    return "; ".join(messages)


@dataclass(frozen=True, eq=False)
class Stream:
    """One stream of the platform: its name, description, file, and where its data lives."""

    name: str
    spec: StreamSpec
    path: str
    """The description file."""
    settings: PlatformSettings

    @property
    def watermark(self) -> WatermarkSpec:
        return self.spec.watermark

    @property
    def landing(self) -> str:
        """The landing folder (a local folder or a URI)."""
        return self.spec.landing or storage.join(self.settings.landing, self.name)

    @property
    def landing_dir(self) -> Path:
        """The landing folder on this machine's disk (a ``SettingsError`` for a remote one)."""
        try:
            return storage.local_path(self.landing)
        except ValueError:
            raise SettingsError(f"{self.path}: landing ({self.landing}) is not a local folder; "
                                "this step reads it from the local disk") from None

    @property
    def folder(self) -> str:
        """``<warehouse>/streams/<name>``: the stream's tables, ingest log and checkpoints."""
        return storage.join(self.settings.warehouse, "streams", self.name)

    def table_path(self, table: str) -> str:
        """A table of the stream's: its arrival log and quarantine (ingest), or tables
        derived from the log as a whole (the enrichment's)."""
        return self.settings.table_path(storage.join("streams", self.name, table))

    @property
    def arrival_log(self) -> str:
        return self.table_path(tables.ARRIVAL_LOG)

    @property
    def quarantine(self) -> str:
        return self.table_path(tables.QUARANTINE)

    @property
    def checkpoints(self) -> str:
        """Where the stream's live checkpoints are (one per set of pipelines)."""
        return storage.join(self.folder, "_checkpoints")


def parse_stream(raw: Any, path: str) -> StreamSpec:
    """A stream description read from ``path``; errors name the file and the setting."""
    if not isinstance(raw, dict):
        raise PipelineConfigError(f"{path}: a stream description must be a mapping, got "
                                  f"{type(raw).__name__}")
    try:
        return StreamSpec.model_validate(raw)
    except ValidationError as error:
        raise PipelineConfigError(f"{path}: {describe_errors(error)}") from None
