"""The live sink's rows for the window tables, built from a micro-batch's output in Arrow
(jobs.tables.window_tables, jobs.live.fanout): each pipeline's assign and late rows become
exactly the ``window_assignments`` rows a row-by-row reading gives, with each window's end
day in the pipeline's time zone. No Spark."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.live.fanout import PIPELINE_COLUMN, pipeline_rows, stream_output_schema
from jobs.tables.days import day_of
from jobs.tables.window_tables import assignment_table, late_table
from operators.pipeline import parse_pipeline
from operators.window_operator import DROPPED
from tests.depth import examples

SESSIONS = parse_pipeline({"source": "events", "window": {"type": "session", "gap": 60_000},
                           "aggregates": [{"name": "events", "fn": "count"}]})
TUMBLING = parse_pipeline({"source": "events", "window": {"type": "tumbling", "size": 60_000},
                           "aggregates": [{"name": "total", "fn": "sum", "field": "value"}]})
SCHEMA = stream_output_schema([SESSIONS, TUMBLING])
ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata",
                         "Pacific/Chatham", "Australia/Lord_Howe"])
# window ends from 1938 to 2200, many on or next to a midnight or a clock change
ENDS = st.one_of(st.integers(-1_000_000_000_000, 7_000_000_000_000),
                 st.integers(-3, 3).map(lambda d: 1_711_843_200_000 + d * 3_600_000),
                 st.integers(-2, 2).map(lambda d: 1_700_000_000_000 // 86_400_000
                                        * 86_400_000 + d))


@st.composite
def outputs(draw) -> list[dict]:
    """Output rows of two pipelines side by side, as the stateful stage emits them."""
    rows = []
    for seq in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["assign", "assign", "late", "pane", "progress"]))
        pipeline = draw(st.sampled_from(["sessions", "tumbling"]))
        end = draw(ENDS)
        rows.append({
            PIPELINE_COLUMN: pipeline, "kind": kind, "key": draw(st.sampled_from("abc")),
            "window_start_ms": end - 60_000, "window_end_ms": end,
            "arrival_seq": seq, "event_time_ms": end - 1_000, "ingest_time_ms": end + seq,
            "watermark_ms": end - 5_000, "value": Decimal(seq).scaleb(-2),
            "fate": draw(st.sampled_from(["on_time", "late_within_lateness"]))
            if kind == "assign" else None,
            "pane_index": 0 if kind == "pane" else None,
            "agg0_events": seq if kind == "pane" and pipeline == "sessions" else None,
        })
    return rows


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@settings(max_examples=examples(200), deadline=None)
@given(outputs(), ZONES)
def test_assignments_are_each_assign_and_late_row_with_its_end_day(rows, zone):
    mine = pipeline_rows(_table(rows), 0, "sessions", SESSIONS)
    expected = [
        {"key": r["key"], "arrival_seq": r["arrival_seq"], "event_time_ms": r["event_time_ms"],
         "ingest_time_ms": r["ingest_time_ms"], "watermark_ms": r["watermark_ms"],
         "window_start_ms": r["window_start_ms"], "window_end_ms": r["window_end_ms"],
         "window_end_date": day_of(r["window_end_ms"] - 1, zone),
         "fate": DROPPED if r["kind"] == "late" else r["fate"]}
        for r in rows if r[PIPELINE_COLUMN] == "sessions" and r["kind"] in ("assign", "late")]
    assert assignment_table(mine, zone).to_pylist() == expected


@settings(max_examples=examples(100), deadline=None)
@given(outputs(), ZONES)
def test_late_rows_carry_their_window_end_day(rows, zone):
    late = pipeline_rows(_table(rows), 1, "tumbling", TUMBLING).to_pandas()
    late = late[late["kind"] == "late"]
    days = late_table(late, zone).column("window_end_date").to_pylist()
    assert days == [day_of(end - 1, zone) for end in late["window_end_ms"]]


def test_each_pipeline_gets_its_own_rows_and_aggregates_under_its_own_names():
    rows = [{PIPELINE_COLUMN: name, "kind": "pane", "key": "k", "window_start_ms": 0,
             "window_end_ms": 60_000, "pane_index": 0, "agg0_events": 3 if index == 0 else None,
             "agg1_total": Decimal("1.5") if index == 1 else None}
            for index, name in enumerate(["sessions", "tumbling", "sessions"])]
    table = _table(rows)
    sessions = pipeline_rows(table, 0, "sessions", SESSIONS)
    tumbling = pipeline_rows(table, 1, "tumbling", TUMBLING)
    assert sessions.num_rows == 2 and tumbling.num_rows == 1
    assert sessions.column("agg_events").to_pylist() == [3, None]
    assert tumbling.column("agg_total").to_pylist() == [Decimal("1.500000000")]
    assert PIPELINE_COLUMN not in sessions.column_names
    assert "agg_total" not in sessions.column_names
    assert pipeline_rows(table.slice(0, 0), 0, "sessions", SESSIONS).num_rows == 0
