"""Beam's composable triggers inside the window operator: what the transcripts cannot show
(state through snapshots, session merges, timers left behind, building from a description).
Pane-by-pane behaviour of each trigger is in tests/operators/transcripts/."""

from __future__ import annotations

import json

import pytest

from operators.build import build_driver, build_window_operator
from operators.composable import (
    AfterProcessingTime,
    AfterWatermark,
    ComposedTrigger,
)
from operators.pipeline import PipelineConfigError, parse_pipeline
from operators.time import MIN_WATERMARK
from operators.window_operator import WindowDriver, WindowOperator
from operators.windows import SessionWindows, TumblingWindows
from tests.operators.ops_helpers import brief, count_sum, run

M = MIN_WATERMARK


def test_a_finished_trigger_closes_the_window_also_across_a_snapshot() -> None:
    """AfterWatermark without late firings finishes on time: that pane is the last, and a
    record within allowed lateness goes to the late output, also after the key went through
    a JSON snapshot (the closed flag is state)."""
    op = WindowOperator(TumblingWindows(10), ComposedTrigger(AfterWatermark()),
                        aggregate=count_sum(), allowed_lateness=5)
    _, _, driver = run(op, [("k", 1, 1, M), ("z", 50, 0, 9)])
    snap = json.loads(json.dumps(driver.snapshot_key("k", evict=True)))
    restored = WindowDriver(WindowOperator(TumblingWindows(10),
                                           ComposedTrigger(AfterWatermark()),
                                           aggregate=count_sum(), allowed_lateness=5))
    restored.restore_key("k", snap)
    restored.process("k", 2, {"v": 2}, arrival_seq=2, watermark=11, ingest_time=2)
    panes, late = restored.take_output()
    assert panes == []
    assert [(r.event_time_ms, r.window_start) for r in late] == [(2, 0)]
    assert restored.operator.metrics["dropped_late"] == 1
    restored.advance(14, 3)  # cleanup: the closed window goes, with no closing pane
    assert restored.take_output() == ([], []) and "k" not in restored.states


def test_session_merge_keeps_the_earliest_processing_time() -> None:
    op = WindowOperator(SessionWindows(5), ComposedTrigger(AfterProcessingTime(10)),
                        aggregate=count_sum())
    panes, _, _ = run(op, [("k", 0, 1, M, 0), ("k", 9, 1, M, 4), ("k", 4, 1, M, 6),
                           ("z", 0, 0, M, 10)])
    # [0,5) waits for ingest 10, [9,14) for 14; merged [0,14) keeps 10: fires before z
    assert brief(panes) == [("k", 0, 14, 0, "EARLY", True, 3, 3)]


def test_cleanup_deletes_the_trees_timers() -> None:
    trigger = ComposedTrigger(AfterWatermark(early=AfterProcessingTime(1_000)))
    _, _, driver = run(WindowOperator(TumblingWindows(10), trigger, aggregate=count_sum()),
                       [("k", 1, 1, M, 0), ("z", 50, 0, 9, 1)])
    assert driver.pending_timers("k") == []  # the early firing's processing-time timer too
    assert "k" not in driver.states


def test_built_from_a_description() -> None:
    spec = parse_pipeline({
        "watermark": {"strategy": "monotonous"}, "window": {"type": "tumbling", "size": 10},
        "trigger": {"type": "or_finally",
                    "main": {"type": "repeatedly",
                             "trigger": {"type": "after_any", "triggers": [
                                 {"type": "after_count", "count": 2},
                                 {"type": "after_processing_time", "delay": "1s"}]}},
                    "finally": {"type": "after_watermark"},
                    "accumulation": "discarding"}})
    assert not spec.is_standard_window and spec.trigger.uses_processing_time
    trigger = build_window_operator(spec).trigger
    assert isinstance(trigger, ComposedTrigger) and not trigger.accumulating
    driver = build_driver(spec)
    for seq, t in enumerate([1, 2, 3]):
        driver.process("k", t, {}, arrival_seq=seq, watermark=M, ingest_time=0)
    driver.process("z", 50, {}, arrival_seq=3, watermark=9, ingest_time=0)
    panes, _ = driver.take_output()
    # discarding: 2 on the count, then the rest (1) on time, which finishes (is_last)
    assert [(p.values["count"], p.timing, p.is_last) for p in panes] == [
        (2, "EARLY", False), (1, "ON_TIME", True)]


@pytest.mark.parametrize(("trigger", "message"), [
    ({"type": "after_any", "triggers": [{"type": "count", "count": 2}]},
     "trigger.triggers[0].type 'count': only composable triggers"),
    ({"type": "repeatedly", "trigger": {"type": "after_count", "count": 1,
                                        "accumulation": "discarding"}},
     "trigger.trigger.accumulation: accumulation belongs to the top"),
    ({"type": "after_count", "count": 2, "purging": True},
     "trigger.purging does not belong to an after_count trigger"),
    ({"type": "or_finally", "main": {"type": "after_count", "count": 1}},
     "trigger.finally is required"),
    ({"type": "after_watermark", "early": {"type": "after_count"}},
     "trigger.early.count is required for an after_count trigger"),
    ({"type": "after_count", "count": 1, "accumulation": "sometimes"},
     "trigger.accumulation must be one of accumulating, discarding"),
])
def test_description_mistakes_name_the_nested_setting(trigger: dict, message: str) -> None:
    with pytest.raises(PipelineConfigError) as error:
        parse_pipeline({"watermark": {"strategy": "monotonous"},
                        "window": {"type": "tumbling", "size": 10}, "trigger": trigger})
    assert message in str(error.value)
