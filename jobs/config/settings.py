"""Every setting of the platform, in one typed model read from ``PLATFORM_*`` variables.

One model, validated up front, so that a wrong path, bound or threshold fails with one message
naming the variable before any data is touched. The command line and the tests build it from
the environment (:meth:`PlatformSettings.from_env`); the Dagster ``platform`` resource builds
it with the fields a deployment overrides. Nothing else in the project reads ``PLATFORM_*``
variables.

Locations (home, warehouse, landing) are local folders or Hadoop filesystem URIs
(jobs.store.storage). Local ones are checked here (a folder, writable or creatable); remote ones
are checked by the first job that reaches them.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from zoneinfo import ZoneInfo

from pydantic import (
    BeforeValidator,
    Field,
    HttpUrl,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from jobs.config.errors import SettingsError
from jobs.store import storage
from operators.time import parse_duration_ms

PROJECT = Path(__file__).resolve().parents[2]
DEFAULT_PIPELINES = PROJECT / "pipelines"
DEFAULT_STREAMS = PROJECT / "streams"
DAY_MS = 86_400_000
T = TypeVar("T")


def _duration(value: Any) -> Any:
    if isinstance(value, str | int) and not isinstance(value, bool):
        try:
            return parse_duration_ms(value, setting="")
        except ValueError as error:
            raise ValueError(str(error).removeprefix(": ")) from None
    return value


_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\s*\d+)?\])?|local-cluster\[[^]]+\]"
                     r"|(spark|k8s|mesos)://\S+|yarn)$")
"""Spark master URLs; anything else fails late, inside Spark, with a JVM message."""

Duration = Annotated[int, BeforeValidator(_duration)]
"""Milliseconds; ``"10s"``, ``"5m"``, ``"1d"`` or a number of ms."""


class PlatformSettings(BaseSettings):
    """The platform's settings. Field docs say what each does; the variable is
    ``PLATFORM_<NAME>`` (docs/settings.md, generated from these fields)."""

    model_config = SettingsConfigDict(env_prefix="PLATFORM_", frozen=True, extra="ignore",
                                      populate_by_name=True, validate_default=True)

    # -- where the data lives -------------------------------------------------------------------
    home: str = Field(".platform",
                      description="Root of everything the platform writes locally "
                                  "(<project>/.platform under ./platform)")
    warehouse: str = Field("",
                           description="Delta tables and the live jobs' checkpoints; a folder "
                                       "or a Hadoop URI such as s3a://bucket/warehouse "
                                       "(docs/operations.md, 'Object stores')")
    landing: str = Field("",
                         description="Landing folders, one per stream: "
                                     "<landing>/<stream>/<source_partition>/*.jsonl (a "
                                     "stream's description may name its own); a folder or a "
                                     "URI (s3a://, gs://, abfss://, hdfs://)")
    pipelines: str = Field(str(DEFAULT_PIPELINES),
                           description="Folder of pipeline descriptions, one file each, the "
                                       "pipeline's name its stem: source, window, trigger, "
                                       "lateness, aggregates "
                                       "(docs/streams-and-pipelines.md)")
    streams: str = Field(str(DEFAULT_STREAMS),
                         description="Folder of stream descriptions, one file each, the "
                                     "stream's name its stem: kind, landing folder, watermark "
                                     "strategy")
    # -- ingest ---------------------------------------------------------------------------------
    ingest_clock: str = Field("field:received_at",
                              description="Where ingest_time comes from: 'field:<name>', the "
                                          "time the landing collector stamped on each line, "
                                          "or 'wall', the clock when ingest reads it")
    max_future_ms: Duration = Field(DAY_MS, gt=0, validation_alias="PLATFORM_MAX_FUTURE",
        description="Events more than this after their ingest time are quarantined "
                    "(reason too_far_in_future)")
    max_past_ms: Duration = Field(3_650 * DAY_MS, gt=0, validation_alias="PLATFORM_MAX_PAST",
        description="Events more than this before their ingest time are quarantined "
                    "(reason too_far_in_past)")
    max_line_bytes: int = Field(1_000_000, gt=0,
        description="Landing lines longer than this many bytes are quarantined "
                    "(line_too_long), never parsed")
    landing_settle_ms: Duration = Field(60_000, gt=0, validation_alias="PLATFORM_LANDING_SETTLE",
        description="A file without a final newline that changed more recently than this "
                    "may still be being written: ingest leaves it for later")
    ingest_reader: Literal["auto", "driver", "spark"] = Field("auto",
        description="Who reads and parses landing files: 'driver' (this process), 'spark' "
                    "(the executors), or 'auto': the executors for a batch of at least "
                    "PLATFORM_INGEST_SPARK_MIN_BYTES from an object store on a cluster")
    ingest_spark_min_bytes: int = Field(64 << 20, ge=0,
        description="Smallest batch 'auto' hands to the executors (smaller ones are read "
                    "faster by the driver than a Spark job starts)")
    ingest_processes: Literal["auto"] | Annotated[int, Field(ge=0)] = Field("auto",
        description="Workers the driver reader parses a batch's files in (processes or "
                    "threads: PLATFORM_INGEST_PARSE_WORKERS): a number, 0 (parse in the "
                    "ingest thread), or 'auto' (one per core, at most 4)")
    ingest_parse_workers: Literal["auto", "threads", "processes"] = Field("auto",
        description="What the driver reader's parse workers are: 'threads' of the ingest "
                    "process, worker 'processes' (off its interpreter lock), or 'auto': "
                    "threads where the native scanner parses (outside the lock), processes "
                    "where it is not built or turned off")
    ingest_processes_min_bytes: int = Field(8 << 20, ge=0,
        description="Smallest batch (of two or more files) parsed by parse workers (a "
                    "smaller one is parsed faster in the ingest thread than its files are "
                    "handed out)")
    native_scan: bool = Field(True,
        description="Landing lines are scanned by the native scanner (native/landing_scan, "
                    "built by ./platform setup) where it is built; false: decoded by msgspec "
                    "alone, with the same rows, more slowly")
    # -- partitions and time ----------------------------------------------------------------------
    time_zone: str = Field("UTC",
                           description="Time zone of the daily partitions")
    partitions_start: date = Field(date(2026, 1, 1),
        description="First daily partition in Dagster")
    # -- the engine -----------------------------------------------------------------------------
    spark_master: str = Field("local[2]",
        description="Spark master URL: local[N], spark://host:port, yarn, k8s://...")
    # NoDecode: the variable is JSON *or* key=value lines, parsed by _conf, not as JSON first
    spark_conf: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict,
        description="Extra Spark and Delta settings: a JSON object, or key=value items "
                    "separated by newlines or commas (a value holding commas needs the JSON "
                    "form)")
    spark_defaults: str = Field("",
        description="A spark-defaults.conf style file of settings (PLATFORM_SPARK_CONF wins)")
    shuffle_partitions: int = Field(4, ge=1,
        description="spark.sql.shuffle.partitions (also the live stream's state partitions)")
    live_engine: Literal["auto", "live", "backfill"] = Field("auto",
        description="How the landing sensor's run updates the windowed tables after ingest: "
                    "'live' (= 'auto': the live job, AvailableNow) or 'backfill' (the "
                    "days it touched)")
    # -- pipeline versions ----------------------------------------------------------------------
    versions_retention_ms: Duration = Field(7 * DAY_MS, gt=0,
        validation_alias="PLATFORM_VERSIONS_RETENTION",
        description="How long a pipeline version's tables are kept after readers switched "
                    "away from it (restoring its file within that time switches back at once)")
    rollout_max_files_per_trigger: int = Field(20, ge=1,
        description="Arrival-log files per micro-batch of a new pipeline version catching up "
                    "inside the long-running job (smaller: less in the way of the live "
                    "versions; larger: a faster rollout)")
    # -- Dagster automation and monitoring ------------------------------------------------------
    landing_grace_seconds: float = Field(300.0, ge=0,
        description="Seconds before the newest landing file seen within which the landing "
                    "sensor still takes an older file as new (files that land out of order "
                    "of modification time); it remembers the files of that window")
    finality_lookback_days: int = Field(3, ge=1,
        description="Recent days the finality schedule re-materialises once final")
    finality_cron: str = Field("*/15 * * * *",
        description="When the finality schedule runs")
    late_rate_warn: float = Field(0.05, ge=0,
        description="Share of a day's (record, window) pairs dropped as too late (past "
                    "allowed lateness) above which the dropped_late_rate check warns")
    late_rate_error: float = Field(0.20, ge=0,
        description="... above which it fails")
    quarantine_rate_warn: float = Field(0.02, ge=0,
        description="Share of a day's landed lines quarantined above which the "
                    "quarantine_rate check warns")
    quarantine_rate_error: float = Field(0.10, ge=0,
        description="... above which it fails")
    watermark_lag_warn_ms: float = Field(30 * 60_000, ge=0,
        description="A day's maximum watermark lag (ingest time - watermark), in "
                    "milliseconds, above which the watermark_lag check warns")
    watermark_lag_error_ms: float = Field(3 * 3_600_000, ge=0,
        description="... above which it fails")
    enrichment_url: str = Field("http://127.0.0.1:8765",
        description="The enrichment service's base URL")

    _derived: dict[str, Any] = PrivateAttr(default_factory=dict)

    # -- validation of single fields ------------------------------------------------------------

    @field_validator("home", "warehouse", "landing", "pipelines", "streams", "spark_defaults")
    @classmethod
    def _location(cls, value: str) -> str:
        return storage.normalise(value) if value else value

    @field_validator("ingest_clock")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not (value == "wall" or (value.startswith("field:") and len(value) > 6)):
            raise ValueError(f"must be 'wall' or 'field:<name>', got {value!r}")
        return value

    @field_validator("finality_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        """Checked here, not first at Dagster's load: the grammar Dagster's schedules accept
        (croniter's, five fields, no 30th or 31st of February)."""
        from croniter import croniter

        fields = croniter.expand(value)[0] if croniter.is_valid(value) else []
        if len(fields) != 5 or (fields[3] == [2] and len(fields[2]) == 1
                                and fields[2][0] in (30, 31)):
            raise ValueError(f"{value!r} is not a cron schedule of five fields "
                             "(minute hour day-of-month month day-of-week, e.g. '*/15 * * * *')")
        return value

    @field_validator("enrichment_url")
    @classmethod
    def _url(cls, value: str) -> str:
        """Pydantic's own URL check; the value is kept as written (``HttpUrl`` would add a
        trailing slash)."""
        try:
            TypeAdapter(HttpUrl).validate_python(value)
        except ValidationError:
            raise ValueError(f"{value!r} is not an http:// or https:// URL with a host "
                             "(e.g. http://127.0.0.1:8765)") from None
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except Exception:
            raise ValueError(f"{value!r} is not a time zone") from None
        return value

    @field_validator("spark_master")
    @classmethod
    def _master(cls, value: str) -> str:
        if value.startswith("sc://"):
            raise ValueError(
                "Spark Connect (sc://...) is not supported: the jobs use Delta's DeltaTable API, "
                "the JVM's Hadoop FileSystem and transformWithState's state store, and Delta's "
                "Connect server plugin (io.delta:delta-connect-server) is not on Maven Central for "
                "delta-spark 4.4 on Spark 4.2; use "
                "the cluster's master URL instead (spark://host:port, yarn, k8s://...), "
                "docs/operations.md, 'Running on a cluster'")
        if not _MASTER.match(value):
            raise ValueError(f"{value!r} is not a Spark master URL: local, local[N], local[*], "
                             "spark://host:port, yarn or k8s://...")
        return value

    @field_validator("spark_conf", mode="before")
    @classmethod
    def _conf(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_conf(value)
        return value

    @model_validator(mode="after")
    def _thresholds(self) -> PlatformSettings:
        """A warn threshold above its error threshold would never warn before failing."""
        for name in ("late_rate", "quarantine_rate", "watermark_lag"):
            suffix = "_ms" if name == "watermark_lag" else ""
            warn = getattr(self, f"{name}_warn{suffix}")
            error = getattr(self, f"{name}_error{suffix}")
            if warn > error:
                variable = f"PLATFORM_{name.upper()}"
                raise ValueError(f"{variable}_WARN{suffix.upper()} ({warn}) is above "
                                 f"{variable}_ERROR{suffix.upper()} ({error}): it could never "
                                 "warn before the check fails")
        return self

    # -- derived values -------------------------------------------------------------------------

    def model_post_init(self, context: Any) -> None:
        home = self.home
        if not self.warehouse:
            object.__setattr__(self, "warehouse", storage.join(home, "warehouse"))
        if not self.landing:
            object.__setattr__(self, "landing", storage.join(home, "landing"))

    def derived(self, name: str, build: Callable[[], T]) -> T:
        """``build()``, once for these settings: what the layers above compute from them alone
        (the registry's reading of the description folders,
        :func:`jobs.config.registry.platform_of`) is kept as long as the settings are, without
        the settings knowing what it is."""
        if name not in self._derived:
            self._derived[name] = build()
        return self._derived[name]

    def spark_settings(self) -> dict[str, str]:
        """Extra Spark settings: the spark-defaults file's, then ``PLATFORM_SPARK_CONF``'s."""
        merged: dict[str, str] = {}
        if self.spark_defaults:
            try:
                text = Path(self.spark_defaults).read_text(encoding="utf-8")
            except OSError as error:
                raise SettingsError(f"PLATFORM_SPARK_DEFAULTS ({self.spark_defaults}): "
                                    f"{error.strerror or error}") from None
            merged.update(parse_defaults_file(text))
        merged.update(self.spark_conf)
        return merged

    # -- paths ----------------------------------------------------------------------------------

    def table_path(self, name: str) -> str:
        """Location of a Delta table; names are ours, never user input, but check anyway."""
        return self.inside_warehouse(storage.join(self.warehouse, name), f"table {name!r}")

    def inside_warehouse(self, location: str | Path, setting: str) -> str:
        """``location`` normalised, or a :class:`SettingsError` naming ``setting`` if it lies
        outside the warehouse (a configured path must never reach other files)."""
        text = str(location)
        if not storage.is_uri(text) and not Path(text).is_absolute() \
                and storage.is_uri(self.warehouse):
            text = storage.join(self.warehouse, text)
        if not storage.is_inside(text, self.warehouse):
            raise SettingsError(f"{setting} ({location}) would escape the warehouse "
                                f"{self.warehouse}; give a path inside it")
        normal = storage.normalise(text)
        return str(Path(normal).resolve()) if storage.is_local(normal) else normal

    def check(self) -> PlatformSettings:
        """Check what can be checked before Spark starts: local folders exist or can be
        created, the landing folder is not inside the warehouse, the Spark settings read. The
        streams and pipelines are checked when they are loaded
        (:func:`jobs.config.registry.platform_of`)."""
        for setting, location in (("PLATFORM_HOME", self.home),
                                  ("PLATFORM_WAREHOUSE", self.warehouse),
                                  ("PLATFORM_LANDING", self.landing)):
            if storage.is_local(location):
                _check_folder(setting, Path(location))
        if self.landing == self.warehouse or storage.is_inside(self.landing, self.warehouse):
            raise SettingsError(f"PLATFORM_LANDING ({self.landing}) must not be inside "
                                f"PLATFORM_WAREHOUSE ({self.warehouse}): ingest would read the "
                                "tables' own files as landing files")
        self.spark_settings()
        return self

    def to_env(self) -> dict[str, str]:
        """Every setting as its ``PLATFORM_*`` variable: what a subprocess (a Dagster Pipes
        job) needs to see the very same settings."""
        variables = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if value in (None, "", {}):
                continue
            text = json.dumps(value) if isinstance(value, dict) else str(value)
            variables[f"PLATFORM_{variable_of(name)}"] = text
        return variables

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                   dotenv_settings, file_secret_settings):
        """Only the values :meth:`from_env` hands over: it reads the variables itself (from
        the mapping it is given), so pydantic-settings must not read the process environment
        a second time, where its own JSON decoding of ``PLATFORM_SPARK_CONF`` fails with a
        message that names no variable."""
        return (init_settings,)

    @classmethod
    def variable_names(cls) -> list[str]:
        """Every setting's variable without ``PLATFORM_``: ``HOME``, ``MAX_FUTURE``, ..."""
        return [variable_of(name) for name in cls.model_fields]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, check: bool = True,
                 **overrides: Any) -> PlatformSettings:
        """The settings from ``env`` (default: the process environment) and field
        ``overrides``; a :class:`SettingsError` names the wrong one. ``check=False`` validates
        the values only (no folder is looked at): what a Dagster code
        location needs when it loads."""
        source = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            variable = f"PLATFORM_{variable_of(name)}"
            if source.get(variable) not in (None, ""):
                values[name] = source[variable]
        values.update({k: v for k, v in overrides.items() if v not in (None, "")})
        try:
            settings = cls.model_validate(values)
        except ValidationError as error:
            raise SettingsError(describe(error)) from None
        return settings.check() if check else settings


