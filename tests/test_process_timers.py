"""Processing-time timers of process pipelines, fired on the ingest clock, against a small
reference that knows every record's position.

The reference (:func:`reference`) runs each key alone but looks up, for every timer, the arrival
position at which it became due (the first record whose watermark, or ingest time, reaches it)
by scanning the whole log; before each of the key's records it fires the timers due by then in
the order of those positions (event time first at one position), and at the end of the log the
event-time timers the last watermark reaches and the processing-time ones whose position the
watermark has moved past (docs/semantics.md, "Processing-time timers"). The runners compare
watermarks instead of positions (operators.ingest_clock); they must emit the same rows in
the same order per key whether they see the whole log at once (a backfill, the replay) or in
micro-batches with snapshots in between, woken only when their deadline says so, with an
ingest clock that knows only the log committed so far (the live engine).
"""

from __future__ import annotations

import json
import time
from bisect import bisect_left

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.ingest_clock import IngestClock
from operators.pipeline import parse_pipeline
from operators.process_function import KeyedProcessDriver
from operators.process_pipeline import ProcessRunner, Record, run_keys
from operators.time import MIN_WATERMARK
from operators.timers import EVENT_TIME, PROCESSING_TIME
from tests.depth import examples
from tests.process_functions import Timeouts

START = 1_767_225_600_000
OUTPUT = {"domain": "string", "at_ms": "long", "count": "long", "fired": "long"}


def _spec(idle_ms: int, event_ms: int):
    return parse_pipeline({"source": "events", "process": "tests.process_functions:Timeouts",
                           "parameters": {"idle_ms": idle_ms, "event_ms": event_ms},
                           "output": OUTPUT, "day_column": "at_ms"})


@st.composite
def logs(draw) -> list[tuple[str, Record]]:
    """A log of a few keys: ingest time and watermark each non-decreasing along it (in steps
    that often stand still), event times scattered around them."""
    count = draw(st.integers(1, 40))
    log, ingest, watermark = [], START, MIN_WATERMARK
    for seq in range(count):
        ingest += draw(st.sampled_from([0, 0, 100, 400, 1_500]))
        if draw(st.booleans()):
            watermark = max(watermark, ingest - draw(st.sampled_from([0, 300, 900, 2_000])))
        key = draw(st.sampled_from("abc"))
        event = ingest + draw(st.integers(-2_500, 500))
        log.append((key, Record(seq, event, watermark, ingest, {"key": key})))
    return log


def _per_key(emitted) -> dict[str, list[dict]]:
    rows: dict[str, list[tuple[int, dict]]] = {}
    for e in emitted:
        rows.setdefault(e.key, []).append((e.emission, e.row))
    return {key: [row for _, row in sorted(found, key=lambda pair: pair[0])]
            for key, found in rows.items()}


def reference(spec, log: list[tuple[str, Record]]) -> dict[str, list[dict]]:
    marks = [r.watermark_ms for _, r in log]
    ingests = [r.ingest_time_ms for _, r in log]
    last = len(log) - 1

    def position(clock: list[int], t: int) -> int | None:
        """The first position whose clock reaches ``t`` (both clocks never go back)."""
        found = bisect_left(clock, t)
        return found if found <= last else None

    def due(driver: KeyedProcessDriver, at: int | None) -> tuple | None:
        """The driver's next timer due before the record at ``at`` (``None``: the log's
        end)."""
        candidates = []
        event = driver.timers.next_event_time()
        if event is not None:
            where = position(marks, event)
            if where is not None and (at is None or where <= at):
                candidates.append((where, EVENT_TIME, event))
        timer = driver.timers.next_processing_time()
        if timer is not None:
            where = position(ingests, timer)
            if where is not None and (marks[where] < marks[last] if at is None
                                      else where <= at):
                candidates.append((where, PROCESSING_TIME, timer))
        return min(candidates) if candidates else None

    rows: dict[str, list[dict]] = {}
    for key in sorted({k for k, _ in log}):
        driver = KeyedProcessDriver(Timeouts(**spec.parameters))
        for at, (owner, record) in enumerate(log):
            if owner != key:
                continue
            while (timer := due(driver, at)) is not None:
                driver.fire_next(timer[1])
            driver.process(key, record.event_time_ms, record.fields,
                           watermark=record.watermark_ms, ingest_time=record.ingest_time_ms,
                           arrival_seq=record.arrival_seq)
        while (timer := due(driver, None)) is not None:
            driver.fire_next(timer[1])
        rows[key] = driver.take_output()
    return {key: found for key, found in rows.items() if found}


