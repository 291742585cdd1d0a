"""Ingest's columnar batch (``batch_rows``: parts parsed as columns, ordered and walked with
numpy) against a line-by-line reference: every line decoded alone by ``parse_line``, its
ingest clock taken as the contract says (its collector stamp, a stamp from the future
quarantined, a line without one taking its neighbour's), and then ``arrive``, the walk that
puts lines in arrival order one at a time. For any files of good, bad, blank, non-UTF-8 and
oddly stamped lines, over any watermark strategy, both give the same arrival-log and
quarantine rows, column by column."""

from __future__ import annotations

import json
import tempfile
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.streams.landing.batch import (
    BAD_INGEST_STAMP,
    FILE_CHANGED,
    RAW_LINE_LIMIT,
    IngestRules,
    Line,
    _clock_of,
    _filled,
    _invalid_utf8,
    arrive,
    batch_rows,
    clock_from_text,
)
from jobs.streams.landing.log import CHANGED, NEW, FilePart, Plan
from jobs.streams.landing.parsing import ParsedEvent, Rejection, parse_line
from operators.pipeline import WatermarkSpec
from tests.depth import examples

PLANNED_AT = 1_767_225_600_000
MAX_FUTURE = 60_000
MAX_PAST = 3_600_000

STAMPS = st.one_of(st.none(), st.integers(PLANNED_AT - 100_000, PLANNED_AT + 100_000),
                   st.just("2026-01-01T00:00:30Z"), st.just("later"),
                   # no usable stamp: before 1970, after 9999, beyond 64 bits, a boolean
                   st.sampled_from([-5, 253_402_300_800_000, 2**70, True]))
GOOD = st.builds(
    lambda key, offset, value, stamp, mark: json.dumps(
        {"key": key, "event_time": PLANNED_AT + offset, "value": value,
         **({} if stamp is None else {"received_at": stamp}),
         **({} if mark is None else {"mark": mark})}, separators=(",", ":")),
    st.sampled_from(["a", "b", "c", " d", "é"]), st.integers(-4_000_000, 100_000),
    st.one_of(st.none(), st.integers(-5, 5), st.decimals("-9.5", "9.5", places=2).map(float)),
    STAMPS, st.one_of(st.none(), st.booleans()))
LINE = st.one_of(
    GOOD, GOOD, GOOD,
    st.just(""), st.just("   "), st.just("{broken"), st.just("[1, 2]"),
    st.just('{"key": "a", "event_time": "2026-01-01T00:00:10Z", "received_at": 5}'),
    st.just('{"key": "a", "event_time": 1767225600000, "value": 0.1234567891}'),
    st.just('{"event_time": 1767225600000, "received_at": 1767225600500}'),
    st.text(max_size=20),
)
LINES = st.lists(st.one_of(LINE.map(lambda text: text.encode("utf-8", "surrogatepass")),
                           st.just(b'{"key": "\xff", "event_time": 1}')), max_size=12)
WATERMARKS = st.sampled_from([
    WatermarkSpec(max_out_of_orderness_ms=5_000),
    WatermarkSpec(max_out_of_orderness_ms=0, idle_timeout_ms=20_000),
    WatermarkSpec(max_out_of_orderness_ms=1_000, tick_interval_ms=10_000),
    WatermarkSpec(strategy="punctuated", punctuation_field="mark"),
])


def _reference_lines(folder: Path, plan: Plan, part: FilePart, rules: IngestRules
                     ) -> list[Line]:
    """One part's lines judged one at a time, as the contract states it."""
    raw = (folder / part.name).read_bytes()[part.offset:part.size]
    chunks = raw.split(b"\n")
    if chunks and chunks[-1] == b"":
        chunks.pop()
    lines: list[Line] = []
    for number, chunk in enumerate(chunks, start=part.first_line):
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError:
            lines.append(_invalid_utf8(part, number, chunk))
            continue
        if not text.strip():
            continue
        if part.kind == CHANGED:
            lines.append(Line(part.name, part.partition, number, plan.planned_at_ms, text,
                              Rejection(FILE_CHANGED, part.same_as or "")))
            continue
        parsed = parse_line(text, rules.max_line_bytes)
        clock = _clock_of(parsed.fields.get("received_at")) \
            if isinstance(parsed, ParsedEvent) else clock_from_text(text, "received_at")
        if clock is not None and clock > plan.planned_at_ms + rules.max_future_ms:
            if isinstance(parsed, ParsedEvent):
                parsed = Rejection(BAD_INGEST_STAMP,
                                   f"received_at={clock} is more than max_future_ms after the "
                                   f"wall clock when the batch was planned "
                                   f"({plan.planned_at_ms})", parsed.event_time_ms)
            clock = None
        lines.append(Line(part.name, part.partition, number, clock, text, parsed))
    for line, clock in zip(lines, _filled([line.clock_ms for line in lines],
                                          plan.planned_at_ms), strict=True):
        line.clock_ms = clock
    return lines


