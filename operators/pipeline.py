"""The pipeline description: one file that both the replay command and the Spark jobs read.

Keeping the description engine-independent is what lets a backfill, a live stream and a local
replay be configured identically; every setting is validated here, before any data is touched,
and errors name the setting (``window.size``, ``aggregates[1].fn``).

The sections are pydantic dataclasses: one definition gives the Python objects the runtimes
use (frozen, hashable, with the ``*_ms`` attribute names), the validation of a description,
and a JSON Schema that editors use to check pipeline YAML as it is typed
(``python -m operators.pipeline --json-schema``, docs/operators.md). A setting that does not
belong to its kind (a tumbling window's ``slide``, a count trigger's ``interval``) is refused;
the table of settings per kind that refuses it also writes the schema's rules for it.

The strict rules (required settings per kind, foreign settings, cross-field checks) apply to
a *description* (:func:`parse_pipeline`, :func:`load_pipeline`); Python code constructing a
spec directly (``WindowSpec(type="tumbling", size_ms=60_000)``) gets type checks only, as
before.

Format (YAML or JSON; durations are ms numbers or strings such as ``"10s"``, ``"5m"``)::

    source: events                         # the stream it reads (a platform pipeline; the
                                           # stream's description holds the watermark)
    description: Events per user and minute   # optional, in words
    watermark:                             # only in a standalone description (replay):
      strategy: bounded_out_of_orderness   # or monotonous, punctuated
      max_out_of_orderness: 5s             # bounded_out_of_orderness only
      punctuation_field: is_watermark      # punctuated only: true emits the event's time,
                                           # an integer is the watermark itself
      idle_timeout: 1m                     # optional; per source partition, on the ingest clock
      tick: every_record                   # or an interval such as 200ms (of ingest clock)
    window:
      type: tumbling                       # tumbling | sliding | session | global
      size: 1m                             # tumbling, sliding
      slide: 10s                           # sliding
      gap: 30s                             # session with a static gap
      gap_field: gap_ms                    # session with a dynamic gap read from each event
      offset: 0                            # tumbling, sliding
    trigger:                               # optional; default: the window's default trigger
      type: event_time                     # Flink's: event_time | processing_time | count |
                                           # delta | continuous_event_time |
                                           # continuous_processing_time
      count: 100                           # count
      threshold: 10.0                      # delta
      field: value                         # delta
      interval: 10s                        # continuous_*
      purging: false                       # wrap in a purging trigger
    # or Beam's composable triggers, nested in each other (operators.composable):
    trigger:
      type: after_watermark                # fire when the watermark passes the window's end
      early: {type: after_count, count: 2} # optional: repeatedly before it
      late: {type: after_count, count: 1}  # optional: repeatedly after it (else finished)
      accumulation: accumulating           # top only: accumulating (default) | discarding
    #   {type: after_count, count: 3}      {type: after_processing_time, delay: 5s}
    #   {type: after_any|after_all|after_each, triggers: [...]}
    #   {type: repeatedly, trigger: {...}} {type: or_finally, main: {...}, finally: {...}}
    evictor:                               # optional
      type: count                          # count | time | delta
      max_count: 10                        # count
      keep_time: 10s                       # time
      threshold: 5.0                       # delta
      field: value                         # delta
      evict_after: false                   # evict after the window function instead of before
    allowed_lateness: 0
    aggregates:                            # name: {fn, field}
      - {name: events, fn: count}
      - {name: value_sum, fn: sum, field: value}
      - {name: spread, fn: "mypackage.stats:Spread", field: value}   # operators.user_functions
    version: "2"                           # optional label; see PipelineSpec.version
    effective_from: 2026-11-01             # optional, a changed windowed pipeline: days
                                           # before it keep the replaced version's rows
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.dataclasses import dataclass

from operators.time import parse_duration_ms
from operators.user_functions import is_user_function, load_user_aggregate

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "AggregateSpec",
    "COMPOSABLE_TRIGGER_TYPES",
    "EVICTOR_TYPES",
    "EvictorSpec",
    "FLINK_TRIGGER_TYPES",
    "OUTPUT_TYPES",
    "OutputColumn",
    "PipelineConfigError",
    "PipelineSpec",
    "RESERVED_OUTPUT",
    "TRIGGER_TYPES",
    "TriggerSpec",
    "WATERMARK_STRATEGIES",
    "WINDOW_TYPES",
    "WatermarkSpec",
    "WindowSpec",
    "load_pipeline",
    "main",
    "parse_pipeline",
    "parse_watermark",
    "pipeline_json_schema",
    "read_description",
]


WATERMARK_STRATEGIES = ("bounded_out_of_orderness", "monotonous", "punctuated")
WINDOW_TYPES = ("tumbling", "sliding", "session", "global")
FLINK_TRIGGER_TYPES = (
    "event_time",
    "processing_time",
    "count",
    "delta",
    "continuous_event_time",
    "continuous_processing_time",
)
COMPOSABLE_TRIGGER_TYPES = (
    "after_watermark",
    "after_count",
    "after_processing_time",
    "after_any",
    "after_all",
    "after_each",
    "repeatedly",
    "or_finally",
)
"""Beam's composable triggers (:mod:`operators.composable`); they nest, and only in each other."""
TRIGGER_TYPES = FLINK_TRIGGER_TYPES + COMPOSABLE_TRIGGER_TYPES
EVICTOR_TYPES = ("count", "time", "delta")
AGGREGATE_FUNCTIONS = ("count", "sum", "min", "max", "mean")

