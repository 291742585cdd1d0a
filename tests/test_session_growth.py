"""Live sessions whose keys only grow skip the session driver (jobs.live.session_growth):
the rows a micro-batch emits and the state it leaves are the driver's, however the stream is
cut into micro-batches and whenever timers wake the bucket."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.live.keyed import KeyedWindows
from jobs.runtime.buckets import KeySnapshots, key_slices
from jobs.runtime.key_runner import as_frame
from operators.pipeline import parse_pipeline
from tests.bucket_calls import packed_call

BASE = 1_767_225_600_000
COLUMNS = ["key", "arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value",
           "payload"]
VALUES = [None, Decimal("1.5"), Decimal("-2.25"), Decimal(7), Decimal("0.000000001"),
          Decimal(2**62).scaleb(-9), Decimal(-(2**63)).scaleb(-9)]
"""Values of 64 bits of nanounits, near its ends too (sums beyond it)."""
BEYOND_64_BITS = [Decimal(2**64 + 5).scaleb(-9), Decimal("1.2e28")]


def _pipeline(gap: int, lateness: int):
    return parse_pipeline({
        "window": {"type": "session", "gap": gap}, "allowed_lateness": lateness,
        "aggregates": [{"name": f"a{i}", "fn": fn, "field": field} for i, (fn, field) in
                       enumerate([("count", None), ("count", "value"), ("sum", "value"),
                                  ("min", "value"), ("max", "value"), ("mean", "value")])],
    })


def _frame(records: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(records, columns=COLUMNS)


def _rows(frames: list[pd.DataFrame]) -> list[tuple]:
    rows = []
    for frame in frames:
        for row in frame.to_dict("records"):
            rows.append(tuple((name, None if value is None or value is pd.NA else
                               value.normalize() if isinstance(value, Decimal) else value)
                              for name, value in sorted(row.items())))
    return sorted(rows, key=repr)


def _state(blob: bytes | None) -> tuple:
    keys = KeySnapshots()
    keys.load(blob)
    return (keys.watermark, sorted(keys.timers.items()),
            sorted((key, repr(keys.get(key))) for key in keys.snapshots))


def _run(spec, batches: list[pd.DataFrame], fires: list[int | None], closed_form: bool,
         packed: bool = False) -> tuple[list[tuple], list[tuple]]:
    """Each micro-batch as the live stream runs it: the bucket loaded, its rows processed,
    a timer's wake-up after it (``fires``), the bucket saved; the rows and each state.
    ``packed``: the rows through the processor's pack, values as nanounits where they fit."""
    blob, emitted, states = None, [], []
    for batch, fire in zip(batches, fires, strict=True):
        engine = KeyedWindows(spec, closed_form=closed_form)
        engine.load(blob)
        rows = packed_call(batch, as_units=True) if packed else batch
        emitted += [as_frame(table) for table in engine.process(rows)]
        if fire is not None:
            emitted += [as_frame(table) for table in engine.fire(fire)]
        blob = engine.dump()
        states.append(_state(blob))
    return _rows(emitted), states


@st.composite
def streams(draw):
    gap = draw(st.integers(1, 15))
    lateness = draw(st.integers(0, 10))
    count = draw(st.integers(1, 60))
    values = VALUES + BEYOND_64_BITS if draw(st.integers(0, 4)) == 0 else VALUES
    records, now, mark = [], BASE, BASE - 30
    for seq in range(count):
        # time moves on; events come around it, the watermark some way behind (only rising)
        now += draw(st.integers(0, 2))
        mark = max(mark, now - draw(st.integers(0, 3 * gap)))
        # now and then a record far behind: dropped, or inside a long session
        event = now + draw(st.integers(-gap, gap) if draw(st.integers(0, 5))
                           else st.integers(-12 * gap, -2 * gap))
        records.append((draw(st.sampled_from("abc")), 2 * seq + 1,
                        event, now + draw(st.integers(-5, 5)),
                        mark, draw(st.sampled_from(values)), "{}"))
    cuts = sorted(set(draw(st.lists(st.integers(1, count), max_size=6))) | {count})
    batches, start = [], 0
    for cut in cuts:
        batches.append(_frame(records[start:cut]))
        start = cut
    fires = [draw(st.one_of(st.none(), st.integers(BASE - 30, now + 3 * gap))) for _ in batches]
    return _pipeline(gap, lateness), batches, fires


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_growing_keys_emit_and_keep_what_the_driver_does(stream):
    spec, batches, fires = stream
    driven = _run(spec, batches, fires, False)
    assert _run(spec, batches, fires, True) == driven
    assert _run(spec, batches, fires, True, packed=True) == driven


