"""The replay library: a pipeline's window operator run over a local arrival log.

Replaying is the smallest possible runtime: read events in arrival order from a JSON-lines
file (:func:`read_arrival_log`), give each the watermark in force when it arrived (recorded in
the file, or computed from the pipeline's watermark strategy exactly as ingest does:
:func:`watermarks_for`), and run the same window operator the Spark jobs run (:func:`run`).
Because every decision lives in :mod:`operators`, its panes and late records are what the live
stream and a backfill produce for the same log.

It is also a debugger's toolkit: watermark lines (``{"watermark": 5000}``) advance the
watermark between records, as a Flink or Beam test does; a final watermark fires what the end
of input makes due; every pane says what fired it (:class:`FiredPane`).

The command (``eventtime-replay``, argparse, the process-pipeline and ``--transcript``
branches) is :mod:`operators.replay_cli`; it imports this module and
:mod:`operators.transcript`, which imports this module too, and this module imports neither,
so the three form no circle. Formats and a worked example: docs/replay.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from operators.build import build_driver
from operators.pipeline import (
    PipelineConfigError,
    PipelineSpec,
    parse_pipeline,
    parse_watermark,
    read_description,
)
from operators.time import MIN_WATERMARK, parse_timestamp_ms
from operators.watermarks import assign_watermarks
from operators.window_operator import Firing, LateRecord, Pane, WindowDriver

__all__ = [
    "ArrivalRecord",
    "FiredPane",
    "Line",
    "ReplayInputError",
    "ReplayOutput",
    "WatermarkLine",
    "json_text",
    "late_by_record",
    "late_to_json",
    "load_replay_pipeline",
    "never_fired",
    "pane_to_json",
    "parse_event_line",
    "read_arrival_log",
    "records_of",
    "run",
    "watermarks_for",
]


class ReplayInputError(ValueError):
    """A bad input line or file; the message says where and why."""


@dataclass(slots=True)
class ArrivalRecord:
    """One event of the arrival log, parsed and validated."""

    key: str
    event_time: int
    partition: str
    ingest_time: int
    arrival_seq: int
    watermark_ms: int | None
    has_watermark: bool
    payload: dict[str, Any]
    where: str = ""
    """``file:line``, for messages."""


@dataclass(slots=True)
class WatermarkLine:
    """``{"watermark": W}``: the watermark advances to ``W`` without a record (Flink's
    ``processWatermark``, a Beam test's watermark step); due timers fire."""

    watermark: int
    ingest_time: int
    where: str = ""


Line = ArrivalRecord | WatermarkLine


@dataclass(slots=True)
class FiredPane:
    """A pane and what fired it (kept apart: the tables store panes, which carry no cause)."""

    pane: Pane
    fired_by: Firing


def _numeric_fields(spec: PipelineSpec) -> set[str]:
    """Payload fields the operator does arithmetic on: they must be numbers (or null)."""
    fields = {a.field for a in spec.aggregates if a.field and a.fn != "count"}
    if spec.trigger is not None and spec.trigger.type == "delta" and spec.trigger.field:
        fields.add(spec.trigger.field)
    if spec.evictor is not None and spec.evictor.type == "delta" and spec.evictor.field:
        fields.add(spec.evictor.field)
    return fields


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _time(value: Any, where: str, name: str, *, nullable: bool = False) -> int | None:
    """An epoch-ms integer or ISO-8601 string; a fractional number is refused, never
    truncated (10.7 ms is not a time this platform can hold)."""
    if value is None and nullable:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, float):
        raise ReplayInputError(f"{where}: bad {name!r}: {value!r} is not a whole number of "
                               f"milliseconds (times are integer epoch ms or ISO-8601)")
    try:
        return parse_timestamp_ms(value)
    except ValueError as error:
        reason = str(error).replace("event time", name.replace("_", " "))
        raise ReplayInputError(f"{where}: bad {name!r}: {reason}") from None


