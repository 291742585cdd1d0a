"""The days a full backfill computes, found from the log's earliest and latest event times
(file statistics) instead of a Spark job over every record's windows: the same days as every
record's windows give, for any events, window and time zone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.tables.days import day_of
from jobs.windows.vectorised import end_days
from operators.build import build_assigner
from operators.pipeline import WindowSpec
from tests.depth import examples

MINUTE = 60_000
WINDOWS = st.one_of(
    st.builds(lambda size, offset: WindowSpec(type="tumbling", size_ms=size * MINUTE,
                                              offset_ms=offset * 1000),
              st.integers(1, 24 * 60), st.integers(0, 59)),
    st.builds(lambda slide, times, offset: WindowSpec(type="sliding",
                                                      size_ms=slide * times * MINUTE,
                                                      slide_ms=slide * MINUTE,
                                                      offset_ms=offset * 1000),
              st.integers(1, 120), st.integers(1, 12), st.integers(0, 59)))
ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata",
                         "Pacific/Chatham"])
EVENTS = st.lists(st.integers(1_600_000_000_000, 1_900_000_000_000), min_size=1, max_size=40)


@settings(max_examples=examples(300), deadline=None)
@given(EVENTS, WINDOWS, ZONES)
def test_the_first_and_last_end_days_come_from_the_extreme_event_times(events, window, zone):
    assigner = build_assigner(window)
    days = [day_of(w.end - 1, zone) for t in events for w in assigner.assign(t, None)]
    assert end_days((min(events), max(events)), window, zone) == \
        (min(days).isoformat(), max(days).isoformat())


def test_an_empty_log_has_the_epoch_day():
    window = WindowSpec(type="tumbling", size_ms=MINUTE)
    assert end_days((None, None), window, "UTC") == ("1970-01-01", "1970-01-01")
