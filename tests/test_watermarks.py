"""Watermarks against a brute-force reference that recomputes every tick from scratch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.pipeline import WatermarkSpec
from operators.time import MIN_WATERMARK
from operators.watermarks import ArrivalWatermarks, assign_watermarks
from tests.depth import examples

Record = tuple[str, int, int, dict]


def reference_watermarks(spec: WatermarkSpec, records: list[Record]) -> list[int]:
    """The definition, literally: at each tick, per partition, the strategy over the records that
    arrived before the tick; min over partitions not idle at the tick; never go back."""

    def partition_watermark(events: list[tuple[int, dict]]) -> int:
        if spec.strategy == "punctuated":  # true: the marker's own time; an integer: itself
            marks = [t if e.get(spec.punctuation_field) is True else e[spec.punctuation_field]
                     for t, e in events
                     if e.get(spec.punctuation_field) is True
                     or type(e.get(spec.punctuation_field)) is int]
            return max(marks, default=MIN_WATERMARK)
        delay = spec.max_out_of_orderness_ms if spec.strategy != "monotonous" else 0
        return max(t for t, _ in events) - delay - 1

    def evaluate(combined: int, before: list[tuple[str, int, int, dict]], at: int) -> int:
        candidates = []
        for name in {p for p, _, _, _ in before}:
            mine = [(t, e) for p, t, _, e in before if p == name]
            last_ingest = max(i for p, _, i, _ in before if p == name)
            if spec.idle_timeout_ms is None or at - last_ingest < spec.idle_timeout_ms:
                candidates.append(partition_watermark(mine))
        return max(combined, min(candidates)) if candidates else combined

    combined = MIN_WATERMARK
    result = []
    if spec.tick_interval_ms is None:
        for index, (_, _, ingest, _) in enumerate(records):
            combined = evaluate(combined, records[:index], ingest)
            result.append(combined)
        return result
    n = spec.tick_interval_ms
    first_tick = (records[0][2] // n) * n
    tick = first_tick
    for _, _, ingest, _ in records:
        while tick <= ingest:
            combined = evaluate(combined, [r for r in records if r[2] < tick], tick)
            tick += n
        result.append(combined)
    return result


@st.composite
def arrival_logs(draw, partitions: tuple[str, ...] = ("p0", "p1", "p2")):
    strategy = draw(st.sampled_from(["bounded_out_of_orderness", "monotonous", "punctuated"]))
    spec = WatermarkSpec(
        strategy=strategy,
        max_out_of_orderness_ms=draw(st.integers(0, 50)),
        punctuation_field="mark" if strategy == "punctuated" else None,
        idle_timeout_ms=draw(st.one_of(st.none(), st.integers(1, 60))),
        tick_interval_ms=draw(st.one_of(st.none(), st.integers(1, 40))),
    )
    size = draw(st.integers(1, 40))
    ingest = draw(st.integers(-100, 100))
    records = []
    for _ in range(size):
        ingest += draw(st.integers(0, 30))
        records.append((
            draw(st.sampled_from(partitions)),
            draw(st.integers(-200, 400)),
            ingest,
            {"mark": draw(st.one_of(st.booleans(), st.integers(-200, 400), st.none(),
                                    st.just("yes")))},
        ))
    return spec, records


@settings(max_examples=examples(150), deadline=None)
@given(arrival_logs())
def test_watermarks_match_the_definition(case):
    spec, records = case
    assert assign_watermarks(spec, records) == reference_watermarks(spec, records)


@settings(max_examples=examples(75), deadline=None)
@given(arrival_logs(), st.data())
def test_snapshot_and_restore_anywhere_gives_the_same_watermarks(case, data):
    """Ingest runs in batches; restoring the saved state between them must change nothing."""
    spec, records = case
    cut = data.draw(st.integers(0, len(records)))
    first = ArrivalWatermarks(spec)
    head = assign_watermarks(spec, records[:cut], start=first)
    resumed = ArrivalWatermarks.restore(spec, first.snapshot())
    tail = assign_watermarks(spec, records[cut:], start=resumed)
    assert head + tail == assign_watermarks(spec, records)


def test_bounded_out_of_orderness_is_max_minus_delay_minus_one():
    spec = WatermarkSpec(max_out_of_orderness_ms=10)
    records = [("p", 100, 0, None), ("p", 90, 1, None), ("p", 130, 2, None), ("p", 0, 3, None)]
    assert assign_watermarks(spec, records) == [MIN_WATERMARK, 89, 89, 119]


def test_idle_partition_stops_holding_back_and_the_watermark_never_goes_back():
    spec = WatermarkSpec(max_out_of_orderness_ms=0, idle_timeout_ms=120)
    records = [
        ("slow", 10, 0, None),
        ("fast", 500, 1, None),
        ("fast", 600, 50, None),   # slow is still active: min(9, 499) = 9
        ("fast", 700, 150, None),  # slow idle since 120: fast alone = 599
        ("slow", 20, 160, None),   # slow back with a low watermark: holds at 699, never back
        ("fast", 800, 170, None),
    ]
    assert assign_watermarks(spec, records) == [MIN_WATERMARK, 9, 9, 599, 699, 699]


def test_all_partitions_idle_holds_the_watermark():
    spec = WatermarkSpec(max_out_of_orderness_ms=0, idle_timeout_ms=10)
    records = [("a", 100, 0, None), ("b", 200, 1, None), ("a", 300, 1000, None)]
    assert assign_watermarks(spec, records) == [MIN_WATERMARK, 99, 99]


def test_interval_ticks_move_only_on_the_ingest_clock():
    spec = WatermarkSpec(max_out_of_orderness_ms=0, tick_interval_ms=100)
    records = [("p", 1000, 0, None), ("p", 2000, 50, None), ("p", 3000, 99, None),
               ("p", 4000, 100, None), ("p", 5000, 250, None)]
    # the tick at 0 saw nothing; the tick at 100 saw records ingested before 100 (max 3000);
    # the tick at 200 also saw the one ingested at 100 (max 4000)
    assert assign_watermarks(spec, records) == [MIN_WATERMARK, MIN_WATERMARK, MIN_WATERMARK,
                                                2999, 3999]


@settings(max_examples=examples(150), deadline=None)
@given(arrival_logs(), st.data())
def test_the_vectorised_column_equals_the_walk_from_any_restored_state(case, data):
    """What ingest computes with numpy (``watermark_column``) is what the walk computes, record
    for record, and leaves the same state, from a state restored anywhere in the log."""
    _vectorised_equals_the_walk(case, data)


@settings(max_examples=examples(150), deadline=None)
@given(arrival_logs(partitions=("p0",)).filter(
    lambda case: case[0].strategy != "punctuated" and case[0].tick_interval_ms is None),
    st.data())
def test_one_partitions_column_equals_the_walk(case, data):
    """A stream of one partition (a landing folder with one producer), which the general
    strategy draws rarely: the same watermarks and state as the walk."""
    _vectorised_equals_the_walk(case, data)


def _walked_and_vectorised(spec, records, cut):
    """The walk's watermarks for ``records[cut:]`` from the state after ``records[:cut]``, the
    state it starts from and ends in, and ``watermark_column``'s answer for the same."""
    from operators.watermarks import watermark_column

    walked = ArrivalWatermarks(spec)
    assign_watermarks(spec, records[:cut], start=walked)
    before = walked.snapshot()
    expected = assign_watermarks(spec, records[cut:], start=walked)
    column = watermark_column(spec, before, [r[0] for r in records[cut:]],
                              [r[1] for r in records[cut:]], [r[2] for r in records[cut:]])
    return expected, before, walked.snapshot(), column


