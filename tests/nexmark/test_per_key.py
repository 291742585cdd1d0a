"""The query hooks a Spark runtime uses, run the way it runs them: one key at a time, in
micro-batches, with each key's state and timers through JSON between batches. The rows must
be those of the whole-stream run (and so of the reference)."""

from __future__ import annotations

import json

import pytest

from nexmark.queries import Q5, Q7, Q11, Q12
from nexmark.runner import Row, WindowQuery
from operators.timers import EVENT_TIME
from operators.window_operator import Pane, WindowDriver
from tests.nexmark.helpers import DISORDERED, PARAMETERS, SOME_SLACK, stream


def _timers(snap: dict) -> list[tuple[int, int]]:
    """``(kind, timestamp)`` of the timers in a key snapshot (flat ints: kind, ts, start, end)."""
    flat = snap.get("timers") or []
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 4)]


def run_per_key(query: WindowQuery, records: list[dict], batch_size: int) -> list[Row]:
    saved: dict[str, str] = {}  # key -> JSON snapshot, as a state store would keep it
    latest: dict[tuple[str, int, int], Pane] = {}
    for offset in range(0, len(records), batch_size):
        batch = records[offset:offset + batch_size]
        watermark = max(query.watermark_of(r) for r in batch)
        now = max(int(r["ingest_time_ms"]) for r in batch)
        by_key: dict[str, list[dict]] = {}
        for record in batch:
            if query.accepts(record):
                by_key.setdefault(query.key_of(record), []).append(record)
        due = {key for key, snap in saved.items()
               if any(kind == EVENT_TIME and ts <= watermark
                      for kind, ts in _timers(json.loads(snap)))}
        for key in sorted(set(by_key) | due):
            driver = WindowDriver(query.window_operator())
            if key in saved:
                driver.restore_key(key, json.loads(saved.pop(key)))
            for record in by_key.get(key, []):
                driver.process(key, query.timestamp_of(record), query.element_of(record),
                               arrival_seq=int(record["arrival_seq"]),
                               watermark=query.watermark_of(record),
                               ingest_time=int(record["ingest_time_ms"]))
            driver.advance(watermark, now)
            for pane in driver.take_output()[0]:
                latest[(pane.key, pane.window_start, pane.window_end)] = pane
            snap = driver.snapshot_key(key, evict=True)
            if snap is not None:
                saved[key] = json.dumps(snap)
    rows = [row for pane in latest.values() for row in query.rows_of(pane)]
    return sorted(rows, key=query.sort_key)


class _Q5Stage1(Q5):
    """Q5's first stage alone: its rows are what stage 2 receives."""

    def run(self, records):  # type: ignore[override]
        return WindowQuery.run(self, records)


@pytest.mark.parametrize("batch_size", [97, 1_000])
@pytest.mark.parametrize("query", [Q7(**PARAMETERS["q7"]), Q11(**PARAMETERS["q11"]),
                                   Q12(**PARAMETERS["q12"]), _Q5Stage1(**PARAMETERS["q5"])],
                         ids=["q7", "q11", "q12", "q5-stage1"])
def test_per_key_micro_batches_give_the_whole_stream_rows(query: WindowQuery,
                                                          batch_size: int):
    records = stream(DISORDERED, SOME_SLACK)
    whole = query.run(records).rows
    assert whole
    assert run_per_key(query, records, batch_size) == whole