def variable_of(field_name: str) -> str:
    """``max_future_ms`` -> ``MAX_FUTURE``: the variable's name (without ``PLATFORM_``)."""
    alias = PlatformSettings.model_fields[field_name].validation_alias
    return str(alias or field_name).removeprefix("PLATFORM_").upper()


def is_duration(field_name: str) -> bool:
    """Whether the setting is a :data:`Duration` (written ``10s``, ``5m``, ``1d``)."""
    metadata = PlatformSettings.model_fields[field_name].metadata
    return any(isinstance(item, BeforeValidator) and item.func is _duration
               for item in metadata)


def describe(error: ValidationError) -> str:
    """A pydantic error as one line per problem, each naming the variable. A setting that
    takes one of several forms (``auto`` or a number) gets one line saying every form it
    takes, not a line per form that the value is not."""
    lines: list[tuple[str, bool]] = []  # (message, or the setting's name; is it a name)
    forms: dict[str, list[str]] = {}
    given_to: dict[str, Any] = {}
    for problem in error.errors():
        location = problem.get("loc") or ()
        if not location:  # a check across fields: its message names them
            lines.append((problem.get("msg", "invalid").removeprefix("Value error, "), False))
            continue
        name = str(location[0])
        if name in PlatformSettings.model_fields:
            name = f"PLATFORM_{variable_of(name)}"
        if name not in forms:
            lines.append((name, True))  # the setting's place, in pydantic's order
        forms.setdefault(name, []).append(
            problem.get("msg", "invalid").removeprefix("Value error, "))
        given_to[name] = problem.get("input")
    return "; ".join(_setting_line(text, forms[text], given_to[text]) if is_setting
                     else text for text, is_setting in lines)