_DESCRIPTION = "pipeline description"
"""The validation context key that switches the strict rules on (see the module docs)."""


class PipelineConfigError(ValueError):
    """A setting of the pipeline description is wrong; the message names the setting."""


class _Invalid(ValueError):
    """Raised inside validation: ``message`` has a ``{setting}`` placeholder that becomes the
    full path of ``setting`` (relative to the section being validated) once pydantic has told
    us where that section is."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.setting = setting


def _strict(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get(_DESCRIPTION))


# -- durations ------------------------------------------------------------------------------------

_DURATION_SCHEMA = {"anyOf": [
    {"type": "integer", "description": "milliseconds"},
    {"type": "string", "pattern": r"^\s*-?\d+\s*(ms|s|min|m|h|d)?\s*$",
     "description": "a number with a unit: ms, s, m (or min), h, d; e.g. '10s'"},
]}


def _to_ms(value: Any, minimum: int | None) -> int | None:
    if value is None:
        return None
    try:
        ms = parse_duration_ms(value, setting="{setting}")
    except ValueError as error:
        raise _Invalid(str(error)) from None
    if minimum is not None and ms < minimum:
        raise _Invalid(f"{{setting}} must be at least {minimum} ms, got {ms} ms")
    return ms


def _duration_schema(minimum: int | None) -> dict[str, Any]:
    number = dict(_DURATION_SCHEMA["anyOf"][0])
    if minimum is not None:
        number["minimum"] = minimum
    return {"anyOf": [number, _DURATION_SCHEMA["anyOf"][1]]}


def _duration(minimum: int | None = None) -> Any:
    """An ``int`` of milliseconds that a description may write as ``"10s"``; ``minimum`` is
    checked here so that the message gives the value in ms."""
    return Annotated[int, BeforeValidator(lambda value: _to_ms(value, minimum)),
                     WithJsonSchema(_duration_schema(minimum))]


def _tick(value: Any) -> int | None:
    return None if value == "every_record" else _to_ms(value, 1)


_Tick = Annotated[int | None, BeforeValidator(_tick), WithJsonSchema({"anyOf": [
    {"const": "every_record", "description": "a tick on every record (the default)"},
    *_duration_schema(1)["anyOf"]]})]


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


# -- settings per kind ----------------------------------------------------------------------------

class _Section:
    """What every section shares: its settings per kind, checked before field validation.

    ``KIND`` is the setting that selects the kind (``type`` or ``strategy``), ``KINDS`` maps
    each kind to the settings it accepts and ``REQUIRED`` to those it needs; ``COMMON`` are
    accepted by every kind. The same tables write the JSON Schema's per-kind rules.
    """

    KIND: ClassVar[str | None] = None
    DEFAULT_KIND: ClassVar[str | None] = None
    NOUN: ClassVar[str] = ""
    ONE: ClassVar[str] = ""
    KINDS: ClassVar[dict[str, tuple[str, ...]]] = {}
    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {}
    COMMON: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _settings(cls) -> list[str]:
        """The description's names of this section's settings, in declaration order."""
        names = []
        for name, info in cls.__pydantic_fields__.items():  # type: ignore[attr-defined]
            names.append(info.alias or name)
        return names

    @classmethod
    def _alias_of(cls) -> dict[str, str]:
        return {name: info.alias or name
                for name, info in cls.__pydantic_fields__.items()}  # type: ignore[attr-defined]

    @model_validator(mode="before")
    @classmethod
    def _settings_belong(cls, data: Any, info: ValidationInfo) -> Any:
        if not _strict(info):
            return data
        if not isinstance(data, Mapping):
            raise _Invalid(f"{{setting}} must be a mapping, got {type(data).__name__}")
        allowed = cls._settings()
        unknown = [key for key in data if key not in allowed]
        if unknown:
            raise _Invalid(f"{{setting}} is not a setting of {cls.NOUN}; allowed: "
                           f"{', '.join(allowed)}", str(unknown[0]))
        if cls.KIND is None:
            return data
        kind = data.get(cls.KIND, cls.DEFAULT_KIND)
        if kind not in cls.KINDS:
            if kind is None:
                raise _Invalid("{setting} is required", cls.KIND)
            raise _Invalid(f"{{setting}} must be one of {', '.join(cls.KINDS)}; got {kind!r}",
                           cls.KIND)
        own = (cls.KIND, *cls.COMMON, *cls.KINDS[kind])
        for key in data:
            if key not in own and data[key] is not None:
                raise _Invalid(
                    f"{{setting}} does not belong to {_a(kind)} {cls.ONE} (its "
                    f"settings: {', '.join(own)})", str(key))
        for key in cls.REQUIRED.get(kind, ()):
            if data.get(key) is None:
                raise _Invalid(f"{{setting}} is required for {_a(kind)} {cls.ONE}",
                               key)
        return data

    @classmethod
    def _json_schema_rules(cls, schema: dict[str, Any]) -> None:
        """Per kind: which settings it needs, and that the others are absent."""
        if cls.KIND is None:
            return
        rules = []
        settings = [s for s in cls._settings() if s != cls.KIND and s not in cls.COMMON]
        for kind, own in cls.KINDS.items():
            condition: dict[str, Any] = {"properties": {cls.KIND: {"const": kind}}}
            if kind != cls.DEFAULT_KIND:
                condition["required"] = [cls.KIND]
            then: dict[str, Any] = {"properties": {s: False for s in settings if s not in own}}
            if cls.REQUIRED.get(kind):
                then["required"] = list(cls.REQUIRED[kind])
            rules.append({"if": condition, "then": then})
        schema["allOf"] = rules


def _section_schema(schema: dict[str, Any], cls: type) -> None:
    cls._json_schema_rules(schema)  # type: ignore[attr-defined]


_CONFIG = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True,
                     json_schema_extra=_section_schema)


# -- the sections ---------------------------------------------------------------------------------

@dataclass(frozen=True, config=_CONFIG)
class WatermarkSpec(_Section):
    """How the arrival log's watermark is computed (:mod:`operators.watermarks`)."""

    KIND: ClassVar[str | None] = "strategy"
    DEFAULT_KIND: ClassVar[str | None] = "bounded_out_of_orderness"
    NOUN: ClassVar[str] = "watermarks"
    ONE: ClassVar[str] = "watermark"
    KINDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "bounded_out_of_orderness": ("max_out_of_orderness",),
        "monotonous": (),
        "punctuated": ("punctuation_field",),
    }
    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        "bounded_out_of_orderness": ("max_out_of_orderness",),
        "punctuated": ("punctuation_field",),
    }
    COMMON: ClassVar[tuple[str, ...]] = ("idle_timeout", "tick")

    strategy: Literal["bounded_out_of_orderness", "monotonous", "punctuated"] = (
        "bounded_out_of_orderness")
    max_out_of_orderness_ms: _duration(0) = Field(0, alias="max_out_of_orderness")  # type: ignore[valid-type]
    punctuation_field: str | None = None
    idle_timeout_ms: _duration(1) | None = Field(None, alias="idle_timeout")  # type: ignore[valid-type]
    tick_interval_ms: _Tick = Field(None, alias="tick")
    """``None`` means a tick on every record."""


