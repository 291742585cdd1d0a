"""The live stream's engine for standard windows: the backfill's closed form, incrementally.

For tumbling and sliding windows with the event-time trigger and built-in aggregates, a
window's latest pane is a function of its counts of on-time and late-within-lateness records,
its aggregates and the watermark reached (jobs/windows/vectorised.py, :func:`pane_fields`). So
the live state of a bucket of keys is one table of the open windows with those counts and
partial aggregates, updated per micro-batch with vectorised operations (numpy and pandas, no
Python per record): assign the batch's records to windows, classify them by their recorded
watermark, fold them into the table, emit the panes whose count changed, drop the windows past
cleanup. Late records (dropped) are emitted as they come.

Aggregates are exact: decimals become integers of nanounits (``value * 10**9``), summed and
compared exactly, and turned back into ``DECIMAL(38, 9)`` values when a pane is emitted. The
state holds them as Python integers (unbounded); a batch's values that came unpacked as 64-bit
nanounits (jobs/runtime/packing.py) are summed with numpy when no sum of them can leave 64
bits, as ``Decimal`` values are not. ``mean`` is the exact sum as the nearest double divided
by the count, as Spark computes it.
"""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from jobs.runtime.key_runner import output_columns, progress_row
from operators.numbers import _CONTEXT, SCALE
from operators.pipeline import AggregateSpec, PipelineSpec
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.window_operator import LATE, ON_TIME

_META_WATERMARK = b"watermark"
KEY_COLUMNS = ("key", "start", "end")
_PANDAS_DTYPES = {"long": "Int64", "int": "Int32", "boolean": "boolean", "double": "Float64",
                  "string": "object"}


def field_input(spec: AggregateSpec) -> str | None:
    """The input column an aggregate reads (added to the stream's input by Spark)."""
    if spec.fn == "count":
        return None if spec.field is None else f"_present_{spec.field}"
    return "value" if spec.field == "value" else f"_field_{spec.field}"


def _nanounits(values: np.ndarray) -> np.ndarray:
    """Exact decimals (or None) as Python integers of 10**-9 units (or None)."""
    return np.array([None if v is None or v != v else int(_CONTEXT.scaleb(v, SCALE))
                     for v in values], dtype=object)


