"""Shared helpers for the operator tests (not a test module)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from operators.aggregates import NamedAggregates
from operators.pipeline import AggregateSpec
from operators.window_operator import WindowDriver, WindowOperator

COUNT_SUM = [AggregateSpec("n", "count"), AggregateSpec("s", "sum", "v")]


def count_sum() -> NamedAggregates:
    return NamedAggregates.from_specs(COUNT_SUM)


def run(operator: WindowOperator, records: Sequence[tuple], ) -> tuple[list, list, WindowDriver]:
    """records: ``(key, event_time, value, watermark[, ingest_time])`` in arrival order; the
    arrival position is the index, the ingest time defaults to it."""
    driver = WindowDriver(operator)
    panes: list[Any] = []
    late: list[Any] = []
    for seq, record in enumerate(records):
        key, t, value, watermark = record[:4]
        ingest = record[4] if len(record) > 4 else seq
        driver.process(key, t, {"v": value}, arrival_seq=seq, watermark=watermark,
                       ingest_time=ingest)
        p, lt = driver.take_output()
        panes += p
        late += lt
    return panes, late, driver


def brief(panes: Sequence[Any]) -> list[tuple]:
    """(key, start, end, index, timing, is_last, n, s) per pane."""
    return [(p.key, p.window_start, p.window_end, p.pane_index, p.timing, p.is_last,
             p.values.get("n"), p.values.get("s")) for p in panes]