@dataclass(frozen=True, config=_CONFIG)
class WindowSpec(_Section):
    """The window assigner (:mod:`operators.windows`)."""

    KIND: ClassVar[str | None] = "type"
    NOUN: ClassVar[str] = "windows"
    ONE: ClassVar[str] = "window"
    KINDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "tumbling": ("size", "offset"),
        "sliding": ("size", "slide", "offset"),
        "session": ("gap", "gap_field"),
        "global": (),
    }
    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        "tumbling": ("size",),
        "sliding": ("size", "slide"),
    }

    type: Literal["tumbling", "sliding", "session", "global"] = "tumbling"
    size_ms: _duration(1) | None = Field(None, alias="size")  # type: ignore[valid-type]
    slide_ms: _duration(1) | None = Field(None, alias="slide")  # type: ignore[valid-type]
    gap_ms: _duration(1) | None = Field(None, alias="gap")  # type: ignore[valid-type]
    gap_field: str | None = None
    offset_ms: _duration() = Field(0, alias="offset")  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> WindowSpec:
        if not _strict(info):
            return self
        if self.type == "sliding" and self.slide_ms > self.size_ms:  # type: ignore[operator]
            raise _Invalid(f"window.slide ({self.slide_ms} ms) must not exceed window.size "
                           f"({self.size_ms} ms)")
        if self.type == "session" and (self.gap_ms is None) == (self.gap_field is None):
            raise _Invalid("session windows need exactly one of window.gap or "
                           "window.gap_field")
        step = self.slide_ms or self.size_ms
        if step is not None and not abs(self.offset_ms) < step:
            raise _Invalid(f"window.offset ({self.offset_ms} ms) must be smaller than the "
                           f"window's {'slide' if self.slide_ms else 'size'}")
        return self


