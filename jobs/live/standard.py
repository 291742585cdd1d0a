"""The live stream's engine for standard windows: the backfill's closed form, incrementally.

For tumbling and sliding windows with the event-time trigger and built-in aggregates, a
window's latest pane is a function of its counts of on-time and late-within-lateness records,
its aggregates and the watermark reached (jobs.windows.vectorised, :func:`pane_fields`). So
the live state of a bucket of keys is one table of the open windows with those counts and
partial aggregates, updated per micro-batch with vectorised operations (numpy, no Python per
record): assign the batch's records to windows, classify them by their recorded watermark,
fold them into the table, emit the panes whose count changed, drop the windows past cleanup.
Late records (dropped) are emitted as they come.

The state is plain arrays and the output is Arrow in the pipeline's output schema, built from
those arrays: a call is tens of thousands of records, and pandas' per-operation overhead
(typed conversions of every small output frame, merges, renames) took more of the Python
workers' time than the arithmetic (benchmarks/history.md). Python runs per window of the
state or per emitted pane, never per record, except for sums and extremes of values past 64
bits of nanounits.

Aggregates are exact: decimals become integers of nanounits (``value * 10**9``), summed and
compared exactly, and turned back into ``DECIMAL(38, 9)`` values when a pane is emitted. The
state holds them as Python integers (unbounded); a batch's values that came unpacked as 64-bit
nanounits (jobs.runtime.packing) are summed with numpy when no sum of them can leave 64
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

from jobs.runtime.key_runner import arrow_schema, progress_row, repeated, shaped
from jobs.runtime.packing import DECIMAL_TYPE, decimals_of_units
from operators.numbers import _CONTEXT, SCALE
from operators.pipeline import AggregateSpec, PipelineSpec
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.window_operator import LATE, ON_TIME

_META_WATERMARK = b"watermark"
KEY_COLUMNS = ("key", "start", "end")
COUNT_COLUMNS = ("start", "end", "on_time", "late", "emitted")
"""The state's int64 columns beside the key: a window, its counts of on-time and late records
and the panes emitted."""
_INT64_SUM_BOUND = 2**63 - 1


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
    as ``Int64`` nanounits (jobs.runtime.packing) stays int64 when no sum of its values
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


def _decimal(units: Any) -> Decimal | None:
    return None if units is None else _CONTEXT.scaleb(Decimal(units), -SCALE)


def _decimal_array(units: np.ndarray, present: np.ndarray) -> pa.Array:
    """Exact integers of nanounits (int64, or Python integers) as ``DECIMAL(38, 9)``."""
    if units.dtype != object:
        return decimals_of_units(units, present)
    try:
        words = np.array([u if p else 0 for u, p in zip(units, present, strict=True)],
                         dtype=np.int64)
    except OverflowError:  # some value needs more than 64 bits
        return pa.array([_decimal(u) if p else None for u, p in zip(units, present,
                                                                    strict=True)],
                        DECIMAL_TYPE)
    return decimals_of_units(words, present)


def _group_sums(groups: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """The sum of ``values`` per group of ``groups`` (0 for a group without any), exactly: in
    int64 when the values are int64 (their caller bounds the sums), else Python integers."""
    if values.dtype != object:
        sums = np.zeros(count, dtype=np.int64)
        np.add.at(sums, groups, values)
        return sums.astype(object)
    sums = np.zeros(count, dtype=object)
    np.add.at(sums, groups, values)
    return sums


def _group_extremes(groups: np.ndarray, values: np.ndarray, count: int, function: str
                    ) -> np.ndarray:
    """The min or max of ``values`` per group (None for a group without any), as Python
    integers: pandas' aggregation would turn integers and None into floats."""
    found = np.bincount(groups, minlength=count) > 0
    if values.dtype != object:
        ufunc, start = ((np.minimum, np.iinfo(np.int64).max) if function == "min"
                        else (np.maximum, np.iinfo(np.int64).min))
        best = np.full(count, start, dtype=np.int64)
        ufunc.at(best, groups, values)
        result = best.astype(object)
    else:
        pick = min if function == "min" else max
        result = np.full(count, None, dtype=object)
        for group, value in zip(groups.tolist(), values, strict=True):
            current = result[group]
            result[group] = value if current is None else pick(current, value)
    result[~found] = None
    return result


