"""The operator library's output rows become a pandas frame for Spark: through Arrow when every
value has its column's own type (built-in aggregates), column by column through pandas
otherwise (a user's aggregate). Either way the frame holds exactly the rows' values with the
columns' nullable dtypes, for any panes, late records and assignments a key emits; long
values beyond 2**53 next to nulls included, which a frame made from the dicts rounded."""

from __future__ import annotations

import json
from decimal import Decimal

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.runtime.key_runner import KeyRunner, arrow_schema
from operators.pipeline import parse_pipeline
from operators.time import MIN_WATERMARK
from tests.depth import examples

WINDOWS = [{"type": "session", "gap": 20}, {"type": "tumbling", "size": 30},
           {"type": "sliding", "size": 30, "slide": 10}]
AGGREGATES = [{"name": "n", "fn": "count"}, {"name": "total", "fn": "sum", "field": "value"},
              {"name": "low", "fn": "min", "field": "x"},
              {"name": "average", "fn": "mean", "field": "value"}]


def reference(runner: KeyRunner, rows: list[dict]) -> pd.DataFrame:
    """Each column from the rows' own values, in its nullable dtype."""
    return pd.DataFrame({name: pd.Series([row.get(name) for row in rows], dtype=object
                                         ).astype(runner.dtypes[name])
                         if runner.dtypes[name] == "object"
                         else pd.array([row.get(name) for row in rows], runner.dtypes[name])
                         for name in runner.columns})


def key_rows(runner: KeyRunner, draws, first_watermark: int) -> list[dict]:
    records, seen = [], first_watermark
    for seq, (event, behind, value, x) in enumerate(draws):
        records.append((seq, event, seq, max(first_watermark, seen - behind), value,
                        json.dumps({} if x is None else {"x": x})))
        seen = max(seen, event)
    return runner.process_records("k", records) + runner.fire("k", seen + 100)


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(WINDOWS), st.sampled_from([0, 15]), st.lists(st.tuples(
    st.integers(0, 300), st.integers(-20, 40),
    st.one_of(st.none(), st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e6"),
                                     places=9, allow_nan=False, allow_infinity=False)),
    st.one_of(st.none(), st.integers(-5, 5))), max_size=30),
    st.sampled_from([MIN_WATERMARK, -(2**62) - 1, 0]), st.booleans())
def test_the_frame_holds_exactly_the_rows(window, lateness, draws, first_watermark, arrow):
    spec = parse_pipeline({"window": window, "allowed_lateness": lateness,
                           "aggregates": AGGREGATES})
    runner = KeyRunner(spec, record_assignments=True)
    assert runner.arrow_schema is not None
    if not arrow:
        runner.arrow_schema = None  # the path a user's aggregate takes
    rows = key_rows(runner, draws, first_watermark)
    pd.testing.assert_frame_equal(runner.frame(rows), reference(runner, rows))


def test_a_users_aggregate_goes_through_pandas():
    spec = parse_pipeline({"window": {"type": "session", "gap": 20}, "aggregates": [
        {"name": "spread", "fn": "tests.user_aggregates:Spread", "field": "value"}]})
    assert arrow_schema(spec) is None
