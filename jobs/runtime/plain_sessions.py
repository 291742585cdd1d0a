"""Session windows in the backfill: whole columns where the arrival order changes nothing, the
session driver where it does.

A key's records fall into *groups*: its sessions over event time alone, every record counted
(a new group starts where the next event time is more than the gap past the last). Two records
of different groups never touch each other's windows, whatever was dropped, so a group's rows
do not depend on the key's other groups.

Most groups are *plain*: each record, when it arrived, touched the session the group's earlier
records had made, and the watermark in force (the one the record carries in the log, which
only rises) had reached neither that session's end nor, for a group's first record, its own
window's. For those the session driver's decisions are
closed-form:

- every record joins on time; no record is late, no pane fires before the group's last record;
- a record's window when it joined spans the group's records that had arrived by then
  (``[earliest, latest + gap)`` of their event times): that is its assignment row;
- the whole group is one window, ``[earliest, latest + gap)``, over every record: its ON_TIME
  pane fires once the log's last watermark reaches the window's end, and its closing pane once
  it reaches the end plus lateness (with lateness 0 the ON_TIME pane is the last), the rule of
  the standard windows' panes (:func:`jobs.windows.vectorised.pane_fields`).

So a backfill computes plain groups with numpy over a partition's Arrow columns, and runs only
the other groups' records (a record behind the watermark, a session that fired before its last
record, two pieces bridged later) through
:class:`~operators.standard_sessions.SessionDriver`, key by key. On the benchmark's log 95 % of
records are in plain groups, and the driver costs about 20 µs of Python per record. Which
groups are plain is decided from the log alone, so every backfill, however the log is sliced,
decides the same. tests/test_plain_sessions.py holds every row to the driver's over random
streams.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa

from jobs.runtime.key_partitions import KeyFunction, arrow_rows_per_key
from jobs.runtime.key_runner import repeated, shaped
from jobs.runtime.packing import DECIMAL_TYPE, decimals_of_units, unscaled_words
from operators.numbers import SCALE
from operators.pipeline import AggregateSpec, PipelineSpec
from operators.standard_sessions import is_standard_session
from operators.window_operator import LATE, ON_TIME, ON_TIME_CLASS

_LONGEST_SPAN = 2**61
"""Gap plus lateness below this keep every bound computed here within an int64 (ingest
refuses event times beyond ±2**62, jobs.streams.landing.parsing); a pipeline beyond it
runs every group on the driver."""

SAFE_SUM = 2.0**62
"""A group whose values' magnitudes add up to less than this sums exactly in an int64."""

VALUE_TYPE = DECIMAL_TYPE


def _reads_the_value_only(aggregate: AggregateSpec) -> bool:
    if aggregate.fn == "count":
        return aggregate.field in (None, "value")
    return aggregate.fn in ("sum", "min", "max", "mean") and aggregate.field == "value"


def computes_plain_groups(spec: PipelineSpec) -> bool:
    """Sessions the driver would run (:func:`is_standard_session`) whose aggregates read the
    arrival log's ``value`` alone: a payload field would need decoding record by record."""
    return (is_standard_session(spec) and spec.window is not None
            and spec.window.gap_ms is not None
            and spec.window.gap_ms + spec.allowed_lateness_ms < _LONGEST_SPAN
            and all(_reads_the_value_only(a) for a in spec.aggregates))


def rows(batch: pa.RecordBatch, spec: PipelineSpec, log_watermark: int, schema: pa.Schema,
         run_key: KeyFunction) -> Iterator[pa.RecordBatch]:
    """Every row of ``batch``'s keys (whole keys, each in arrival order): the plain groups'
    computed here, the others' from ``run_key`` (the session driver over a key's records)."""
    parts = split(batch, spec, log_watermark, schema)
    yield from parts.plain_rows
    if parts.driven.num_rows:
        yield arrow_rows_per_key(parts.driven, "key", run_key, schema)


@dataclass(frozen=True)
class Split:
    """A partition's whole keys, split: the plain groups' rows, and the other groups' records
    (in the partition's order: by key, then arrival) for the driver."""

    plain_rows: list[pa.RecordBatch]
    driven: pa.RecordBatch