def parse_event_line(text: str, where: str, spec: PipelineSpec, previous_ingest: int | None,
                     previous_seq: int | None, default_seq: int) -> Line:
    """Validate one input line; ``where`` is ``file:line`` for error messages."""
    try:
        event = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReplayInputError(f"{where}: not valid JSON ({error.msg} at column "
                               f"{error.colno})") from None
    if not isinstance(event, dict):
        raise ReplayInputError(f"{where}: expected a JSON object, got {type(event).__name__}")
    if event.get("ingest_time") is not None:
        ingest = _time(event["ingest_time"], where, "ingest_time")
    else:
        ingest = previous_ingest
    if "watermark" in event:
        extra = sorted(set(event) - {"watermark", "ingest_time"})
        if extra:
            raise ReplayInputError(f"{where}: a watermark line has only 'watermark' (and "
                                   f"'ingest_time'); got also {', '.join(extra)}")
        watermark = _time(event["watermark"], where, "watermark")
        ingest = ingest if ingest is not None else MIN_WATERMARK
        if previous_ingest is not None and ingest < previous_ingest:
            ingest = previous_ingest
        return WatermarkLine(watermark, ingest, where)  # type: ignore[arg-type]
    key = event.get("key")
    if key is None:
        raise ReplayInputError(f"{where}: missing required field 'key'")
    if not isinstance(key, str):
        raise ReplayInputError(f"{where}: 'key' must be a string, got {key!r}")
    if "event_time" not in event or event["event_time"] is None:
        raise ReplayInputError(f"{where}: missing required field 'event_time'")
    event_time = _time(event["event_time"], where, "event_time")
    assert event_time is not None
    partition = event.get("partition", "default")
    if not isinstance(partition, str):
        raise ReplayInputError(f"{where}: 'partition' must be a string, got {partition!r}")
    if ingest is None:
        ingest = event_time
    if previous_ingest is not None and ingest < previous_ingest:
        ingest = previous_ingest  # the ingest clock never goes back along arrival order
    seq = event.get("arrival_seq", default_seq)
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ReplayInputError(f"{where}: 'arrival_seq' must be an integer, got {seq!r}")
    if previous_seq is not None and seq <= previous_seq:
        raise ReplayInputError(f"{where}: 'arrival_seq' {seq} is not greater than the previous "
                               f"record's {previous_seq}; lines must be in arrival order")
    has_watermark = "watermark_ms" in event
    watermark: int | None = None
    if has_watermark:
        value = event["watermark_ms"]
        if isinstance(value, bool) or not (value is None or isinstance(value, int | float | str)):
            raise ReplayInputError(f"{where}: 'watermark_ms' must be an integer, an ISO-8601 "
                                   f"time or null, got {value!r}")
        watermark = _time(value, where, "watermark_ms", nullable=True)
        if watermark is None:
            watermark = MIN_WATERMARK
    for field in sorted(_numeric_fields(spec)):
        value = event.get(field)
        if value is not None and not _is_number(value):
            raise ReplayInputError(f"{where}: field {field!r} must be a number or null, got "
                                   f"{value!r}")
    gap_field = spec.window.gap_field if spec.window is not None else None
    if gap_field is not None:
        gap = event.get(gap_field)
        if not isinstance(gap, int) or isinstance(gap, bool) or gap <= 0:
            raise ReplayInputError(f"{where}: session gap field {gap_field!r} must be a "
                                   f"positive integer (ms), got {gap!r}")
    return ArrivalRecord(key, event_time, partition, ingest, seq, watermark, has_watermark,
                         event, where)


def read_arrival_log(path: Path, spec: PipelineSpec) -> list[Line]:
    """Parse the whole events file; blank lines are skipped (but count for line numbers)."""
    lines: list[Line] = []
    previous_ingest: int | None = None
    previous_seq: int | None = None
    try:
        handle = path.open(encoding="utf-8")
    except OSError as error:
        raise ReplayInputError(f"cannot read events file {path}: {error.strerror}") from None
    with handle:
        try:
            for index, text in enumerate(handle):
                if not text.strip():
                    continue
                line = parse_event_line(text, f"{path}:{index + 1}", spec, previous_ingest,
                                        previous_seq, index)
                if isinstance(line, ArrivalRecord):
                    previous_ingest = line.ingest_time
                    previous_seq = line.arrival_seq
                elif line.ingest_time != MIN_WATERMARK:
                    previous_ingest = line.ingest_time
                lines.append(line)
        except UnicodeDecodeError as error:
            raise ReplayInputError(f"{path}: not UTF-8 text ({error.reason})") from None
    return lines


def records_of(lines: Sequence[Line]) -> list[ArrivalRecord]:
    return [line for line in lines if isinstance(line, ArrivalRecord)]


def watermarks_for(records: Sequence[ArrivalRecord], spec: PipelineSpec,
                   warn: Callable[[str], None] | None = None, *,
                   recorded_only: bool = False) -> list[int]:
    """The recorded watermarks if every record has one, else computed from the strategy.

    ``recorded_only``: the pipeline has no ``watermark`` section, so every record must carry
    ``watermark_ms``."""
    recorded = sum(r.has_watermark for r in records)
    if records and recorded == len(records):
        return [r.watermark_ms for r in records]  # type: ignore[misc]
    if recorded_only:
        first = next(r for r in records if not r.has_watermark)
        remedy = (f"--stream with the description of stream {spec.source!r}" if spec.source
                  else "a watermark section")
        raise ReplayInputError(f"{first.where}: no 'watermark_ms', and the pipeline has no "
                               f"watermark section to compute it from (give every record "
                               f"watermark_ms, or {remedy})")
    if recorded and warn is not None:
        warn(f"warning: only {recorded} of {len(records)} records carry watermark_ms; "
             f"ignoring them and computing watermarks from the pipeline's strategy")
    return assign_watermarks(spec.watermark, ((r.partition, r.event_time, r.ingest_time,
                                               r.payload) for r in records))


@dataclass(slots=True)
class ReplayOutput:
    driver: WindowDriver
    panes: list[FiredPane]
    late: list[LateRecord]
    records: int