def _reference_rows(lines: list[Line], plan: Plan, rules: IngestRules):
    arrivals = arrive(lines, plan, rules)
    good, bad = [], []
    for line, clock, verdict in arrivals.ordered:
        if isinstance(verdict, Rejection):
            bad.append((line.source_partition, line.source_file, line.line_number, clock,
                        verdict.reason, verdict.detail, verdict.event_time_ms,
                        (line.text or "")[:RAW_LINE_LIMIT]))
        else:
            parsed = line.parsed
            good.append((line.source_partition, line.source_file, line.line_number,
                         parsed.key, parsed.event_time_ms, clock, verdict, parsed.value,
                         line.text))
    return good, bad, arrivals.end_state, arrivals.watermark_ms


def _values(values) -> list:
    """A column as the arrival log holds it (the fast paths keep some as Arrow)."""
    return values.to_pylist() if isinstance(values, pa.Array | pa.ChunkedArray) else list(values)


def _rows(rows):
    good, bad = rows.good, rows.bad
    good_rows = list(zip(_values(good["source_partition"]), _values(good["source_file"]),
                         [int(n) for n in good["line_number"]], _values(good["key"]),
                         [int(e) for e in good["event_time_ms"]],
                         [int(c) for c in good["ingest_time_ms"]],
                         [int(w) for w in good["watermark_ms"]], _values(good["value"]),
                         _values(good["payload"]),
                         strict=True))
    bad_rows = list(zip(bad["source_partition"], bad["source_file"],
                        [int(n) for n in bad["line_number"]],
                        [int(c) for c in bad["ingest_time_ms"]], bad["reason"], bad["detail"],
                        bad["event_time_ms"], bad["raw_line"], strict=True))
    return good_rows, bad_rows, rows.end_state, rows.watermark_ms


FILES = st.lists(st.tuples(st.sampled_from(["producer-0", "producer-1"]), LINES, st.booleans()),
                 min_size=1, max_size=4)
"""Landing files: each a partition, its lines, and whether it changed after an ingest."""


def landed_parts(folder: Path, files: list) -> list[FilePart]:
    """``files`` (:data:`FILES`) written under ``folder``, as a batch's parts."""
    parts = []
    for index, (partition, lines, changed) in enumerate(files):
        name = f"{partition}/f-{index}.jsonl"
        (folder / partition).mkdir(exist_ok=True)
        data = b"\n".join(lines) + (b"\n" if lines else b"")
        (folder / name).write_bytes(data)
        parts.append(FilePart(name, len(data), 0, "sha", CHANGED if changed else NEW,
                              same_as="bytes 0..4 changed" if changed else None))
    return parts


@settings(max_examples=examples(300), deadline=None)
@given(files=FILES, watermark=WATERMARKS,
       last_ingest=st.sampled_from([None, PLANNED_AT - 50_000]))
def test_columnar_batch_rows_equal_the_line_by_line_walk(files, watermark, last_ingest):
    rules = IngestRules("field:received_at", MAX_FUTURE, MAX_PAST, 90, watermark)
    start_state = {} if last_ingest is None else {"last_ingest_ms": last_ingest}
    with tempfile.TemporaryDirectory() as home:
        folder = Path(home)
        parts = landed_parts(folder, files)
        plan = Plan(7, tuple(parts), 100, PLANNED_AT, start_state)
        expected = _reference_rows(
            [line for part in parts for line in _reference_lines(folder, plan, part, rules)],
            plan, rules)
        assert _rows(batch_rows(folder, plan, rules)) == expected