@dataclass(frozen=True, config=_CONFIG)
class TriggerSpec(_Section):
    """When a window emits a pane; ``None`` in a pipeline means the window's default trigger.

    Flink's triggers (:mod:`operators.triggers`) or a tree of Beam's composable triggers
    (:mod:`operators.composable`): ``after_watermark`` with optional ``early`` and ``late``
    firings, ``after_count``, ``after_processing_time`` (on the ingest clock), ``after_any`` /
    ``after_all`` / ``after_each`` of ``triggers``, ``repeatedly`` of a ``trigger``,
    ``or_finally`` of ``main`` until ``finally``. The top of a tree may say
    ``accumulation: accumulating`` (the default: each pane holds the whole window) or
    ``discarding`` (each pane holds what arrived since the previous one).
    """

    KIND: ClassVar[str | None] = "type"
    NOUN: ClassVar[str] = "triggers"
    ONE: ClassVar[str] = "trigger"
    KINDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "event_time": ("purging",),
        "processing_time": ("purging",),
        "count": ("count", "purging"),
        "delta": ("threshold", "field", "purging"),
        "continuous_event_time": ("interval", "purging"),
        "continuous_processing_time": ("interval", "purging"),
        "after_watermark": ("early", "late", "accumulation"),
        "after_count": ("count", "accumulation"),
        "after_processing_time": ("delay", "accumulation"),
        "after_any": ("triggers", "accumulation"),
        "after_all": ("triggers", "accumulation"),
        "after_each": ("triggers", "accumulation"),
        "repeatedly": ("trigger", "accumulation"),
        "or_finally": ("main", "finally", "accumulation"),
    }
    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        "count": ("count",),
        "delta": ("threshold", "field"),
        "continuous_event_time": ("interval",),
        "continuous_processing_time": ("interval",),
        "after_count": ("count",),
        "after_any": ("triggers",),
        "after_all": ("triggers",),
        "after_each": ("triggers",),
        "repeatedly": ("trigger",),
        "or_finally": ("main", "finally"),
    }

    type: Literal["event_time", "processing_time", "count", "delta", "continuous_event_time",
                  "continuous_processing_time", "after_watermark", "after_count",
                  "after_processing_time", "after_any", "after_all", "after_each",
                  "repeatedly", "or_finally"] = "event_time"
    count: int | None = Field(None, strict=True, ge=1)
    threshold: float | None = Field(None, strict=True)
    field: str | None = None
    interval_ms: _duration(1) | None = Field(None, alias="interval")  # type: ignore[valid-type]
    purging: bool = Field(False, strict=True)
    early: TriggerSpec | None = None
    late: TriggerSpec | None = None
    delay_ms: _duration(0) | None = Field(None, alias="delay")  # type: ignore[valid-type]
    triggers: tuple[TriggerSpec, ...] | None = Field(None, min_length=1)
    trigger: TriggerSpec | None = None
    main: TriggerSpec | None = None
    finally_: TriggerSpec | None = Field(None, alias="finally")
    accumulation: Literal["accumulating", "discarding"] | None = None

    @property
    def is_composable(self) -> bool:
        return self.type in COMPOSABLE_TRIGGER_TYPES

    @property
    def parts(self) -> tuple[tuple[str, TriggerSpec], ...]:
        """The nested triggers with their setting names (``early``, ``triggers[1]``, ...)."""
        named = [(name, getattr(self, attr)) for name, attr in
                 (("early", "early"), ("late", "late"), ("trigger", "trigger"),
                  ("main", "main"), ("finally", "finally_"))]
        named += [(f"triggers[{i}]", t) for i, t in enumerate(self.triggers or ())]
        return tuple((name, t) for name, t in named if t is not None)

    @property
    def uses_processing_time(self) -> bool:
        """Does any part fire on the ingest clock? (The Spark runtimes refuse those.)"""
        if self.type in ("processing_time", "continuous_processing_time",
                         "after_processing_time"):
            return True
        return any(t.uses_processing_time for _, t in self.parts)

    @model_validator(mode="after")
    def _composable_parts(self, info: ValidationInfo) -> TriggerSpec:
        if not _strict(info):
            return self
        for name, part in self.parts:
            if not part.is_composable:
                raise _Invalid(f"{{setting}}.type {part.type!r}: only composable triggers "
                               f"({', '.join(COMPOSABLE_TRIGGER_TYPES)}) nest in "
                               f"{self.type}", name)
            if part.accumulation is not None:
                raise _Invalid("{setting}.accumulation: accumulation belongs to the top of a "
                               "trigger, not to a nested one", name)
        return self


