"""``eventtime-replay``: run a pipeline's window operator over a local arrival log.

The replay command is the smallest possible runtime: it reads events in arrival order from a
JSON-lines file, gives each the watermark in force when it arrived (recorded in the file, or
computed from the pipeline's watermark strategy exactly as ingest does), and runs the same
window operator the Spark jobs run. Because every decision lives in ``operators/``, its panes
and late records are what the live stream and a backfill produce for the same log. Formats and
a worked example: docs/replay.md.

Exit status: 0 on success, 1 when the pipeline or the events are wrong (the message names the
file and line), 2 for bad command-line usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from operators.build import build_driver
from operators.pipeline import PipelineSpec, load_pipeline
from operators.time import MIN_WATERMARK, parse_timestamp_ms
from operators.watermarks import assign_watermarks
from operators.window_operator import LateRecord, Pane, WindowDriver


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


def parse_event_line(text: str, where: str, spec: PipelineSpec, previous_ingest: int | None,
                     previous_seq: int | None, default_seq: int) -> ArrivalRecord:
    """Validate one input line; ``where`` is ``file:line`` for error messages."""
    try:
        event = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReplayInputError(f"{where}: not valid JSON ({error.msg} at column "
                               f"{error.colno})") from None
    if not isinstance(event, dict):
        raise ReplayInputError(f"{where}: expected a JSON object, got {type(event).__name__}")
    key = event.get("key")
    if key is None:
        raise ReplayInputError(f"{where}: missing required field 'key'")
    if not isinstance(key, str):
        raise ReplayInputError(f"{where}: 'key' must be a string, got {key!r}")
    if "event_time" not in event or event["event_time"] is None:
        raise ReplayInputError(f"{where}: missing required field 'event_time'")
    try:
        event_time = parse_timestamp_ms(event["event_time"])
    except ValueError as error:
        raise ReplayInputError(f"{where}: bad 'event_time': {error}") from None
    partition = event.get("partition", "default")
    if not isinstance(partition, str):
        raise ReplayInputError(f"{where}: 'partition' must be a string, got {partition!r}")
    if event.get("ingest_time") is not None:
        try:
            ingest = parse_timestamp_ms(event["ingest_time"])
        except ValueError as error:
            raise ReplayInputError(f"{where}: bad 'ingest_time': "
                                   f"{str(error).replace('event time', 'ingest time')}") from None
    else:
        ingest = previous_ingest if previous_ingest is not None else event_time
    if previous_ingest is not None and ingest < previous_ingest:
        ingest = previous_ingest  # the ingest clock never goes back along arrival order
    seq = event.get("arrival_seq", default_seq)
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ReplayInputError(f"{where}: 'arrival_seq' must be an integer, got {seq!r}")
    if previous_seq is not None and seq <= previous_seq:
        raise ReplayInputError(f"{where}: 'arrival_seq' {seq} is not greater than the previous "
                               f"record's {previous_seq}; lines must be in arrival order")
    has_watermark = "watermark_ms" in event
    watermark = event.get("watermark_ms")
    if has_watermark:
        if watermark is None:
            watermark = MIN_WATERMARK
        elif not isinstance(watermark, int) or isinstance(watermark, bool):
            raise ReplayInputError(f"{where}: 'watermark_ms' must be an integer or null, got "
                                   f"{watermark!r}")
    for field in sorted(_numeric_fields(spec)):
        value = event.get(field)
        if value is not None and not _is_number(value):
            raise ReplayInputError(f"{where}: field {field!r} must be a number or null, got "
                                   f"{value!r}")
    gap_field = spec.window.gap_field
    if gap_field is not None:
        gap = event.get(gap_field)
        if not isinstance(gap, int) or isinstance(gap, bool) or gap <= 0:
            raise ReplayInputError(f"{where}: session gap field {gap_field!r} must be a "
                                   f"positive integer (ms), got {gap!r}")
    return ArrivalRecord(key, event_time, partition, ingest, seq, watermark, has_watermark,
                         event)


def read_arrival_log(path: Path, spec: PipelineSpec) -> list[ArrivalRecord]:
    """Parse the whole events file; blank lines are skipped (but count for line numbers)."""
    records: list[ArrivalRecord] = []
    previous_ingest: int | None = None
    previous_seq: int | None = None
    try:
        handle = path.open(encoding="utf-8")
    except OSError as error:
        raise ReplayInputError(f"cannot read events file {path}: {error.strerror}") from None
    with handle:
        try:
            for index, line in enumerate(handle):
                if not line.strip():
                    continue
                record = parse_event_line(line, f"{path}:{index + 1}", spec, previous_ingest,
                                          previous_seq, index)
                previous_ingest = record.ingest_time
                previous_seq = record.arrival_seq
                records.append(record)
        except UnicodeDecodeError as error:
            raise ReplayInputError(f"{path}: not UTF-8 text ({error.reason})") from None
    return records


def watermarks_for(records: Sequence[ArrivalRecord], spec: PipelineSpec,
                   warn: Any = None) -> list[int]:
    """The recorded watermarks if every record has one, else computed from the strategy."""
    recorded = sum(r.has_watermark for r in records)
    if records and recorded == len(records):
        return [r.watermark_ms for r in records]  # type: ignore[misc]
    if recorded and warn is not None:
        warn(f"warning: only {recorded} of {len(records)} records carry watermark_ms; "
             f"ignoring them and computing watermarks from the pipeline's strategy")
    return assign_watermarks(spec.watermark, ((r.partition, r.event_time, r.ingest_time,
                                               r.payload) for r in records))


def run(spec: PipelineSpec, records: Sequence[ArrivalRecord], watermarks: Sequence[int],
        driver: WindowDriver | None = None
        ) -> tuple[WindowDriver, list[Pane], list[LateRecord]]:
    """Run the window operator over the records; returns the driver and its output."""
    driver = driver or build_driver(spec)
    panes: list[Pane] = []
    late: list[LateRecord] = []
    for record, watermark in zip(records, watermarks, strict=True):
        driver.process(record.key, record.event_time, record.payload,
                       arrival_seq=record.arrival_seq, watermark=watermark,
                       ingest_time=record.ingest_time)
        new_panes, new_late = driver.take_output()
        panes += new_panes
        late += new_late
    return driver, panes, late


def _watermark_out(watermark: int) -> int | None:
    return None if watermark == MIN_WATERMARK else watermark


def pane_to_json(pane: Pane) -> dict[str, Any]:
    return {"key": pane.key, "window_start": pane.window_start, "window_end": pane.window_end,
            "pane_index": pane.pane_index, "timing": pane.timing, "is_last": pane.is_last,
            "values": {name: _json_number(value) for name, value in pane.values.items()}}


def _json_number(value: Any) -> Any:
    """Exact decimal results print as JSON numbers (their shortest double form, which is the
    decimal itself for up to 15 significant digits)."""
    return float(value) if isinstance(value, Decimal) else value


def late_to_json(record: LateRecord) -> dict[str, Any]:
    return {"key": record.key, "event_time": record.event_time_ms,
            "arrival_seq": record.arrival_seq,
            "watermark_ms": _watermark_out(record.watermark_ms),
            "window_start": record.window_start, "window_end": record.window_end}


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    try:
        with path.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, separators=(",", ":")) + "\n")
    except OSError as error:
        raise ReplayInputError(f"cannot write {path}: {error.strerror}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eventtime-replay",
        description="Replay an arrival log (JSON lines) through a pipeline's window operator "
                    "and write its panes and late records. See docs/replay.md.")
    parser.add_argument("--pipeline", required=True, type=Path,
                        help="pipeline description (.yaml/.yml or .json)")
    parser.add_argument("--events", required=True, type=Path,
                        help="events in arrival order, one JSON object per line")
    parser.add_argument("--panes", required=True, type=Path, help="output: panes (JSON lines)")
    parser.add_argument("--late", type=Path,
                        help="output: late records (JSON lines); omitted: only counted")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def say(message: str) -> None:
        print(message, file=sys.stderr)

    try:
        spec = load_pipeline(args.pipeline)
        driver = build_driver(spec)  # combinations the operator refuses (say a delta trigger
    except ValueError as error:      # on session windows) are pipeline errors too
        say(f"eventtime-replay: bad pipeline {args.pipeline}: {error}")
        return 1
    try:
        records = read_arrival_log(args.events, spec)
        watermarks = watermarks_for(records, spec, say)
        driver, panes, late = run(spec, records, watermarks, driver)
        _write_jsonl(args.panes, [pane_to_json(p) for p in panes])
        if args.late is not None:
            _write_jsonl(args.late, [late_to_json(r) for r in late])
    except ReplayInputError as error:
        say(f"eventtime-replay: {error}")
        return 1
    if not args.quiet:
        metrics = driver.operator.metrics
        say(f"eventtime-replay: {len(records)} records, {len(panes)} panes, {len(late)} late "
            f"records (on_time={metrics['on_time']}, "
            f"late_within_lateness={metrics['late_within_lateness']}, "
            f"dropped_late={metrics['dropped_late']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
