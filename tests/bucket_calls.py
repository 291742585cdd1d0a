"""A bucket's calls as the live stream's bucket processor makes them (jobs.runtime.buckets),
for tests that drive its engines without Spark."""

from __future__ import annotations

import io

import pandas as pd
import pyarrow as pa
from hypothesis import strategies as st

from jobs.runtime.key_runner import as_frame
from jobs.runtime.packing import PACKED_COLUMN, unpack
from operators.time import MIN_WATERMARK

DECIMAL = pa.decimal128(38, 9)


def packed_call(frame: pd.DataFrame, as_units: bool) -> pd.DataFrame:
    """One call's records (``value`` as ``Decimal`` or None) as the processor unpacks them:
    through an Arrow pack, exact decimals as nanounits where they fit when ``as_units`` (as
    the standard windows' engine gets them), with the column Spark adds for ``count`` of
    ``value`` and an empty payload."""
    table = pa.Table.from_pandas(frame.assign(_present_value=frame.value.notna(), payload="{}"),
                                 preserve_index=False)
    table = table.set_column(table.schema.get_field_index("value"), "value",
                             pa.array(frame.value.tolist(), DECIMAL))
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return unpack(pd.DataFrame({PACKED_COLUMN: [sink.getvalue()]}), as_units)


def output_rows(output: list[pd.DataFrame | pa.Table]) -> list[tuple]:
    """An engine's output rows (frames, or Arrow tables in its output schema) as tuples, None
    for a missing value."""
    frames = [as_frame(part) if isinstance(part, pa.Table) else part
              for part in output if len(part)]
    if not frames:
        return []
    joined = pd.concat(frames, ignore_index=True).astype(object)
    return [tuple(None if pd.isna(v) else v for v in row)
            for row in joined.itertuples(index=False, name=None)]


@st.composite
def bucket_streams(draw, values: st.SearchStrategy, keys: list[str], max_records: int,
                   events: st.SearchStrategy, max_cuts: int) -> tuple[pd.DataFrame, list[int]]:
    """A bucket's records in arrival order (non-decreasing recorded watermarks, some records
    far behind them) and the sizes of the calls that deliver them."""
    count = draw(st.integers(1, max_records))
    rows, watermark, seen = [], MIN_WATERMARK, 0
    for seq in range(count):
        event = draw(events)
        rows.append({"key": draw(st.sampled_from(keys)), "arrival_seq": seq,
                     "event_time_ms": event, "ingest_time_ms": seq * 1_000,
                     "watermark_ms": watermark, "value": draw(values)})
        seen = max(seen, event)
        if draw(st.booleans()):
            watermark = max(watermark, seen - draw(st.integers(0, 90_000)))
    cuts = sorted(set(draw(st.lists(st.integers(1, count), max_size=max_cuts)))) + [count]
    return pd.DataFrame(rows), [b - a for a, b in zip([0, *cuts], cuts, strict=False) if b > a]


def driven(engine, frame: pd.DataFrame, sizes: list[int], final_watermark: int,
           as_units: bool) -> list[pd.DataFrame | pa.Table]:
    """An engine's output over calls of ``sizes`` records (:func:`packed_call`), its state
    dumped and loaded between calls (Spark's state store), then a timer at
    ``final_watermark``."""
    output, blob, start = [], None, 0
    for size in sizes:
        engine.load(blob)
        output += engine.process(packed_call(frame.iloc[start:start + size], as_units))
        blob = engine.dump()
        start += size
    engine.load(blob)
    output += engine.fire(final_watermark)
    return output
