"""The pipeline description: what it accepts, what it refuses (naming the setting), the spec
objects the runtimes use, and the JSON Schema editors check YAML with."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from operators.pipeline import (
    AggregateSpec,
    EvictorSpec,
    PipelineConfigError,
    PipelineSpec,
    TriggerSpec,
    WatermarkSpec,
    WindowSpec,
    load_pipeline,
    parse_pipeline,
    pipeline_json_schema,
)

ROOT = Path(__file__).resolve().parents[2]
WM = {"strategy": "monotonous"}
TUMBLING = {"type": "tumbling", "size": 10}


def refusal(**raw) -> str:
    with pytest.raises(PipelineConfigError) as error:
        parse_pipeline({"watermark": WM, "window": TUMBLING, **raw})
    return str(error.value)


def test_a_full_description_becomes_the_spec_the_runtimes_read() -> None:
    spec = parse_pipeline({
        "watermark": {"max_out_of_orderness": "5s", "idle_timeout": "1m", "tick": "200ms"},
        "window": {"type": "sliding", "size": "1m", "slide": "10s", "offset": "1s"},
        "trigger": {"type": "count", "count": 3, "purging": True},
        "evictor": {"type": "time", "keep_time": "2s", "evict_after": True},
        "allowed_lateness": "30s",
        "aggregates": [{"name": "n", "fn": "count"}, {"name": "s", "fn": "sum", "field": "v"}],
    })
    assert spec == PipelineSpec(
        watermark=WatermarkSpec(max_out_of_orderness_ms=5_000, idle_timeout_ms=60_000,
                                tick_interval_ms=200),
        window=WindowSpec(type="sliding", size_ms=60_000, slide_ms=10_000, offset_ms=1_000),
        trigger=TriggerSpec(type="count", count=3, purging=True),
        evictor=EvictorSpec(type="time", keep_time_ms=2_000, evict_after=True),
        allowed_lateness_ms=30_000,
        aggregates=(AggregateSpec("n", "count"), AggregateSpec("s", "sum", "v")),
    )
    assert not spec.is_standard_window  # a count trigger: not the vectorised shape
    assert spec.trigger.type == "count" and spec.trigger.purging
    assert parse_pipeline({"watermark": WM, "window": TUMBLING}).aggregates == (
        AggregateSpec("count", "count"),)  # the default


def test_specs_are_frozen_hashable_dataclasses() -> None:
    spec = parse_pipeline({"watermark": WM, "window": TUMBLING})
    assert spec.is_standard_window
    assert hash(spec) == hash(parse_pipeline({"watermark": WM, "window": TUMBLING}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.window.size_ms = 5  # type: ignore[misc]
    assert dataclasses.asdict(spec.window)["size_ms"] == 10
    assert dataclasses.replace(spec.window, size_ms=20).size_ms == 20
    assert AggregateSpec("x", "pkg.mod:Cls").is_user_defined


@pytest.mark.parametrize(("raw", "message"), [
    ({"window": {"type": "tumbling", "size": 10, "slide": 5}},
     "window.slide does not belong to a tumbling window"),
    ({"window": {"type": "session", "gap": 5, "size": 10}},
     "window.size does not belong to a session window"),
    ({"window": {"type": "global", "offset": 1}}, "window.offset does not belong to a global"),
    ({"window": {"type": "tumbling"}}, "window.size is required for a tumbling window"),
    ({"window": {"type": "sliding", "size": 10}}, "window.slide is required"),
    ({"window": {"type": "sliding", "size": 10, "slide": 20}},
     "window.slide (20 ms) must not exceed window.size (10 ms)"),
    ({"window": {"type": "tumbling", "size": 10, "offset": 10}}, "window.offset (10 ms)"),
    ({"window": {"type": "session"}}, "exactly one of window.gap or window.gap_field"),
    ({"window": {"type": "cubic"}}, "window.type must be one of tumbling, sliding, session"),
    ({"window": {"type": "tumbling", "size": "soon"}}, "window.size: expected a duration"),
    ({"window": {"type": "tumbling", "size": 0}}, "window.size must be at least 1 ms, got 0"),
    ({"window": {"type": "tumbling", "sise": 10}}, "window.sise is not a setting of windows"),
    ({"window": 5}, "window must be a mapping"),
    ({"watermark": {"strategy": "bounded_out_of_orderness"}},
     "watermark.max_out_of_orderness is required"),
    ({"watermark": {"strategy": "monotonous", "max_out_of_orderness": "1s"}},
     "watermark.max_out_of_orderness does not belong to a monotonous watermark"),
    ({"watermark": {"strategy": "monotonous", "tick": "0ms"}}, "watermark.tick must be at least"),
    ({"trigger": {"type": "count"}}, "trigger.count is required for a count trigger"),
    ({"trigger": {"type": "count", "count": True}}, "trigger.count: input should be a valid int"),
    ({"trigger": {"type": "count", "count": 0}}, "trigger.count: input should be greater"),
    ({"trigger": {"type": "count", "count": 2, "interval": "1s"}},
     "trigger.interval does not belong to a count trigger"),
    ({"trigger": {"type": "event_time", "purging": "yes"}}, "trigger.purging: input should be"),
    ({"trigger": {"type": "delta", "threshold": "x", "field": "v"}}, "trigger.threshold"),
    ({"evictor": {"type": "count"}}, "evictor.max_count is required for a count evictor"),
    ({"evictor": {"type": "time", "keep_time": "1s", "max_count": 2}},
     "evictor.max_count does not belong to a time evictor"),
    ({"allowed_lateness": -1}, "allowed_lateness must be at least 0 ms"),
    ({"colour": "red"}, "colour is not a setting of a pipeline"),
    ({"aggregates": []}, "aggregates must be a non-empty list"),
    ({"aggregates": [5]}, "aggregates[0] must be a mapping"),
    ({"aggregates": [{"name": "n", "fn": "count"}, {"name": "m", "fn": "median"}]},
     "aggregates[1].fn must be one of count, sum, min, max, mean"),
    ({"aggregates": [{"name": "n", "fn": "count"}, {"name": "s", "fn": "sum"}]},
     "aggregates[1].field is required for sum"),
    ({"aggregates": [{"name": "x y", "fn": "count"}]}, "aggregates[0].name must be an identif"),
    ({"aggregates": [{"name": "x", "fn": "no_such_module:Cls"}]}, "aggregates[0].fn: cannot"),
    ({"aggregates": [{"name": "a", "fn": "count"}, {"name": "a", "fn": "count"}]},
     "duplicate names"),
])
def test_mistakes_are_refused_naming_the_setting(raw: dict, message: str) -> None:
    assert message in refusal(**raw)


def test_missing_sections() -> None:
    with pytest.raises(PipelineConfigError, match="^window is required"):
        parse_pipeline({"watermark": {"strategy": "monotonous"}})
    # the watermark is the stream's: a platform pipeline names its source and has none
    spec = parse_pipeline({"source": "events", "window": TUMBLING})
    assert spec.watermark is None and spec.source == "events"
    with pytest.raises(PipelineConfigError, match="must be a mapping"):
        parse_pipeline([1, 2])  # type: ignore[arg-type]


def test_syntax_errors_name_the_file_line_and_column(tmp_path: Path) -> None:
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text("watermark: {strategy: monotonous}\nwindow:\n  type: [tumbling\n")
    with pytest.raises(PipelineConfigError) as error:
        load_pipeline(yaml_file)
    assert str(error.value).startswith(f"{yaml_file}:4:1: not valid YAML")
    assert "<unicode string>" not in str(error.value)
    json_file = tmp_path / "p.json"
    json_file.write_text('{"watermark": {"strategy": "monotonous"},\n "window": {"type": }}')
    with pytest.raises(PipelineConfigError, match=rf"^{json_file}:2:21: not valid JSON"):
        load_pipeline(json_file)
    with pytest.raises(PipelineConfigError, match="is a directory"):
        load_pipeline(tmp_path)
    with pytest.raises(PipelineConfigError, match="does not exist"):
        load_pipeline(tmp_path / "nope.yaml")


SECTIONS = [("watermark", WatermarkSpec, "strategy"), ("window", WindowSpec, "type"),
            ("trigger", TriggerSpec, "type"), ("evictor", EvictorSpec, "type")]


def test_json_schema_states_the_rules_the_validation_applies() -> None:
    """For every section and kind: the schema forbids exactly the settings that a description
    is refused for, and requires those whose absence is refused."""
    schema = pipeline_json_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    definitions = schema["$defs"]
    assert set(schema["properties"]) == {"source", "description", "watermark", "window",
                                         "trigger", "evictor", "allowed_lateness",
                                         "aggregates", "version", "process", "output",
                                         "day_column", "state_ttl", "parameters",
                                         "effective_from"}
    for section, cls, kind_setting in SECTIONS:
        definition = definitions[cls.__name__]
        settings = set(definition["properties"])
        for rule in definition["allOf"]:
            kind = rule["if"]["properties"][kind_setting]["const"]
            forbidden = {s for s, allowed in rule["then"]["properties"].items() if not allowed}
            required = set(rule["then"].get("required", ()))
            base = {kind_setting: kind, **{s: _sample(s) for s in required}}
            if section == "window" and kind == "session":
                base["gap"] = 5  # one of gap or gap_field, checked by the validation itself
            refused = set()
            for setting in sorted(settings - {kind_setting}):
                if setting in required or setting in base:
                    continue
                try:
                    _parse_section(section, {**base, setting: _sample(setting)})
                except PipelineConfigError as error:
                    if f"{section}.{setting} does not belong" in str(error):
                        refused.add(setting)
            assert refused == forbidden, (section, kind)
            _parse_section(section, base)  # the required settings are enough
            for setting in required:
                with pytest.raises(PipelineConfigError, match=f"{section}.{setting} is required"):
                    _parse_section(section, {k: v for k, v in base.items() if k != setting})


def _sample(setting: str) -> object:
    part = {"type": "after_count", "count": 1}
    return {"count": 2, "max_count": 2, "threshold": 1.5, "field": "v", "punctuation_field": "m",
            "gap_field": "g", "purging": True, "evict_after": True, "early": part,
            "late": part, "trigger": part, "main": part, "finally": part, "triggers": [part],
            "accumulation": "discarding"}.get(setting, 5)


def _parse_section(section: str, raw: dict) -> PipelineSpec:
    base = {"watermark": WM, "window": {"type": "global"}
            if section in ("trigger", "evictor") else TUMBLING}
    return parse_pipeline({**base, section: raw})


def test_schema_and_check_from_the_command_line(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "operators.pipeline"]
    result = subprocess.run([*run, "--json-schema"], capture_output=True, text=True, cwd=ROOT,
                            check=True)
    assert json.loads(result.stdout) == pipeline_json_schema()
    shipped = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pipelines").glob("*.yaml"))
    result = subprocess.run([*run, "examples/pipeline.yaml", *shipped],
                            capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("watermark: {strategy: monotonous}\nwindow: {type: tumbling, size: 1m, "
                   "slide: 10s}\n")
    result = subprocess.run([*run, str(bad)], capture_output=True, text=True, check=False,
                            cwd=ROOT)
    assert result.returncode == 1
    assert f"{bad}: window.slide does not belong to a tumbling window" in result.stderr
