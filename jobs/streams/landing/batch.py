"""One planned ingest batch turned into arrival-log and quarantine rows.

A pure function of the plan (the exact bytes of each file part, the planning time, the state
before the batch), so a batch run again after a crash produces the very same rows: lines are
put in arrival order by ``(ingest clock, file, line)``, each good record gets the next arrival
position and the watermark computed from the records before it; bad lines go to quarantine with
their reason and never move the ingest clock or a watermark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from jobs.streams.landing.folder import LandingFolder, read_range
from jobs.streams.landing.log import CHANGED, DUPLICATE, FilePart, Plan
from jobs.streams.landing.parsing import ParsedEvent, Rejection, check_event_time_bounds, parse_line
from operators.pipeline import WatermarkSpec
from operators.time import MIN_WATERMARK, parse_timestamp_ms
from operators.watermarks import ArrivalWatermarks

INVALID_UTF8 = "invalid_utf8"
BAD_INGEST_STAMP = "bad_ingest_stamp"
DUPLICATE_FILE = "duplicate_file"
FILE_CHANGED = "file_changed_after_ingest"
_CLOCK_RANGE = (0, 253_402_300_799_999)  # 1970 .. 9999-12-31: a collector stamp we can trust
RAW_LINE_LIMIT = 10_000

ARRIVAL_COLUMNS = ("source_partition", "source_file", "line_number", "key", "event_time_ms",
                   "ingest_time_ms", "watermark_ms", "value", "payload")
QUARANTINE_COLUMNS = ("source_partition", "source_file", "line_number", "ingest_time_ms",
                      "reason", "detail", "event_time_ms", "raw_line")


@dataclass(frozen=True)
class IngestRules:
    """The settings a batch's rows depend on (and nothing else)."""

    ingest_clock: str
    max_future_ms: int
    max_past_ms: int
    max_line_bytes: int
    watermark: WatermarkSpec

    @property
    def clock_field(self) -> str | None:
        return None if self.ingest_clock == "wall" else self.ingest_clock.split(":", 1)[1]

    @property
    def punctuation_field(self) -> str | None:
        """The field a punctuated watermark reads (``None`` for the other strategies)."""
        return self.watermark.punctuation_field \
            if self.watermark.strategy == "punctuated" else None


@dataclass(slots=True)
class Line:
    source_file: str
    source_partition: str
    line_number: int
    clock_ms: int | None
    text: str | None
    parsed: ParsedEvent | Rejection


@dataclass
class BatchRows:
    """What a batch appends: good records (arrival order, without positions yet) and bad
    lines, plus the watermark state after it."""

    good: pd.DataFrame
    bad: pd.DataFrame
    end_state: dict
    watermark_ms: int

    @property
    def reasons(self) -> dict[str, int]:
        counts = self.bad["reason"].value_counts().to_dict() if len(self.bad) else {}
        return {str(k): int(v) for k, v in sorted(counts.items())}


def _clock_of(record_clock: object) -> int | None:
    try:
        value = parse_timestamp_ms(record_clock)
    except (ValueError, OverflowError):
        return None
    return value if _CLOCK_RANGE[0] <= value <= _CLOCK_RANGE[1] else None


def _clock_from_text(text: str, clock_field: str) -> int | None:
    """A rejected line may still carry the collector's stamp (say, a bad value)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _clock_of(record.get(clock_field)) if isinstance(record, dict) else None


def _fill_clock(lines: list[Line], default_ms: int) -> None:
    """Lines without a stamp take the previous line's, else the next one's, else the batch's."""
    last = None
    for line in lines:
        if line.clock_ms is None:
            line.clock_ms = last
        else:
            last = line.clock_ms
    following = None
    for line in reversed(lines):
        if line.clock_ms is None:
            line.clock_ms = following if following is not None else default_ms
        else:
            following = line.clock_ms


def _split_lines(raw: bytes) -> list[bytes]:
    chunks = raw.split(b"\n")
    if chunks and chunks[-1] == b"":
        chunks.pop()
    return chunks


