"""Window assigners against the definitions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.time import MAX_TIMESTAMP
from operators.windows import (
    GLOBAL_WINDOW,
    GlobalWindows,
    SessionWindows,
    SlidingWindows,
    TimeWindow,
    TumblingWindows,
)


def test_time_window_basics() -> None:
    window = TimeWindow(0, 10)
    assert window.max_timestamp == 9
    assert window.intersects(TimeWindow(10, 20))  # touching windows intersect (Flink)
    assert not window.intersects(TimeWindow(11, 20))
    assert GLOBAL_WINDOW.max_timestamp == MAX_TIMESTAMP


def test_tumbling_negative_times_and_offset() -> None:
    assigner = TumblingWindows(10)
    assert assigner.assign(-1, None) == [TimeWindow(-10, 0)]
    assert assigner.assign(-10, None) == [TimeWindow(-10, 0)]
    assert assigner.assign(0, None) == [TimeWindow(0, 10)]
    assert assigner.assign(9, None) == [TimeWindow(0, 10)]
    shifted = TumblingWindows(10, offset=3)
    assert shifted.assign(2, None) == [TimeWindow(-7, 3)]
    assert shifted.assign(3, None) == [TimeWindow(3, 13)]
    assert TumblingWindows(10, offset=-3).assign(6, None) == [TimeWindow(-3, 7)]
    with pytest.raises(ValueError):
        TumblingWindows(10, offset=10)


@given(st.integers(-10**6, 10**6), st.integers(1, 50), st.integers(1, 50), st.integers(0, 49))
def test_sliding_assigns_exactly_the_windows_containing_the_time(t: int, size: int, slide: int,
                                                               offset: int) -> None:
    if slide > size:
        size, slide = slide, size
    offset %= slide
    got = SlidingWindows(size, slide, offset).assign(t, None)
    expected = [TimeWindow(s, s + size) for s in range(t - size - slide, t + slide + 1)
                if (s - offset) % slide == 0 and s <= t < s + size]
    assert sorted(got) == expected
    assert got == sorted(got, reverse=True)  # latest start first, as Flink


@given(st.integers(-10**6, 10**6), st.integers(1, 50), st.integers(-49, 49))
def test_tumbling_is_sliding_with_slide_equal_size(t: int, size: int, offset: int) -> None:
    offset = offset % size if offset >= 0 else -((-offset) % size)
    assert TumblingWindows(size, offset).assign(t, None) == \
        SlidingWindows(size, size, offset).assign(t, None)


def test_session_static_and_dynamic_gap() -> None:
    assert SessionWindows(5).assign(7, None) == [TimeWindow(7, 12)]
    assert SessionWindows(gap_field="gap").assign(7, {"gap": 3}) == [TimeWindow(7, 10)]
    assert SessionWindows(gap_fn=lambda e: 2 * e["g"]).assign(1, {"g": 4}) == [TimeWindow(1, 9)]
    with pytest.raises(ValueError):
        SessionWindows(gap_field="gap").assign(7, {"gap": 0})
    with pytest.raises(ValueError):
        SessionWindows()


def test_session_merge_windows_groups() -> None:
    windows = [TimeWindow(0, 5), TimeWindow(5, 8), TimeWindow(20, 25), TimeWindow(3, 4),
               TimeWindow(30, 31)]
    merged = SessionWindows.merge_windows(windows)
    assert merged == [
        (TimeWindow(0, 8), [TimeWindow(0, 5), TimeWindow(3, 4), TimeWindow(5, 8)]),
    ]


def test_global_windows() -> None:
    assert GlobalWindows().assign(-5, None) == [GLOBAL_WINDOW]