def test_a_key_keeps_its_clocks_when_its_records_carry_earlier_ones():
    """A wake-up at a later watermark closes one of the key's sessions and raises its clock;
    the next records carry an earlier watermark and ingest time (the driver keeps the larger)."""
    spec = _pipeline(10, 0)
    batches = [_frame([("a", 1, BASE, BASE + 50, BASE - 20, Decimal(1), "{}"),
                       ("a", 3, BASE + 30, BASE + 50, BASE - 20, Decimal(1), "{}")]),
               _frame([("a", 5, BASE + 31, BASE + 1, BASE - 10, Decimal(2), "{}")])]
    fires = [BASE + 9, None]
    assert _run(spec, batches, fires, True) == _run(spec, batches, fires, False)
    engine = KeyedWindows(spec)
    engine.process(batches[0])
    engine.fire(BASE + 9)
    assert engine.keys.get("a")["clock"] == [BASE + 9, BASE + 50]
    assert _growth(engine, batches[1], BASE - 10) == (["a"], [])


def test_sums_beyond_64_bits_of_a_growing_key_stay_exact():
    spec = _pipeline(10, 0)
    big = Decimal(2**62).scaleb(-9)
    batches = [_frame([("a", 2 * i + 1, BASE + i, BASE, BASE - 20, big, "{}")
                       for i in range(5)])]
    assert _run(spec, batches, [None], True) == _run(spec, batches, [None], False)
    engine = KeyedWindows(spec)
    engine.process(batches[0])
    blob = engine.dump()
    keys = KeySnapshots()
    keys.load(blob)
    assert Decimal(keys.get("a")["windows"][0][2][2]) == 5 * big


def _growth(engine: KeyedWindows, frame: pd.DataFrame, watermark: int):
    order, slices = key_slices(frame.key.to_numpy(), frame.arrival_seq.to_numpy())
    grown = engine.growth.grow(frame, order, slices, engine.keys, watermark)
    driven = sorted((slices[index][0], done) for index, done in grown.driven)
    return sorted(set(grown.sessions) - {key for key, _ in driven}), driven


def test_which_keys_grow_and_which_go_to_the_driver():
    """gap 10, lateness 5: one batch makes sessions, the next grows some of them."""
    spec = _pipeline(10, 5)
    engine = KeyedWindows(spec)
    first = _frame([("grows", 1, BASE, BASE, BASE - 20, Decimal(1), "{}"),
                    ("fires", 3, BASE, BASE, BASE - 20, Decimal(1), "{}"),
                    ("splits", 5, BASE, BASE, BASE - 20, Decimal(1), "{}")])
    assert _growth(engine, first, BASE - 20) == (["fires", "grows", "splits"], [])
    engine.process(first)
    second = _frame([
        ("grows", 7, BASE + 8, BASE + 1, BASE - 5, Decimal(2), "{}"),  # within [0, 10)
        ("splits", 9, BASE + 30, BASE + 1, BASE - 5, Decimal(2), "{}"),  # a second session
        ("fires", 11, BASE + 1, BASE + 1, BASE + 9, Decimal(2), "{}"),  # its end passed
        ("new", 13, BASE - 5, BASE + 1, BASE + 9, None, "{}"),  # its own window's end passed
    ])
    assert _growth(engine, second, BASE + 9) == (
        ["grows"], [("fires", 0), ("new", 0), ("splits", 0)])
    grown = as_frame(engine.process(second)[0])
    assigned = grown[(grown.kind == "assign") & (grown.key == "grows")]
    assert (assigned.window_start_ms.tolist(), assigned.window_end_ms.tolist()) == (
        [BASE], [BASE + 18])


