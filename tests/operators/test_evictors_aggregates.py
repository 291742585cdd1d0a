"""Evictors and aggregate functions."""

from __future__ import annotations

import pytest

from operators.aggregates import Count, Max, Mean, Min, NamedAggregates, Sum
from operators.evictors import CountEvictor, DeltaEvictor, TimeEvictor
from operators.pipeline import AggregateSpec
from operators.windows import TimeWindow

W = TimeWindow(0, 100)


def elements(*pairs: tuple[int, int]) -> list:
    return [(t, {"v": v}, i) for i, (t, v) in enumerate(pairs)]


def test_count_evictor_keeps_most_recent() -> None:
    items = elements((5, 1), (1, 2), (3, 3))
    assert CountEvictor(2).evict_before(items, W) == items[1:]
    assert CountEvictor(5).evict_before(items, W) == items
    after = CountEvictor(1, evict_after=True)
    assert after.evict_before(items, W) == items
    assert after.evict_after_fn(items, W) == items[2:]


def test_time_evictor_cutoff_is_inclusive() -> None:
    items = elements((10, 1), (15, 2), (20, 3), (12, 4))
    # newest event time 20, keep 5 ms: evict t <= 15
    assert TimeEvictor(5).evict_before(items, W) == [items[2]]
    assert TimeEvictor(10).evict_before(items, W) == [items[1], items[2], items[3]]
    assert TimeEvictor(5).evict_before([], W) == []


def test_delta_evictor_against_last_element() -> None:
    items = elements((1, 1), (2, 10), (3, 7), (4, 8))
    # last value 8: evict |v - 8| >= 3
    assert DeltaEvictor.on_field(3, "v").evict_before(items, W) == items[1:]
    assert DeltaEvictor.on_field(2, "v").evict_before(items, W) == items[2:]


def test_builtin_aggregates_follow_sql() -> None:
    rows = [{"v": 3}, {"v": None}, {}, {"v": 1.5}, {"v": -2}]
    for fn, expected in [(Count(), 5), (Count("v"), 3), (Sum("v"), 2.5), (Min("v"), -2),
                         (Max("v"), 3), (Mean("v"), 2.5 / 3)]:
        acc = fn.create_accumulator()
        for row in rows:
            acc = fn.add(row, acc)
        assert fn.get_result(acc) == pytest.approx(expected)
    for fn in (Sum("v"), Min("v"), Max("v"), Mean("v")):
        acc = fn.add({}, fn.create_accumulator())
        assert fn.get_result(acc) is None


def test_merge_equals_adding_everything() -> None:
    aggs = NamedAggregates.from_specs([AggregateSpec("n", "count"),
                                       AggregateSpec("s", "sum", "v"),
                                       AggregateSpec("lo", "min", "v"),
                                       AggregateSpec("hi", "max", "v"),
                                       AggregateSpec("m", "mean", "v")])
    left, right = [{"v": 4}, {"v": 1}], [{"v": 9}, {}]
    a = aggs.create_accumulator()
    for row in left:
        a = aggs.add(row, a)
    b = aggs.create_accumulator()
    for row in right:
        b = aggs.add(row, b)
    both = aggs.create_accumulator()
    for row in left + right:
        both = aggs.add(row, both)
    assert aggs.get_result(aggs.merge(a, b)) == aggs.get_result(both) == {
        "n": 4, "s": 14, "lo": 1, "hi": 9, "m": 14 / 3}
    assert aggs.over([(0, row, i) for i, row in enumerate(left + right)]) == aggs.get_result(both)
