"""The late-data metrics of the live stream's pipelines, without Spark jobs.

Per micro-batch, ``late_data_metrics_batches`` counts the fates of the (record, window)
assignments of the records the batch consumed and gives the exact distribution of their
lateness and watermark lag (jobs.lateness.aggregates, ``lateness_aggregates``); per day,
``late_data_metrics`` gives the same over the assignments whose window ends that day, and the
lines quarantined that day. Computed by Spark (explode every record into its windows, exact
percentiles per group), the two took 12 s and 6.5 s of the two cores every minute at 80,000
events/s (benchmarks/history.md). Here the records are read from the arrival log's files by
``deltalake`` and classified with numpy, window by window (a sliding window's records are
never copied once per window). The operator library's pipelines (sessions, custom triggers)
record each record's fate in their ``window_assignments`` table, and their per-batch metrics
are the same aggregates over its rows (``assigned_batch_lateness``): by Spark, a job of 11 s
every minute at 80,000 events/s of sessions.

The rows are what the Spark aggregates give, which the backfill writes: the same
classification (``classify``), Spark's exact percentile (``percentile``: linear between the
two closest ranks), Spark's ``round(x, 3)`` (half up on the value's decimal text) and the
days of ``window_end_date``; tests/test_live_lateness.py holds them equal to a
record-by-record reference and to Spark's, and the determinism suite the live tables to the
backfill's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from operators.pipeline import PipelineSpec
from operators.time import MIN_WATERMARK
from operators.window_operator import DROPPED, LATE_WITHIN, ON_TIME_CLASS

COLUMNS = ("arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms")
"""The arrival log's columns the metrics read."""
PERCENTILES = (0.5, 0.95, 0.99)
_THOUSANDTH = Decimal("0.001")


def batch_lateness(records: pa.Table, ranges: Sequence[tuple[int, int, int]],
                   spec: PipelineSpec) -> dict[int, dict[str, Any]]:
    """Per ``(batch_id, first_arrival_seq, last_arrival_seq)``, the fates and lateness of its
    records' window assignments: ``on_time``, ``late_within_lateness``, ``dropped_late`` and
    the lateness columns (jobs.lateness.aggregates, ``LATENESS_COLUMNS``)."""
    order, slices = _batch_slices(records, ranges)
    columns = {name: records.column(name).to_numpy()[order] for name in COLUMNS[1:]}
    found = {}
    for batch_id, low, high in slices:
        found[batch_id] = _metrics(columns["event_time_ms"][low:high],
                                   columns["ingest_time_ms"][low:high],
                                   columns["watermark_ms"][low:high], spec)
    return found


ASSIGNED_COLUMNS = ("arrival_seq", "fate", "event_time_ms", "ingest_time_ms", "watermark_ms")
"""The ``window_assignments`` columns the metrics of the operator library's pipelines read."""
FATES = (ON_TIME_CLASS, LATE_WITHIN, DROPPED)
"""The fates the operator library records, in the order of their codes (:func:`fate_codes`)."""
ON_TIME_CODE, LATE_WITHIN_CODE, DROPPED_CODE = 0, 1, 2
"""Each fate's code: its index in :data:`FATES`, as :func:`fate_codes` gives it and the per-day
tallies count it (jobs.lateness.day_tallies)."""