def test_the_rule_s_edges_go_to_the_driver():
    """gap 10, lateness 5, the batch's watermark BASE + 9: a new key's first window whose end
    its clock has reached (it fires a LATE pane at once, before a later record grows it), and
    a session whose end the batch's
    watermark reaches (its ON_TIME pane fires in the batch)."""
    spec = _pipeline(10, 5)
    batch = _frame([("fires_at_end", 1, BASE, BASE, BASE - 20, Decimal(1), "{}"),
                    ("edge_new", 3, BASE, BASE, BASE + 9, Decimal(1), "{}"),
                    ("inside_new", 5, BASE + 1, BASE, BASE + 9, Decimal(1), "{}"),
                    ("edge_new", 7, BASE + 5, BASE, BASE + 9, Decimal(1), "{}")])
    assert _growth(KeyedWindows(spec), batch, BASE + 9) == (
        ["inside_new"], [("edge_new", 0), ("fires_at_end", 1)])
    rows, _ = _run(spec, [batch], [None], True)
    assert rows == _run(spec, [batch], [None], False)[0]
    panes = {dict(row)["key"]: dict(row)["timing"] for row in rows
             if dict(row)["kind"] == "pane"}
    assert panes == {"edge_new": "LATE", "fires_at_end": "ON_TIME"}


def test_a_record_dropped_behind_the_watermark_leaves_the_session_growing():
    """gap 10, lateness 0: key a's third record is behind the watermark and touches nothing
    (dropped, a late row), and its fourth grows the session on, all in closed form. Key b's
    third is behind the watermark too but touches the session's start, which it would move:
    the driver goes on from there."""
    spec = _pipeline(10, 0)
    batch = _frame([("a", 1, BASE, BASE, BASE - 20, Decimal(1), "{}"),
                    ("a", 3, BASE + 4, BASE, BASE - 20, Decimal(2), "{}"),
                    ("a", 5, BASE - 50, BASE + 7, BASE - 30, Decimal(4), "{}"),
                    ("a", 7, BASE + 6, BASE, BASE - 10, Decimal(8), "{}"),
                    ("b", 9, BASE, BASE, BASE - 20, Decimal(1), "{}"),
                    ("b", 11, BASE + 6, BASE, BASE - 20, Decimal(1), "{}"),
                    ("b", 13, BASE - 5, BASE, BASE + 4, Decimal(1), "{}")])
    assert _growth(KeyedWindows(spec), batch, BASE + 4) == (["a"], [("b", 2)])
    rows, states = _run(spec, [batch], [None], True)
    assert (rows, states) == _run(spec, [batch], [None], False)
    late = [dict(row) for row in rows if dict(row)["kind"] == "late"]
    assert [(row["key"], row["window_start_ms"], row["watermark_ms"]) for row in late] == [
        ("a", BASE - 50, BASE - 20)]  # the key's clock, not the record's earlier watermark
    snapshot = dict(states[0][2])["a"]
    assert "'11.000000000'" in snapshot  # 1 + 2 + 8
    assert f"'clock': [{BASE - 10}, {BASE + 7}]" in snapshot  # the dropped record's too


def test_a_value_beyond_64_bits_sends_the_batch_to_the_driver():
    spec = _pipeline(10, 0)
    engine = KeyedWindows(spec)
    frame = _frame([("a", 1, BASE, BASE, BASE - 20, Decimal(2**64).scaleb(-9), "{}"),
                    ("b", 3, BASE, BASE, BASE - 20, Decimal(1), "{}")])
    assert _growth(engine, frame, BASE - 20) == ([], [("a", 0), ("b", 0)])
    sums = as_frame(engine.process(frame)[0]).dropna(subset=["window_start_ms"])
    assert len(sums) == 2 and np.all(sums.kind == "assign")


def test_pipelines_reading_payload_fields_keep_the_driver():
    spec = parse_pipeline({"window": {"type": "session", "gap": 10},
                           "aggregates": [{"name": "s", "fn": "sum", "field": "price"}]})
    assert KeyedWindows(spec).growth is None


def test_the_driver_goes_on_with_the_clocks_the_grown_records_left():
    """gap 13, lateness 0: the first record grows a session that the second's watermark fires
    and empties; the key starts again from the driver's clocks, which must still hold the
    first record's later ingest time, as when the driver ran both."""
    spec = _pipeline(13, 0)
    batch = _frame([("a", 1, BASE - 12, BASE + 1, BASE - 1, None, "{}"),
                    ("a", 3, BASE, BASE, BASE, None, "{}")])
    assert _growth(KeyedWindows(spec), batch, BASE) == ([], [("a", 1)])
    rows, states = _run(spec, [batch], [None], True)
    assert (rows, states) == _run(spec, [batch], [None], False)
    assert f"'clock': [{BASE}, {BASE + 1}]" in states[0][2][0][1]
