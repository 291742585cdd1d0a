"""One planned ingest batch turned into arrival-log and quarantine rows.

A pure function of the plan (the exact bytes of each file part, the planning time, the state
before the batch), so a batch run again after a crash produces the very same rows: lines are
put in arrival order by ``(ingest clock, file, line)``, each good record gets the next arrival
position and the watermark computed from the records before it; bad lines go to quarantine with
their reason and never move the ingest clock or a watermark.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.streams.landing.fast_parse import FastParser, ParsedLines
from jobs.streams.landing.folder import LandingFolder, read_range
from jobs.streams.landing.lines import Lines
from jobs.streams.landing.log import CHANGED, DUPLICATE, FilePart, Plan
from jobs.streams.landing.parsing import ParsedEvent, Rejection, check_event_time_bounds
from jobs.streams.landing.text_views import TextViews
from operators.pipeline import WatermarkSpec
from operators.time import MIN_WATERMARK, parse_timestamp_ms
from operators.watermarks import ArrivalWatermarks, CodedPartitions, watermark_column

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
    native_scan: bool = True
    """Whether parts are scanned natively where the scanner is built (the rows are the same
    either way: PLATFORM_NATIVE_SCAN)."""

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
        """``parse_line`` at C speed for these rules (jobs.streams.landing.fast_parse),
        built once per process (not pickled with the rules to Spark's executors)."""
        return parser_for(self.max_line_bytes, (self.clock_field, self.punctuation_field),
                          self.native_scan)


@lru_cache(maxsize=8)
def parser_for(max_line_bytes: int, extra_fields: tuple[str | None, ...],
               native_scan: bool = True) -> FastParser:
    return FastParser(max_line_bytes, extra_fields, native_scan=native_scan)


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
    lines, as columns (name -> list, numpy array or Arrow array), plus the watermark state
    after it."""

    good: dict[str, Any]
    """:data:`ARRIVAL_COLUMNS`."""
    bad: dict[str, Any]
    """:data:`QUARANTINE_COLUMNS`."""
    end_state: dict
    watermark_ms: int

    @property
    def records(self) -> int:
        return len(self.good["key"])

    @property
    def quarantined(self) -> int:
        return len(self.bad["reason"])

    @property
    def reasons(self) -> dict[str, int]:
        counts = Counter(self.bad["reason"])
        return {str(k): int(v) for k, v in sorted(counts.items())}


def _clock_of(record_clock: object) -> int | None:
    try:
        value = parse_timestamp_ms(record_clock)
    except (ValueError, OverflowError):
        return None
    return value if _CLOCK_RANGE[0] <= value <= _CLOCK_RANGE[1] else None


def clock_from_text(text: str, clock_field: str) -> int | None:
    """A rejected line may still carry the collector's stamp (say, a bad value)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _clock_of(record.get(clock_field)) if isinstance(record, dict) else None


def _filled(clocks: list[int | None], default_ms: int) -> list[int]:
    """Lines without a stamp take the previous line's, else the next one's, else the batch's."""
    last = None
    filled: list[int | None] = []
    for clock in clocks:
        if clock is None:
            filled.append(last)
        else:
            last = clock
            filled.append(clock)
    following = None
    for index in range(len(filled) - 1, -1, -1):
        if filled[index] is None:
            filled[index] = following if following is not None else default_ms
        elif clocks[index] is not None:
            following = clocks[index]
    return filled  # type: ignore[return-value]


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


@dataclass
class PartRead:
    """One file part's lines as columns, in file order: each line's number, text, ingest
    clock and outcome (a record, or why it is quarantined)."""

    name: str
    partition: str
    numbers: np.ndarray
    """int64 line numbers (a Kafka partition's offsets)."""
    texts: Sequence[str]
    """A list, or :class:`Lines` (a landing part's bytes)."""
    clocks: np.ndarray
    """int64 ingest clocks."""
    parsed: ParsedLines
    stamps: list[int | None] | None = None
    """A Kafka partition's record timestamps (landing files have none)."""
    stamped: bool = False
    """Every line's clock is its own stamp (none took a neighbour's or the plan's time): only
    then does the part say where its partition's unread lines can begin
    (jobs.streams.batch_cut)."""

    def __len__(self) -> int:
        return len(self.texts)

    def head(self, count: int) -> PartRead:
        """Its first ``count`` lines (a batch cut short: jobs.streams.batch_cut)."""
        if count >= len(self):
            return self
        texts = self.texts.head(count) if isinstance(self.texts, Lines) \
            else list(self.texts[:count])
        return replace(self, numbers=self.numbers[:count], texts=texts,
                       clocks=self.clocks[:count], parsed=self.parsed.head(count),
                       stamps=None if self.stamps is None else self.stamps[:count])

    @classmethod
    def from_verdicts(cls, name: str, partition: str, numbers: Sequence[int],
                      texts: list[str], clocks: Sequence[int],
                      verdicts: Sequence[ParsedEvent | Rejection],
                      stamps: list[int | None] | None = None,
                      stamped: bool = False) -> PartRead:
        """A part whose lines were judged one by one."""
        return cls(name, partition, np.asarray(numbers, dtype=np.int64), texts,
                   np.asarray(clocks, dtype=np.int64), ParsedLines.from_verdicts(verdicts),
                   stamps, stamped)


def read_part(landing: LandingFolder | Path, plan: Plan, part: FilePart,
              rules: IngestRules) -> PartRead:
    """Every line of one file part, parsed, with its ingest clock: a function of the part's
    bytes and the plan alone, so parts can be read in any order and on any machine."""
    if part.kind == DUPLICATE:
        # it arrived when this batch was planned; its own lines are never read
        return PartRead.from_verdicts(part.name, part.partition, [0], [""],
                                      [plan.planned_at_ms], [Rejection(
            DUPLICATE_FILE, f"same content as {part.same_as}, already ingested; its lines "
                            "are not read again")])
    raw = read_range(landing, part.name, part.offset, part.size)
    texts: Sequence[str] | None = Lines.of(raw)  # the usual part, kept as its bytes
    if texts is None:
        lines = _texts(raw)
        if all(type(text) is str for text in lines) and all(map(str.strip, lines)):
            texts = lines  # type: ignore[assignment]  # all good text
    if texts is not None:
        numbers = np.arange(part.first_line, part.first_line + len(texts), dtype=np.int64)
        parsed = _judge(texts, part, rules)
    else:
        numbers, texts, parsed = _read_mixed(lines, part, rules)
    clocks, stamped = _clocks(texts, parsed, part, plan, rules)
    return PartRead(part.name, part.partition, numbers, texts, clocks, parsed, None, stamped)


def _judge(texts: Sequence[str], part: FilePart, rules: IngestRules) -> ParsedLines:
    if part.kind == CHANGED:
        return ParsedLines.from_verdicts([Rejection(FILE_CHANGED, part.same_as or "")]
                                         * len(texts), rules.parser.extras)
    return rules.parser.parse_columns(texts)


def _read_mixed(lines: list[str | bytes], part: FilePart, rules: IngestRules,
                ) -> tuple[np.ndarray, list[str], ParsedLines]:
    """A part with blank lines (not records) or lines that are not UTF-8 (quarantined)."""
    kept = [(number, text) for number, text in enumerate(lines, start=part.first_line)
            if not isinstance(text, str) or text.strip()]
    judged = iter(_judge([text for _, text in kept if isinstance(text, str)], part, rules)
                  .verdicts())
    texts: list[str] = []
    verdicts: list[ParsedEvent | Rejection] = []
    for number, text in kept:
        if isinstance(text, str):
            texts.append(text)
            verdicts.append(next(judged))
        else:
            line = _invalid_utf8(part, number, text)
            texts.append(line.text or "")
            verdicts.append(line.parsed)
    numbers = np.fromiter((number for number, _ in kept), dtype=np.int64, count=len(kept))
    return numbers, texts, ParsedLines.from_verdicts(verdicts, rules.parser.extras)


def _clocks(texts: Sequence[str], parsed: ParsedLines, part: FilePart, plan: Plan,
            rules: IngestRules) -> tuple[np.ndarray, bool]:
    """Each line's ingest clock: the collector's stamp where the line has a usable one, else
    the line before's, else the next one's, else the plan's time; and whether every line had
    its own. A record stamped beyond ``max_future_ms`` after the plan's time is quarantined
    (``parsed`` is changed)."""
    clock_field = rules.clock_field
    invalid = {i for i, verdict in parsed.slow.items()
               if type(verdict) is Rejection and verdict.reason == INVALID_UTF8}
    count = len(texts)
    if part.kind == CHANGED:
        clocks = np.full(count, plan.planned_at_ms, dtype=np.int64)
        clocks[sorted(invalid)] = _NO_STAMP
    elif clock_field is None:
        clocks = np.full(count, _NO_STAMP, dtype=np.int64)
    else:
        clocks = _stamps(parsed.extras[clock_field])
        for i in np.flatnonzero(~parsed.is_event).tolist():
            clock = None if i in invalid else clock_from_text(texts[i], clock_field)
            clocks[i] = _NO_STAMP if clock is None else clock
    stamp_limit = plan.planned_at_ms + rules.max_future_ms
    for i in np.flatnonzero(clocks > stamp_limit).tolist():
        # a collector stamp from the future would drag the ingest clock (and with it
        # idleness and interval ticks, hence watermarks) forward for every later record
        if parsed.is_event[i] and part.kind != CHANGED:
            parsed.reject(i, Rejection(BAD_INGEST_STAMP,
                                       f"{clock_field}={int(clocks[i])} is more than "
                                       "max_future_ms after the wall clock when the batch was "
                                       f"planned ({plan.planned_at_ms})",
                                       int(parsed.events[i])))
        clocks[i] = _NO_STAMP
    return _filled_clocks(clocks, plan.planned_at_ms), bool(np.all(clocks != _NO_STAMP))


_NO_STAMP = -1
"""A line without a usable stamp (every usable one is within ``_CLOCK_RANGE``, from 0)."""


def _stamps(column: list[Any]) -> np.ndarray:
    """The records' stamps as clocks (``_NO_STAMP`` where none is usable): at once when every
    stamp is an integer or missing, one by one otherwise (ISO text, say)."""
    if set(map(type, column)) <= {int, type(None)}:
        try:
            stamps = pa.array(column, pa.int64())
        except (pa.ArrowInvalid, OverflowError):  # beyond 64 bits: not a usable stamp
            pass
        else:
            values = pc.fill_null(stamps, _NO_STAMP).to_numpy().copy()
            values[(values < _CLOCK_RANGE[0]) | (values > _CLOCK_RANGE[1])] = _NO_STAMP
            return values
    return np.array([_NO_STAMP if clock is None else clock
                     for clock in map(_stamp_clock, column)], dtype=np.int64)


def _filled_clocks(clocks: np.ndarray, default_ms: int) -> np.ndarray:
    """:func:`_filled` over an array (``_NO_STAMP``: no stamp): the previous stamped line's
    clock, before the first one the first one's, without any the batch's."""
    stamped = clocks != _NO_STAMP
    if stamped.all():
        return clocks
    if not stamped.any():
        return np.full(len(clocks), default_ms, dtype=np.int64)
    previous = np.maximum.accumulate(np.where(stamped, np.arange(len(clocks)), -1))
    previous[previous < 0] = int(np.argmax(stamped))
    return clocks[previous]


def _stamp_clock(stamp: object) -> int | None:
    if type(stamp) is int and _CLOCK_RANGE[0] <= stamp <= _CLOCK_RANGE[1]:
        return stamp
    return None if stamp is None else _clock_of(stamp)


def part_lines(landing: LandingFolder | Path, plan: Plan, part: FilePart,
               rules: IngestRules) -> list[Line]:
    """:func:`read_part` as lines (Spark's executors read parts this way)."""
    read = read_part(landing, plan, part, rules)
    return [Line(read.name, read.partition, number, clock, text, read.parsed.verdict(index))
            for index, (number, clock, text) in enumerate(zip(
                read.numbers.tolist(), read.clocks.tolist(), read.texts, strict=True))]


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
    bad lines with their reason; as :func:`arrive` orders and walks them, with columns (numpy
    where it can) instead of a line at a time."""
    return arrival_rows(read_parts_here(landing, plan, rules), plan.start_state, rules)


def read_parts_here(landing: LandingFolder | Path, plan: Plan, rules: IngestRules
                    ) -> list[PartRead]:
    """Every part of the plan read in this process, in plan order."""
    return [read_part(landing, plan, part, rules) for part in plan.files]


def arrival_rows(reads: list[PartRead], start_state: dict, rules: IngestRules) -> BatchRows:
    """Parts' lines (a landing file's, a Kafka partition's) in arrival order by ``(clock, part,
    line number)``: good records with their ingest time and watermark, bad lines with their
    reason. A part's ``stamps``, when it has them, go along as the column ``stamp_ms``.

    Columns throughout: a line's place in the batch is its index into the parts' columns
    laid end to end, and the arrival order a permutation of those indexes."""
    names, file_of_read = _coded([read.name for read in reads])
    sizes = [len(read) for read in reads]
    starts = np.cumsum([0, *sizes])
    owner = np.repeat(np.arange(len(reads), dtype=np.int64), sizes)
    codes = np.repeat(file_of_read, sizes)
    numbers = _joined([read.numbers for read in reads])
    clocks = _joined([read.clocks for read in reads])
    order = _arrival_permutation(clocks, codes, numbers)
    last_ingest = start_state.get("last_ingest_ms", MIN_WATERMARK)
    clocks = np.maximum(clocks, last_ingest)  # the lines' clocks are sorted (see arrive)
    is_event = np.concatenate([read.parsed.is_event for read in reads]) if reads \
        else np.zeros(0, dtype=bool)
    events = _joined([read.parsed.events for read in reads])
    out_of_bounds = is_event & ((events > clocks + rules.max_future_ms)
                                | (events < clocks - rules.max_past_ms))
    good_mask = (is_event & ~out_of_bounds)[order]
    good = order[good_mask]  # batch indexes of the good records, in arrival order
    bad = order[~good_mask]
    partitions_of = [read.partition for read in reads]
    partition_names, partition_of_read = _coded(partitions_of)
    good_partitions = CodedPartitions(partition_names, partition_of_read[owner[good]])
    start = start_state.get("watermarks")
    column = watermark_column(rules.watermark, start, good_partitions, events[good],
                              clocks[good])
    if column is not None:
        marks, snapshot = column
        current = snapshot["combined"]
    else:  # punctuated, or ticks at intervals: the walk
        watermarks = ArrivalWatermarks.restore(rules.watermark, start)
        walked = []
        for i, code in zip(good.tolist(), good_partitions.codes.tolist(), strict=True):
            partition = partition_names[code]
            read = reads[int(owner[i])]
            walked.append(watermarks.watermark_for(partition, int(clocks[i])))
            watermarks.observe(partition, int(events[i]), int(clocks[i]),
                               read.parsed.verdict(i - int(starts[owner[i]])).fields)
        marks = np.array(walked, dtype=np.int64)
        snapshot, current = watermarks.snapshot(), watermarks.current
    if len(good):
        last_ingest = int(clocks[good[-1]])
    # one array per column, not a chunk per part: the arrival order interleaves the parts, and
    # a take across many chunks cost more (1 M lines in 100 files: 0.56 s against 0.43 s,
    # benchmarks/history.md)
    keys = _one_array([read.parsed.key_column() for read in reads])
    values = pa.concat_arrays([read.parsed.value_column() for read in reads]) if reads \
        else pa.array([], pa.decimal128(38, 9))
    texts = TextViews.of([read.texts for read in reads])
    if any(read.stamps is not None for read in reads):  # a Kafka batch's record timestamps
        stamps = [st for read in reads for st in (read.stamps or [None] * len(read))]
        good_stamps = [stamps[i] for i in good.tolist()]
        bad_stamps = [stamps[i] for i in bad.tolist()]
    else:
        good_stamps, bad_stamps = [None] * len(good), [None] * len(bad)
    good_at = pa.array(good)
    good_rows = {
        "source_partition": pa.array(partition_names, pa.string())
                            .take(pa.array(good_partitions.codes)),
        "source_file": pa.array(names, pa.string()).take(pa.array(codes[good])),
        "line_number": numbers[good], "key": keys.take(good_at),
        "event_time_ms": events[good], "ingest_time_ms": clocks[good], "watermark_ms": marks,
        "value": values.take(good_at), "payload": texts.take(good),
        "stamp_ms": good_stamps,
    }
    dropped = bad.tolist()
    rejections = [_rejection(reads, owner, starts, i, out_of_bounds, events, clocks, rules)
                  for i in dropped]
    bad_rows = {
        "source_partition": [partitions_of[r] for r in owner[bad].tolist()],
        "source_file": [names[c] for c in codes[bad].tolist()], "line_number": numbers[bad],
        "ingest_time_ms": clocks[bad], "reason": [r.reason for r in rejections],
        "detail": [r.detail for r in rejections],
        "event_time_ms": [r.event_time_ms for r in rejections],
        "raw_line": [text[:RAW_LINE_LIMIT] for text in texts.take(bad).to_pylist()],
        "stamp_ms": bad_stamps,
    }
    state = {"watermarks": snapshot, "last_ingest_ms": last_ingest}
    return BatchRows(good_rows, bad_rows, state, current)


def _arrival_permutation(clocks: np.ndarray, codes: np.ndarray, numbers: np.ndarray
                         ) -> np.ndarray:
    """The permutation that sorts the lines by ``(clock, file, line number)``, stably. A batch
    of one source partition's files, each with its clocks rising, comes in that order already:
    a check in a few passes then spares the sort (800,000 lines: about 5 ms against 17-37 ms).
    Partitions whose files overlap in time interleave. Their lines still come in ``(file,
    line number)`` order (a plan lists its files by name), so a stable sort by clock alone
    gives the same permutation: ties keep that order. numpy's stable sort merges the runs of
    rising clocks it finds, one per file, where a lexsort of three keys sorts every key in full
    (600,000 lines of 3 files: 1.9 ms against 8.2; benchmarks/history.md, "Searched again").
    Lines in any other order are lexsorted."""
    count = len(clocks)
    if count < 2:
        return np.arange(count, dtype=np.int64)
    later_clock = clocks[1:] > clocks[:-1]
    same_clock = clocks[1:] == clocks[:-1]
    in_file_order = (codes[1:] > codes[:-1]) | ((codes[1:] == codes[:-1])
                                                 & (numbers[1:] >= numbers[:-1]))
    if bool(np.all(later_clock | (same_clock & in_file_order))):
        return np.arange(count, dtype=np.int64)  # a stable sort of sorted lines changes none
    if bool(np.all(in_file_order)):
        return np.argsort(clocks, kind="stable")
    return np.lexsort((numbers, codes, clocks))


def _coded(labels: list[str]) -> tuple[list[str], np.ndarray]:
    """The labels' distinct values in order, and each label's index into them."""
    names = sorted(set(labels))
    code_of = {name: code for code, name in enumerate(names)}
    return names, np.array([code_of[label] for label in labels], dtype=np.int64)


def _one_array(chunks: list[pa.Array]) -> pa.Array | pa.ChunkedArray:
    """Strings of the parts as one array, or as chunks when they hold 2 GiB or more (an
    Arrow string array's offsets are 32-bit)."""
    if sum(chunk.nbytes for chunk in chunks) < 2**31 - 1:
        return pa.chunked_array(chunks, pa.string()).combine_chunks()
    return pa.chunked_array(chunks, pa.string())


def _joined(columns: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(columns).astype(np.int64, copy=False) if columns \
        else np.zeros(0, dtype=np.int64)


def _rejection(reads: list[PartRead], owner: np.ndarray, starts: np.ndarray, index: int,
               out_of_bounds: np.ndarray, events: np.ndarray, clocks: np.ndarray,
               rules: IngestRules) -> Rejection:
    """Why line ``index`` of the batch is quarantined: its parse's rejection, or an event
    time too far from its ingest time."""
    if out_of_bounds[index]:
        rejection = check_event_time_bounds(int(events[index]), int(clocks[index]),
                                            rules.max_future_ms, rules.max_past_ms)
        assert rejection is not None
        return rejection
    part = int(owner[index])
    return reads[part].parsed.rejection(index - int(starts[part]))