def test_a_part_of_plain_good_lines_keeps_every_field():
    """A part of plain good lines: the records, values exact, stamps read."""
    rules = IngestRules("field:received_at", MAX_FUTURE, MAX_PAST, 1_000,
                        WatermarkSpec(max_out_of_orderness_ms=5_000))
    lines = [json.dumps({"key": f"k{i}", "event_time": PLANNED_AT + i, "value": i / 4,
                         "received_at": PLANNED_AT + 10 * i}) for i in range(50)]
    with tempfile.TemporaryDirectory() as home:
        folder = Path(home)
        (folder / "p").mkdir()
        data = ("\n".join(lines) + "\n").encode()
        (folder / "p/f.jsonl").write_bytes(data)
        plan = Plan(1, (FilePart("p/f.jsonl", len(data), 0, "sha"),), 0, PLANNED_AT + 1_000)
        rows = batch_rows(folder, plan, rules)
    assert rows.records == 50 and rows.quarantined == 0
    assert _values(rows.good["value"][:5]) == [Decimal(v) for v in ("0", "0.25", "0.5", "0.75",
                                                                    "1")]
    assert list(rows.good["ingest_time_ms"][:3]) == [PLANNED_AT, PLANNED_AT + 10,
                                                     PLANNED_AT + 20]
    assert list(rows.good["watermark_ms"][1:3]) == [PLANNED_AT - 5_001, PLANNED_AT - 5_000]


def _long_file(length: int, stamp: int, bad: set[int], seed: int) -> list[bytes]:
    """A producer's file of ``length`` lines stamped ``stamp``, the lines at ``bad`` broken."""
    return [b"{broken" if i in bad else json.dumps(
        {"key": f"user-{(seed + i) % 7}", "event_time": PLANNED_AT - 30_000 + (seed * i) % 9_000,
         "value": round((seed + i) % 500 / 100, 2), "received_at": stamp},
        separators=(",", ":")).encode() for i in range(length)]


LONG_FILES = st.lists(st.builds(
    lambda partition, length, stamp, bad, seed: (
        partition, _long_file(length, PLANNED_AT + stamp, set(bad), seed), False),
    st.sampled_from(["producer-0", "producer-1", "producer-2"]), st.integers(64, 200),
    st.sampled_from([-3_000, -2_000, -1_000, 0]),
    st.lists(st.integers(0, 199), max_size=4), st.integers(0, 50)), min_size=1, max_size=5)
"""Producers' files of 64 to 200 lines, each stamped as a whole, arriving in turns by their
stamps (so the arrival order interleaves the files in long runs), a few lines broken."""


@settings(max_examples=examples(40), deadline=None)
@given(files=LONG_FILES, watermark=WATERMARKS)
def test_long_files_arriving_in_turns_give_the_line_by_line_rows(files, watermark):
    rules = IngestRules("field:received_at", MAX_FUTURE, MAX_PAST, 200, watermark)
    with tempfile.TemporaryDirectory() as home:
        folder = Path(home)
        parts = landed_parts(folder, files)
        plan = Plan(3, tuple(parts), 0, PLANNED_AT, {})
        expected = _reference_rows(
            [line for part in parts for line in _reference_lines(folder, plan, part, rules)],
            plan, rules)
        assert _rows(batch_rows(folder, plan, rules)) == expected


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
                max_size=30), st.sampled_from(["any", "arrival", "file"]))
def test_the_arrival_permutation_is_numpys_stable_lexsort(lines, order):
    """Lines already in ``(clock, file, line number)`` order skip the sort, and lines in
    ``(file, line number)`` order are sorted by clock alone: the permutation is still exactly
    the stable lexsort's, ties and all."""
    import numpy as np

    from jobs.streams.landing.batch import _arrival_permutation

    if order == "arrival":
        lines = sorted(lines)
    elif order == "file":
        lines = sorted(lines, key=lambda line: line[1:])
    clocks, codes, numbers = (np.array([line[i] for line in lines], dtype=np.int64)
                              for i in range(3))
    expected = np.lexsort((numbers, codes, clocks)) if lines else np.empty(0, dtype=np.int64)
    assert _arrival_permutation(clocks, codes, numbers).tolist() == expected.tolist()