_SHOULD_BE = "Input should be "


def _as_form(bound: str) -> str:
    """``greater than or equal to 0`` -> ``a number greater than or equal to 0``: a bound
    read as one of a setting's forms."""
    return f"a number {bound}" if bound.startswith(("greater than", "less than")) else bound


def _setting_line(name: str, messages: list[str], given: Any) -> str:
    """``NAME: message (got value)``; the messages of a union's forms joined by "or"
    (``Input should be 'auto' or a valid integer``)."""
    if len(messages) > 1 and all(m.startswith(_SHOULD_BE) for m in messages):
        alternatives = [_as_form(m.removeprefix(_SHOULD_BE).split(", unable to ")[0])
                        for m in messages]
        message = _SHOULD_BE + " or ".join(dict.fromkeys(alternatives))
    else:
        message = " and ".join(dict.fromkeys(messages))
    shown = isinstance(given, dict) or repr(given) in message
    return f"{name}: {message}" if shown else f"{name}: {message} (got {given!r})"


def parse_conf(text: str) -> dict[str, str]:
    """``PLATFORM_SPARK_CONF``: a JSON object, or ``key=value`` items separated by newlines
    or commas."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not a JSON object: {error.msg} at column {error.colno}") from None
        if not isinstance(parsed, dict):
            raise ValueError("must be a JSON object of setting -> value")
        return {str(k): str(v) for k, v in parsed.items()}
    result = {}
    for item in text.replace(",", "\n").splitlines():
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected key=value, got {item!r} (commas and newlines separate "
                             "items; for a value holding commas give a JSON object, "
                             '{"spark.jars.packages": "a:b:1,c:d:2"})')
        result[key.strip()] = value.strip()
    return result


def parse_defaults_file(text: str) -> dict[str, str]:
    """A ``spark-defaults.conf``: ``key value`` (or ``key=value``) per line, ``#`` comments."""
    result = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.replace("=", " ", 1).split(None, 1)
        if len(parts) != 2:
            raise SettingsError(f"PLATFORM_SPARK_DEFAULTS line {number}: expected 'key value', "
                                f"got {line!r}")
        result[parts[0]] = parts[1].strip()
    return result


def _check_folder(setting: str, path: Path) -> None:
    """The folder exists or can be created: not a file, and its nearest existing ancestor is
    a writable folder."""
    if path.exists():
        if not path.is_dir():
            raise SettingsError(f"{setting} ({path}) is a file, not a folder")
        if not _writable(path):
            raise SettingsError(f"{setting} ({path}) is not writable")
        return
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SettingsError(f"{setting} ({path}) cannot be created: {ancestor} is a file")
    if not _writable(ancestor):
        raise SettingsError(f"{setting} ({path}) cannot be created: {ancestor} is not "
                            "writable")


def _writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder``, found by creating (and removing) one:
    permission bits say nothing for root, a read-only mount or a pseudo filesystem."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".platform-probe-"):
            return True
    except OSError:
        return False