@dataclass(frozen=True, config=_CONFIG)
class EvictorSpec(_Section):
    """What a window forgets before or after its function runs (:mod:`operators.evictors`)."""

    KIND: ClassVar[str | None] = "type"
    NOUN: ClassVar[str] = "evictors"
    ONE: ClassVar[str] = "evictor"
    KINDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "count": ("max_count",),
        "time": ("keep_time",),
        "delta": ("threshold", "field"),
    }
    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = KINDS
    COMMON: ClassVar[tuple[str, ...]] = ("evict_after",)

    type: Literal["count", "time", "delta"]
    max_count: int | None = Field(None, strict=True, ge=1)
    keep_time_ms: _duration(0) | None = Field(None, alias="keep_time")  # type: ignore[valid-type]
    threshold: float | None = Field(None, strict=True)
    field: str | None = None
    evict_after: bool = Field(False, strict=True)


@dataclass(frozen=True, config=_CONFIG)
class AggregateSpec(_Section):
    """One named result of a pane: a built-in aggregate or a user class."""

    NOUN: ClassVar[str] = "aggregates"

    name: str
    fn: str = Field(json_schema_extra={"anyOf": [
        {"enum": list(AGGREGATE_FUNCTIONS)},
        {"pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
         "description": "your AggregateFunction class as module:Class"}]})
    """A built-in (``count``, ``sum``, ...) or a user class as ``module:Class``
    (:mod:`operators.user_functions`)."""
    field: str | None = None

    @property
    def is_user_defined(self) -> bool:
        return is_user_function(self.fn)

    @model_validator(mode="after")
    def _known_function(self, info: ValidationInfo) -> AggregateSpec:
        if not _strict(info):
            return self
        if not self.name.isidentifier():
            raise _Invalid(f"{{setting}} must be an identifier, got {self.name!r}", "name")
        if is_user_function(self.fn):
            try:
                load_user_aggregate(self.fn)
            except ValueError as error:
                raise _Invalid(f"{{setting}}: {error}", "fn") from None
            return self
        if self.fn not in AGGREGATE_FUNCTIONS:
            raise _Invalid(f"{{setting}} must be one of {', '.join(AGGREGATE_FUNCTIONS)} or "
                           f"a class as module:Class; got {self.fn!r}", "fn")
        if self.fn != "count" and self.field is None:
            raise _Invalid(f"{{setting}} is required for {self.fn}", "field")
        return self


_DEFAULT_AGGREGATES = ({"name": "count", "fn": "count"},)


OUTPUT_TYPES = ("long", "double", "string", "boolean")
"""The column types a process function's output may declare."""
RESERVED_OUTPUT = ("key", "emission")
"""Columns the platform adds to a process function's output: the key it ran for, and the
number of the row among that key's rows (their identity, for idempotent writes)."""


@dataclass(frozen=True, config=_CONFIG)
class OutputColumn:
    """One column of a process function's output: its name and type."""

    name: str
    type: Literal["long", "double", "string", "boolean"]


