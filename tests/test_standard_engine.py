"""The live stream's engine for standard windows (jobs.live.standard) computes, a batch at a
time and with numpy, what the operator library's window operator computes record by record:
the same latest pane of each window (counts, exact sums, means, extremes, pane index, timing,
last flag: what the tables keep), the same late rows and the same progress rows, whatever the
slicing of the stream into calls, with the state dumped and loaded between calls as Spark's
state store does. No Spark: both engines as the bucket processor drives them on the
executors."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.live.keyed import KeyedWindows
from jobs.live.standard import StandardWindows
from operators.pipeline import parse_pipeline
from tests.bucket_calls import bucket_streams, driven, output_rows
from tests.depth import examples

DECIMAL = pa.decimal128(38, 9)
AGGREGATES = [{"name": "events", "fn": "count"},
              {"name": "present", "fn": "count", "field": "value"},
              {"name": "total", "fn": "sum", "field": "value"},
              {"name": "average", "fn": "mean", "field": "value"},
              {"name": "low", "fn": "min", "field": "value"},
              {"name": "high", "fn": "max", "field": "value"}]
WINDOWS = st.one_of(
    st.builds(lambda size, offset: {"type": "tumbling", "size": size, "offset": offset},
              st.sampled_from([30_000, 60_000]), st.sampled_from([0, 7_000])),
    st.builds(lambda size, slide: {"type": "sliding", "size": size, "slide": slide},
              st.sampled_from([60_000, 90_000]), st.sampled_from([20_000, 30_000])),
)
VALUES = st.one_of(
    st.none(),
    st.integers(-50, 50).map(Decimal),
    st.decimals(min_value=Decimal("-1e12"), max_value=Decimal("1e12"), places=9,
                allow_nan=False, allow_infinity=False),
    st.sampled_from([Decimal("9223372036.854775807"), Decimal("-9223372036.854775808"),
                     Decimal("9.99e26"), Decimal("0.000000001")]),
)
"""Values whose sums over a stream still fit ``DECIMAL(38, 9)``, some past 64 bits of
nanounits (summed as Python integers)."""


@st.composite
def pipelines(draw) -> dict:
    chosen = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4,
                           unique_by=lambda a: a["name"]))
    return {"source": "events", "window": draw(WINDOWS),
            "allowed_lateness": draw(st.sampled_from([0, 15_000, 45_000])),
            "aggregates": chosen}


STREAMS = bucket_streams(VALUES, ["a", "b", "c", "ü"], 60, st.integers(-100_000, 400_000), 6)
"""Records of four keys, some at the same time and key, some before the epoch."""


def _rows(engine, frame: pd.DataFrame, sizes: list[int], final_watermark: int) -> list[tuple]:
    # the live stream hands the standard engine exact decimals as nanounits
    output = driven(engine, frame, sizes, final_watermark, isinstance(engine, StandardWindows))
    rows = [r for r in output_rows(output) if r[0] != "assign"]  # the operator's assignments
    # what the tables keep of panes: each window's latest (a batch fires once, at its end,
    # where the operator may fire an earlier pane of the same window before a later record)
    latest = {}
    for row in sorted((r for r in rows if r[0] == "pane"), key=lambda r: r[4]):
        latest[row[1:4]] = row
    return sorted([*latest.values(), *(r for r in rows if r[0] != "pane")], key=repr)


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(pipelines(), STREAMS, st.integers(0, 600_000))
def test_the_batch_engine_emits_what_the_window_operator_emits_record_by_record(
        raw, stream, after):
    frame, sizes = stream
    spec = parse_pipeline(raw)
    final = int(frame.event_time_ms.max()) + after
    assert (_rows(StandardWindows(spec), frame, sizes, final)
            == _rows(KeyedWindows(spec, closed_form=False), frame, sizes, final))
