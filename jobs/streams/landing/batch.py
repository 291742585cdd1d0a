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
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from jobs.streams.landing.fast_parse import FastParser
from jobs.streams.landing.folder import LandingFolder, read_range
from jobs.streams.landing.log import CHANGED, DUPLICATE, FilePart, Plan
from jobs.streams.landing.parsing import ParsedEvent, Rejection, check_event_time_bounds
from operators.pipeline import WatermarkSpec
from operators.time import MIN_WATERMARK, parse_timestamp_ms
from operators.watermarks import ArrivalWatermarks, watermark_column

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

    @property
    def parser(self) -> FastParser:
        """``parse_line`` at C speed for these rules (jobs/streams/landing/fast_parse.py),
        built once per process (not pickled with the rules to Spark's executors)."""
        return parser_for(self.max_line_bytes, (self.clock_field, self.punctuation_field))


@lru_cache(maxsize=8)
def parser_for(max_line_bytes: int, extra_fields: tuple[str | None, ...]) -> FastParser:
    return FastParser(max_line_bytes, extra_fields)


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


def _texts(raw: bytes) -> list[str | bytes]:
    """A part's lines as text; a line that is not UTF-8 stays bytes (it is quarantined). The
    whole part is decoded at once when it can be (lines split at the same newlines)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        texts: list[str | bytes] = []
        for chunk in _split_lines(raw):
            try:
                texts.append(chunk.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(chunk)
        return texts
    lines: list[str | bytes] = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _invalid_utf8(part: FilePart, number: int, chunk: bytes) -> Line:
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError as error:
        detail = str(error)[:200]
    return Line(part.name, part.partition, number, None, chunk.decode("utf-8", errors="replace"),
                Rejection(INVALID_UTF8, detail))


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
    raw = read_range(landing, part.name, part.offset, part.size)
    numbered = list(enumerate(_texts(raw), start=part.first_line))
    file_lines: list[Line] = []
    if part.kind == CHANGED:
        for number, text in numbered:
            if isinstance(text, str) and text.strip():
                file_lines.append(Line(part.name, part.partition, number, plan.planned_at_ms,
                                       text, Rejection(FILE_CHANGED, part.same_as or "")))
            elif not isinstance(text, str):
                file_lines.append(_invalid_utf8(part, number, text))
        _fill_clock(file_lines, plan.planned_at_ms)
        return file_lines
    texts = [(number, text) for number, text in numbered
             if not isinstance(text, str) or text.strip()]  # blank lines are not records
    good = [text for _, text in texts if isinstance(text, str)]
    verdicts = iter(rules.parser.parse_many(good))
    name, partition = part.name, part.partition
    for number, text in texts:
        if not isinstance(text, str):
            file_lines.append(_invalid_utf8(part, number, text))
            continue
        parsed = next(verdicts)
        clock = None
        if clock_field is not None and isinstance(parsed, ParsedEvent):
            stamp = parsed.fields.get(clock_field)
            clock = stamp if type(stamp) is int and _CLOCK_RANGE[0] <= stamp <= \
                _CLOCK_RANGE[1] else _clock_of(stamp)
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
        file_lines.append(Line(name, partition, number, clock, text, parsed))
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
    clock, place, partition, event time and parse verdict (not its text).

    The lines' clocks are sorted, so a line's ingest time is its clock or, if later, the last
    one of the batch before (the start state): no good record depends on another's verdict.
    That lets the order, the event-time bounds and (for the strategies
    :func:`~operators.watermarks.watermark_column` computes) the watermarks be columns; other
    strategies walk the records."""
    order = _arrival_order(lines)
    lines = [lines[i] for i in order]
    last_ingest = plan.start_state.get("last_ingest_ms", MIN_WATERMARK)
    clocks = [max(last_ingest, line.clock_ms) for line in lines]
    verdicts: list[int | Rejection | None] = []
    good: list[int] = []
    for index, (line, clock) in enumerate(zip(lines, clocks, strict=True)):
        parsed = line.parsed
        if isinstance(parsed, ParsedEvent):
            event = parsed.event_time_ms
            if event > clock + rules.max_future_ms or event < clock - rules.max_past_ms:
                parsed = check_event_time_bounds(event, clock, rules.max_future_ms,
                                                 rules.max_past_ms)
        if isinstance(parsed, Rejection):
            verdicts.append(parsed)
        else:
            verdicts.append(None)
            good.append(index)
    start = plan.start_state.get("watermarks")
    partitions = [lines[i].source_partition for i in good]
    events = [lines[i].parsed.event_time_ms for i in good]
    ingests = [clocks[i] for i in good]
    column = watermark_column(rules.watermark, start, partitions, events, ingests)
    if column is not None:
        marks, snapshot = column
        for index, mark in zip(good, marks.tolist(), strict=True):
            verdicts[index] = mark
        current = snapshot["combined"]
    else:  # punctuated, or ticks at intervals: the walk
        watermarks = ArrivalWatermarks.restore(rules.watermark, start)
        for index, partition in zip(good, partitions, strict=True):
            verdicts[index] = watermarks.watermark_for(partition, clocks[index])
            watermarks.observe(partition, lines[index].parsed.event_time_ms, clocks[index],
                               lines[index].parsed.fields)
        snapshot, current = watermarks.snapshot(), watermarks.current
    if good:
        last_ingest = clocks[good[-1]]
    state = {"watermarks": snapshot, "last_ingest_ms": last_ingest}
    return Arrivals(list(zip(lines, clocks, verdicts, strict=True)), state, current)