def _combine(a: Any, b: Any, pick: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


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
        schema = arrow_schema(spec)
        if schema is None:
            raise ValueError("standard windows compute built-in aggregates only")
        self.schema = schema
        self.partials = [c for a in spec.aggregates for c in self._partial_columns(a)]
        self.state = self._empty()
        self.watermark = MIN_WATERMARK

    # -- the state table: the open windows of the bucket, one array per column -------------

    @staticmethod
    def _partial_columns(spec: AggregateSpec) -> list[str]:
        if spec.fn == "count":
            return [f"n_{spec.name}"]
        if spec.fn in ("sum", "mean"):
            return [f"n_{spec.name}", f"s_{spec.name}"]
        return [f"s_{spec.name}"]  # min, max

    def _empty(self) -> dict[str, np.ndarray]:
        """``key`` (strings), the :data:`COUNT_COLUMNS` and the partials: ``n_*`` counts
        (int64), ``s_*`` sums and extremes in nanounits (Python integers, or None)."""
        state = {"key": np.empty(0, dtype=object)}
        state.update({c: np.empty(0, dtype=np.int64) for c in COUNT_COLUMNS})
        state.update({c: np.empty(0, dtype=np.int64 if c[0] == "n" else object)
                      for c in self.partials})
        return state

    def _size(self) -> int:
        return len(self.state["key"])

    def load(self, blob: bytes | None) -> None:
        if blob is None:
            self.state, self.watermark = self._empty(), MIN_WATERMARK
            return
        table = pa.ipc.open_stream(io.BytesIO(blob)).read_all()
        state = {"key": np.array(table.column("key").to_pylist(), dtype=object)}
        for column in (*COUNT_COLUMNS, *(c for c in self.partials if c[0] == "n")):
            state[column] = table.column(column).to_numpy().astype(np.int64)
        for column in self.partials:
            if column[0] == "s":  # nanounits travel as decimal strings
                state[column] = np.array([None if v is None else int(v)
                                          for v in table.column(column).to_pylist()],
                                         dtype=object)
        self.state = state
        self.watermark = int((table.schema.metadata or {}).get(_META_WATERMARK, MIN_WATERMARK))

    def dump(self) -> bytes | None:
        if not self._size():
            return None
        columns = {"key": pa.array(self.state["key"], pa.string())}
        for column in (*COUNT_COLUMNS, *self.partials):
            values = self.state[column]
            columns[column] = (pa.array(values, pa.int64()) if column[0] != "s" else
                               pa.array([None if v is None else str(v) for v in values],
                                        pa.string()))
        table = pa.table({name: columns[name] for name in
                          ("key", *COUNT_COLUMNS, *self.partials)})
        table = table.replace_schema_metadata({_META_WATERMARK: str(self.watermark)})
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue()

    def _max_ts(self) -> np.ndarray:
        return self.state["end"] - 1

    def _cleanup(self, max_ts: np.ndarray) -> np.ndarray:
        return np.minimum(max_ts, MAX_TIMESTAMP - self.lateness) + self.lateness

    def next_deadline(self) -> int | None:
        if not self._size():
            return None
        max_ts = self._max_ts()
        cleanup = self._cleanup(max_ts)
        on_time_due = (self.state["on_time"] > 0) & (max_ts > self.watermark)
        return int(np.where(on_time_due, max_ts, cleanup).min())

    # -- one call -------------------------------------------------------------------------------

    def _assign(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each (record, window) pair as the record's index and the window's start: Flink's
        assignment (floor modulo for any time)."""
        last_start = times - np.mod(times - self.offset, self.slide)
        count = -(-self.size // self.slide)
        if count == 1:
            return np.arange(len(times)), last_start
        starts = last_start[:, None] - np.arange(count, dtype=np.int64)[None, :] * self.slide
        keep = (starts > (times - self.size)[:, None]).ravel()
        return np.repeat(np.arange(len(times)), count)[keep], starts.ravel()[keep]

    def process(self, rows: pd.DataFrame) -> list[pa.Table]:
        recorded = rows["watermark_ms"].to_numpy(dtype=np.int64)
        watermark = max(self.watermark, int(recorded.max()))
        index, start = self._assign(rows["event_time_ms"].to_numpy(dtype=np.int64))
        max_ts = start + (self.size - 1)
        w = recorded[index]
        dropped = self._cleanup(max_ts) <= w
        output = [self._late_rows(rows, index[dropped], start[dropped])]
        kept = ~dropped
        if kept.any():
            self._fold(rows, index[kept], start[kept], w[kept] < max_ts[kept])
        output.append(self._fire(watermark))
        self.watermark = watermark
        output.append(pa.Table.from_pylist([progress_row(rows)], schema=self.schema))
        return output

    def fire(self, watermark: int) -> list[pa.Table]:
        watermark = max(self.watermark, watermark)
        output = [self._fire(watermark)]
        self.watermark = watermark
        return output

    def _table(self, columns: dict[str, pa.Array], count: int) -> pa.Table:
        """Output rows in the pipeline's schema; the columns a row kind lacks are null."""
        return pa.Table.from_batches([shaped(columns, count, self.schema)])

    def _late_rows(self, rows: pd.DataFrame, index: np.ndarray, start: np.ndarray) -> pa.Table:
        count = len(index)
        columns = {name: pa.array(rows[name].to_numpy(dtype=np.int64)[index], pa.int64())
                   for name in ("arrival_seq", "event_time_ms", "ingest_time_ms",
                                "watermark_ms")}
        values = rows["value"]
        if isinstance(values.dtype, pd.Int64Dtype):
            value = decimals_of_units(values.to_numpy(dtype=np.int64, na_value=0)[index],
                                      values.notna().to_numpy()[index])
        else:
            value = pa.array(values.to_numpy(dtype=object)[index], DECIMAL_TYPE)
        return self._table({"kind": repeated("late", count),
                            "key": pa.array(rows["key"].to_numpy(dtype=object)[index],
                                            pa.string()),
                            "window_start_ms": pa.array(start, pa.int64()),
                            "window_end_ms": pa.array(start + self.size, pa.int64()),
                            **columns, "value": value}, count)

    def _fold(self, rows: pd.DataFrame, index: np.ndarray, start: np.ndarray,
              on_time: np.ndarray) -> None:
        """Add the batch's (record, window) pairs to the open windows' counts and partials:
        each pair's group is its window of the state, or a new window after them."""
        state = self.state
        known = self._size()
        # keys coded once per record, not per (record, window) pair: a sliding window's
        # record is in size / slide windows, and hashing its key again for each was a fifth
        # of the engine's time
        record_keys = rows["key"].to_numpy(dtype=object)
        coded, _ = pd.factorize(np.concatenate([state["key"], record_keys]))
        key_codes = np.concatenate([coded[:known], coded[known:][index]])
        start_codes, start_values = pd.factorize(np.concatenate([state["start"], start]))
        groups, _ = pd.factorize(key_codes.astype(np.int64) * len(start_values) + start_codes)
        total = int(groups.max()) + 1
        mine = groups[known:]  # the state's windows are groups 0..known-1, in order
        # a new window's first pair: its group is larger than every pair's before it
        first = mine > np.maximum.accumulate(np.r_[known - 1, mine[:-1]])
        grown = {"key": np.concatenate([state["key"], record_keys[index[first]]])}
        new_start = start[first]
        grown["start"] = np.concatenate([state["start"], new_start])
        grown["end"] = np.concatenate([state["end"], new_start + self.size])
        grown["on_time"] = (np.r_[state["on_time"], np.zeros(total - known, np.int64)]
                            + np.bincount(mine[on_time], minlength=total))
        grown["late"] = (np.r_[state["late"], np.zeros(total - known, np.int64)]
                         + np.bincount(mine[~on_time], minlength=total))
        grown["emitted"] = np.r_[state["emitted"], np.zeros(total - known, np.int64)]
        fresh = np.zeros(total - known, dtype=np.int64)
        units_of: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for spec in self.aggregates:
            source = field_input(spec)
            if spec.fn == "count":
                counted = mine if source is None else \
                    mine[rows[source].fillna(False).to_numpy(dtype=bool)[index]]
                grown[f"n_{spec.name}"] = (np.r_[state[f"n_{spec.name}"], fresh]
                                           + np.bincount(counted, minlength=total))
                continue
            if source not in units_of:  # sum and mean of one field read it once
                units, present = _units_of(rows[source])
                units_of[source] = units[index], present[index]
            units, present = units_of[source]
            there = mine[present]
            if spec.fn in ("sum", "mean"):
                grown[f"n_{spec.name}"] = (np.r_[state[f"n_{spec.name}"], fresh]
                                           + np.bincount(there, minlength=total))
                grown[f"s_{spec.name}"] = (
                    np.r_[state[f"s_{spec.name}"], fresh.astype(object)]
                    + _group_sums(there, units[present], total))
            else:
                pick = min if spec.fn == "min" else max
                best = _group_extremes(there, units[present], total, spec.fn)
                before = np.r_[state[f"s_{spec.name}"], np.full(total - known, None, object)]
                grown[f"s_{spec.name}"] = np.array(
                    [_combine(a, b, pick) for a, b in zip(before, best, strict=True)],
                    dtype=object)
        self.state = grown

    def _fire(self, watermark: int) -> pa.Table:
        """Panes whose count grew at ``watermark``; windows past cleanup are dropped."""
        state = self.state
        if not self._size():
            return self.schema.empty_table()
        max_ts = self._max_ts()
        on_time_pane = (state["on_time"] > 0) & (watermark >= max_ts)
        cleanup = self._cleanup(max_ts)
        closing = (self.lateness > 0) & (watermark >= cleanup)
        panes = on_time_pane.astype(np.int64) + state["late"] + closing
        changed = panes > state["emitted"]
        count = int(changed.sum())
        columns = {
            "kind": repeated("pane", count),
            "key": pa.array(state["key"][changed], pa.string()),
            "window_start_ms": pa.array(state["start"][changed], pa.int64()),
            "window_end_ms": pa.array(state["end"][changed], pa.int64()),
            "pane_index": pa.array((panes[changed] - 1).astype(np.int32), pa.int32()),
            "timing": pa.array(np.where(on_time_pane[changed] & (panes[changed] == 1),
                                        ON_TIME, LATE).astype(object), pa.string()),
            "is_last": pa.array(closing[changed] | (on_time_pane[changed]
                                                    & (self.lateness == 0)), pa.bool_())}
        for spec in self.aggregates:
            columns[f"agg_{spec.name}"] = self._results(spec, changed)
        state["emitted"] = np.maximum(panes, state["emitted"])
        open_windows = watermark < cleanup
        self.state = {name: values[open_windows] for name, values in state.items()}
        return self._table(columns, count)

    def _results(self, spec: AggregateSpec, fired: np.ndarray) -> pa.Array:
        """An aggregate's values of the fired windows."""
        if spec.fn == "count":
            return pa.array(self.state[f"n_{spec.name}"][fired], pa.int64())
        sums = self.state[f"s_{spec.name}"][fired]
        if spec.fn in ("min", "max"):
            return _decimal_array(sums, np.array([s is not None for s in sums], dtype=bool))
        counts = self.state[f"n_{spec.name}"][fired]
        if spec.fn == "sum":
            return _decimal_array(sums, counts > 0)
        return pa.array([float(_decimal(s)) / int(n) if n else None
                         for s, n in zip(sums, counts.tolist(), strict=True)], pa.float64())
