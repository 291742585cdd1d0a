"""One read of each micro-batch feeds every pipeline of a stream (jobs.live.fanout): a
pipeline's rows beside others are exactly its rows alone, whatever the slicing of the stream
into calls and whatever the other pipelines are, and the side-by-side state survives being
dumped and loaded between calls (Spark's state store between micro-batches). No Spark: the
engines the live job runs on its executors, driven as the bucket processor drives them."""

from __future__ import annotations

import json
from decimal import Decimal

import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.live.fanout import (
    PIPELINE_COLUMN,
    PipelineEngines,
    make_engine,
    pipeline_rows,
    stream_output_schema,
)
from jobs.runtime.key_runner import as_frame
from operators.pipeline import parse_pipeline
from operators.time import MIN_WATERMARK
from tests.depth import examples

SPECS = {
    "tumbling": {"window": {"type": "tumbling", "size": 60_000}, "allowed_lateness": 30_000,
                 "aggregates": [{"name": "events", "fn": "count"},
                                {"name": "value_sum", "fn": "sum", "field": "value"}]},
    "sliding": {"window": {"type": "sliding", "size": 120_000, "slide": 30_000},
                "allowed_lateness": 0,
                "aggregates": [{"name": "value_max", "fn": "max", "field": "value"}]},
    "sessions": {"window": {"type": "session", "gap": 45_000}, "allowed_lateness": 20_000,
                 "trigger": {"type": "after_watermark", "early": {"type": "after_count",
                                                                  "count": 2}},
                 "aggregates": [{"name": "events", "fn": "count"},
                                {"name": "value_sum", "fn": "sum", "field": "value"}]},
}
PARSED = {name: parse_pipeline({"source": "events", **raw}) for name, raw in SPECS.items()}
INPUT = ["key", "arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value",
         "payload"]


@st.composite
def streams(draw) -> tuple[pd.DataFrame, list[int]]:
    """A bucket's records in arrival order (non-decreasing recorded watermarks, some records
    far behind them) and the sizes of the calls that deliver them."""
    count = draw(st.integers(1, 40))
    rows, watermark, seen = [], MIN_WATERMARK, 0
    for seq in range(count):
        event = draw(st.integers(0, 600_000))
        value = draw(st.one_of(st.none(), st.integers(-50, 50)))
        rows.append({"key": draw(st.sampled_from(["a", "b", "c"])), "arrival_seq": seq,
                     "event_time_ms": event, "ingest_time_ms": seq * 1_000,
                     "watermark_ms": watermark,
                     "value": None if value is None else Decimal(value).scaleb(-2),
                     "payload": json.dumps({"value": None if value is None else value / 100})})
        seen = max(seen, event)
        if draw(st.booleans()):
            watermark = max(watermark, seen - draw(st.integers(0, 90_000)))
    cuts = sorted(set(draw(st.lists(st.integers(1, count), max_size=5)))) + [count]
    sizes = [b - a for a, b in zip([0, *cuts], cuts, strict=False) if b > a]
    return pd.DataFrame(rows, columns=INPUT), sizes


def _standard_inputs(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns Spark adds for the standard windows' aggregates (jobs.live.queries)."""
    return frame.assign(_present_value=frame.value.notna())


def _drive(engine, frame: pd.DataFrame, sizes: list[int], final_watermark: int
           ) -> list[pd.DataFrame]:
    """Calls of ``sizes`` records, the state dumped and loaded between calls, then a timer at
    ``final_watermark``, as the bucket processor does."""
    output, blob, start = [], None, 0
    for size in sizes:
        engine.load(blob)
        output += engine.process(frame.iloc[start:start + size].reset_index(drop=True))
        blob = engine.dump()
        start += size
    engine.load(blob)
    output += engine.fire(final_watermark)
    return [f for f in output if len(f)]


def _frames(output: list[pd.DataFrame | pa.Table]) -> list[pd.DataFrame]:
    """An engine's output as frames (the operator library's engines emit Arrow tables)."""
    return [as_frame(part) if isinstance(part, pa.Table) else part for part in output]


def _rows(frames: list[pd.DataFrame]) -> list[tuple]:
    """Every row as a sorted tuple list (decimals and nulls compared exactly)."""
    if not frames:
        return []
    joined = pd.concat(frames, ignore_index=True)
    return sorted((tuple(None if pd.isna(v) else v for v in row)
                   for row in joined.astype(object).itertuples(index=False, name=None)),
                  key=repr)


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sets(st.sampled_from(sorted(SPECS)), min_size=1),
       st.integers(1, 3))
def test_each_pipeline_beside_others_emits_exactly_what_it_emits_alone(stream, chosen, split):
    frame, sizes = stream
    frame = _standard_inputs(frame)
    names = sorted(chosen)
    final = int(frame.event_time_ms.max()) + 10 * 60_000
    together = _drive(PipelineEngines(names, [PARSED[n] for n in names]), frame, sizes, final)
    # one Arrow table per call, in the stream's schema, each row tagged with its pipeline
    assert all(table.schema == stream_output_schema([PARSED[n] for n in names])
               for table in together)
    joined = pa.concat_tables(together) if together else None
    assert joined is None or set(joined.column(PIPELINE_COLUMN).to_pylist()) <= set(names)
    # alone, delivered in other slices: the rows of a pipeline depend on neither
    parts = min(split, len(frame))
    other = [len(frame) // parts + (i < len(frame) % parts) for i in range(parts)]
    for index, name in enumerate(names):
        alone = _frames(_drive(make_engine(PARSED[name])(), frame, sizes, final))
        mine = [] if joined is None else [as_frame(pipeline_rows(joined, index, name,
                                                               PARSED[name]))]
        assert _rows(mine) == _rows(alone), name
        latest_alone = _latest(_frames(_drive(make_engine(PARSED[name])(), frame, other,
                                              final)))
        assert _latest(alone) == latest_alone, name


def _latest(frames: list[pd.DataFrame]) -> dict[str, object]:
    """What the tables keep: the latest pane per key and window, and the late rows."""
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["kind"])
    panes = rows[rows.kind == "pane"]
    latest = {}
    for row in panes.sort_values("pane_index", kind="stable").itertuples(index=False):
        values = tuple(None if pd.isna(v) else v for k, v in row._asdict().items()
                       if k.startswith("agg_"))
        latest[(row.key, row.window_start_ms, row.window_end_ms)] = (
            row.pane_index, row.timing, bool(row.is_last), values)
    late = sorted((r.key, r.arrival_seq, r.window_start_ms, r.window_end_ms)
                  for r in rows[rows.kind == "late"].itertuples(index=False))
    return {"panes": latest, "late": late}
