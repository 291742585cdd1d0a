"""The late-data metrics of a standard-window pipeline from the live stream, without Spark jobs.

Per micro-batch, ``late_data_metrics_batches`` counts the fates of the (record, window)
assignments of the records the batch consumed and gives the exact distribution of their
lateness and watermark lag (jobs/window_tables.py, ``lateness_aggregates``); per day,
``late_data_metrics`` gives the same over the assignments whose window ends that day, and the
lines quarantined that day. Computed by Spark (explode every record into its windows, exact
percentiles per group), the two took 12 s and 6.5 s of the two cores every minute at 80,000
events/s (benchmarks/RESULTS.md). Here the records are read from the arrival log's files by
``deltalake`` and classified with numpy, window by window (a sliding window's records are
never copied once per window).

The rows are what the Spark aggregates give, which the backfill writes: the same
classification (``classify``), Spark's exact percentile (``percentile``: linear between the
two closest ranks), Spark's ``round(x, 3)`` (half up on the value's decimal text) and the
days of ``window_end_date``; tests/test_live_lateness.py holds them equal to a
record-by-record reference and to Spark's, and the determinism suite the live tables to the
backfill's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from jobs.days import day_end_ms
from operators.pipeline import PipelineSpec
from operators.time import MIN_WATERMARK

COLUMNS = ("arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms")
"""The arrival log's columns the metrics read."""
PERCENTILES = (0.5, 0.95, 0.99)
_THOUSANDTH = Decimal("0.001")


def batch_lateness(records: pa.Table, ranges: Sequence[tuple[int, int, int]],
                   spec: PipelineSpec) -> dict[int, dict[str, Any]]:
    """Per ``(batch_id, first_arrival_seq, last_arrival_seq)``, the fates and lateness of its
    records' window assignments: ``on_time``, ``late_within_lateness``, ``dropped_late`` and
    the lateness columns (jobs/window_tables.py, ``LATENESS_COLUMNS``)."""
    seqs = records.column("arrival_seq").to_numpy()
    order = np.argsort(seqs, kind="stable")
    seqs = seqs[order]
    columns = {name: records.column(name).to_numpy()[order] for name in COLUMNS[1:]}
    found = {}
    for batch_id, first, last in ranges:
        low = np.searchsorted(seqs, first, side="left")
        high = np.searchsorted(seqs, last, side="right")
        found[batch_id] = _metrics(columns["event_time_ms"][low:high],
                                   columns["ingest_time_ms"][low:high],
                                   columns["watermark_ms"][low:high], spec)
    return found


def _assignments(event: np.ndarray, watermark: np.ndarray, spec: PipelineSpec
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
    for valid, _, is_dropped, is_on_time in _assignments(event, watermark, spec):
        dropped += int(is_dropped.sum())
        on_time += int(is_on_time.sum())
        late_within += int((valid & ~is_dropped & ~is_on_time).sum())
        late = valid & known & ~is_on_time
        late_values.append(np.maximum(0, watermark[late] - event[late]))
        windows_per_record += valid
    lag_of = known & (windows_per_record > 0)
    return {"on_time": on_time, "late_within_lateness": late_within, "dropped_late": dropped,
            **_distribution(np.concatenate(late_values), ingest[lag_of] - watermark[lag_of],
                            windows_per_record[lag_of])}


def _distribution(lateness: np.ndarray, lags: np.ndarray, lag_weights: np.ndarray
                  ) -> dict[str, Any]:
    """``lateness_columns``: the late assignments' lateness, the assignments' watermark lag
    (each lag counted ``lag_weights`` times)."""
    late_p = exact_percentiles(lateness, np.ones(len(lateness), np.int64), PERCENTILES)
    lag_p = exact_percentiles(lags, lag_weights, (0.5,))
    return {
        "lateness_p50_ms": spark_round(late_p[0] if late_p else 0.0),
        "lateness_p95_ms": spark_round(late_p[1] if late_p else 0.0),
        "lateness_p99_ms": spark_round(late_p[2] if late_p else 0.0),
        "lateness_max_ms": int(lateness.max()) if len(lateness) else 0,
        "watermark_lag_p50_ms": spark_round(lag_p[0]) if lag_p else None,
        "watermark_lag_max_ms": int(lags.max()) if len(lags) else None,
    }


def day_lateness(records: pa.Table, quarantined_ingest_ms: np.ndarray, spec: PipelineSpec,
                 time_zone: str, first_day: str, last_day: str) -> list[dict[str, Any]]:
    """``late_data_metrics`` rows of the days ``[first_day, last_day]`` (``window_end_date``
    in ``time_zone``): the fates and lateness of ``records``' assignments whose window ends
    that day, and the quarantined lines ingested that day; a day with neither has no row."""
    first, last = dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day)
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    # the starts of the days (first_day's, then each next day's) in the zone, as epoch ms
    bounds = np.array([day_end_ms(first - dt.timedelta(days=1), time_zone)]
                      + [day_end_ms(day, time_zone) for day in days], dtype=np.int64)

    def day_index(ms: np.ndarray) -> np.ndarray:
        """The index in ``days`` of each instant's day; -1 or ``len(days)`` outside."""
        return np.searchsorted(bounds, ms, side="right") - 1

    event = records.column("event_time_ms").to_numpy()
    ingest = records.column("ingest_time_ms").to_numpy()
    watermark = records.column("watermark_ms").to_numpy()
    known = watermark != MIN_WATERMARK
    counts = np.zeros((3, len(days)), dtype=np.int64)  # on time, late within, dropped
    late_days, late_values, lag_days, lag_values = [], [], [], []
    for valid, max_ts, dropped, on_time in _assignments(event, watermark, spec):
        index = day_index(max_ts)
        inside = valid & (index >= 0) & (index < len(days))
        for row, fate in enumerate((on_time, valid & ~dropped & ~on_time, dropped)):
            counts[row] += np.bincount(index[inside & fate], minlength=len(days))
        late = inside & known & ~on_time
        late_days.append(index[late])
        late_values.append(np.maximum(0, watermark[late] - event[late]))
        lagged = inside & known
        lag_days.append(index[lagged])
        lag_values.append(ingest[lagged] - watermark[lagged])
    late_days, late_values = np.concatenate(late_days), np.concatenate(late_values)
    lag_days, lag_values = np.concatenate(lag_days), np.concatenate(lag_values)
    quarantine_days = day_index(np.asarray(quarantined_ingest_ms, dtype=np.int64))
    quarantined = np.bincount(quarantine_days[(quarantine_days >= 0)
                                             & (quarantine_days < len(days))],
                              minlength=len(days))
    rows = []
    for i, day in enumerate(days):
        if not counts[:, i].any() and not quarantined[i]:
            continue
        lags = lag_values[lag_days == i]
        rows.append({"window_end_date": day, "on_time": int(counts[0, i]),
                     "late_within_lateness": int(counts[1, i]),
                     "dropped_late": int(counts[2, i]), "quarantined": int(quarantined[i]),
                     **_distribution(late_values[late_days == i], lags,
                                     np.ones(len(lags), np.int64))})
    return rows


def exact_percentiles(values: np.ndarray, weights: np.ndarray, percentages: Sequence[float]
                      ) -> list[float]:
    """Spark's exact ``percentile`` of ``values`` each counted ``weights`` times (empty: no
    values): position ``(n - 1) * p`` in the sorted values, linear between the two values
    around it, in Spark's own arithmetic."""
    if not len(values):
        return []
    distinct, inverse = np.unique(values, return_inverse=True)
    counts = np.bincount(inverse, weights=weights).astype(np.int64)
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
