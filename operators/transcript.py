"""Transcripts: a window operator's behaviour written down as a YAML story, in Beam's style.

A transcript is what a Flink or Beam test does, as data: a pipeline (window, trigger, allowed
lateness), then steps — records arriving, the watermark or the ingest clock advancing — and,
after them, the panes and late rows that must have come out. One runner executes every
transcript of the test suite (:mod:`tests.operators.test_transcripts`) and ``eventtime-replay
--transcript FILE`` runs one and prints the first divergence, so a suspected bug is filed as a
transcript that fails. Format: docs/replay.md, "Transcripts".

::

    name: allowed lateness fires a LATE pane per late record
    pipeline:                      # a pipeline description without its watermark section
      window: {type: tumbling, size: 10}
      allowed_lateness: 5
    steps:
      - input: [1, 2]              # records at event times 1 and 2 (key k, value = time)
      - watermark: 9               # the watermark reaches 9: due timers fire
      - expect:
          panes: [{window: [0, 10], timing: ON_TIME, last: false, values: {n: 2, s: 3}}]
      - input: [{t: 3, value: 30}]
      - expect: {panes: [{window: [0, 10], index: 1, timing: LATE, fired_by: {arrival_seq: 2}}]}

Records carry the watermark and ingest time in force (the last ``watermark`` and
``processing_time`` steps); an ``expect`` lists *all* panes (and late rows) emitted since the
previous ``expect``, in order, and a pane matches when every field it names matches. Anything
emitted and never expected is a divergence too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from operators.build import build_driver
from operators.pipeline import PipelineConfigError, parse_pipeline
from operators.replay import FiredPane, json_text
from operators.time import MIN_WATERMARK, parse_timestamp_ms
from operators.window_operator import LateRecord, WindowDriver

__all__ = [
    "DEFAULT_AGGREGATES",
    "Divergence",
    "LATE_FIELDS",
    "PANE_FIELDS",
    "Transcript",
    "TranscriptError",
    "load_transcript",
    "main_transcript",
    "run_transcript",
]


DEFAULT_AGGREGATES = [{"name": "n", "fn": "count"}, {"name": "s", "fn": "sum", "field": "value"}]
"""``n`` elements, ``s`` the sum of their ``value`` (by default their event time, so ``s``
fingerprints which elements a pane holds)."""

PANE_FIELDS = ("key", "window", "index", "timing", "last", "values", "fired_by")
LATE_FIELDS = ("key", "t", "window")


class TranscriptError(ValueError):
    """The transcript itself is malformed (not a divergence); the message says where."""


@dataclass(slots=True)
class Divergence:
    """Where the operator and the transcript first disagree."""

    step: int
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"step {self.step + 1}" + (f" (line {self.line})" if self.line else "")
        return f"{where}: {self.message}"


@dataclass(slots=True)
class Transcript:
    name: str
    pipeline: dict[str, Any]
    steps: list[Mapping[str, Any]]
    lines: list[int | None]
    source: str


def load_transcript(path: str | Path) -> Transcript:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TranscriptError(f"cannot read transcript {path}: {error.strerror}") from None
    try:
        node = yaml.compose(text)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise TranscriptError(f"{where}: not valid YAML: "
                              f"{getattr(error, 'problem', None) or error}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise TranscriptError(f"{path}: a transcript is a mapping with pipeline and steps")
    unknown = sorted(set(doc) - {"name", "description", "pipeline", "steps"})
    if unknown:
        raise TranscriptError(f"{path}: unknown transcript setting(s) {', '.join(unknown)}")
    lines: list[int | None] = [None] * len(doc["steps"])
    for key, value in node.value:  # type: ignore[union-attr]
        if key.value == "steps" and isinstance(value, yaml.SequenceNode):
            lines = [item.start_mark.line + 1 for item in value.value]
    pipeline = doc.get("pipeline") or {}
    if not isinstance(pipeline, dict):
        raise TranscriptError(f"{path}: pipeline must be a mapping")
    return Transcript(str(doc.get("name") or path.stem), pipeline, doc["steps"], lines,
                      str(path))


def _spec(transcript: Transcript) -> Any:
    raw = dict(transcript.pipeline)
    if "watermark" in raw:
        raise TranscriptError(f"{transcript.source}: pipeline.watermark: a transcript moves the "
                              f"watermark with its steps; leave the section out")
    raw["watermark"] = {"strategy": "monotonous"}
    raw.setdefault("aggregates", DEFAULT_AGGREGATES)
    try:
        return parse_pipeline(raw)
    except PipelineConfigError as error:
        raise TranscriptError(f"{transcript.source}: pipeline: {error}") from None


def _record(item: Any, where: str) -> tuple[str, int, dict[str, Any], int | None]:
    """``5`` or ``{t: 5, key: k, value: 1, ingest: 3, any: payload}``."""
    if isinstance(item, int) and not isinstance(item, bool):
        return "k", item, {"value": item}, None
    if not isinstance(item, Mapping) or "t" not in item:
        raise TranscriptError(f"{where}: an input is an event time or a mapping with t")
    try:
        t = parse_timestamp_ms(item["t"])
        ingest = None if item.get("ingest") is None else parse_timestamp_ms(item["ingest"])
    except ValueError as error:
        raise TranscriptError(f"{where}: {error}") from None
    payload = {k: v for k, v in item.items() if k not in ("t", "key", "ingest")}
    payload.setdefault("value", t)
    return str(item.get("key", "k")), t, payload, ingest


def _pane_view(fired: FiredPane) -> dict[str, Any]:
    pane = fired.pane
    return {"key": pane.key, "window": [pane.window_start, pane.window_end],
            "index": pane.pane_index, "timing": pane.timing, "last": pane.is_last,
            "values": dict(pane.values), "fired_by": {fired.fired_by[0]: fired.fired_by[1]}}


def _late_view(record: LateRecord) -> dict[str, Any]:
    return {"key": record.key, "t": record.event_time_ms,
            "window": [record.window_start, record.window_end]}


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and set(expected) == set(actual) and all(
            _same(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return isinstance(actual, list | tuple) and len(expected) == len(actual) and all(
            _same(e, a) for e, a in zip(expected, actual, strict=True))
    if isinstance(actual, Decimal) and isinstance(expected, int | float | str):
        try:
            return Decimal(str(expected)) == actual
        except ArithmeticError:
            return False
    return bool(expected == actual)


def _matches(expected: Mapping[str, Any], actual: Mapping[str, Any], defaults: Mapping[str, Any]
             ) -> bool:
    return all(_same(expected.get(name, defaults.get(name)), actual[name])
               for name in actual if name in expected or name in defaults)


def _show(row: Mapping[str, Any]) -> str:
    return json_text(row).replace('":', '": ').replace(",", ", ")


def _compare(kind: str, expected: Any, actual: list[dict[str, Any]], fields: Sequence[str],
             defaults: Mapping[str, Any], where: str) -> str | None:
    if expected is None:
        expected = []
    if not isinstance(expected, list):
        raise TranscriptError(f"{where}: expect.{kind} must be a list")
    for index, row in enumerate(expected):
        if not isinstance(row, Mapping) or set(row) - set(fields):
            raise TranscriptError(f"{where}: expect.{kind}[{index}] must be a mapping of "
                                  f"{', '.join(fields)}")
    one, many = ("pane", "panes") if kind == "panes" else ("late row", "late rows")
    for index in range(max(len(expected), len(actual))):
        if index >= len(actual):
            return (f"expected {one} {index} {_show(expected[index])}, but no more {many} "
                    f"came out (got {len(actual)})")
        if index >= len(expected):
            return (f"unexpected {one} {index}: {_show(actual[index])} (expected "
                    f"{len(expected)})")
        if not _matches(expected[index], actual[index], defaults):
            return (f"{one} {index} differs\n  expected: {_show(expected[index])}\n"
                    f"  got:      {_show(actual[index])}")
    return None


def run_transcript(transcript: Transcript, *,
                   driver_factory: Callable[[Any], WindowDriver] = build_driver
                   ) -> Divergence | None:
    """Run every step; the first divergence, or ``None`` when the operator agrees."""
    spec = _spec(transcript)
    try:
        driver = driver_factory(spec)
    except ValueError as error:
        raise TranscriptError(f"{transcript.source}: pipeline: {error}") from None
    driver.record_firings()
    watermark, now, seq = MIN_WATERMARK, 0, 0
    panes: list[dict[str, Any]] = []
    late: list[dict[str, Any]] = []

    def collect() -> None:
        new_panes, new_late = driver.take_output()
        panes.extend(_pane_view(FiredPane(p, f))
                     for p, f in zip(new_panes, driver.take_firings(), strict=True))
        late.extend(_late_view(r) for r in new_late)

    for index, step in enumerate(transcript.steps):
        where = f"{transcript.source}: step {index + 1}"
        line = transcript.lines[index]
        if not isinstance(step, Mapping) or len(step) != 1:
            raise TranscriptError(f"{where}: a step is one of input, watermark, "
                                  f"processing_time, expect")
        (action, value), = step.items()
        if action == "input":
            for item in value if isinstance(value, list) else [value]:
                key, t, payload, ingest = _record(item, where)
                if ingest is not None:
                    now = max(now, ingest)
                driver.process(key, t, payload, arrival_seq=seq, watermark=watermark,
                               ingest_time=now)
                seq += 1
                collect()
        elif action in ("watermark", "processing_time"):
            try:
                time = parse_timestamp_ms(value)
            except ValueError as error:
                raise TranscriptError(f"{where}: {action}: {error}") from None
            if action == "watermark":
                watermark = max(watermark, time)
            else:
                now = max(now, time)
            driver.advance(watermark, now)
            collect()
        elif action == "expect":
            if not isinstance(value, Mapping) or set(value) - {"panes", "late"}:
                raise TranscriptError(f"{where}: expect has panes and/or late")
            message = (_compare("panes", value.get("panes"), panes, PANE_FIELDS, {"key": "k"},
                                where)
                       or _compare("late", value.get("late"), late, LATE_FIELDS, {"key": "k"},
                                   where))
            if message:
                return Divergence(index, line, message)
            panes, late = [], []
        else:
            raise TranscriptError(f"{where}: unknown step {action!r}; a step is one of input, "
                                  f"watermark, processing_time, expect")
    if panes or late:
        message = (_compare("panes", [], panes, PANE_FIELDS, {}, "end")
                   or _compare("late", [], late, LATE_FIELDS, {}, "end"))
        return Divergence(len(transcript.steps) - 1, None,
                          f"after the last step: {message} (add an expect step)")
    return None


def main_transcript(path: Path, say: Callable[[str], None]) -> int:
    """``eventtime-replay --transcript FILE``: 0 when the operator agrees, 1 otherwise."""
    try:
        transcript = load_transcript(path)
        divergence = run_transcript(transcript)
    except TranscriptError as error:
        say(f"eventtime-replay: {error}")
        return 1
    if divergence is None:
        say(f"eventtime-replay: {path}: ok ({transcript.name}, {len(transcript.steps)} steps)")
        return 0
    say(f"eventtime-replay: {path}: {transcript.name}: diverges at {divergence}")
    return 1