@dataclass(frozen=True)
class _Groups:
    """A batch's records in order of (group, arrival): ``order`` indexes the batch; the rest
    are arrays in that order, ``starts`` where each group begins; ``running_min`` and
    ``running_max`` are the event-time bounds of the group's records arrived so far."""

    order: np.ndarray
    times: np.ndarray
    group: np.ndarray
    starts: np.ndarray
    running_min: np.ndarray
    running_max: np.ndarray
    first: np.ndarray


def split(batch: pa.RecordBatch, spec: PipelineSpec, log_watermark: int,
          schema: pa.Schema) -> Split:
    """Rows (of ``schema``, the runtime's output rows) of the plain groups of ``batch``'s keys,
    and the records of the others. ``batch`` holds whole keys, each in arrival order; a key's
    latest panes are the ones the log's last watermark, ``log_watermark``, has fired."""
    assert computes_plain_groups(spec) and spec.window is not None
    gap = spec.window.gap_ms
    assert gap is not None
    if batch.num_rows == 0:
        return Split([], batch)
    column = batch.column
    t = _longs(column("event_time_ms"), "event_time_ms")
    watermark = _longs(column("watermark_ms"), "watermark_ms")
    units, valid, fits = _unscaled(column("value"))
    key_ids = _key_ids(column("key"))
    groups = _grouped(key_ids, t, gap)
    in_order = groups.order
    times, watermarks = groups.times, watermark[in_order]
    low, high = _shifted(groups.running_min), _shifted(groups.running_max)
    keeps_plain = np.where(
        groups.first, watermarks < times + (gap - 1),
        (times >= low - gap) & (times <= high + gap) & (watermarks < high + (gap - 1)))
    keeps_plain &= (fits & _steady_watermark(key_ids, watermark))[in_order]
    magnitude = np.add.reduceat(np.where(valid, np.abs(units.astype(np.float64)), 0.0)[in_order],
                                groups.starts)
    plain_group = ((np.add.reduceat((~keeps_plain).astype(np.int64), groups.starts) == 0)
                   & (magnitude < SAFE_SUM))
    plain = plain_group[groups.group]
    computed = [_assignments(batch, groups, plain, gap, schema),
                _panes(batch, groups, plain_group, spec, units, valid, log_watermark, schema)]
    driven = np.sort(in_order[~plain])  # back in the batch's order
    return Split([r for r in computed if r.num_rows], batch.take(pa.array(driven)))