def live_like(spec, log, cuts: list[int], ahead: int) -> dict[str, list[dict]]:
    """Micro-batches ending at ``cuts``; ingest ``ahead`` records past each; per batch every
    key with records, then every key whose deadline the batch's watermark reached."""
    visible = [0]

    def fetch(after: int):
        rows = [r for _, r in log[after + 1:visible[0]]]
        return ([r.arrival_seq for r in rows], [r.ingest_time_ms for r in rows],
                [r.watermark_ms for r in rows])

    clock = IngestClock(fetch)
    runner = ProcessRunner(spec, "live", clock)
    snapshots: dict[str, object] = {}
    deadlines: dict[str, int] = {}
    emitted = []
    watermark, start = MIN_WATERMARK, 0

    def run(key: str, records: list[Record], at: int) -> None:
        runner.restore(key, snapshots.get(key))
        emitted.extend(runner.process(key, records) + runner.fire(key, at))
        snapshot = json.loads(json.dumps(runner.snapshot(key)))
        snapshots[key] = snapshot
        deadline = ProcessRunner.deadline(snapshot, None, clock, at)
        deadlines.pop(key, None) if deadline is None else deadlines.__setitem__(key, deadline)

    for cut in [*sorted(set(cuts)), len(log)]:
        batch = log[start:cut]
        if not batch:
            continue
        start = cut
        visible[0] = min(len(log), cut + ahead)
        clock.fresh_after = time.time()  # as the live engine does when a call begins
        watermark = max(watermark, max(r.watermark_ms for _, r in batch))
        keys: dict[str, list[Record]] = {}
        for key, record in batch:
            keys.setdefault(key, []).append(record)
        for key in sorted(keys):
            run(key, keys[key], watermark)
        for key in sorted(k for k, d in deadlines.items() if d <= watermark and k not in keys):
            run(key, [], watermark)
    return _per_key(emitted)


@settings(max_examples=examples(150), deadline=None)
@given(log=logs(), cuts=st.lists(st.integers(0, 40), max_size=6),
       ahead=st.integers(0, 5), idle_ms=st.sampled_from([0, 400, 1_000, 3_000]),
       event_ms=st.sampled_from([0, 500, 2_000]))
def test_processing_time_timers_fire_in_the_logs_order_however_the_log_is_cut(
        log, cuts, ahead, idle_ms, event_ms):
    spec = _spec(idle_ms, event_ms)
    expected = reference(spec, log)
    histories: dict[str, list[Record]] = {}
    for key, record in log:
        histories.setdefault(key, []).append(record)
    last = max(r.watermark_ms for _, r in log)
    assert _per_key(run_keys(spec, histories, last, "whole")) == expected
    assert live_like(spec, log, cuts, ahead) == expected


def test_a_timeout_on_the_ingest_clock_fires_when_other_keys_records_move_it():
    """Key ``a`` goes quiet; records of key ``b`` keep arriving and move the ingest clock (and
    the watermark) past ``a``'s timeout: it fires, though ``a`` has no record after it, and
    before ``a``'s event-time timer that the watermark reached only later."""
    spec = _spec(idle_ms=1_000, event_ms=5_000)
    log = [("a", Record(0, START, MIN_WATERMARK, START, {})),
           *[("b", Record(i, START + i * 400, START + i * 400 - 500, START + i * 400, {}))
             for i in range(1, 20)]]
    rows = reference(spec, log)["a"]
    assert [(r["domain"], r["at_ms"], r["fired"]) for r in rows] == [
        ("processing", START + 1_000, 1), ("event", START + 1_001, 2),
        ("event", START + 5_000, 3)]
    histories = {"a": [log[0][1]], "b": [r for _, r in log[1:]]}
    last = log[-1][1].watermark_ms
    assert _per_key(run_keys(spec, histories, last))["a"] == rows
