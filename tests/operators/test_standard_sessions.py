"""The session driver (operators.standard_sessions) against the window operator it stands in
for: for any key's records in arrival order, any gap, allowed lateness and built-in aggregates,
any points at which a runtime fires timers at a recorded watermark, and any point at which a
key's state is snapshotted by one driver and restored by the other, both emit the same panes
(every field and value), the same late records and the same assignments."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.build import build_driver
from operators.pipeline import parse_pipeline
from operators.standard_sessions import SessionDriver, is_standard_session
from operators.time import MIN_WATERMARK
from tests.depth import examples

FIELD_VALUES = st.one_of(
    st.none(), st.integers(-1000, 1000),
    st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e6"), places=3,
                allow_nan=False, allow_infinity=False),
    st.floats(-1e6, 1e6, allow_nan=False), st.just("not a number"), st.just(True))
AGGREGATES = st.lists(st.sampled_from([
    ("count", None), ("count", "x"), ("sum", "value"), ("sum", "x"), ("min", "value"),
    ("max", "x"), ("mean", "value"), ("mean", "x")]), min_size=1, max_size=4)


@st.composite
def streams(draw):
    """One or two keys' records in arrival order, with non-decreasing watermarks that trail
    the largest event time seen (sometimes jumping ahead), and fire points between them."""
    n = draw(st.integers(1, 40))
    records = []
    seen = MIN_WATERMARK
    watermark = MIN_WATERMARK
    for seq in range(n):
        event = draw(st.integers(0, 200))
        if draw(st.booleans()):
            watermark = max(watermark, seen - draw(st.integers(0, 30)))
        element = {"value": draw(st.one_of(st.none(), st.decimals(
            min_value=Decimal("-1000"), max_value=Decimal("1000"), places=9,
            allow_nan=False, allow_infinity=False)))}
        if draw(st.booleans()):
            element["x"] = draw(FIELD_VALUES)
        records.append((draw(st.sampled_from("ab")), event, seq, watermark, element))
        seen = max(seen, event)
    fires = draw(st.sets(st.integers(0, n - 1)))
    handoff = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    return records, fires, handoff


def spec_of(gap: int, lateness: int, aggregates: list[tuple[str, str | None]]):
    return parse_pipeline({
        "window": {"type": "session", "gap": gap}, "allowed_lateness": lateness,
        "aggregates": [{"name": f"a{i}", "fn": fn, **({"field": field} if field else {})}
                       for i, (fn, field) in enumerate(aggregates)]})


def run(driver_for, records, fires, handoff, spec, final_watermark):
    """Feed the records per key (as a per-key runtime does), firing at the fire points; at
    ``handoff`` every key's state moves to a fresh driver of the other kind."""
    drivers = [driver_for[0](spec), driver_for[1](spec)]
    current = 0
    for driver in drivers:
        driver.record_assignments()
    panes, late, assignments = [], [], []

    def take(driver):
        p, lt = driver.take_output()
        panes.extend((x.key, x.window_start, x.window_end, x.pane_index, x.timing, x.is_last,
                      tuple(x.values.items())) for x in p)
        late.extend((x.key, x.event_time_ms, x.arrival_seq, x.watermark_ms, x.window_start,
                     x.window_end) for x in lt)
        assignments.extend(driver.take_assignments())

    for index, (key, event, seq, watermark, element) in enumerate(records):
        driver = drivers[current]
        driver.process(key, event, element, arrival_seq=seq, watermark=watermark,
                       ingest_time=seq)
        if index in fires:
            driver.advance(watermark, MIN_WATERMARK)
        take(driver)
        if index == handoff:
            other = drivers[1 - current]
            other.watermark, other.processing_time = driver.watermark, driver.processing_time
            for moved in "ab":
                other.restore_key(moved, driver.snapshot_key(moved, evict=True))
            current = 1 - current
    drivers[current].advance(final_watermark, MIN_WATERMARK)
    take(drivers[current])
    return sorted(panes), sorted(late), sorted(assignments)


@settings(max_examples=examples(400), deadline=None)
@given(streams(), st.integers(1, 40), st.sampled_from([0, 1, 7, 50]), AGGREGATES,
       st.integers(0, 300))
def test_session_driver_emits_what_the_window_operator_emits(stream, gap, lateness, aggregates,
                                                             beyond):
    records, fires, handoff = stream
    spec = spec_of(gap, lateness, aggregates)
    final = max(r[3] for r in records) + beyond
    expected = run((build_driver, SessionDriver), records, fires, None, spec, final)
    assert run((SessionDriver, build_driver), records, fires, None, spec, final) == expected
    # a key's state handed from one driver to the other keeps its meaning, either way
    assert run((SessionDriver, build_driver), records, fires, handoff, spec, final) == expected
    assert run((build_driver, SessionDriver), records, fires, handoff, spec, final) == expected


def test_only_standard_sessions_take_the_session_driver():
    assert is_standard_session(spec_of(10, 0, [("count", None)]))
    dynamic = parse_pipeline({"window": {"type": "session", "gap_field": "gap"},
                              "aggregates": [{"name": "n", "fn": "count"}]})
    counted = parse_pipeline({"window": {"type": "session", "gap": 10},
                              "trigger": {"type": "count", "count": 2},
                              "aggregates": [{"name": "n", "fn": "count"}]})
    tumbling = parse_pipeline({"window": {"type": "tumbling", "size": 10},
                               "aggregates": [{"name": "n", "fn": "count"}]})
    for spec in (dynamic, counted, tumbling):
        assert not is_standard_session(spec)
        with pytest.raises(ValueError, match="session windows of a fixed gap"):
            SessionDriver(spec)