def _longs(array: pa.Array, name: str) -> np.ndarray:
    if array.null_count:
        raise ValueError(f"the arrival log's {name} holds nulls; ingest never writes one")
    return array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _unscaled(values: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``DECIMAL(38, 9)`` values as int64 nanounits, with which are present and which fit
    in an int64."""
    if values.type != VALUE_TYPE:
        raise TypeError(f"value must be {VALUE_TYPE}, got {values.type}")
    units, missing, fits = unscaled_words(values)
    return units, ~missing, fits


def _key_ids(keys: pa.Array) -> np.ndarray:
    """A number per record, the same for a key's records (which are adjacent)."""
    names = keys.to_numpy(zero_copy_only=False)
    changes = np.ones(len(names), dtype=bool)
    changes[1:] = names[1:] != names[:-1]
    return np.cumsum(changes)


def _steady_watermark(key_ids: np.ndarray, watermark: np.ndarray) -> np.ndarray:
    """Which records' keys carry a watermark that never goes back in arrival order. Ingest
    writes it so (the watermark in force only rises), and the rule for plain groups reads a
    record's own watermark as the driver's clock, which is the largest one so far: a key
    that broke the contract runs on the driver, as it always did."""
    backwards = (key_ids[1:] == key_ids[:-1]) & (watermark[1:] < watermark[:-1])
    return ~np.isin(key_ids, key_ids[1:][backwards])


def _grouped(key_ids: np.ndarray, t: np.ndarray, gap: int) -> _Groups:
    by_time = np.lexsort((t, key_ids))  # stable: ties keep the batch's order
    ts, ks = t[by_time], key_ids[by_time]
    opens = np.ones(len(ts), dtype=bool)
    opens[1:] = (ks[1:] != ks[:-1]) | (ts[1:] > ts[:-1] + gap)
    group = np.empty(len(ts), dtype=np.int64)
    group[by_time] = np.cumsum(opens) - 1
    order = np.argsort(group, kind="stable")  # a group's records in the batch's (arrival) order
    in_group = group[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = in_group[1:] != in_group[:-1]
    by_group = pd.Series(t[order]).groupby(in_group, sort=False)
    return _Groups(order, t[order], in_group, np.flatnonzero(first), by_group.cummin().to_numpy(),
                   by_group.cummax().to_numpy(), first)


def _shifted(running: np.ndarray) -> np.ndarray:
    """The value at the record before (meaningless at a group's first record)."""
    return np.concatenate(([0], running[:-1]))


def _assignments(batch: pa.RecordBatch, groups: _Groups, plain: np.ndarray, gap: int,
                 schema: pa.Schema) -> pa.RecordBatch:
    rows = pa.array(groups.order[plain])
    columns = {
        "kind": repeated("assign", len(rows)), "key": batch.column("key").take(rows),
        "window_start_ms": pa.array(groups.running_min[plain]),
        "window_end_ms": pa.array(groups.running_max[plain] + gap),
        "fate": repeated(ON_TIME_CLASS, len(rows)),
    }
    for name in ("arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms"):
        columns[name] = batch.column(name).take(rows)
    return shaped(columns, len(rows), schema)


def _panes(batch: pa.RecordBatch, groups: _Groups, plain_group: np.ndarray, spec: PipelineSpec,
           units: np.ndarray, valid: np.ndarray, log_watermark: int,
           schema: pa.Schema) -> pa.RecordBatch:
    """Each plain group's window and its latest pane, if the log's watermark fired one."""
    gap, lateness = spec.window.gap_ms, spec.allowed_lateness_ms  # type: ignore[union-attr]
    starts = groups.starts
    window_start = np.minimum.reduceat(groups.times, starts)
    window_end = np.maximum.reduceat(groups.times, starts) + gap
    max_ts = window_end - 1
    on_time = log_watermark >= max_ts
    closing = (lateness > 0) & (log_watermark >= max_ts + lateness)
    panes = on_time.astype(np.int32) + closing
    chosen = plain_group & (panes > 0)
    count = np.diff(np.append(starts, len(groups.order)))
    present = valid[groups.order]
    values = units[groups.order]
    columns = {
        "kind": repeated("pane", int(chosen.sum())),
        "key": batch.column("key").take(pa.array(groups.order[starts[chosen]])),
        "window_start_ms": pa.array(window_start[chosen]),
        "window_end_ms": pa.array(window_end[chosen]),
        "pane_index": pa.array((panes - 1)[chosen], pa.int32()),
        "timing": pa.array(np.where((on_time & (panes == 1))[chosen], ON_TIME, LATE)),
        "is_last": pa.array((closing | (on_time & (lateness == 0)))[chosen]),
    }
    for aggregate in spec.aggregates:
        columns[f"agg_{aggregate.name}"] = _aggregate(aggregate, starts, count, values,
                                                      present, chosen)
    return shaped(columns, int(chosen.sum()), schema)


def _aggregate(aggregate: AggregateSpec, starts: np.ndarray, count: np.ndarray,
               values: np.ndarray, present: np.ndarray, chosen: np.ndarray) -> pa.Array:
    """One aggregate per chosen group, as the session driver computes it: exact nanounits,
    nulls skipped, null where no value was present (``count`` then 0)."""
    counted = np.add.reduceat(present.astype(np.int64), starts)
    if aggregate.fn == "count":
        return pa.array((count if aggregate.field is None else counted)[chosen], pa.int64())
    if aggregate.fn in ("sum", "mean"):
        result = np.add.reduceat(np.where(present, values, 0), starts)
    elif aggregate.fn == "min":
        result = np.minimum.reduceat(np.where(present, values, np.iinfo(np.int64).max), starts)
    else:
        result = np.maximum.reduceat(np.where(present, values, np.iinfo(np.int64).min), starts)
    result, counted = result[chosen], counted[chosen]
    if aggregate.fn == "mean":  # the exact sum to the nearest double, then divided
        return pa.array([None if n == 0 else float(Decimal(int(s)).scaleb(-SCALE)) / int(n)
                         for s, n in zip(result.tolist(), counted.tolist(), strict=True)],
                        pa.float64())
    return decimals_of_units(result, counted > 0)

