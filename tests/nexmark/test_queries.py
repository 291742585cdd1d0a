"""Each Nexmark query on the operators equals its DuckDB reference, in and out of order,
with and without late records."""

from __future__ import annotations

import pytest

from nexmark import reference
from nexmark.queries import Q5, Q7, Q8, Q11, Q12, QUERIES, run_query
from nexmark.runner import QueryResult
from operators.time import MIN_WATERMARK
from tests.nexmark.helpers import (
    DISORDERED,
    GENEROUS,
    PARAMETERS,
    SMALL,
    SOME_SLACK,
    TIGHT,
    stream,
)

CASES = {
    "in_order_nothing_late": (SMALL, GENEROUS),
    "small_late": (SMALL, TIGHT),
    "disordered_late": (DISORDERED, SOME_SLACK),
    "disordered_nothing_late": (DISORDERED, GENEROUS),
}


def _run(name: str, case: str) -> tuple[list[dict], QueryResult]:
    records = stream(*CASES[case])
    return records, run_query(name, records, **PARAMETERS[name])


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_query_equals_reference(name: str, case: str):
    records, result = _run(name, case)
    if name == "q11" and CASES[case][1] is not GENEROUS:
        expected = reference.q11_in_arrival_order(records, **PARAMETERS[name])
    else:
        expected = reference.REFERENCES[name](records, **PARAMETERS[name])
    assert result.rows == expected
    assert len(result.rows) >= 5
    if CASES[case][1] is GENEROUS:
        assert result.late == []


@pytest.mark.parametrize("case", ["small_late", "disordered_late"])
@pytest.mark.parametrize("name", ["q5", "q7", "q8"])
def test_late_records_equal_reference(name: str, case: str):
    records, result = _run(name, case)
    mine = sorted((r["arrival_seq"], r["window_start"], r["window_end"]) for r in result.late)
    assert mine == reference.late_windows(records, name, **PARAMETERS[name])
    assert mine, "the case should drop something"


def test_q11_sql_reference_agrees_with_arrival_order_reference():
    records = stream(DISORDERED, GENEROUS)
    params = PARAMETERS["q11"]
    assert reference.q11(records, **params) == reference.q11_in_arrival_order(records, **params)
    with pytest.raises(ValueError, match="ahead of its watermark"):
        reference.q11(stream(SMALL, TIGHT), **params)


def _bid(seq: int, bidder: int, t: int, watermark: int, ingest: int | None = None) -> dict:
    return {"arrival_seq": seq, "type": "bid", "key": "1000", "auction": 1000,
            "bidder": bidder, "price": 100, "event_time_ms": t, "watermark_ms": watermark,
            "ingest_time_ms": t if ingest is None else ingest, "value": 100.0}


def _person(seq: int, t: int, watermark: int) -> dict:
    return {"arrival_seq": seq, "type": "person", "key": "7", "id": 7, "name": "Kate Smith",
            "event_time_ms": t, "watermark_ms": watermark, "ingest_time_ms": t, "value": 0.0}


def test_q11_late_bid_is_dropped_and_does_not_reopen_a_closed_session():
    m = MIN_WATERMARK
    records = [
        _bid(0, 1, 1_000, m), _bid(1, 1, 1_200, m),  # session [1000, 1700)
        _person(2, 6_000, 5_000),                    # watermark 5000 closes it
        _bid(3, 1, 1_500, 5_000),                    # own session [1500, 2000): late
        _bid(4, 1, 4_800, 5_000),                    # [4800, 5300): on time, new session
        _bid(5, 2, 9_000, 5_000),                    # bidder 2: never closed (end of log)
        _person(6, 9_900, 5_400),                    # closes [4800, 5300)
    ]
    result = Q11(session_gap_ms=500).run(records)
    assert result.rows == [
        {"bidder": 1, "session_start": 1_000, "session_end": 1_700, "bid_count": 2},
        {"bidder": 1, "session_start": 4_800, "session_end": 5_300, "bid_count": 1},
    ]
    assert [(r["arrival_seq"], r["window_start"], r["window_end"]) for r in result.late] == [
        (3, 1_500, 2_000)]
    assert reference.q11_in_arrival_order(records, 500) == result.rows


def test_q11_sessions_merge_when_they_touch():
    m = MIN_WATERMARK
    records = [_bid(0, 1, 1_000, m), _bid(1, 1, 2_000, m), _bid(2, 1, 1_500, m),
               _person(3, 9_000, 8_000)]
    rows = Q11(session_gap_ms=500).run(records).rows
    assert rows == [{"bidder": 1, "session_start": 1_000, "session_end": 2_500, "bid_count": 3}]
    assert reference.q11(records, 500) == rows


