"""The live per-day metrics kept as running tallies (jobs.lateness.day_tallies) against the
same rows computed in one go from the whole log: for a log and a quarantine appended in any
slices, flushes asking for any days in between, a sink restarted half way and days let go
and read again, every flush's rows equal ``day_rows`` over everything appended so far."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.lateness.day_tallies import DayTallies, day_rows
from jobs.store import fast_writes
from jobs.tables.days import day_of
from operators.pipeline import parse_pipeline
from operators.time import MIN_WATERMARK
from tests.depth import examples

START = 1_774_656_000_000  # 2026-03-28 00:00 UTC; Europe changes clocks on the 29th
HOUR = 3_600_000
ZONE = "Europe/Berlin"
SPECS = [
    parse_pipeline({"source": "events", "window": {"type": "tumbling", "size": HOUR},
                    "allowed_lateness": 10 * 60_000,
                    "aggregates": [{"name": "n", "fn": "count"}]}),
    parse_pipeline({"source": "events", "window": {"type": "sliding", "size": 2 * HOUR,
                                                   "slide": HOUR // 2},
                    "aggregates": [{"name": "n", "fn": "count"}]}),
]

RECORD = st.tuples(st.integers(0, 4 * 24), st.integers(0, 59), st.integers(0, 600),
                   st.one_of(st.none(), st.integers(0, 5 * 60)))
"""(hour of the event, its minute, seconds until ingest, minutes the watermark is behind
the ingest time, or no watermark yet)."""
SLICE = st.tuples(st.lists(RECORD, max_size=30), st.lists(st.integers(-24, 5 * 24), max_size=4))
FLUSH = st.tuples(st.integers(0, 4), st.integers(0, 2))
"""(first day, days after it) of the range a flush asks for, from the log's first day."""


def _records(pieces: list[tuple], first_seq: int) -> pa.Table:
    event = np.array([START + h * HOUR + m * 60_000 for h, m, _, _ in pieces], np.int64)
    ingest = event + np.array([s * 1000 for _, _, s, _ in pieces], np.int64)
    watermark = np.array([MIN_WATERMARK if behind is None else
                          int(ingest[i]) - behind * 60_000
                          for i, (_, _, _, behind) in enumerate(pieces)], np.int64)
    seq = np.arange(first_seq, first_seq + len(pieces), dtype=np.int64)
    return pa.table({"arrival_seq": seq, "event_time_ms": event, "ingest_time_ms": ingest,
                     "watermark_ms": watermark})


@settings(max_examples=examples(25), deadline=None)
@given(slices=st.lists(st.tuples(SLICE, st.lists(FLUSH, max_size=2)), min_size=1, max_size=5),
       spec=st.sampled_from(SPECS), restart_at=st.integers(0, 5), keep_days=st.integers(0, 3))
def test_running_tallies_equal_the_days_computed_from_the_whole_log(slices, spec, restart_at,
                                                                     keep_days):
    with tempfile.TemporaryDirectory() as home:
        log_path, quarantine_path = str(Path(home) / "log"), str(Path(home) / "quarantine")
        tallies = DayTallies(spec, ZONE, log_path, quarantine_path, keep_days=keep_days)
        log = _records([], 0)
        lines = np.empty(0, np.int64)
        first_day = day_of(START, ZONE)
        for batch, ((pieces, quarantined), flushes) in enumerate(slices):
            if batch == restart_at:  # a new sink: nothing held
                tallies = DayTallies(spec, ZONE, log_path, quarantine_path, keep_days=keep_days)
            if pieces:
                more = _records(pieces, log.num_rows)
                fast_writes.append(log_path, more, app_id="test", version=batch)
                log = pa.concat_tables([log, more])
            if quarantined:
                ingested = np.array([START + h * HOUR for h in quarantined], np.int64)
                fast_writes.append(quarantine_path, pa.table({
                    "ingest_batch": np.full(len(ingested), batch, np.int64),
                    "ingest_time_ms": ingested}), app_id="test", version=batch)
                lines = np.concatenate([lines, ingested])
            for offset, length in flushes:
                first = first_day + dt.timedelta(days=offset)
                last = first + dt.timedelta(days=length)
                expected = day_rows(*(log.column(c).to_numpy() for c in
                                      ("event_time_ms", "ingest_time_ms", "watermark_ms")),
                                    lines, spec, ZONE, str(first), str(last))
                assert tallies.rows(str(first), str(last)) == expected, (first, last)


def test_a_flush_reads_only_what_the_log_gained():
    """Held days are not read again: a record appended out of their reach is folded in, and
    the rows follow the log as it grows."""
    spec = SPECS[0]
    with tempfile.TemporaryDirectory() as home:
        log_path, quarantine_path = str(Path(home) / "log"), str(Path(home) / "quarantine")
        tallies = DayTallies(spec, "UTC", log_path, quarantine_path)
        fast_writes.append(log_path, _records([(1, 0, 5, 1)], 0), app_id="t", version=0)
        day = str(day_of(START, "UTC"))
        assert [r["on_time"] for r in tallies.rows(day, day)] == [1]
        assert tallies.through_seq == 0
        fast_writes.append(log_path, _records([(2, 0, 5, 1), (3, 0, 5, 1)], 1), app_id="t",
                           version=1)
        assert [r["on_time"] for r in tallies.rows(day, day)] == [3]
        assert tallies.through_seq == 2


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 3), st.integers(-(2**62), 2**62)), max_size=40),
       st.booleans())
def test_a_histogram_counts_each_distinct_value(values, weighted):
    """Dense ranges are counted without a sort, wide ones sorted: both are the Counter."""
    from collections import Counter

    from jobs.lateness.metrics import histogram

    array = np.array(values, dtype=np.int64)
    weights = np.arange(1, len(values) + 1, dtype=np.int64) if weighted else None
    expected = Counter()
    for index, value in enumerate(values):
        expected[value] += index + 1 if weighted else 1
    distinct, counts = histogram(array, weights)
    assert list(zip(distinct.tolist(), counts.tolist(), strict=True)) == sorted(expected.items())
