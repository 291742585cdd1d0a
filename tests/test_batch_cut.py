"""A backlog ingested in capped batches gives the arrival log one batch of it gives.

The reference is the simplest ingest there is: every partition's records read at once, in one
batch (jobs.streams.landing.batch.arrival_rows over the whole backlog). Against it, the same
backlog is planned as the Kafka ingestor plans it (a share of ``max_records_per_batch`` per
partition with records left, drawn at random batch by batch), each batch cut where a capped
partition's unread records could begin (jobs.streams.batch_cut), started from the state the
batch before ended in: every record must arrive at the same place with the same ingest time
and watermark. The backlogs have what made records late before the cut: a partition lagging
its event times by minutes, one going quiet, one whose records start later.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.streams.batch_cut import Unread, kept_lines, unread_after
from jobs.streams.kafka.ingest import KafkaPlan, cut_short, start_state
from jobs.streams.landing.batch import IngestRules, PartRead, arrival_rows
from jobs.streams.landing.parsing import ParsedEvent
from operators.pipeline import parse_watermark
from tests.depth import examples

MINUTE = 60_000
START = 1_767_225_600_000


@st.composite
def backlogs(draw):
    """Per partition, its records' ingest clocks (rising in offset order) and event times."""
    count = draw(st.integers(2, 4))
    backlog = {}
    for number in range(count):
        size = draw(st.integers(0, 30))
        begins = START + draw(st.sampled_from([0, 0, 30_000, 5 * MINUTE]))  # added later
        gaps = draw(st.lists(st.integers(0, 20_000), min_size=size, max_size=size))
        clocks = begins + np.cumsum(np.asarray(gaps, dtype=np.int64))
        if draw(st.booleans()):  # goes quiet after its first records
            clocks[size // 3:] += draw(st.integers(0, 4 * MINUTE))
        lag = draw(st.sampled_from([0, 1_000, 8 * MINUTE]))  # event times minutes behind
        jitter = draw(st.lists(st.integers(0, 9_000), min_size=size, max_size=size))
        events = clocks - lag - np.asarray(jitter, dtype=np.int64)
        backlog[f"events-{number}"] = (clocks, events)
    return backlog


def _read(name: str, clocks: np.ndarray, events: np.ndarray, start: int, until: int
          ) -> PartRead:
    verdicts = [ParsedEvent(f"k{i % 3}", int(events[i]), Decimal(i), {})
                for i in range(start, until)]
    return PartRead.from_verdicts(name.replace("-", "/"), name, list(range(start, until)),
                                  [""] * (until - start), clocks[start:until], verdicts,
                                  [int(c) for c in clocks[start:until]], stamped=True)


def _batch(backlog, ranges, state, capped, batch_id):
    plan = KafkaPlan(batch_id, {n: list(span) for n, span in ranges.items()}, 0, START, state,
                     {}, sorted(backlog), sorted(capped))
    reads = [_read(name, *backlog[name], *ranges[name]) for name in sorted(ranges)]
    return plan, reads


def _rows(rows) -> list[tuple]:
    good = rows.good
    return list(zip(good["source_partition"].to_pylist(), good["line_number"].tolist(),
                    good["ingest_time_ms"].tolist(), good["watermark_ms"].tolist(),
                    good["event_time_ms"].tolist(), strict=True))


def ingested_at_once(backlog, rules) -> list[tuple]:
    ranges = {n: (0, len(clocks)) for n, (clocks, _) in backlog.items() if len(clocks)}
    plan, reads = _batch(backlog, ranges, {}, [], 0)
    return _rows(arrival_rows(reads, start_state(plan, reads, rules.watermark), rules))


def ingested_in_batches(backlog, rules, caps, cut=True) -> list[tuple]:
    positions = dict.fromkeys(backlog, 0)
    state: dict = {}
    found: list[tuple] = []
    for batch_id in range(10_000):
        waiting = [n for n in backlog if positions[n] < len(backlog[n][0])]
        if not waiting:
            return found
        share = -(-caps[batch_id % len(caps)] // len(waiting))
        ranges = {n: (positions[n], min(len(backlog[n][0]), positions[n] + share))
                  for n in waiting}
        capped = [n for n in waiting if ranges[n][1] < len(backlog[n][0])]
        plan, reads = _batch(backlog, ranges, state, capped, batch_id)
        consumed: dict[str, int] = {}
        if cut:
            reads, consumed = cut_short(plan, reads)
        rows = arrival_rows(reads, start_state(plan, reads, rules.watermark), rules)
        found += _rows(rows)
        state = rows.end_state
        for name, (_, until) in ranges.items():
            positions[name] = consumed.get(name, until)
    raise AssertionError("the batches never caught up")


def _rules(delay_ms: int, idle_ms: int | None) -> IngestRules:
    watermark = {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": delay_ms}
    if idle_ms is not None:
        watermark["idle_timeout"] = idle_ms
    return IngestRules("wall", 10 * 86_400_000, 3_650 * 86_400_000, 1_000_000,
                       parse_watermark(watermark))


@settings(max_examples=examples(150), deadline=None)
@given(backlogs(), st.lists(st.integers(1, 40), min_size=1, max_size=5),
       st.sampled_from([0, 5_000]), st.sampled_from([None, MINUTE, 10_000]))
def test_a_backlog_in_capped_batches_arrives_as_in_one(backlog, caps, delay_ms, idle_ms):
    rules = _rules(delay_ms, idle_ms)
    assert ingested_in_batches(backlog, rules, caps) == ingested_at_once(backlog, rules)


def test_cut_by_count_alone_a_lagging_partition_is_made_idle_and_its_records_late():
    """The issue's case, small: partition 1 lags its ingest clock behind partition 0's; a
    batch of two records each covers a minute and a half of partition 0's clock but seconds
    of partition 1's, which then looks idle for a minute and lets the watermark jump."""
    clocks0 = START + np.arange(0, 10) * 45_000
    clocks1 = START + np.arange(0, 40) * 5_000
    backlog = {"events-0": (clocks0, clocks0 - 1_000),
               "events-1": (clocks1, clocks1 - 8 * MINUTE)}
    rules = _rules(0, 40_000)
    once = ingested_at_once(backlog, rules)
    assert ingested_in_batches(backlog, rules, [4]) == once
    by_count = ingested_in_batches(backlog, rules, [4], cut=False)
    assert by_count != once
    late = sum(mark > event for (_, _, _, mark, event) in by_count)
    assert late > sum(mark > event for (_, _, _, mark, event) in once)


def test_the_cut_keeps_what_sorts_before_the_first_unread_place():
    clocks = np.array([10, 20, 30, 30, 40], dtype=np.int64)
    a = PartRead.from_verdicts("t/0", "t-0", [0, 1, 2, 3, 4], [""] * 5, clocks,
                               [ParsedEvent("k", 0, None, {})] * 5, stamped=True)
    b = replace(a, name="t/1", partition="t-1")
    # b's unread records start at clock 30, after its offset 2: a keeps what is before
    # (30, t/1), its two clock-30 records included (its name sorts first); b keeps offsets
    # up to 2
    assert kept_lines([a, b], [Unread(30, "t/1", 3)]) == [4, 3]
    assert kept_lines([a, b], [unread_after(b.head(2))]) == [2, 2]
    assert kept_lines([a, b], [None]) == [5, 5]
    # a part whose clocks were not all its own stamps bounds nothing
    assert unread_after(replace(b, stamped=False)) is None