def test_q12_uses_the_ingest_clock_not_event_time():
    m = MIN_WATERMARK
    # event times all over the place; ingest times decide the windows
    records = [_bid(0, 1, 50_000, m, ingest=1_000), _bid(1, 1, 10, m, ingest=1_999),
               _bid(2, 2, 99, m, ingest=1_999), _bid(3, 1, 7, m, ingest=2_000),
               _bid(4, 1, 7, m, ingest=3_999)]
    rows = Q12(window_size_ms=1_000).run(records).rows
    assert rows == [
        {"window_start": 1_000, "window_end": 2_000, "bidder": 1, "bid_count": 2},
        {"window_start": 1_000, "window_end": 2_000, "bidder": 2, "bid_count": 1},
        {"window_start": 2_000, "window_end": 3_000, "bidder": 1, "bid_count": 1},
    ]  # [3000, 4000) is still open: the log's ingest clock has not passed 3999
    assert reference.q12(records, 1_000) == rows


def test_q7_keeps_every_tied_highest_bid():
    m = MIN_WATERMARK
    records = [_bid(0, 1, 100, m), _bid(1, 2, 200, m) | {"price": 300},
               _bid(2, 3, 300, m) | {"price": 300}, _bid(3, 4, 2_500, 1_500)]
    rows = Q7(window_size_ms=1_000).run(records).rows
    assert [(r["bidder"], r["price"]) for r in rows] == [(2, 300), (3, 300)]
    assert reference.q7(records, 1_000) == rows


def test_q5_reports_ties_for_the_hottest_auction():
    m = MIN_WATERMARK
    records = [_bid(0, 1, 100, m) | {"auction": 5}, _bid(1, 1, 150, m) | {"auction": 6},
               _bid(2, 2, 900, m) | {"auction": 6}, _bid(3, 1, 950, m) | {"auction": 5},
               _bid(4, 1, 5_000, 4_000)]
    rows = Q5(window_size_ms=1_000, window_slide_ms=500).run(records).rows
    assert rows == [
        {"window_start": -500, "window_end": 500, "auction": 5, "bid_count": 1},
        {"window_start": -500, "window_end": 500, "auction": 6, "bid_count": 1},
        {"window_start": 0, "window_end": 1_000, "auction": 5, "bid_count": 2},
        {"window_start": 0, "window_end": 1_000, "auction": 6, "bid_count": 2},
        {"window_start": 500, "window_end": 1_500, "auction": 5, "bid_count": 1},
        {"window_start": 500, "window_end": 1_500, "auction": 6, "bid_count": 1},
    ]
    assert reference.q5(records, 1_000, 500) == rows


def test_q8_joins_only_within_the_same_window():
    m = MIN_WATERMARK
    auction = {"type": "auction", "key": "1", "id": 1, "seller": 7, "reserve": 10, "value": 10.0}
    records = [_person(0, 100, m),
               auction | {"arrival_seq": 1, "event_time_ms": 900, "watermark_ms": m,
                          "ingest_time_ms": 900},
               auction | {"arrival_seq": 2, "event_time_ms": 1_100, "watermark_ms": m,
                          "ingest_time_ms": 1_100},
               _person(3, 5_000, 4_000)]
    result = Q8(window_size_ms=1_000).run(records)
    assert result.rows == [{"window_start": 0, "window_end": 1_000, "person_id": 7,
                            "name": "Kate Smith", "auctions": 1}]
    assert reference.q8(records, 1_000) == result.rows


def test_queries_expose_their_parameters():
    assert Q5().parameters() == {
        "name": "q5", "time_domain": "event_time", "allowed_lateness_ms": 0,
        "window": {"type": "sliding", "size_ms": 10_000, "slide_ms": 5_000, "gap_ms": None,
                   "gap_field": None, "offset_ms": 0},
        "columns": ["window_start", "window_end", "auction", "bid_count"]}
    assert Q11(session_gap_ms=3).parameters()["window"]["gap_ms"] == 3
    assert Q12().parameters()["time_domain"] == "ingest_time"
    assert Q8().parameters()["window"]["type"] == "tumbling"
    assert Q7(window_size_ms=60_000).window_spec().size_ms == 60_000


def test_queries_are_deterministic():
    records = stream(DISORDERED, SOME_SLACK)
    for name in QUERIES:
        first = run_query(name, records, **PARAMETERS[name])
        again = run_query(name, list(records), **PARAMETERS[name])
        assert first == again
