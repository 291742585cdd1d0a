"""The session backfill's rows (plain groups over whole columns, the session driver for the
rest: jobs.runtime.plain_sessions) equal the session driver's over each whole key, however
a partition's records come cut into batches."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.runtime import plain_sessions
from jobs.runtime.key_partitions import whole_keys
from jobs.runtime.key_runner import KeyRunner, arrow_schema, output_columns
from operators.numbers import SCALE
from operators.pipeline import parse_pipeline
from operators.time import MIN_WATERMARK

BASE = 1_767_225_600_000
COLUMNS = ["key", "arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value",
           "payload"]
LOG_SCHEMA = pa.schema([("key", pa.string()), ("arrival_seq", pa.int64()),
                        ("event_time_ms", pa.int64()), ("ingest_time_ms", pa.int64()),
                        ("watermark_ms", pa.int64()), ("value", pa.decimal128(38, SCALE)),
                        ("payload", pa.string())])


def _pipeline(gap: int, lateness: int, aggregates: list[tuple[str, str | None]] | None = None):
    return parse_pipeline({
        "window": {"type": "session", "gap": gap}, "allowed_lateness": lateness,
        "aggregates": [{"name": f"a{i}", "fn": fn, "field": field}
                       for i, (fn, field) in enumerate(aggregates or [
                           ("count", None), ("count", "value"), ("sum", "value"),
                           ("min", "value"), ("max", "value"), ("mean", "value")])],
    })


def _reference(rows: list[tuple], spec, log_watermark: int) -> list[tuple]:
    """Every key's whole history through the session driver, as the live stream runs it."""
    emitted: list[dict] = []
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for key, records in frame.groupby("key", sort=True):
        emitted += KeyRunner(spec, record_assignments=True).history(
            key, records.reset_index(drop=True), log_watermark)
    return _sorted(emitted, spec)


def _sorted(emitted: list[dict], spec) -> list[tuple]:
    names = [name for name, _ in output_columns(spec)]
    return sorted((tuple(_comparable(row.get(name)) for name in names) for row in emitted),
                  key=repr)


def _comparable(value):
    return value.normalize() if isinstance(value, Decimal) else value


def _computed(rows: list[tuple], spec, log_watermark: int, cuts: list[int]) -> list[tuple]:
    """As a backfill's partition computes them: the records by key and arrival, in Arrow
    batches cut at ``cuts`` (a key may go on into the next batch)."""
    ordered = sorted(rows, key=lambda row: (row[0], row[1]))
    table = pa.Table.from_pylist([dict(zip(COLUMNS, row, strict=True)) for row in ordered],
                                 schema=LOG_SCHEMA)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ordered)}), len(ordered)]
    batches = [table.slice(a, b - a).combine_chunks().to_batches()[0]
               if b > a else pa.RecordBatch.from_pylist([], schema=LOG_SCHEMA)
               for a, b in zip(bounds, bounds[1:], strict=False)]
    schema = arrow_schema(spec)

    def run_key(key: str, frame: pd.DataFrame) -> list[dict]:
        return KeyRunner(spec, record_assignments=True).history(key, frame, log_watermark)

    emitted = []
    for batch in whole_keys(iter(batches), "key"):
        for out in plain_sessions.rows(batch, spec, log_watermark, schema, run_key):
            emitted += out.to_pylist()
    return _sorted(emitted, spec)


def _log_watermark(rows: list[tuple]) -> int:
    return max((row[4] for row in rows), default=MIN_WATERMARK)


_VALUES = st.one_of(st.none(), st.integers(-10**6, 10**6).map(lambda v: Decimal(v).scaleb(-2)),
                    st.sampled_from([Decimal("9223372036.854775807"),  # 2**63 - 1 nanounits
                                     Decimal("9223372036.854775808"),
                                     Decimal("-9223372036.854775809"),
                                     Decimal("4611686018.427387904"),  # 2**62 nanounits
                                     Decimal("18446744073.709551621"),  # 2**64 + 5
                                     Decimal("-12345678901234567890.123456789")]))


