"""Exact decimals as 64-bit nanounits (jobs.runtime.packing ``nanounits``, and the
standard windows' engine folding them with numpy): the unscaled integer read from Arrow's
buffer is the decimal times 10**9 exactly, or the column stays ``Decimal`` when some value
needs more than 64 bits; and the engine emits exactly the same panes and late rows from
either form, sums that could leave 64 bits included."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.live.fanout import make_engine
from jobs.runtime.packing import nanounits
from operators.pipeline import parse_pipeline
from operators.time import MIN_WATERMARK
from tests.bucket_calls import bucket_streams, driven, output_rows, packed_call
from tests.depth import examples

DECIMAL = pa.decimal128(38, 9)
VALUES = st.one_of(
    st.none(),
    st.decimals(min_value=Decimal("-1e12"), max_value=Decimal("1e12"), places=9,
                allow_nan=False, allow_infinity=False),
    st.decimals(min_value=Decimal("-9.99e28"), max_value=Decimal("9.99e28"), places=0,
                allow_nan=False, allow_infinity=False),
    st.sampled_from([Decimal("9223372036.854775807"), Decimal("-9223372036.854775808"),
                     Decimal("9223372036.854775808"), Decimal("0.000000001")]),
)
FITTING = st.one_of(
    st.none(),
    st.decimals(min_value=Decimal("-9223372036"), max_value=Decimal("9223372036"), places=9,
                allow_nan=False, allow_infinity=False),
    st.sampled_from([Decimal("9223372036.854775807"), Decimal("-9223372036.854775808"),
                     Decimal("4611686018.427387904")]),
)
"""Values that all fit 64 bits of nanounits, though their sums need not."""


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(VALUES, max_size=30), st.integers(0, 5))
def test_nanounits_are_the_decimals_unscaled_integers_or_nothing(values, skip):
    array = pa.array(values, DECIMAL).slice(min(skip, len(values)))
    expected = [None if v is None else int(v.scaleb(9)) for v in array.to_pylist()]
    found = nanounits(array)
    if all(v is None or -(2**63) <= v < 2**63 for v in expected):
        assert found is not None
        assert [None if pd.isna(v) else int(v) for v in found] == expected
    else:
        assert found is None


SPECS = [
    {"window": {"type": "tumbling", "size": 60_000}, "allowed_lateness": 30_000,
     "aggregates": [{"name": "events", "fn": "count"},
                    {"name": "total", "fn": "sum", "field": "value"},
                    {"name": "average", "fn": "mean", "field": "value"}]},
    {"window": {"type": "sliding", "size": 120_000, "slide": 30_000}, "allowed_lateness": 0,
     "aggregates": [{"name": "top", "fn": "max", "field": "value"},
                    {"name": "bottom", "fn": "min", "field": "value"},
                    {"name": "total", "fn": "sum", "field": "value"}]},
]


@st.composite
def streams(draw) -> tuple[pd.DataFrame, list[int]]:
    values = draw(st.sampled_from([VALUES, FITTING]))
    return draw(bucket_streams(values, ["a", "b"], 30, st.integers(0, 400_000), 4))


def _outputs(spec, frame: pd.DataFrame, sizes: list[int], as_units: bool) -> list[tuple]:
    output = driven(make_engine(spec, "events")(), frame, sizes, 10**9, as_units)
    return sorted(output_rows(output), key=repr)


@settings(max_examples=examples(30), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sampled_from(SPECS))
def test_the_engine_emits_the_same_rows_from_nanounits_as_from_decimals(stream, raw):
    frame, sizes = stream
    spec = parse_pipeline({"source": "events", **raw})
    assert _outputs(spec, frame, sizes, True) == _outputs(spec, frame, sizes, False)


def test_a_column_that_fits_comes_as_nanounits():
    frame = pd.DataFrame({"key": ["a", "b"], "arrival_seq": [0, 1], "event_time_ms": [1, 2],
                          "ingest_time_ms": [1, 2], "watermark_ms": [0, 0],
                          "value": [Decimal("1.5"), None]})
    unpacked = packed_call(frame, True)
    assert isinstance(unpacked.value.dtype, pd.Int64Dtype)
    assert unpacked.value.tolist()[0] == 1_500_000_000 and pd.isna(unpacked.value[1])
    assert list(unpacked.columns) == list(packed_call(frame, False).columns)


def test_a_sum_down_to_minus_two_to_the_63_nanounits_stays_exact():
    """-2**63 nanounits fits 64 bits but its magnitude does not (numpy's abs of it is itself):
    one more nanounit below it must not wrap around to a large positive sum."""
    frame = pd.DataFrame({"key": ["a", "a"], "arrival_seq": [0, 1], "event_time_ms": [1, 2],
                          "ingest_time_ms": [1, 2], "watermark_ms": [MIN_WATERMARK] * 2,
                          "value": [Decimal("-0.000000001"), Decimal("-9223372036.854775808")]})
    spec = parse_pipeline({"source": "events", **SPECS[0]})
    rows = _outputs(spec, frame, [2], True)
    assert rows == _outputs(spec, frame, [2], False)
    assert Decimal("-9223372036.854775809") in rows[0]
