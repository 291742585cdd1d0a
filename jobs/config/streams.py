"""A stream's description: where its records come from and its watermark strategy, and where
its tables live. (What ingests it is jobs.streams.)

A stream is described once, in ``<PLATFORM_STREAMS>/<name>.yaml``; every pipeline that reads it
names it (``source: events``). Its watermark strategy belongs to it, as in Flink, where the
strategy is assigned at the source: ingest computes each record's watermark once and records
it in the arrival log, so however many pipelines read the stream, their tables are functions of
one log. A stream is a landing folder of JSON-lines files (``kind: landing``) or Kafka topics
(``kind: kafka``, :class:`KafkaSettings`)::

    kind: landing                 # or kafka (with a kafka: section instead of landing:)
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
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from jobs import tables
from jobs.config.errors import SettingsError
from jobs.store import storage
from operators.pipeline import PipelineConfigError, WatermarkSpec, parse_watermark

if TYPE_CHECKING:
    from jobs.config.settings import PlatformSettings

STREAM_TABLES = (tables.ARRIVAL_LOG, tables.QUARANTINE)
"""The tables a stream's ingest writes (every other table belongs to a pipeline)."""


MAX_BYTES_PER_BATCH = 64 * 2**20
"""A landing stream's default ``max_bytes_per_batch`` (64 MiB): about 700,000 lines of
bench_live's events, a few seconds of ingest on two cores (benchmarks/history.md)."""
MAX_BYTES_PER_MICRO_BATCH = 64 * 2**20
"""A stream's default ``max_bytes_per_micro_batch`` (64 MiB of the arrival log's files): about
2 million records of bench_live's, a few seconds of the stream at its ceiling. A file limit
alone bounds nothing, since each file is an ingest batch: a version catching up (20 files a
trigger, ``rollout_max_files_per_trigger``) took 3-5 million records a micro-batch, and a
session pipeline's, which emits a row per record, once held more than 1 GiB of output in one
Arrow buffer: the JVM ran out of heap in the sink's collect, and the same offsets would have
failed again on every restart (benchmarks/history.md)."""

_SECRET_WORDS = ("password", "secret", "jaas", "token", "key.password", "ssl.key")