def _vectorised_equals_the_walk(case, data) -> None:
    from operators.watermarks import CodedPartitions, watermark_column

    spec, records = case
    cut = data.draw(st.integers(0, len(records)))
    expected, before, after, column = _walked_and_vectorised(spec, records, cut)
    if spec.strategy == "punctuated" or spec.tick_interval_ms is not None:
        assert column is None  # the walk computes those
        return
    assert column is not None
    watermarks, state = column
    assert watermarks.tolist() == expected
    assert state == after
    # the partitions as ingest holds them: codes into names (more names than the records use,
    # in any order)
    names = data.draw(st.permutations(sorted({r[0] for r in records} | {"unused"})))
    coded = watermark_column(spec, before, CodedPartitions(
        names, np.array([names.index(r[0]) for r in records[cut:]], dtype=np.int64)),
        [r[1] for r in records[cut:]], [r[2] for r in records[cut:]])
    assert coded is not None
    assert coded[0].tolist() == expected and coded[1] == state


@pytest.mark.parametrize(("spec", "records", "cut"), [
    # b's first record: a alone is present, so its watermark is a's (b not yet counted)
    (WatermarkSpec(max_out_of_orderness_ms=0),
     [("a", 100, 0, None), ("a", 200, 1, None), ("b", 50, 2, None), ("b", 60, 3, None)], 0),
    # a, restored from before the cut, sends nothing in the batch and is idle from ingest 50
    (WatermarkSpec(max_out_of_orderness_ms=0, idle_timeout_ms=50),
     [("a", 100, 0, None), ("b", 500, 40, None), ("b", 600, 70, None), ("b", 700, 80, None)],
     2),
    # a is idle between two of its records in the batch (from ingest 50 to 80), and only then
    (WatermarkSpec(max_out_of_orderness_ms=0, idle_timeout_ms=50),
     [("a", 100, 0, None), ("b", 500, 10, None), ("b", 600, 60, None), ("b", 700, 70, None),
      ("a", 200, 80, None), ("b", 800, 90, None)], 0),
    # the same from a state restored after a's first record: idle from the batch's start
    (WatermarkSpec(max_out_of_orderness_ms=0, idle_timeout_ms=50),
     [("a", 100, 0, None), ("b", 500, 10, None), ("b", 600, 60, None), ("b", 700, 70, None),
      ("a", 200, 80, None), ("b", 800, 90, None)], 2),
    # a's records every 30 ms never leave it idle: its watermark holds b's back throughout
    (WatermarkSpec(max_out_of_orderness_ms=0, idle_timeout_ms=50),
     [("a", 100, 0, None), ("b", 500, 10, None), ("a", 150, 30, None), ("b", 600, 50, None),
      ("a", 160, 60, None), ("b", 700, 70, None)], 0),
])
def test_the_vectorised_column_counts_a_partition_only_while_it_is_present_and_active(
        spec, records, cut):
    expected, _, after, column = _walked_and_vectorised(spec, records, cut)
    assert column is not None
    assert column[0].tolist() == expected and column[1] == after