@st.composite
def streams(draw):
    """Logs of a few keys whose records mostly follow their key's last one, with a watermark
    that holds, creeps, jumps, or stops right at a session's end, and records drawn right at
    the edges a group's plainness turns on: a window ending exactly at the watermark, a record
    touching the session's start or just missing it (and one bridging the two later), records
    behind it by up to several gaps; values absent, ordinary, or too large for 64 bits."""
    gap = draw(st.sampled_from([5_000, 20_000]))
    lateness = draw(st.sampled_from([0, 10_000, 60_000]))
    count = draw(st.integers(1, 60))
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    watermark = MIN_WATERMARK
    rows = []
    for seq in range(count):
        step = draw(st.sampled_from(["hold", "creep", "to_an_end", "behind_the_latest"]))
        if step == "creep" and watermark != MIN_WATERMARK:
            watermark += draw(st.sampled_from([1, 1_000]))
        elif step == "to_an_end" and high:
            end = high[draw(st.sampled_from(sorted(high)))] + gap - 1
            watermark = max(watermark, end + draw(st.sampled_from([-1, 0])))
        elif step == "behind_the_latest" and high:
            watermark = max(watermark, max(high.values()) - draw(st.sampled_from(
                [1, 2_000, 8_000])))
        key = draw(st.sampled_from(["a", "b", "c"]))
        move = draw(st.sampled_from(["next", "next", "next", "at_the_watermark", "before_low",
                                     "bridge", "behind"]))
        if key not in high:
            t = BASE + draw(st.integers(0, 10)) * 1_000
        elif move == "next":
            t = high[key] + draw(st.sampled_from([0, 1_000, gap - 1, gap, gap + 1, 3 * gap]))
        elif move == "at_the_watermark" and watermark != MIN_WATERMARK:
            t = watermark - gap + draw(st.sampled_from([0, 1, 2]))
        elif move == "before_low":
            t = low[key] - gap + draw(st.sampled_from([-1, 0, 1]))
        elif move == "bridge":  # between a record before the key's start and the start
            t = low[key] + draw(st.sampled_from([1, gap // 2]))
        else:
            t = high[key] - draw(st.sampled_from([1_000, gap, 4 * gap]))
        low[key], high[key] = min(low.get(key, t), t), max(high.get(key, t), t)
        rows.append((key, seq, t, BASE + seq, watermark, draw(_VALUES), "{}"))
    cuts = draw(st.lists(st.integers(0, count), max_size=4))
    return rows, _pipeline(gap, lateness), cuts


def _bridged_later() -> tuple[list[tuple], object, list[int]]:
    """A record that just misses its key's session (its window ends 1 ms before the
    session's start), then one that bridges the two: one group, two windows for a while."""
    gap = 5_000
    rows = [("a", seq, BASE + t, BASE + seq, MIN_WATERMARK, Decimal(seq), "{}")
            for seq, t in enumerate([0, -gap - 1, -gap // 2])]
    return rows, _pipeline(gap, 0), [1]


@example(_bridged_later())
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(streams())
def test_rows_equal_the_session_driver_over_whole_keys(case):
    rows, spec, cuts = case
    log_watermark = _log_watermark(rows)
    assert _computed(rows, spec, log_watermark, cuts) == _reference(rows, spec, log_watermark)


def _arrivals(arrive_at: list[tuple[str, int, int]]) -> list[tuple]:
    """``(key, event time, watermark)`` in seconds from ``BASE``, in arrival order."""
    return [(key, seq, BASE + t * 1_000, BASE + seq, BASE + w * 1_000, Decimal(seq + 1), "{}")
            for seq, (key, t, w) in enumerate(arrive_at)]


def test_groups_a_late_or_fired_record_touches_go_to_the_driver():
    """Key ``a``: a plain session; one that a record behind the watermark reaches after it
    fired (a late pane); a plain one of a single record; one bridged by a late record. Key
    ``b``: a session that fired before its last record arrived; a record whose own window's
    end is behind the watermark at once. Key ``c``: a record dropped as late."""
    rows = _arrivals([
        ("a", 0, -1), ("a", 4, 0),             # plain: [0, 14 s)
        ("a", 100, 4),                         # fires at 110 s - 1 ms, then one within lateness
        ("a", 130, 99),                        # plain, alone
        ("a", 101, 129),
        ("a", 300, 129), ("a", 318, 299),      # bridged later: [300, 310) and [318, 328)
        ("a", 309, 305),
        ("b", 500, 305), ("b", 505, 515),      # fires at 510 s - 1 ms before 505 s arrives
        ("b", 900, 915),                       # a late pane at once
        ("c", 0, 915),                         # dropped
    ])
    spec = _pipeline(10_000, 60_000)
    ordered = sorted(rows, key=lambda row: (row[0], row[1]))
    batch = pa.RecordBatch.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in ordered],
                                       schema=LOG_SCHEMA)
    parts = plain_sessions.split(batch, spec, _log_watermark(rows), arrow_schema(spec))
    driven = {(r["key"], (r["event_time_ms"] - BASE) // 1_000)
              for r in parts.driven.to_pylist()}
    assert driven == {("a", 100), ("a", 101), ("a", 300), ("a", 318), ("a", 309),
                      ("b", 500), ("b", 505), ("b", 900), ("c", 0)}
    log_watermark = _log_watermark(rows)
    assert _computed(rows, spec, log_watermark, [3, 9]) == _reference(rows, spec, log_watermark)


def test_a_plain_group_is_one_on_time_pane_over_all_its_records():
    """What a user reads in the results table for the common case, computed without the
    driver: the session's bounds, pane 0 ON_TIME, the last one with lateness 0."""
    rows = [("k", i, BASE + t, BASE + i, BASE + w, Decimal(v), "{}")
            for i, (t, w, v) in enumerate([(0, -1, 1), (3_000, 0, 2), (1_000, 2_000, 4),
                                           (60_000, 3_000, 8)])]
    spec = _pipeline(5_000, 0, [("count", None), ("sum", "value")])
    batch = pa.RecordBatch.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows],
                                       schema=LOG_SCHEMA)
    parts = plain_sessions.split(batch, spec, BASE + 70_000, arrow_schema(spec))
    assert parts.driven.num_rows == 0
    out = [row for batch in parts.plain_rows for row in batch.to_pylist()]
    panes = sorted((r["window_start_ms"] - BASE, r["window_end_ms"] - BASE, r["pane_index"],
                    r["timing"], r["is_last"], r["agg_a0"], r["agg_a1"])
                   for r in out if r["kind"] == "pane")
    assert panes == [(0, 8_000, 0, "ON_TIME", True, 3, Decimal(7)),
                     (60_000, 65_000, 0, "ON_TIME", True, 1, Decimal(8))]
    windows = sorted((r["arrival_seq"], r["window_start_ms"] - BASE, r["window_end_ms"] - BASE,
                      r["fate"]) for r in out if r["kind"] == "assign")
    assert windows == [(0, 0, 5_000, "on_time"), (1, 0, 8_000, "on_time"),
                       (2, 0, 8_000, "on_time"), (3, 60_000, 65_000, "on_time")]


def test_aggregates_of_a_payload_field_keep_every_group_on_the_driver():
    """A payload field is decoded record by record, which the driver does: such pipelines
    (and any beyond the driver's sessions) take no plain groups."""
    assert plain_sessions.computes_plain_groups(_pipeline(5_000, 0))
    assert not plain_sessions.computes_plain_groups(_pipeline(5_000, 0, [("sum", "price")]))
    assert not plain_sessions.computes_plain_groups(parse_pipeline({
        "window": {"type": "tumbling", "size": "1m"},
        "aggregates": [{"name": "n", "fn": "count"}]}))


def test_a_sum_past_64_bits_is_exact():
    """Two values of 2**62 nanounits each in one plain session: their sum, 2**63 nanounits,
    does not fit an int64, so the group goes to the driver and the sum stays exact; a value
    of 2**64 + 5 nanounits (5 in its low word) does not fit either."""
    big, wide = Decimal("4611686018.427387904"), Decimal("18446744073.709551621")
    rows = [("a", 0, BASE, BASE, MIN_WATERMARK, big, "{}"),
            ("a", 1, BASE + 1_000, BASE + 1, BASE - 1, big, "{}"),
            ("b", 2, BASE, BASE + 2, BASE - 1, wide, "{}"),
            ("c", 3, BASE, BASE + 3, BASE - 1, Decimal(1), "{}")]
    spec = _pipeline(5_000, 0, [("sum", "value"), ("max", "value")])
    log_watermark = BASE + 10_000
    computed = _computed(rows, spec, log_watermark, [])
    sums = {row[1]: row[-2] for row in computed if row[0] == "pane"}
    assert sums == {"a": 2 * big, "b": wide, "c": Decimal(1)}
    assert computed == _reference(rows, spec, log_watermark)
    batch = pa.RecordBatch.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows],
                                       schema=LOG_SCHEMA)
    driven = plain_sessions.split(batch, spec, log_watermark, arrow_schema(spec)).driven
    assert driven.column("key").to_pylist() == ["a", "a", "b"]


def test_a_key_whose_watermark_goes_back_runs_on_the_driver():
    """Ingest never records a watermark lower than an earlier one; should a log break that,
    the driver's clock (the largest so far) decides, as it always did: here the second record
    moves it past the first session's end, so the third record is dropped as late."""
    rows = [("a", 0, BASE, BASE, BASE - 1, Decimal(1), "{}"),
            ("a", 1, BASE + 1_000_000, BASE + 1, BASE + 500_000, Decimal(2), "{}"),
            ("a", 2, BASE + 2_000, BASE + 2, BASE - 1, Decimal(4), "{}"),
            ("b", 3, BASE, BASE + 3, BASE - 1, Decimal(8), "{}")]
    spec = _pipeline(5_000, 0, [("count", None)])
    log_watermark = BASE + 500_000
    computed = _computed(rows, spec, log_watermark, [])
    assert [row[0] for row in computed].count("late") == 1
    assert computed == _reference(rows, spec, log_watermark)
