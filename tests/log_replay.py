"""The operator library replaying an arrival log record by record, one driver for all keys and
no Spark: what every Spark runtime's tables must equal."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

import pandas as pd

from operators.build import build_driver
from operators.pipeline import PipelineSpec


@dataclass
class Replayed:
    latest: dict[tuple, dict]
    """(key, window_start, window_end) -> the latest pane's fields and values."""
    late: list[tuple]
    """Sorted (key, arrival_seq, window_start, window_end) of every late row."""
    metrics: dict[str, int]
    """on_time, late_within_lateness, dropped_late over the whole log."""


def replay(log: pd.DataFrame, spec: PipelineSpec) -> Replayed:
    """``log``: the arrival log's rows (any order; replayed in ``arrival_seq`` order)."""
    driver = build_driver(spec)
    latest: dict[tuple, dict] = {}
    late: list[tuple] = []
    for row in log.sort_values("arrival_seq").itertuples(index=False):
        element = json.loads(row.payload, parse_float=Decimal)
        element["value"] = row.value
        driver.process(row.key, row.event_time_ms, element, arrival_seq=row.arrival_seq,
                       watermark=row.watermark_ms, ingest_time=row.ingest_time_ms)
        panes, dropped = driver.take_output()
        for pane in panes:
            latest[(pane.key, pane.window_start, pane.window_end)] = {
                "pane_index": pane.pane_index, "timing": pane.timing, "is_last": pane.is_last,
                **pane.values}
        late.extend((r.key, r.arrival_seq, r.window_start, r.window_end) for r in dropped)
    return Replayed(latest, sorted(late), dict(driver.operator.metrics))


def results_of(results: pd.DataFrame, spec: PipelineSpec) -> dict[tuple, dict]:
    """The results table in :attr:`Replayed.latest`'s shape."""
    names = [a.name for a in spec.aggregates]
    return {(r.key, r.window_start_ms, r.window_end_ms): {
        "pane_index": r.pane_index, "timing": r.timing, "is_last": r.is_last,
        **{n: _plain(getattr(r, n)) for n in names}} for r in results.itertuples(index=False)}


def late_of(late: pd.DataFrame) -> list[tuple]:
    """The late-records table in :attr:`Replayed.late`'s shape."""
    return sorted(late[["key", "arrival_seq", "window_start_ms", "window_end_ms"]]
                  .itertuples(index=False, name=None))


def metric_totals(metrics: pd.DataFrame) -> dict[str, int]:
    return {c: int(metrics[c].sum()) for c in ("on_time", "late_within_lateness",
                                                "dropped_late")}


def _plain(value):
    """Spark's nulls arrive in pandas as None or NaN; the operators say None."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value