def _arrival_order(lines: list[Line]) -> list[int]:
    """The lines' indexes sorted by ``(clock, file, line number)`` (numpy's lexsort: files
    compare as Python compares strings, by code point)."""
    if not lines:
        return []
    files = np.array([line.source_file for line in lines])
    numbers = np.fromiter((line.line_number for line in lines), dtype=np.int64,
                          count=len(lines))
    clocks = np.fromiter((line.clock_ms for line in lines), dtype=np.int64, count=len(lines))
    return np.lexsort((numbers, files, clocks)).tolist()


def batch_rows(landing: LandingFolder | Path, plan: Plan, rules: IngestRules) -> BatchRows:
    """The plan's lines in arrival order: good records with their ingest time and watermark,
    bad lines with their reason."""
    arrivals = arrive(read_lines(landing, plan, rules), plan, rules)
    ordered = arrivals.ordered
    kept = [(line, clock, mark) for line, clock, mark in ordered
            if not isinstance(mark, Rejection)]
    dropped = [(line, clock, why) for line, clock, why in ordered if isinstance(why, Rejection)]
    good = {
        "source_partition": [line.source_partition for line, _, _ in kept],
        "source_file": [line.source_file for line, _, _ in kept],
        "line_number": [line.line_number for line, _, _ in kept],
        "key": [line.parsed.key for line, _, _ in kept],
        "event_time_ms": [line.parsed.event_time_ms for line, _, _ in kept],
        "ingest_time_ms": [clock for _, clock, _ in kept],
        "watermark_ms": [mark for _, _, mark in kept],
        "value": [line.parsed.value for line, _, _ in kept],
        "payload": [line.text for line, _, _ in kept],
    }
    bad = {
        "source_partition": [line.source_partition for line, _, _ in dropped],
        "source_file": [line.source_file for line, _, _ in dropped],
        "line_number": [line.line_number for line, _, _ in dropped],
        "ingest_time_ms": [clock for _, clock, _ in dropped],
        "reason": [why.reason for _, _, why in dropped],
        "detail": [why.detail for _, _, why in dropped],
        "event_time_ms": [why.event_time_ms for _, _, why in dropped],
        "raw_line": [(line.text or "")[:RAW_LINE_LIMIT] for line, _, _ in dropped],
    }
    bad_rows = pd.DataFrame(bad, columns=list(QUARANTINE_COLUMNS))
    # ints beside nulls would become float64 and round event times beyond 2**53
    bad_rows["event_time_ms"] = pd.Series(bad["event_time_ms"], dtype=object)
    return BatchRows(pd.DataFrame(good, columns=list(ARRIVAL_COLUMNS)), bad_rows,
                     arrivals.end_state, arrivals.watermark_ms)