def _output_columns(value: Any) -> Any:
    """``{name: type, ...}`` (in order) as columns; each name an identifier, none reserved."""
    if value is None or not isinstance(value, Mapping):
        return value
    columns = []
    for name, kind in value.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise _Invalid(f"{{setting}}: column name {name!r} is not an identifier")
        if name in RESERVED_OUTPUT:
            raise _Invalid(f"{{setting}}: column {name!r} is the platform's (every output row "
                           f"carries {', '.join(RESERVED_OUTPUT)}); name yours otherwise")
        if kind not in OUTPUT_TYPES:
            raise _Invalid(f"{{setting}}.{name}: type must be one of {', '.join(OUTPUT_TYPES)}; "
                           f"got {kind!r}")
        columns.append({"name": name, "type": kind})
    if not columns:
        raise _Invalid("{setting} must name at least one column")
    return columns


_Output = Annotated[tuple[OutputColumn, ...] | None, BeforeValidator(_output_columns),
                    WithJsonSchema({"type": "object", "minProperties": 1,
                                    "additionalProperties": {"enum": list(OUTPUT_TYPES)},
                                    "description": "column name: type, in order"})]
def _day(value: Any) -> Any:
    """A ``YAML`` date or an ISO ``YYYY-MM-DD`` string; anything else is refused by name."""
    if isinstance(value, dt.datetime):
        raise _Invalid(f"{{setting}} must be a day (YYYY-MM-DD), not a time: got {value}")
    if isinstance(value, dt.date) or value is None:
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise _Invalid(f"{{setting}} must be a day as YYYY-MM-DD, got {value!r}") from None


_Day = Annotated[dt.date | None, BeforeValidator(_day),
                 WithJsonSchema({"type": "string", "format": "date"})]
_WINDOW_ONLY = ("trigger", "evictor", "allowed_lateness", "aggregates")
_PROCESS_ONLY = ("output", "day_column", "state_ttl", "parameters")