def run(spec: PipelineSpec, lines: Sequence[Line], watermarks: Sequence[int],
        driver: WindowDriver | None = None, *, final_watermark: int | None = None,
        on_step: Callable[[int, list[FiredPane], list[LateRecord]], None] | None = None
        ) -> ReplayOutput:
    """Run the window operator over the lines (``watermarks``: one per record, in order).

    ``final_watermark`` is advanced to after the last line (the end of input). ``on_step(i,
    panes, late)`` sees the output of each line ``i`` (``len(lines)`` for the end of input).
    """
    driver = driver or build_driver(spec)
    driver.record_firings()
    panes: list[FiredPane] = []
    late: list[LateRecord] = []
    marks = iter(watermarks)
    records = 0

    def collect(step: int) -> None:
        new_panes, new_late = driver.take_output()
        fired = [FiredPane(p, f) for p, f in zip(new_panes, driver.take_firings(),
                                                  strict=True)]
        panes.extend(fired)
        late.extend(new_late)
        if on_step is not None:
            on_step(step, fired, new_late)

    for step, line in enumerate(lines):
        if isinstance(line, WatermarkLine):
            driver.advance(line.watermark, line.ingest_time)
        else:
            driver.process(line.key, line.event_time, line.payload,
                           arrival_seq=line.arrival_seq, watermark=next(marks),
                           ingest_time=line.ingest_time)
            records += 1
        collect(step)
    if final_watermark is not None:
        driver.advance(final_watermark, driver.processing_time)
        collect(len(lines))
    return ReplayOutput(driver, panes, late, records)


def _watermark_out(watermark: int) -> int | None:
    return None if watermark == MIN_WATERMARK else watermark


def pane_to_json(pane: Pane, fired_by: Firing | None = None) -> dict[str, Any]:
    row = {"key": pane.key, "window_start": pane.window_start, "window_end": pane.window_end,
           "pane_index": pane.pane_index, "timing": pane.timing, "is_last": pane.is_last,
           "values": dict(pane.values)}
    if fired_by is not None:
        row["fired_by"] = {fired_by[0]: fired_by[1]}
    return row


def late_to_json(record: LateRecord) -> dict[str, Any]:
    return {"key": record.key, "event_time": record.event_time_ms,
            "arrival_seq": record.arrival_seq,
            "watermark_ms": _watermark_out(record.watermark_ms),
            "window_start": record.window_start, "window_end": record.window_end}


def late_by_record(late: Sequence[LateRecord]) -> list[dict[str, Any]]:
    """One row per late record, with every window it missed (the assigner's order)."""
    rows: dict[int, dict[str, Any]] = {}
    for record in late:
        row = rows.get(record.arrival_seq)
        if row is None:
            row = rows[record.arrival_seq] = {
                "key": record.key, "event_time": record.event_time_ms,
                "arrival_seq": record.arrival_seq,
                "watermark_ms": _watermark_out(record.watermark_ms), "missed_windows": []}
        row["missed_windows"].append([record.window_start, record.window_end])
    return list(rows.values())


def json_text(value: Any) -> str:
    """Compact JSON in which exact decimals stay exact: ``DECIMAL(38, 9)`` aggregates print as
    the tables print them (``8.000000000``), not as the nearest double."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json.dumps(str(k))}:{json_text(v)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    return json.dumps(value, separators=(",", ":"))


def load_replay_pipeline(path: Path, stream: Path | None = None) -> tuple[PipelineSpec, bool]:
    """The pipeline, and whether it lacked a ``watermark`` section (then every record must
    carry ``watermark_ms``; the strategy put in its place is never used).

    A platform pipeline reads a stream (``source``) whose description holds the watermark
    strategy: ``stream`` is that description, and its ``watermark`` section computes the
    records' watermarks as ingest does."""
    raw = read_description(path)
    if isinstance(raw, dict) and stream is not None:
        if raw.get("watermark") is not None:
            raise PipelineConfigError("watermark: the pipeline has its own watermark section; "
                                      "--stream gives it one too (keep one of them)")
        described = read_description(stream)
        if not isinstance(described, dict) or described.get("watermark") is None:
            raise PipelineConfigError(f"--stream {stream}: no watermark section in it")
        parse_watermark(described["watermark"], f"{stream}: watermark")  # errors name the file
        return parse_pipeline({**raw, "watermark": described["watermark"]}), False
    if isinstance(raw, dict) and raw.get("watermark") is None:
        return parse_pipeline({**raw, "watermark": {"strategy": "monotonous"}}), True
    return parse_pipeline(raw), False


def never_fired(driver: WindowDriver) -> str | None:
    """What the end of the log leaves undone, said plainly (or ``None``)."""
    windows = sum(len(state.windows) for state in driver.states.values())
    if not windows:
        return None
    keys = sum(1 for state in driver.states.values() if state.windows)
    next_timer = driver.timers.next_event_time()
    due = (f"; the next event-time timer is at {next_timer}" if next_timer is not None else "")
    return (f"note: {windows} window(s) of {keys} key(s) are still open at the end of the log "
            f"(last watermark {_watermark_out(driver.watermark)}){due}; their remaining panes "
            f"never fired. --final-watermark max fires them as the end of input would.")
