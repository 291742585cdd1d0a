"""The pipeline description: one file that both the replay command and the Spark jobs read.

Keeping the description engine-independent is what lets a backfill, a live stream and a local
replay be configured identically; every setting is validated here, before any data is touched,
and errors name the setting.

Format (YAML or JSON; durations are ms numbers or strings such as ``"10s"``, ``"5m"``)::

    watermark:
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
      type: event_time                     # event_time | processing_time | count | delta |
                                           # continuous_event_time | continuous_processing_time
      count: 100                           # count
      threshold: 10.0                      # delta
      field: value                         # delta
      interval: 10s                        # continuous_*
      purging: false                       # wrap in a purging trigger
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
      - {name: spread, fn: "mypackage.stats:Spread", field: value}   # operators/user_functions.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operators.time import parse_duration_ms
from operators.user_functions import is_user_function, load_user_aggregate

WATERMARK_STRATEGIES = ("bounded_out_of_orderness", "monotonous", "punctuated")
WINDOW_TYPES = ("tumbling", "sliding", "session", "global")
TRIGGER_TYPES = (
    "event_time",
    "processing_time",
    "count",
    "delta",
    "continuous_event_time",
    "continuous_processing_time",
)
EVICTOR_TYPES = ("count", "time", "delta")
AGGREGATE_FUNCTIONS = ("count", "sum", "min", "max", "mean")


class PipelineConfigError(ValueError):
    """A setting of the pipeline description is wrong; the message names the setting."""


@dataclass(frozen=True)
class WatermarkSpec:
    strategy: str = "bounded_out_of_orderness"
    max_out_of_orderness_ms: int = 0
    punctuation_field: str | None = None
    idle_timeout_ms: int | None = None
    tick_interval_ms: int | None = None
    """``None`` means a tick on every record."""


@dataclass(frozen=True)
class WindowSpec:
    type: str = "tumbling"
    size_ms: int | None = None
    slide_ms: int | None = None
    gap_ms: int | None = None
    gap_field: str | None = None
    offset_ms: int = 0


@dataclass(frozen=True)
class TriggerSpec:
    type: str = "event_time"
    count: int | None = None
    threshold: float | None = None
    field: str | None = None
    interval_ms: int | None = None
    purging: bool = False


@dataclass(frozen=True)
class EvictorSpec:
    type: str
    max_count: int | None = None
    keep_time_ms: int | None = None
    threshold: float | None = None
    field: str | None = None
    evict_after: bool = False


@dataclass(frozen=True)
class AggregateSpec:
    name: str
    fn: str
    """A built-in (``count``, ``sum``, ...) or a user class as ``module:Class``
    (operators/user_functions.py)."""
    field: str | None = None

    @property
    def is_user_defined(self) -> bool:
        return is_user_function(self.fn)


@dataclass(frozen=True)
class PipelineSpec:
    watermark: WatermarkSpec
    window: WindowSpec
    trigger: TriggerSpec | None = None
    evictor: EvictorSpec | None = None
    allowed_lateness_ms: int = 0
    aggregates: tuple[AggregateSpec, ...] = field(default_factory=tuple)

    @property
    def is_standard_window(self) -> bool:
        """True when Spark's own vectorised expressions can compute the result exactly.

        Tumbling or sliding windows, the default event-time trigger, no evictor and built-in
        aggregates only: the shape the vectorised backfill handles.
        """
        default_trigger = self.trigger is None or (
            self.trigger.type == "event_time" and not self.trigger.purging
        )
        return self.window.type in ("tumbling", "sliding") and default_trigger and (
            self.evictor is None
        ) and not any(a.is_user_defined for a in self.aggregates)


def _duration(section: dict[str, Any], key: str, where: str, *, required: bool = False,
              minimum: int | None = None) -> int | None:
    if key not in section or section[key] is None:
        if required:
            raise PipelineConfigError(f"{where}.{key} is required")
        return None
    try:
        value = parse_duration_ms(section[key], setting=f"{where}.{key}")
    except ValueError as error:
        raise PipelineConfigError(str(error)) from None
    if minimum is not None and value < minimum:
        raise PipelineConfigError(f"{where}.{key} must be at least {minimum} ms, got {value} ms")
    return value


def _choice(section: dict[str, Any], key: str, where: str, choices: tuple[str, ...],
            default: str | None = None) -> str:
    value = section.get(key, default)
    if value not in choices:
        raise PipelineConfigError(
            f"{where}.{key} must be one of {', '.join(choices)}; got {value!r}"
        )
    return value


def _section(raw: dict[str, Any], key: str, *, required: bool) -> dict[str, Any] | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise PipelineConfigError(f"{key} is required")
        return None
    if not isinstance(value, dict):
        raise PipelineConfigError(f"{key} must be a mapping, got {type(value).__name__}")
    return value


def _unknown_keys(section: dict[str, Any], where: str, allowed: set[str]) -> None:
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise PipelineConfigError(
            f"{where} has unknown setting(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(allowed))}"
        )


def _parse_watermark(raw: dict[str, Any]) -> WatermarkSpec:
    _unknown_keys(raw, "watermark", {"strategy", "max_out_of_orderness", "punctuation_field",
                                     "idle_timeout", "tick"})
    strategy = _choice(raw, "strategy", "watermark", WATERMARK_STRATEGIES,
                       "bounded_out_of_orderness")
    delay = 0
    if strategy == "bounded_out_of_orderness":
        delay = _duration(raw, "max_out_of_orderness", "watermark", required=True, minimum=0)
    punctuation_field = raw.get("punctuation_field")
    if strategy == "punctuated" and not isinstance(punctuation_field, str):
        raise PipelineConfigError("watermark.punctuation_field is required for 'punctuated'")
    tick = raw.get("tick", "every_record")
    tick_interval = None
    if tick != "every_record":
        tick_interval = _duration(raw, "tick", "watermark", minimum=1)
    return WatermarkSpec(
        strategy=strategy,
        max_out_of_orderness_ms=delay or 0,
        punctuation_field=punctuation_field,
        idle_timeout_ms=_duration(raw, "idle_timeout", "watermark", minimum=1),
        tick_interval_ms=tick_interval,
    )


def _parse_window(raw: dict[str, Any]) -> WindowSpec:
    _unknown_keys(raw, "window", {"type", "size", "slide", "gap", "gap_field", "offset"})
    kind = _choice(raw, "type", "window", WINDOW_TYPES)
    size = slide = gap = None
    gap_field = None
    if kind in ("tumbling", "sliding"):
        size = _duration(raw, "size", "window", required=True, minimum=1)
    if kind == "sliding":
        slide = _duration(raw, "slide", "window", required=True, minimum=1)
        if slide > size:
            raise PipelineConfigError(
                f"window.slide ({slide} ms) must not exceed window.size ({size} ms)"
            )
    if kind == "session":
        gap = _duration(raw, "gap", "window", minimum=1)
        gap_field = raw.get("gap_field")
        if (gap is None) == (gap_field is None):
            raise PipelineConfigError("session windows need exactly one of window.gap or "
                                      "window.gap_field")
    offset = _duration(raw, "offset", "window") or 0
    if size is not None and not (abs(offset) < (slide or size)):
        raise PipelineConfigError(
            f"window.offset ({offset} ms) must be smaller than the window's "
            f"{'slide' if slide else 'size'}"
        )
    return WindowSpec(type=kind, size_ms=size, slide_ms=slide, gap_ms=gap, gap_field=gap_field,
                      offset_ms=offset)


def _parse_trigger(raw: dict[str, Any]) -> TriggerSpec:
    _unknown_keys(raw, "trigger", {"type", "count", "threshold", "field", "interval", "purging"})
    kind = _choice(raw, "type", "trigger", TRIGGER_TYPES)
    count = raw.get("count")
    if kind == "count" and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise PipelineConfigError(f"trigger.count must be a positive integer, got {count!r}")
    threshold = raw.get("threshold")
    if kind == "delta":
        if not isinstance(threshold, int | float) or isinstance(threshold, bool):
            raise PipelineConfigError(f"trigger.threshold must be a number, got {threshold!r}")
        if not isinstance(raw.get("field"), str):
            raise PipelineConfigError("trigger.field is required for a delta trigger")
    interval = None
    if kind.startswith("continuous_"):
        interval = _duration(raw, "interval", "trigger", required=True, minimum=1)
    purging = raw.get("purging", False)
    if not isinstance(purging, bool):
        raise PipelineConfigError(f"trigger.purging must be true or false, got {purging!r}")
    return TriggerSpec(type=kind, count=count, threshold=threshold, field=raw.get("field"),
                       interval_ms=interval, purging=purging)


def _parse_evictor(raw: dict[str, Any]) -> EvictorSpec:
    _unknown_keys(raw, "evictor", {"type", "max_count", "keep_time", "threshold", "field",
                                   "evict_after"})
    kind = _choice(raw, "type", "evictor", EVICTOR_TYPES)
    max_count = raw.get("max_count")
    if kind == "count" and (not isinstance(max_count, int) or max_count < 1):
        raise PipelineConfigError(f"evictor.max_count must be a positive integer, got "
                                  f"{max_count!r}")
    keep_time = None
    if kind == "time":
        keep_time = _duration(raw, "keep_time", "evictor", required=True, minimum=0)
    threshold = raw.get("threshold")
    if kind == "delta" and (not isinstance(threshold, int | float) or
                            not isinstance(raw.get("field"), str)):
        raise PipelineConfigError("a delta evictor needs evictor.threshold (a number) and "
                                  "evictor.field")
    return EvictorSpec(type=kind, max_count=max_count, keep_time_ms=keep_time,
                       threshold=threshold, field=raw.get("field"),
                       evict_after=bool(raw.get("evict_after", False)))


def _parse_aggregates(raw: Any) -> tuple[AggregateSpec, ...]:
    if raw is None:
        return (AggregateSpec("count", "count"),)
    if not isinstance(raw, list) or not raw:
        raise PipelineConfigError("aggregates must be a non-empty list")
    specs = []
    for index, item in enumerate(raw):
        where = f"aggregates[{index}]"
        if not isinstance(item, dict):
            raise PipelineConfigError(f"{where} must be a mapping with name and fn")
        _unknown_keys(item, where, {"name", "fn", "field"})
        name = item.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise PipelineConfigError(f"{where}.name must be an identifier, got {name!r}")
        agg_field = item.get("field")
        if isinstance(item.get("fn"), str) and is_user_function(item["fn"]):
            fn = item["fn"]
            try:
                load_user_aggregate(fn)
            except ValueError as error:
                raise PipelineConfigError(f"{where}.fn: {error}") from None
            if agg_field is not None and not isinstance(agg_field, str):
                raise PipelineConfigError(f"{where}.field must be a field name")
            specs.append(AggregateSpec(name=name, fn=fn, field=agg_field))
            continue
        fn = _choice(item, "fn", where, AGGREGATE_FUNCTIONS)
        if fn != "count" and not isinstance(agg_field, str):
            raise PipelineConfigError(f"{where}.field is required for {fn}")
        specs.append(AggregateSpec(name=name, fn=fn, field=agg_field))
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise PipelineConfigError(f"aggregates have duplicate names: {names}")
    return tuple(specs)


def parse_pipeline(raw: dict[str, Any]) -> PipelineSpec:
    """Validate a pipeline description (already loaded from YAML/JSON) into a spec."""
    if not isinstance(raw, dict):
        raise PipelineConfigError("a pipeline description must be a mapping")
    _unknown_keys(raw, "pipeline", {"watermark", "window", "trigger", "evictor",
                                    "allowed_lateness", "aggregates"})
    watermark = _parse_watermark(_section(raw, "watermark", required=True))
    window = _parse_window(_section(raw, "window", required=True))
    trigger_raw = _section(raw, "trigger", required=False)
    evictor_raw = _section(raw, "evictor", required=False)
    lateness = _duration(raw, "allowed_lateness", "pipeline", minimum=0) or 0
    return PipelineSpec(
        watermark=watermark,
        window=window,
        trigger=_parse_trigger(trigger_raw) if trigger_raw else None,
        evictor=_parse_evictor(evictor_raw) if evictor_raw else None,
        allowed_lateness_ms=lateness,
        aggregates=_parse_aggregates(raw.get("aggregates")),
    )


def load_pipeline(path: str | Path) -> PipelineSpec:
    """Read a pipeline description from a ``.yaml``/``.yml`` or ``.json`` file."""
    path = Path(path)
    if not path.is_file():
        raise PipelineConfigError(f"pipeline description {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise PipelineConfigError(f"{path} is not valid YAML: {error}") from None
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise PipelineConfigError(f"{path} is not valid JSON: {error}") from None
    return parse_pipeline(raw)