@dataclass(frozen=True, config=_CONFIG)
class PipelineSpec(_Section):
    """A whole pipeline description: windows and aggregates, or a process function."""

    NOUN: ClassVar[str] = "a pipeline"

    window: WindowSpec | None = None
    source: str | None = None
    """The stream the pipeline reads (a pipeline of the platform's pipelines folder; its
    watermark strategy is the stream's)."""
    description: str | None = None
    """What the pipeline is for, in words (shown with its tables, e.g. in Dagster)."""
    watermark: WatermarkSpec | None = None
    """How watermarks are computed: a stream's property in the platform (ingest records them
    in the arrival log); a standalone description for the replay command may give its own."""
    trigger: TriggerSpec | None = None
    evictor: EvictorSpec | None = None
    allowed_lateness_ms: _duration(0) = Field(0, alias="allowed_lateness")  # type: ignore[valid-type]
    aggregates: tuple[AggregateSpec, ...] = Field(
        default=(), json_schema_extra={"minItems": 1, "default": list(_DEFAULT_AGGREGATES)})
    process: str | None = Field(None, json_schema_extra={
        "description": "your KeyedProcessFunction class as module:Class"})
    """Instead of ``window``: a user's ``KeyedProcessFunction`` subclass
    (:mod:`operators.process_pipeline`), run per key with its state and event-time timers."""
    output: _Output = None
    """A process function's output columns, ``{name: type}`` in order."""
    day_column: str | None = None
    """The output column (epoch milliseconds, ``long``) whose day partitions the output."""
    state_ttl_ms: _duration(1) | None = Field(None, alias="state_ttl")  # type: ignore[valid-type]
    """A key's state is cleared once the watermark passes its last record's event time by
    this much (Flink's state TTL, on event time)."""
    parameters: dict[str, Any] | None = None
    """Keyword arguments the process function's class is built with."""
    effective_from: _Day = None
    """A changed windowed pipeline's first day (``YYYY-MM-DD``, in the platform's time zone,
    by window end): the days before it keep the rows of the version it replaces; the new
    version's rows start on it (docs/streams-and-pipelines.md, "Versions")."""
    version: str | None = Field(None, strict=True, min_length=1, max_length=64,
                                pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """A label for this version of the pipeline (``"2"``, ``"spend-fix"``): its version
    fingerprint then covers the description, label included, instead of the source of the user
    code it names. Without one, the named modules' source files are fingerprinted."""

    @model_validator(mode="before")
    @classmethod
    def _default_aggregates(cls, data: Any, info: ValidationInfo) -> Any:
        if _strict(info) and isinstance(data, Mapping):
            if data.get("process") is not None or data.get("window") is None:
                return _process_or_window(data)
            for name in _PROCESS_ONLY:
                if data.get(name) is not None:
                    raise _Invalid("{setting} belongs to a process pipeline (with "
                                   "process:), not to a windowed one", name)
            aggregates = data.get("aggregates")
            if aggregates is None:
                return {**data, "aggregates": list(_DEFAULT_AGGREGATES)}
            if not isinstance(aggregates, list) or not aggregates:
                raise _Invalid("{setting} must be a non-empty list", "aggregates")
        return data

    @model_validator(mode="after")
    def _distinct_names(self, info: ValidationInfo) -> PipelineSpec:
        names = [a.name for a in self.aggregates]
        if _strict(info) and len(set(names)) != len(names):
            raise _Invalid(f"aggregates have duplicate names: {names}")
        return self

    @property
    def is_process(self) -> bool:
        """A user's process function rather than windows and aggregates."""
        return self.process is not None

    @property
    def is_standard_window(self) -> bool:
        """True when Spark's own vectorised expressions can compute the result exactly.

        Tumbling or sliding windows, the default event-time trigger, no evictor and built-in
        aggregates only: the shape the vectorised backfill handles.
        """
        if self.window is None:
            return False
        default_trigger = self.trigger is None or (
            self.trigger.type == "event_time" and not self.trigger.purging
        )
        return self.window.type in ("tumbling", "sliding") and default_trigger and (
            self.evictor is None
        ) and not any(a.is_user_defined for a in self.aggregates)


def _process_or_window(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A description with ``process`` (or without ``window``): a process pipeline's settings
    are all there and consistent, and none of a windowed one's."""
    if data.get("process") is None:
        raise _Invalid("{setting} is required (or process: module:Class, your process "
                       "function)", "window")
    if data.get("window") is not None:
        raise _Invalid("{setting}: a pipeline is windows and aggregates or a process "
                       "function, not both; remove window or process", "process")
    for name in _WINDOW_ONLY:
        if data.get(name) is not None:
            raise _Invalid("{setting} belongs to a windowed pipeline; a process function "
                           "decides itself what to emit and when", name)
    if data.get("effective_from") is not None:
        raise _Invalid("{setting} belongs to a windowed pipeline: a process function numbers "
                       "its rows per key across days, so two versions' rows cannot share one "
                       "table; a changed process pipeline is recomputed whole",
                       "effective_from")
    process = data["process"]
    if not isinstance(process, str) or not is_user_function(process):
        raise _Invalid(f"{{setting}} must name your class as module:Class, got {process!r}",
                       "process")
    from operators.process_pipeline import load_process_function

    try:
        load_process_function(process)
    except ValueError as error:
        raise _Invalid(f"{{setting}}: {error}", "process") from None
    output = data.get("output")
    if output is None:
        raise _Invalid("{setting} is required for a process pipeline: its columns and types, "
                       "e.g. {user: string, total: double, at_ms: long}", "output")
    day = data.get("day_column")
    if day is None:
        raise _Invalid("{setting} is required for a process pipeline: the output column "
                       "(epoch ms, long) whose day partitions the output", "day_column")
    if isinstance(output, Mapping) and output.get(day) != "long":
        raise _Invalid(f"{{setting}} {day!r} must be a long column of output (epoch "
                       f"milliseconds); output has {dict(output)}", "day_column")
    parameters = data.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise _Invalid("{setting} must be a mapping of keyword arguments", "parameters")
    return data


_ADAPTER = TypeAdapter(PipelineSpec)
_WATERMARK_ADAPTER = TypeAdapter(WatermarkSpec)


# -- errors that name the setting -----------------------------------------------------------------

def _path(loc: Sequence[Any]) -> str:
    """``('aggregates', 1, 'fn')`` -> ``aggregates[1].fn``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part:
            text += f".{part}" if text else str(part)
    return text


def _message(error: Mapping[str, Any]) -> str:
    loc = [part for part in error["loc"] if part not in ("function-after", "function-before")]
    where = _path(loc)
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _Invalid):
        setting = _path([*loc, *(cause.setting.split(".") if cause.setting else [])])
        return cause.message.replace("{setting}", setting or "pipeline")
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return f"{where} is required"
    if kind == "literal_error":
        expected = error["ctx"]["expected"].replace("'", "").replace(" or ", ", ")
        return f"{where} must be one of {expected}; got {value!r}"
    if kind in ("model_type", "dataclass_type", "dict_type"):
        return f"{where or 'a pipeline description'} must be a mapping, got {type(value).__name__}"
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):
        return f"{where} is not a setting"
    return f"{where}: {error['msg'].lower()}, got {value!r}"


def _config_error(error: ValidationError) -> PipelineConfigError:
    messages: list[str] = []
    for item in error.errors(include_url=False):
        message = _message(item)
        if message not in messages:
            messages.append(message)
    return PipelineConfigError("; ".join(messages))


# -- reading a description ------------------------------------------------------------------------

def parse_pipeline(raw: Any) -> PipelineSpec:
    """Validate a pipeline description (already loaded from YAML/JSON) into a spec."""
    if not isinstance(raw, Mapping):
        raise PipelineConfigError("a pipeline description must be a mapping")
    try:
        return _ADAPTER.validate_python(raw, context={_DESCRIPTION: True}, by_alias=True,
                                        by_name=False)
    except ValidationError as error:
        raise _config_error(error) from None


def parse_watermark(raw: Any, where: str = "watermark") -> WatermarkSpec:
    """Validate a ``watermark`` section on its own (a stream description holds one); errors
    name the setting below ``where``."""
    if not isinstance(raw, Mapping):
        raise PipelineConfigError(f"{where} must be a mapping, got {type(raw).__name__}")
    try:
        return _WATERMARK_ADAPTER.validate_python(raw, context={_DESCRIPTION: True},
                                                  by_alias=True, by_name=False)
    except ValidationError as error:
        messages = []
        for item in error.errors(include_url=False):
            item = {**item, "loc": (where, *item["loc"])}
            message = _message(item)
            if message not in messages:
                messages.append(message)
        raise PipelineConfigError("; ".join(messages)) from None


def load_pipeline(path: str | Path) -> PipelineSpec:
    """Read a pipeline description from a ``.yaml``/``.yml`` or ``.json`` file."""
    return parse_pipeline(read_description(path))


def read_description(path: str | Path) -> Any:
    """The parsed YAML/JSON of a description file, not yet validated (for tools that add
    defaults of their own, such as the replay command's optional ``watermark`` section)."""
    path = Path(path)
    if path.is_dir():
        raise PipelineConfigError(f"pipeline description {path} is a directory, not a file")
    if not path.is_file():
        raise PipelineConfigError(f"pipeline description {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PipelineConfigError(f"cannot read pipeline description {path}: {error}") from None
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            raw = yaml.safe_load(text)
        except ValueError as error:  # a date-like scalar YAML cannot build (2026-13-01)
            raise PipelineConfigError(f"{path}: not valid YAML: {error}") from None
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            problem = getattr(error, "problem", None) or str(error)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
            raise PipelineConfigError(f"{where}: not valid YAML: {problem}") from None
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise PipelineConfigError(f"{path}:{error.lineno}:{error.colno}: not valid JSON: "
                                      f"{error.msg}") from None
    return raw


def pipeline_json_schema() -> dict[str, Any]:
    """The JSON Schema of a pipeline description, for editors (YAML language servers read
    it through a ``# yaml-language-server: $schema=...`` comment or their settings)."""
    schema = _ADAPTER.json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema,
            "title": "eventtime-platform pipeline description"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m operators.pipeline",
        description="Check pipeline descriptions, or print their JSON Schema.")
    parser.add_argument("--json-schema", action="store_true",
                        help="print the JSON Schema of a pipeline description")
    parser.add_argument("files", nargs="*", type=Path, help="descriptions to check")
    args = parser.parse_args(argv)
    if args.json_schema:
        print(json.dumps(pipeline_json_schema(), indent=2))
    if not args.json_schema and not args.files:
        parser.error("give --json-schema or files to check")
    status = 0
    for path in args.files:
        try:
            load_pipeline(path)
        except PipelineConfigError as error:
            message = str(error)
            if not message.startswith(str(path)):
                message = f"{path}: {message}"
            print(message, file=sys.stderr)
            status = 1
        else:
            print(f"{path}: ok (the description's format only; the platform also checks "
                  "its source stream and what its runtimes can run: python -m jobs check)",
                  file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