def fate_codes(fate: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each recorded fate as its index in :data:`FATES`: 0 on time, 1 late within the allowed
    lateness, 2 dropped."""
    return pc.index_in(fate, value_set=pa.array(FATES)).to_numpy(zero_copy_only=False)


def assigned_batch_lateness(assigned: pa.Table, ranges: Sequence[tuple[int, int, int]]
                            ) -> dict[int, dict[str, Any]]:
    """Per ``(batch_id, first_arrival_seq, last_arrival_seq)``, the fates and lateness of the
    window assignments the operator library recorded for its records (``assigned``: rows of
    ``window_assignments``, :data:`ASSIGNED_COLUMNS`), as :func:`batch_lateness` gives them
    for standard windows; a batch with no assignment has no entry."""
    if not assigned.num_rows:  # nothing assigned yet: no table, or none in the range
        return {}
    order, slices = _batch_slices(assigned, ranges)
    fate = fate_codes(assigned.column("fate"))[order]
    event, ingest, watermark = (assigned.column(name).to_numpy()[order]
                                for name in COLUMNS[1:])
    found = {}
    for batch_id, low, high in slices:
        if high == low:
            continue
        kind = fate[low:high]
        e, i, w = event[low:high], ingest[low:high], watermark[low:high]
        known = w != MIN_WATERMARK
        on_time, late_within, dropped = (int((kind == code).sum()) for code in range(3))
        late = known & (kind != 0)  # not on time
        found[batch_id] = {
            "on_time": on_time, "late_within_lateness": late_within, "dropped_late": dropped,
            **distribution(np.maximum(0, w[late] - e[late]), np.ones(int(late.sum()), np.int64),
                           i[known] - w[known], np.ones(int(known.sum()), np.int64))}
    return found


def _batch_slices(rows: pa.Table, ranges: Sequence[tuple[int, int, int]]
                  ) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """The order that sorts ``rows`` by arrival position (the log's files come in any order),
    and each ``(batch_id, first, last)`` range's ``(batch_id, low, high)`` slice of it."""
    seqs = rows.column("arrival_seq").to_numpy()
    order = np.argsort(seqs, kind="stable")
    seqs = seqs[order]
    return order, [(batch_id, int(np.searchsorted(seqs, first, side="left")),
                    int(np.searchsorted(seqs, last, side="right")))
                   for batch_id, first, last in ranges]


def assignments(event: np.ndarray, watermark: np.ndarray, spec: PipelineSpec
                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per window position ``k`` (starts ``last_start - k * slide`` while ``> t - size``):
    which records have that window, its end, and which of them are dropped and on time."""
    window = spec.window
    size = window.size_ms
    slide = window.slide_ms if window.type == "sliding" else size
    last_start = event - np.mod(event - window.offset_ms, slide)
    for k in range(-(-size // slide)):
        start = last_start - k * slide
        valid = start > event - size
        max_ts = start + size - 1
        dropped = valid & (max_ts + spec.allowed_lateness_ms <= watermark)
        on_time = valid & ~dropped & (watermark < max_ts)
        yield valid, max_ts, dropped, on_time


def _metrics(event: np.ndarray, ingest: np.ndarray, watermark: np.ndarray,
             spec: PipelineSpec) -> dict[str, Any]:
    known = watermark != MIN_WATERMARK
    on_time = late_within = dropped = 0
    late_values: list[np.ndarray] = []
    windows_per_record = np.zeros(len(event), dtype=np.int64)
    for valid, _, is_dropped, is_on_time in assignments(event, watermark, spec):
        dropped += int(is_dropped.sum())
        on_time += int(is_on_time.sum())
        late_within += int((valid & ~is_dropped & ~is_on_time).sum())
        late = valid & known & ~is_on_time
        late_values.append(np.maximum(0, watermark[late] - event[late]))
        windows_per_record += valid
    lag_of = known & (windows_per_record > 0)
    late = np.concatenate(late_values)
    return {"on_time": on_time, "late_within_lateness": late_within, "dropped_late": dropped,
            **distribution(late, np.ones(len(late), np.int64),
                           ingest[lag_of] - watermark[lag_of], windows_per_record[lag_of])}


def distribution(late_values: np.ndarray, late_counts: np.ndarray, lags: np.ndarray,
                 lag_counts: np.ndarray) -> dict[str, Any]:
    """``lateness_columns``: the late assignments' lateness (each value counted
    ``late_counts`` times), the assignments' watermark lag (each ``lag_counts`` times)."""
    late_p = exact_percentiles(late_values, late_counts, PERCENTILES)
    lag_p = exact_percentiles(lags, lag_counts, (0.5,))
    return {
        "lateness_p50_ms": spark_round(late_p[0] if late_p else 0.0),
        "lateness_p95_ms": spark_round(late_p[1] if late_p else 0.0),
        "lateness_p99_ms": spark_round(late_p[2] if late_p else 0.0),
        "lateness_max_ms": int(late_values.max()) if len(late_values) else 0,
        "watermark_lag_p50_ms": spark_round(lag_p[0]) if lag_p else None,
        "watermark_lag_max_ms": int(lags.max()) if len(lags) else None,
    }


def histogram(values: np.ndarray, weights: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values, ascending, and how many times each occurs (``weights``: how many
    times each entry counts). Lateness and lag are milliseconds within a narrow range, so
    they are counted into a dense array without a sort where the range allows (a sliding
    window's lags, one per assignment, took seconds to sort per flush)."""
    if not len(values):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    if values.dtype.kind in "iu" and span <= max(_DENSE_SPAN, 4 * len(values)):
        counts = np.bincount((values - low).astype(np.intp), weights=weights, minlength=span)
        present = np.flatnonzero(counts)
        return (present + low).astype(np.int64), counts[present].astype(np.int64)
    distinct, inverse = np.unique(values, return_inverse=True)
    counts = np.bincount(inverse, weights=weights, minlength=len(distinct)).astype(np.int64)
    kept = counts != 0
    return distinct[kept].astype(np.int64), counts[kept]


_DENSE_SPAN = 1 << 20


def exact_percentiles(values: np.ndarray, weights: np.ndarray, percentages: Sequence[float]
                      ) -> list[float]:
    """Spark's exact ``percentile`` of ``values`` each counted ``weights`` times (empty: no
    values): position ``(n - 1) * p`` in the sorted values, linear between the two values
    around it, in Spark's own arithmetic."""
    if not len(values):
        return []
    distinct, counts = histogram(values, weights)
    accumulated = np.cumsum(counts)
    total = int(accumulated[-1])
    found = []
    for percentage in percentages:
        position = (total - 1) * percentage
        lower, higher = int(np.floor(position)), int(np.ceil(position))
        # the first distinct value whose accumulated count exceeds the rank
        lower_value = float(distinct[np.searchsorted(accumulated, lower + 1)])
        if higher == lower:
            found.append(lower_value)
            continue
        higher_value = float(distinct[np.searchsorted(accumulated, higher + 1)])
        if higher_value == lower_value:
            found.append(lower_value)
            continue
        found.append((higher - position) * lower_value + (position - lower) * higher_value)
    return found


def spark_round(value: float) -> float:
    """Spark's ``round(value, 3)`` of a double: half up on the value's decimal text."""
    return float(Decimal(repr(value)).quantize(_THOUSANDTH, rounding=ROUND_HALF_UP))