class KafkaSettings(BaseModel):
    """Where a Kafka stream's records come from and how its records read
    (docs/streams-and-pipelines.md, "Kafka streams")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str
    """``host:port[,host:port...]``, or ``${VARIABLE}``: taken from the environment."""
    topics: tuple[str, ...]
    key: Literal["field", "record_key"] = "field"
    """The event's key: the value's ``key`` field, or the Kafka record's key."""
    event_time: Literal["field", "record_timestamp"] = "field"
    """The event's time: the value's ``event_time`` field, or the Kafka record's timestamp."""
    client: dict[str, str] = {}
    """Kafka client settings (``security.protocol``, ``sasl.mechanism``, ...), no secrets."""
    secrets: dict[str, str] = {}
    """Client settings whose values are secret: setting -> the environment variable holding
    it (never the value itself, never in a file)."""
    accept_data_loss: bool = False
    """Offsets that retention deleted before they were read: stop (``false``), or record the
    gap (one quarantine row per partition and gap, counted) and go on."""
    max_records_per_batch: PositiveInt = 500_000
    """At most this many records per ingest batch, shared among the partitions that have some
    (as Spark's ``maxOffsetsPerTrigger``): a stream far behind its topic catches up in batches
    of bounded size instead of reading the whole backlog into one. A batch ends where the
    partitions it left records of could go on in the arrival order (jobs.streams.batch_cut),
    so the arrival log is the same however the backlog is batched."""

    @field_validator("topics", mode="before")
    @classmethod
    def _topics(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if not value:
            raise ValueError("name at least one topic")
        return value

    @field_validator("client")
    @classmethod
    def _no_secret_in_client(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if any(word in name.lower() for word in _SECRET_WORDS):
                raise ValueError(f"{name!r} holds a secret: put it under secrets as "
                                 f"{name}: <ENVIRONMENT_VARIABLE>, never in the file")
        return value

    @field_validator("secrets")
    @classmethod
    def _secrets_are_variables(cls, value: dict[str, str]) -> dict[str, str]:
        for name, variable in value.items():
            if not variable.isidentifier() or variable.upper() != variable:
                raise ValueError(f"secrets.{name} must name an environment variable (upper "
                                 f"case, e.g. KAFKA_PASSWORD), got {variable!r}")
        return value

    def servers(self) -> str:
        """The bootstrap servers, a ``${VARIABLE}`` read from the environment."""
        text = self.bootstrap_servers.strip()
        if text.startswith("${") and text.endswith("}"):
            import os

            name = text[2:-1]
            value = os.environ.get(name)
            if not value:
                raise SettingsError(f"kafka.bootstrap_servers names ${{{name}}}, which is not "
                                    "set in the environment")
            return value
        return text

    def client_settings(self) -> dict[str, str]:
        """The client settings with the secrets read from their variables."""
        import os

        settings = dict(self.client)
        for name, variable in self.secrets.items():
            value = os.environ.get(variable)
            if value is None:
                raise SettingsError(f"kafka.secrets.{name} names {variable}, which is not set "
                                    "in the environment")
            settings[name] = value
        return settings


class StreamSpec(BaseModel):
    """A stream's description, as its file gives it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["landing", "kafka"] = "landing"
    landing: str | None = None
    """A folder or a Hadoop URI; default ``<PLATFORM_LANDING>/<name>`` (landing streams)."""
    kafka: KafkaSettings | None = None
    """Where a Kafka stream's records come from (``kind: kafka``)."""
    max_bytes_per_batch: Annotated[ByteSize, Field(gt=0)] = ByteSize(MAX_BYTES_PER_BATCH)
    """A landing stream's ingest batch takes at most this many new landing bytes (at least one
    file, and the file of the earliest stamped line it would leave), the files that landed first
    first (as Spark's ``maxBytesPerTrigger``): a stream far behind its folder catches up in
    batches of bounded size, and the live stage gets each batch while ingest reads the next,
    instead of one batch of the whole backlog. A batch ends where the partitions it left bytes
    of could go on in the arrival order (jobs.streams.landing.cut)."""
    max_bytes_per_micro_batch: Annotated[ByteSize, Field(gt=0)] = \
        ByteSize(MAX_BYTES_PER_MICRO_BATCH)
    """A live micro-batch of the stream's pipelines reads at most this many bytes of the
    arrival log's files (at least one file; Spark's ``maxBytesPerTrigger``). Larger: fewer
    micro-batches for a stream behind, each with more output held at once."""
    description: str | None = None
    watermark: WatermarkSpec

    @model_validator(mode="after")
    def _kind_has_its_settings(self) -> StreamSpec:
        if self.kind == "kafka" and self.kafka is None:
            raise ValueError("kafka: is required for kind: kafka (bootstrap_servers, topics)")
        if self.kind == "kafka" and self.landing is not None:
            raise ValueError("landing: belongs to kind: landing, not kafka")
        if self.kind == "landing" and self.kafka is not None:
            raise ValueError("kafka: belongs to kind: kafka (set kind: kafka)")
        if self.kind == "kafka" and "max_bytes_per_batch" in self.model_fields_set:
            raise ValueError("max_bytes_per_batch belongs to kind: landing; a Kafka stream's "
                             "batches are bounded by kafka.max_records_per_batch")
        return self

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
        elif problem["type"].startswith("byte_size"):  # a size pydantic cannot read
            message = f"{message}; give a size such as 64MiB or 1GB, got {problem.get('input')!r}"
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
    def nothing_yet(self) -> str:
        """What a command says when the stream has given nothing yet."""
        if self.spec.kind == "kafka":
            return f"nothing has come from {self.origin} yet"
        return f"nothing has landed in {self.landing} yet"

    @property
    def origin(self) -> str:
        """Where its records come from, for people: the landing folder, or the topics."""
        if self.spec.kind == "kafka":
            return (f"topics {', '.join(self.spec.kafka.topics)} at "
                    f"{self.spec.kafka.bootstrap_servers}")
        return self.landing

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