def part_lines(landing: LandingFolder | Path, plan: Plan, part: FilePart,
               rules: IngestRules) -> list[Line]:
    """Every line of one file part, parsed, with its ingest clock: a function of the part's
    bytes and the plan alone, so parts can be read in any order and on any machine."""
    clock_field = rules.clock_field
    stamp_limit = plan.planned_at_ms + rules.max_future_ms
    if part.kind == DUPLICATE:
        # it arrived when this batch was planned; its own lines are never read
        return [Line(part.name, part.partition, 0, plan.planned_at_ms, "", Rejection(
            DUPLICATE_FILE, f"same content as {part.same_as}, already ingested; its lines "
                            "are not read again"))]
    chunks = _split_lines(read_range(landing, part.name, part.offset, part.size))
    file_lines: list[Line] = []
    for number, chunk in enumerate(chunks, start=part.first_line):
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as error:
            file_lines.append(Line(part.name, part.partition, number, None,
                                    chunk.decode("utf-8", errors="replace"),
                                    Rejection(INVALID_UTF8, str(error)[:200])))
            continue
        if not text.strip():
            continue  # blank lines carry nothing; they are not records
        if part.kind == CHANGED:
            file_lines.append(Line(part.name, part.partition, number, plan.planned_at_ms,
                                    text, Rejection(FILE_CHANGED, part.same_as or "")))
            continue
        parsed = parse_line(text, rules.max_line_bytes)
        clock = None
        if clock_field is not None and isinstance(parsed, ParsedEvent):
            clock = _clock_of(parsed.fields.get(clock_field))
        elif clock_field is not None:
            clock = _clock_from_text(text, clock_field)
        if clock is not None and clock > stamp_limit:
            # a collector stamp from the future would drag the ingest clock (and with it
            # idleness and interval ticks, hence watermarks) forward for every later record
            if isinstance(parsed, ParsedEvent):
                parsed = Rejection(BAD_INGEST_STAMP,
                                   f"{clock_field}={clock} is more than max_future_ms after "
                                   f"the wall clock when the batch was planned "
                                   f"({plan.planned_at_ms})", parsed.event_time_ms)
            clock = None
        file_lines.append(Line(part.name, part.partition, number, clock, text, parsed))
    _fill_clock(file_lines, plan.planned_at_ms)
    return file_lines


def read_lines(landing: LandingFolder | Path, plan: Plan, rules: IngestRules) -> list[Line]:
    """Every line of the plan's file parts, parsed, with its ingest clock."""
    return [line for part in plan.files for line in part_lines(landing, plan, part, rules)]


@dataclass
class Arrivals:
    """The sequential half of a batch: each line in arrival order with its ingest time and
    either the watermark in force at its arrival (a good record) or why it is quarantined."""

    ordered: list[tuple[Line, int, int | Rejection]]
    end_state: dict
    watermark_ms: int


def arrive(lines: list[Line], plan: Plan, rules: IngestRules) -> Arrivals:
    """Put the lines in arrival order by ``(ingest clock, file, line)`` and walk them once:
    only a good record moves the ingest clock and the watermarks. Needs of each line only its
    clock, place, partition, event time and parse verdict (not its text)."""
    lines = sorted(lines, key=lambda line: (line.clock_ms, line.source_file, line.line_number))
    watermarks = ArrivalWatermarks.restore(rules.watermark, plan.start_state.get("watermarks"))
    last_ingest = plan.start_state.get("last_ingest_ms", MIN_WATERMARK)
    ordered: list[tuple[Line, int, int | Rejection]] = []
    for line in lines:
        # only a good record moves the ingest clock: a quarantined line never moves a watermark
        clock = max(last_ingest, line.clock_ms)
        parsed = line.parsed
        if isinstance(parsed, ParsedEvent):
            parsed = check_event_time_bounds(parsed.event_time_ms, clock, rules.max_future_ms,
                                             rules.max_past_ms) or parsed
        if isinstance(parsed, Rejection):
            ordered.append((line, clock, parsed))
            continue
        last_ingest = clock
        ordered.append((line, clock, watermarks.watermark_for(line.source_partition, clock)))
        watermarks.observe(line.source_partition, parsed.event_time_ms, clock, parsed.fields)
    state = {"watermarks": watermarks.snapshot(), "last_ingest_ms": last_ingest}
    return Arrivals(ordered, state, watermarks.current)


def batch_rows(landing: LandingFolder | Path, plan: Plan, rules: IngestRules) -> BatchRows:
    """The plan's lines in arrival order: good records with their ingest time and watermark,
    bad lines with their reason."""
    arrivals = arrive(read_lines(landing, plan, rules), plan, rules)
    good: dict[str, list] = {name: [] for name in ARRIVAL_COLUMNS}
    bad: dict[str, list] = {name: [] for name in QUARANTINE_COLUMNS}
    for line, clock, verdict in arrivals.ordered:
        if isinstance(verdict, Rejection):
            for name, value in (("source_partition", line.source_partition),
                                ("source_file", line.source_file),
                                ("line_number", line.line_number),
                                ("ingest_time_ms", clock), ("reason", verdict.reason),
                                ("detail", verdict.detail),
                                ("event_time_ms", verdict.event_time_ms),
                                ("raw_line", (line.text or "")[:RAW_LINE_LIMIT])):
                bad[name].append(value)
            continue
        parsed = line.parsed
        assert isinstance(parsed, ParsedEvent)
        for name, value in (("source_partition", line.source_partition),
                            ("source_file", line.source_file), ("line_number", line.line_number),
                            ("key", parsed.key), ("event_time_ms", parsed.event_time_ms),
                            ("ingest_time_ms", clock), ("watermark_ms", verdict),
                            ("value", parsed.value), ("payload", line.text)):
            good[name].append(value)
    bad_rows = pd.DataFrame(bad, columns=list(QUARANTINE_COLUMNS))
    # ints beside nulls would become float64 and round event times beyond 2**53
    bad_rows["event_time_ms"] = pd.Series(bad["event_time_ms"], dtype=object)
    return BatchRows(pd.DataFrame(good, columns=list(ARRIVAL_COLUMNS)), bad_rows,
                     arrivals.end_state, arrivals.watermark_ms)