def _units_of(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column's values as integers of nanounits and which are present. A column unpacked
    as ``Int64`` nanounits (jobs/runtime/packing.py) stays int64 when no sum of its values
    can leave 64 bits; otherwise Python integers (object), as from ``Decimal`` values."""
    if isinstance(column.dtype, pd.Int64Dtype):
        present = column.notna().to_numpy()
        raw = column.to_numpy(dtype="int64", na_value=0)
        # the largest magnitude in Python integers: numpy's abs(-2**63) is -2**63 again
        if not len(raw) or max(int(raw.max()), -int(raw.min())) < _INT64_SUM_BOUND // len(raw):
            return raw, present
        return np.array([int(u) if p else None for u, p in zip(raw.tolist(), present,
                                                                strict=True)],
                        dtype=object), present
    units = _nanounits(column.to_numpy(dtype=object))
    return units, np.array([u is not None for u in units], dtype=bool)


_INT64_SUM_BOUND = 2**63 - 1


def _as_decimals(column: pd.Series) -> np.ndarray:
    """Values for the output's ``DECIMAL(38, 9)``: ``Decimal`` (or None) either way."""
    if isinstance(column.dtype, pd.Int64Dtype):
        return np.array([None if u is None else _decimal(u)
                         for u in column.astype(object).where(column.notna(), None)],
                        dtype=object)
    return column.to_numpy()


def _decimal(units: Any) -> Decimal | None:
    return None if units is None else _CONTEXT.scaleb(Decimal(units), -SCALE)


class StandardWindows:
    """One bucket of keys for a standard-window pipeline
    (:class:`jobs.runtime.buckets.BucketEngine`)."""

    def __init__(self, spec: PipelineSpec) -> None:
        window = spec.window
        self.size = window.size_ms
        self.slide = window.slide_ms if window.type == "sliding" else window.size_ms
        self.offset = window.offset_ms
        self.lateness = spec.allowed_lateness_ms
        self.aggregates = spec.aggregates
        columns = output_columns(spec)
        self.columns = [name for name, _ in columns]
        self.dtypes = {name: _PANDAS_DTYPES.get(kind, "object") for name, kind in columns}
        self.partials = [c for a in spec.aggregates for c in self._partial_columns(a)]
        self.state = self._empty()
        self.watermark = MIN_WATERMARK

    # -- the state table ----------------------------------------------------------------------

    @staticmethod
    def _partial_columns(spec: AggregateSpec) -> list[str]:
        if spec.fn == "count":
            return [f"n_{spec.name}"]
        if spec.fn in ("sum", "mean"):
            return [f"n_{spec.name}", f"s_{spec.name}"]
        return [f"s_{spec.name}"]  # min, max

    def _empty(self) -> pd.DataFrame:
        frame = pd.DataFrame({"key": pd.Series([], dtype=object),
                              **{c: pd.Series([], dtype="int64") for c in
                                 ("start", "end", "on_time", "late", "emitted")}})
        for column in self.partials:
            frame[column] = pd.Series([], dtype="int64" if column[0] == "n" else object)
        return frame

    def load(self, blob: bytes | None) -> None:
        if blob is None:
            self.state, self.watermark = self._empty(), MIN_WATERMARK
            return
        table = pa.ipc.open_stream(io.BytesIO(blob)).read_all()
        frame = table.to_pandas()
        for column in self.partials:
            if column[0] == "s":  # nanounits travel as decimal strings
                frame[column] = np.array([None if v is None else int(v) for v in frame[column]],
                                         dtype=object)
        self.state = frame
        self.watermark = int((table.schema.metadata or {}).get(_META_WATERMARK, MIN_WATERMARK))

    def dump(self) -> bytes | None:
        if self.state.empty:
            return None
        frame = self.state.copy()
        for column in self.partials:
            if column[0] == "s":
                frame[column] = [None if v is None else str(v) for v in frame[column]]
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({_META_WATERMARK: str(self.watermark)})
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue()

    def _max_ts(self) -> np.ndarray:
        return self.state["end"].to_numpy(dtype="int64") - 1

    def _cleanup(self, max_ts: np.ndarray) -> np.ndarray:
        return np.minimum(max_ts, MAX_TIMESTAMP - self.lateness) + self.lateness

    def next_deadline(self) -> int | None:
        if self.state.empty:
            return None
        max_ts = self._max_ts()
        cleanup = self._cleanup(max_ts)
        on_time_due = (self.state["on_time"].to_numpy() > 0) & (max_ts > self.watermark)
        return int(np.where(on_time_due, max_ts, cleanup).min())

    # -- one call -------------------------------------------------------------------------------

    def _assign(self, rows: pd.DataFrame) -> pd.DataFrame:
        """One row per (record, window), Flink's assignment (floor modulo for any time)."""
        t = rows["event_time_ms"].to_numpy(dtype="int64")
        last_start = t - np.mod(t - self.offset, self.slide)
        count = -(-self.size // self.slide)
        if count == 1:
            assigned = rows.assign(start=last_start)
        else:
            k = np.arange(count, dtype="int64")
            starts = last_start[:, None] - k[None, :] * self.slide
            keep = starts > (t - self.size)[:, None]
            index = np.repeat(np.arange(len(rows)), count)[keep.ravel()]
            assigned = rows.iloc[index].reset_index(drop=True)
            assigned["start"] = starts.ravel()[keep.ravel()]
        assigned["end"] = assigned["start"].to_numpy(dtype="int64") + self.size
        return assigned

    def process(self, rows: pd.DataFrame) -> list[pd.DataFrame]:
        watermark = max(self.watermark, int(rows["watermark_ms"].max()))
        assigned = self._assign(rows)
        max_ts = assigned["end"].to_numpy(dtype="int64") - 1
        w = assigned["watermark_ms"].to_numpy(dtype="int64")
        cleanup = np.minimum(max_ts, MAX_TIMESTAMP - self.lateness) + self.lateness
        dropped = cleanup <= w
        output = [self._late_rows(assigned[dropped])]
        kept = assigned[~dropped]
        if len(kept):
            self._fold(kept, w[~dropped] < max_ts[~dropped])
        output.append(self._fire(watermark))
        self.watermark = watermark
        output.append(pd.DataFrame([progress_row(rows)]).reindex(columns=self.columns)
                      .astype(self.dtypes))
        return output

    def fire(self, watermark: int) -> list[pd.DataFrame]:
        watermark = max(self.watermark, watermark)
        output = [self._fire(watermark)]
        self.watermark = watermark
        return output

    def _late_rows(self, late: pd.DataFrame) -> pd.DataFrame:
        frame = pd.DataFrame({
            "kind": "late", "key": late["key"].to_numpy(),
            "window_start_ms": late["start"].to_numpy(), "window_end_ms": late["end"].to_numpy(),
            "arrival_seq": late["arrival_seq"].to_numpy(),
            "event_time_ms": late["event_time_ms"].to_numpy(),
            "ingest_time_ms": late["ingest_time_ms"].to_numpy(),
            "watermark_ms": late["watermark_ms"].to_numpy(),
            "value": _as_decimals(late["value"])})
        return frame.reindex(columns=self.columns).astype(self.dtypes)

    def _fold(self, kept: pd.DataFrame, on_time: np.ndarray) -> None:
        """Add the batch's (record, window) rows to the open windows' counts and partials."""
        batch = pd.DataFrame({"key": kept["key"].to_numpy(), "start": kept["start"].to_numpy(),
                              "end": kept["end"].to_numpy(),
                              "on_time": on_time.astype("int64"),
                              "late": (~on_time).astype("int64")})
        sums = {"on_time": "sum", "late": "sum"}
        extremes: dict[str, tuple[str, np.ndarray]] = {}
        for spec in self.aggregates:
            source = field_input(spec)
            if spec.fn == "count":
                batch[f"n_{spec.name}"] = 1 if source is None else \
                    kept[source].fillna(False).to_numpy(dtype=bool).astype("int64")
                sums[f"n_{spec.name}"] = "sum"
                continue
            units, present = _units_of(kept[source])
            if spec.fn in ("sum", "mean"):
                batch[f"n_{spec.name}"] = present.astype("int64")
                batch[f"s_{spec.name}"] = np.where(present, units, 0)
                sums[f"n_{spec.name}"] = "sum"
                sums[f"s_{spec.name}"] = "sum"
            else:
                if units.dtype != object:
                    units = np.array([int(u) if p else None for u, p in
                                      zip(units.tolist(), present, strict=True)], dtype=object)
                extremes[f"s_{spec.name}"] = (spec.fn, units)
        grouped = batch.groupby(list(KEY_COLUMNS), sort=False).agg(sums).reset_index()
        for column in sums:  # the state holds Python integers (unbounded), never int64 sums
            if column.startswith("s_") and grouped[column].dtype != object:
                grouped[column] = np.array(grouped[column].tolist(), dtype=object)
        for column, (function, units) in extremes.items():
            grouped[column] = _exact_extremes(batch, grouped, units, function)
        merged = self.state.merge(grouped, on=list(KEY_COLUMNS), how="outer",
                                  suffixes=("", "_new"), sort=False)
        new = merged["on_time_new"].notna().to_numpy()
        old = merged["on_time"].notna().to_numpy()
        for column in ("on_time", "late"):
            merged[column] = (merged[column].fillna(0).astype("int64")
                              + merged[f"{column}_new"].fillna(0).astype("int64"))
        merged["emitted"] = merged["emitted"].fillna(0).astype("int64")
        for spec in self.aggregates:
            for column in self._partial_columns(spec):
                mine, theirs = merged[column].to_numpy(dtype=object), \
                    merged[f"{column}_new"].to_numpy(dtype=object)
                if column[0] == "n" or spec.fn in ("sum", "mean"):
                    merged[column] = [(a if o else 0) + (b if n else 0) for a, b, o, n in
                                      zip(mine, theirs, old, new, strict=True)]
                    if column[0] == "n":
                        merged[column] = merged[column].astype("int64")
                else:
                    pick = min if spec.fn == "min" else max
                    merged[column] = np.array(
                        [_combine(a if o else None, b if n else None, pick) for a, b, o, n in
                         zip(mine, theirs, old, new, strict=True)], dtype=object)
        self.state = merged[list(self._empty().columns)]

    def _fire(self, watermark: int) -> pd.DataFrame:
        """Panes whose count grew at ``watermark``; windows past cleanup are dropped."""
        state = self.state
        if state.empty:
            return pd.DataFrame(columns=self.columns).astype(self.dtypes)
        max_ts = self._max_ts()
        on_time_pane = (state["on_time"].to_numpy() > 0) & (watermark >= max_ts)
        cleanup = self._cleanup(max_ts)
        closing = (self.lateness > 0) & (watermark >= cleanup)
        panes = on_time_pane.astype("int64") + state["late"].to_numpy() + closing
        changed = panes > state["emitted"].to_numpy()
        fired = state[changed]
        output = pd.DataFrame({
            "kind": "pane", "key": fired["key"].to_numpy(),
            "window_start_ms": fired["start"].to_numpy(),
            "window_end_ms": fired["end"].to_numpy(),
            "pane_index": (panes[changed] - 1).astype("int32"),
            "timing": np.where(on_time_pane[changed] & (panes[changed] == 1), ON_TIME, LATE),
            "is_last": closing[changed] | (on_time_pane[changed] & (self.lateness == 0))})
        for spec in self.aggregates:
            output[f"agg_{spec.name}"] = self._results(spec, fired)
        state = state.assign(emitted=np.maximum(panes, state["emitted"].to_numpy()))
        self.state = state[watermark < cleanup].reset_index(drop=True)
        return output.reindex(columns=self.columns).astype(self.dtypes)

    @staticmethod
    def _results(spec: AggregateSpec, fired: pd.DataFrame) -> list:
        if spec.fn == "count":
            return fired[f"n_{spec.name}"].astype("int64").tolist()
        if spec.fn in ("min", "max"):
            return [_decimal(v) for v in fired[f"s_{spec.name}"]]
        counts = fired[f"n_{spec.name}"].to_numpy()
        sums = fired[f"s_{spec.name}"].to_numpy(dtype=object)
        if spec.fn == "sum":
            return [_decimal(s) if n else None for s, n in zip(sums, counts, strict=True)]
        return [float(_decimal(s)) / int(n) if n else None
                for s, n in zip(sums, counts, strict=True)]


def _combine(a: Any, b: Any, pick: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


def _exact_extremes(batch: pd.DataFrame, grouped: pd.DataFrame, units: np.ndarray,
                    function: str) -> np.ndarray:
    """min/max of Python integers (or None) per key and window of ``grouped``, exactly.

    In Python rather than through pandas' aggregation: pandas turns a result column of
    integers and None into float64 (NaN for None, and integers past 2**53 rounded)."""
    pick = min if function == "min" else max
    best: dict[tuple, Any] = {}
    for group, value in zip(zip(batch["key"].to_numpy(), batch["start"].to_numpy(),
                                batch["end"].to_numpy(), strict=True), units, strict=True):
        if value is None:
            continue
        current = best.get(group)
        best[group] = value if current is None else pick(current, value)
    return np.array([best.get(group) for group in zip(
        grouped["key"].to_numpy(), grouped["start"].to_numpy(), grouped["end"].to_numpy(),
        strict=True)], dtype=object)
