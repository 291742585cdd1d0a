"""The window operator on hand-made streams: Flink's tricky cases, one by one.

Expected values are worked out from the definitions in docs/semantics.md in the comments.
"""

from __future__ import annotations

import json

import pytest

from operators.aggregates import ProcessWindowFunction
from operators.evictors import CountEvictor, TimeEvictor
from operators.time import MIN_WATERMARK
from operators.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EventTimeTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from operators.window_operator import WindowOperator
from operators.windows import GlobalWindows, SessionWindows, SlidingWindows, TumblingWindows
from tests.operators.ops_helpers import brief, count_sum, run

M = MIN_WATERMARK


def tumbling(lateness: int = 0, trigger: Trigger | None = None, **kw) -> WindowOperator:
    return WindowOperator(TumblingWindows(10), trigger, aggregate=count_sum(),
                          allowed_lateness=lateness, **kw)


def test_record_exactly_at_the_watermark() -> None:
    # Window [0,10) has max_timestamp 9. With lateness 0 it is late once 9 <= W.
    panes, late, _ = run(tumbling(), [
        ("k", 9, 1, 8),    # 9 > 8: on time
        ("k", 9, 2, 9),    # fires [0,10) first (timer 9 <= 9), then the record is late
        ("k", 10, 3, 10),  # event_time == watermark, but [10,20) ends at 19 > 10: on time
    ])
    assert brief(panes) == [("k", 0, 10, 0, "ON_TIME", True, 1, 1)]
    assert [(r.event_time_ms, r.arrival_seq, r.watermark_ms, r.window_start, r.window_end)
            for r in late] == [(9, 1, 9, 0, 10)]


def test_lateness_zero_emits_one_final_on_time_pane_and_drops_later_records() -> None:
    panes, late, driver = run(tumbling(), [
        ("k", 1, 1, M), ("k", 5, 2, M), ("k", 12, 4, 4), ("k", 3, 8, 12), ("k", 25, 0, 19),
    ])
    # the third record's watermark 4 fires nothing; W=12 fires [0,10) (its end-of-window
    # timer is its cleanup timer: is_last); the record t=3 is then late; W=19 fires [10,20).
    assert brief(panes) == [("k", 0, 10, 0, "ON_TIME", True, 2, 3),
                            ("k", 10, 20, 0, "ON_TIME", True, 1, 4)]
    assert [(r.event_time_ms, r.window_start) for r in late] == [(3, 0)]
    assert driver.operator.metrics == {"on_time": 4, "late_within_lateness": 0,
                                       "dropped_late": 1}


def test_allowed_lateness_late_panes_then_closing_pane() -> None:
    panes, late, driver = run(tumbling(lateness=5), [
        ("k", 1, 1, M),
        ("k", 2, 2, 9),    # fires on time at W=9 (< cleanup 14), then a late-within pane
        ("k", 3, 4, 13),   # another late pane (13 < 14)
        ("k", 4, 8, 14),   # W=14 = cleanup: closing pane, then this record is late
    ])
    assert brief(panes) == [
        ("k", 0, 10, 0, "ON_TIME", False, 1, 1),
        ("k", 0, 10, 1, "LATE", False, 2, 3),
        ("k", 0, 10, 2, "LATE", False, 3, 7),
        ("k", 0, 10, 3, "LATE", True, 3, 7),  # closing pane
    ]
    assert [(r.event_time_ms, r.watermark_ms) for r in late] == [(4, 14)]
    assert driver.operator.metrics["late_within_lateness"] == 2


def test_watermark_jumping_past_cleanup_still_closes_with_the_cleanup_timer() -> None:
    panes, _, _ = run(tumbling(lateness=5), [("k", 1, 1, M), ("k", 50, 1, 100)])
    # timers 9 and 14 fire in one pass at W=100: the end-of-window pane is not the cleanup
    # timer's, so it is not last; the cleanup timer emits the closing pane (is_last is tied to
    # the cleanup timer, not to the watermark at firing)
    assert brief(panes) == [("k", 0, 10, 0, "ON_TIME", False, 1, 1),
                            ("k", 0, 10, 1, "LATE", True, 1, 1)]


def test_window_created_by_a_late_within_lateness_record_is_late_then_closes() -> None:
    panes, _, driver = run(tumbling(lateness=5), [("k", 30, 0, 11), ("k", 3, 1, 11),
                                                  ("k", 31, 0, 20)])
    # [0,10) first exists at W=11 > 9: the record fires it at once. The watermark did not
    # fire it by reaching the window's end, so even its first pane is LATE (Beam's PaneInfo:
    # an element-fired pane is never ON_TIME; issue 16)
    assert brief(panes) == [("k", 0, 10, 0, "LATE", False, 1, 1),
                            ("k", 0, 10, 1, "LATE", True, 1, 1)]
    assert driver.operator.metrics["late_within_lateness"] == 1


def test_window_ending_at_the_largest_timestamp_fires_like_any_other() -> None:
    """Tumbling 1000 with offset 807 has a window ending exactly at MAX_TIMESTAMP: its max
    timestamp is ``end - 1`` (Flink's), so it fires when the watermark reaches it; only the
    global window ``[MIN_WATERMARK, MAX_TIMESTAMP)`` never ends."""
    from operators.time import MAX_TIMESTAMP

    op = WindowOperator(TumblingWindows(1000, 807), aggregate=count_sum())
    t = MAX_TIMESTAMP - 5
    assert op.assigner.assign(t, None)[0].end == MAX_TIMESTAMP
    panes, late, _ = run(op, [("k", t, 1, M), ("z", 0, 0, MAX_TIMESTAMP - 1)])
    assert brief(panes) == [("k", MAX_TIMESTAMP - 1000, MAX_TIMESTAMP, 0, "ON_TIME", True, 1,
                             1)]
    assert [r.key for r in late] == ["z"]  # 0 is far behind that watermark


def test_sliding_late_rows_per_missed_window() -> None:
    op = WindowOperator(SlidingWindows(10, 5), aggregate=count_sum())
    panes, late, _ = run(op, [("k", 7, 1, M), ("k", 7, 2, 10)])
    # t=7 is in [0,10) (max 9 <= 10: late) and [5,15) (max 14 > 10: on time)
    assert [(r.window_start, r.window_end) for r in late] == [(0, 10)]
    assert brief(panes) == [("k", 0, 10, 0, "ON_TIME", True, 1, 1)]
    assert op.timers.timers()  # [5,15) is still pending


def test_timers_at_the_same_timestamp_fire_by_key_then_window() -> None:
    op = WindowOperator(SlidingWindows(10, 5), aggregate=count_sum())
    panes, _, _ = run(op, [("b", 7, 1, M), ("a", 7, 1, M), ("b", 1, 1, M), ("z", 100, 0, 50)])
    assert [(p.key, p.window_start) for p in panes] == [
        ("b", -5),            # timestamp 4
        ("a", 0), ("b", 0),   # timestamp 9: a before b
        ("a", 5), ("b", 5),   # timestamp 14
    ]


def test_purging_trigger_fires_and_purges_repeatedly() -> None:
    op = tumbling(trigger=PurgingTrigger(CountTrigger(2)))
    panes, _, driver = run(op, [("k", i, i, M) for i in range(5)] + [("k", 20, 0, 30)])
    # fires at the 2nd and 4th element, emptying the window; the 5th stays until cleanup,
    # where the closing pane carries it alone
    assert brief(panes) == [("k", 0, 10, 0, "EARLY", False, 2, 1),
                            ("k", 0, 10, 1, "EARLY", False, 2, 5),
                            ("k", 0, 10, 2, "ON_TIME", True, 1, 4)]


def test_purge_then_nothing_left_means_no_closing_pane() -> None:
    op = tumbling(trigger=PurgingTrigger(CountTrigger(2)))
    panes, _, _ = run(op, [("k", 1, 1, M), ("k", 2, 1, M), ("k", 20, 0, 30)])
    assert [p.pane_index for p in panes] == [0]


def test_purging_event_time_trigger_with_lateness() -> None:
    op = tumbling(lateness=5, trigger=PurgingTrigger(EventTimeTrigger()))
    panes, _, _ = run(op, [("k", 1, 1, M), ("k", 2, 2, 9), ("k", 3, 4, 10), ("k", 50, 0, 14)])
    # each pane carries only what arrived since the previous one; after the last purge the
    # window is empty at cleanup, so there is no closing pane
    assert brief(panes) == [("k", 0, 10, 0, "ON_TIME", False, 1, 1),
                            ("k", 0, 10, 1, "LATE", False, 1, 2),
                            ("k", 0, 10, 2, "LATE", False, 1, 4)]


def test_count_trigger_accumulates_without_purging() -> None:
    op = tumbling(trigger=CountTrigger(2))
    panes, _, _ = run(op, [("k", i, 1, M) for i in range(4)])
    assert [(p.values["n"], p.timing) for p in panes] == [(2, "EARLY"), (4, "EARLY")]


def test_delta_trigger() -> None:
    op = WindowOperator(GlobalWindows(), DeltaTrigger.on_field(5, "v"), aggregate=count_sum())
    panes, _, _ = run(op, [("k", 1, 10, M), ("k", 2, 14, M), ("k", 3, 16, M), ("k", 4, 20, M),
                           ("k", 5, 22, M)])
    # remembered 10; 16-10 > 5 fires (remember 16); 22-16 > 5 fires
    assert [p.values["n"] for p in panes] == [3, 5]
    assert all(p.timing == "EARLY" and not p.is_last for p in panes)


def test_global_window_default_trigger_never_fires() -> None:
    op = WindowOperator(GlobalWindows(), aggregate=count_sum())
    panes, late, _ = run(op, [("k", 1, 1, M), ("k", 2, 1, 10**12)])
    assert panes == [] and late == []


def test_continuous_event_time_trigger_fires_early_panes() -> None:
    op = WindowOperator(TumblingWindows(100), ContinuousEventTimeTrigger(30),
                        aggregate=count_sum())
    panes, _, _ = run(op, [("k", 5, 1, M), ("k", 40, 1, 29), ("k", 50, 1, 30),
                           ("k", 70, 1, 60), ("k", 200, 1, 99)])
    # first element at 5 schedules 30; then 60, 90 and 99 (the end). At W=99 the timers 90
    # and 99 fire in one pass. Timing is judged on the key's clock, which a timer moves to
    # its own timestamp: the pane of timer 90 is EARLY (90 < 99) whatever the watermark that
    # fired it; the pane of timer 99 is ON_TIME and, 99 being the cleanup time, the last.
    assert [(p.values["n"], p.timing, p.is_last) for p in panes] == [
        (2, "EARLY", False), (3, "EARLY", False), (4, "EARLY", False), (4, "ON_TIME", True)]


def test_processing_time_trigger_uses_the_ingest_clock() -> None:
    op = tumbling(trigger=ProcessingTimeTrigger())
    panes, _, _ = run(op, [("k", 1, 1, M, 0), ("k", 2, 1, M, 5), ("x", 0, 0, M, 9),
                           ("x", 0, 0, M, 9)])
    # k's processing-time timer at 9 fires before the record ingested at 9; x's window
    # registers a timer at 9 that is already due at ingest time 9: it fires before the next
    # record, not at once
    assert [(p.key, p.values["n"], p.timing) for p in panes] == [("k", 2, "EARLY"),
                                                                  ("x", 1, "EARLY")]


def test_continuous_processing_time_trigger() -> None:
    op = WindowOperator(TumblingWindows(100), ContinuousProcessingTimeTrigger(10),
                        aggregate=count_sum())
    panes, _, _ = run(op, [("k", 1, 1, M, 3), ("k", 2, 1, M, 12), ("k", 3, 1, M, 25)])
    # first element at ingest 3 schedules 10; firing at 10 schedules 20
    assert [(p.values["n"]) for p in panes] == [1, 2]


def test_continuous_processing_time_trigger_after_the_ingest_clock_passed_the_window() -> None:
    """The ingest clock usually runs ahead of event time: once it is past the window's max
    timestamp the next firing is capped there, already due. It fires once, and each later
    element fires once more; no endless re-firing (this used to hang)."""
    op = WindowOperator(TumblingWindows(100), ContinuousProcessingTimeTrigger(30),
                        aggregate=count_sum())
    panes, _, _ = run(op, [("k", 10, 1, M, 10), ("k", 20, 1, M, 50), ("k", 30, 1, M, 200),
                           ("k", 40, 1, M, 260), ("x", 0, 0, M, 400)])
    # 30 fires at ingest 50 (n=1, before the record at 50); 60 and 90 at 200 (n=2, twice)
    # then 99, the cap, once; the record at 200 starts again at 99 (due: fires n=3 before
    # the record at 260), the record at 260 once more (n=4, at ingest 400)
    assert [p.values["n"] for p in panes if p.key == "k"] == [1, 2, 2, 2, 3, 4]


class BothClocks(Trigger):
    """Fires on an event-time timer at the window end and on a processing-time timer 1 ms
    of ingest clock after each element; records the callbacks it sees, in order."""

    calls: list = []

    def on_element(self, element, timestamp, window, ctx):
        ctx.register_event_time_timer(window.max_timestamp)
        ctx.register_processing_time_timer(ctx.current_processing_time + 1)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        self.calls.append(("event", time, ctx.key))
        return TriggerResult.FIRE if time == window.max_timestamp else TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        self.calls.append(("processing", time, ctx.key))
        return TriggerResult.FIRE


def test_event_time_timers_fire_before_processing_time_timers() -> None:
    BothClocks.calls = []
    op = tumbling(lateness=100, trigger=BothClocks())
    panes, _, _ = run(op, [("b", 1, 1, M, 0), ("a", 2, 1, M, 0), ("z", 50, 0, 9, 5)])
    # due at W=9 / ingest 5: event-time timers (9, a) and (9, b), then the processing-time
    # timers (1, a) and (1, b), although their timestamps are smaller
    assert BothClocks.calls == [("event", 9, "a"), ("event", 9, "b"),
                                ("processing", 1, "a"), ("processing", 1, "b")]
    assert [(p.key, p.timing) for p in panes] == [("a", "ON_TIME"), ("b", "ON_TIME"),
                                                  ("a", "LATE"), ("b", "LATE")]


def test_session_windows_merge_and_fire() -> None:
    op = WindowOperator(SessionWindows(5), aggregate=count_sum(), allowed_lateness=0)
    panes, late, _ = run(op, [("k", 0, 1, M), ("k", 3, 2, M), ("k", 8, 4, M),  # [0,13)
                              ("k", 20, 8, M), ("k", 100, 0, 30)])
    assert brief(panes) == [("k", 0, 13, 0, "ON_TIME", True, 3, 7),
                            ("k", 20, 25, 0, "ON_TIME", True, 1, 8)]
    assert late == []


def test_touching_sessions_merge_as_in_flink() -> None:
    op = WindowOperator(SessionWindows(5), aggregate=count_sum())
    panes, _, _ = run(op, [("k", 0, 1, M), ("k", 5, 2, M), ("k", 100, 0, 50)])
    assert [(p.window_start, p.window_end, p.values["n"]) for p in panes] == [(0, 10, 2)]


def test_late_within_lateness_record_bridges_two_sessions() -> None:
    op = WindowOperator(SessionWindows(5), aggregate=count_sum(), allowed_lateness=20)
    panes, late, _ = run(op, [
        ("k", 0, 1, M),    # [0,5)
        ("k", 9, 2, M),    # [9,14)
        ("k", 40, 0, 15),  # fires [0,5) (max 4) and [9,14) (max 13) on time, not final
        ("k", 4, 4, 15),   # [4,9) touches both: merged [0,14) (max 13 <= 15: fires now)
        ("k", 60, 0, 40),  # cleanup of [0,14) at 33: closing pane
    ])
    # the merged window is a new window, but the late record fired it, not the watermark
    # reaching its end: LATE from its first pane on
    assert brief(panes) == [
        ("k", 0, 5, 0, "ON_TIME", False, 1, 1),
        ("k", 9, 14, 0, "ON_TIME", False, 1, 2),
        ("k", 0, 14, 0, "LATE", False, 3, 7),
        ("k", 0, 14, 1, "LATE", True, 3, 7),
    ]
    assert late == []


def test_session_opened_by_a_late_record_is_late() -> None:
    op = WindowOperator(SessionWindows(5), aggregate=count_sum(), allowed_lateness=20)
    panes, late, _ = run(op, [("k", 50, 1, M), ("k", 10, 2, 20), ("k", 90, 0, 40)])
    # at W=20 [10,15) (max 14) is past its end but within lateness: the record opens it and
    # fires it (LATE); the cleanup timer at 34 closes it (LATE, last)
    assert brief(panes) == [("k", 10, 15, 0, "LATE", False, 1, 2),
                            ("k", 10, 15, 1, "LATE", True, 1, 2)]
    assert late == []


def test_record_late_for_its_own_session_joins_a_live_one() -> None:
    # Lateness is judged on the merged window (Flink): at W=26 with lateness 20, [0,5) alone
    # would be late (4 + 20 <= 26), but it touches the live [5,10) (9 + 20 > 26).
    op = WindowOperator(SessionWindows(5), aggregate=count_sum(), allowed_lateness=20)
    panes, late, _ = run(op, [("k", 5, 1, M), ("k", 12, 1, M), ("k", 0, 1, 26)])
    assert late == []
    assert [(p.window_start, p.window_end, p.values["n"]) for p in panes][-1] == (0, 10, 2)
    _, late, _ = run(op.__class__(SessionWindows(5), aggregate=count_sum(),
                                  allowed_lateness=20), [("k", 20, 1, M), ("k", 0, 1, 26)])
    assert [(r.window_start, r.window_end) for r in late] == [(0, 5)]


def test_dynamic_gap_sessions() -> None:
    op = WindowOperator(SessionWindows(gap_field="gap"), aggregate=count_sum())
    driver_records = [("k", 0, {"v": 1, "gap": 10}), ("k", 8, {"v": 1, "gap": 1}),
                      ("k", 30, {"v": 1, "gap": 1})]
    from operators.window_operator import WindowDriver

    driver = WindowDriver(op)
    for seq, (key, t, payload) in enumerate(driver_records):
        driver.process(key, t, payload, arrival_seq=seq, watermark=M, ingest_time=seq)
    assert sorted(driver.states["k"].windows) == [(0, 10), (30, 31)]


class LastThreeOrOnTime(Trigger):
    """A user-defined trigger: an early pane every third element, plus the on-time pane;
    its timer callback registers an already-due timer to check same-pass firing."""

    def on_element(self, element, timestamp, window, ctx):
        n = ctx.get_state("n", 0) + 1
        ctx.set_state("n", n)
        if window.max_timestamp <= ctx.current_watermark:
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp - 1)
        return TriggerResult.FIRE if n % 3 == 0 else TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        if time == window.max_timestamp - 1:
            ctx.register_event_time_timer(window.max_timestamp)  # already due at W >= max
            return TriggerResult.CONTINUE
        return TriggerResult.FIRE if time == window.max_timestamp else TriggerResult.CONTINUE

    def clear(self, window, ctx):
        ctx.clear_state("n")


def test_user_defined_trigger_and_timer_registered_in_callback_fires_same_pass() -> None:
    op = tumbling(lateness=5, trigger=LastThreeOrOnTime())
    panes, _, driver = run(op, [("k", i, 1, M) for i in range(4)] + [("z", 50, 0, 20)])
    # at W=20: timer 8 registers timer 9, which fires in the same pass (ON_TIME), before the
    # cleanup timer 14 (closing pane) and before the record of z
    assert [(p.values["n"], p.timing, p.is_last) for p in panes] == [
        (3, "EARLY", False), (4, "ON_TIME", False), (4, "LATE", True)]
    assert "k" not in driver.states  # cleaned up in the same pass


class CountAndSum(ProcessWindowFunction):
    def process(self, key, context, elements):
        context.window_state["fired"] = context.window_state.get("fired", 0) + 1
        context.global_state["panes"] = context.global_state.get("panes", 0) + 1
        return {"n": len(elements), "s": sum(e[1]["v"] for e in elements),
                "fired": context.window_state["fired"], "seen": context.global_state["panes"]}


def test_process_window_function_with_window_and_global_state() -> None:
    op = WindowOperator(TumblingWindows(10), CountTrigger(1), process_function=CountAndSum())
    panes, _, driver = run(op, [("k", 1, 1, M), ("k", 2, 2, M), ("k", 15, 4, M)])
    assert [p.values for p in panes] == [
        {"n": 1, "s": 1, "fired": 1, "seen": 1}, {"n": 2, "s": 3, "fired": 2, "seen": 2},
        {"n": 1, "s": 4, "fired": 1, "seen": 3}]


def test_count_evictor_before_and_after() -> None:
    before = WindowOperator(TumblingWindows(10), CountTrigger(1), aggregate=count_sum(),
                            evictor=CountEvictor(2))
    panes, _, _ = run(before, [("k", i, i + 1, M) for i in range(4)])
    assert [p.values["s"] for p in panes] == [1, 3, 5, 7]
    after = WindowOperator(TumblingWindows(10), CountTrigger(1), aggregate=count_sum(),
                           evictor=CountEvictor(2, evict_after=True))
    panes, _, _ = run(after, [("k", i, i + 1, M) for i in range(4)])
    # the function sees up to 3 elements (2 kept + the new one), then 2 are kept
    assert [p.values["s"] for p in panes] == [1, 3, 6, 9]


def test_time_evictor_in_operator() -> None:
    op = WindowOperator(TumblingWindows(100), CountTrigger(1), aggregate=count_sum(),
                        evictor=TimeEvictor(10))
    panes, _, _ = run(op, [("k", 5, 1, M), ("k", 12, 2, M), ("k", 20, 4, M)])
    # at 20 the cut-off is 10: t=5 evicted
    assert [p.values["s"] for p in panes] == [1, 3, 6]


def test_key_snapshot_round_trip_through_json() -> None:
    op = tumbling(lateness=5)
    _, _, driver = run(op, [("k", 1, 1, M), ("k", 2, 2, 9)])
    snap = json.loads(json.dumps(driver.snapshot_key("k", evict=True)))
    assert "k" not in driver.states and driver.pending_timers("k") == []
    assert snap["timers"] == [0, 14, 0, 10]  # (kind, timestamp, window start, end)
    driver.restore_key("k", snap)
    assert [(kind, ts) for kind, ts, _ in driver.pending_timers("k")] == [(0, 14)]
    driver.process("z", 50, {"v": 0}, arrival_seq=9, watermark=14, ingest_time=9)
    panes, _ = driver.take_output()
    assert brief(panes) == [("k", 0, 10, 2, "LATE", True, 2, 3)]


def test_invalid_configurations() -> None:
    with pytest.raises(ValueError):
        WindowOperator(SessionWindows(5), DeltaTrigger.on_field(1, "v"), aggregate=count_sum())
    with pytest.raises(ValueError):
        WindowOperator(TumblingWindows(5))
    with pytest.raises(ValueError):
        WindowOperator(TumblingWindows(5), EventTimeTrigger(), aggregate=count_sum(),
                       allowed_lateness=-1)


class EveryThirdOrOnTime(Trigger):
    """The custom trigger of docs/operators.md, verbatim."""

    def on_element(self, element, timestamp, window, ctx):
        n = ctx.get_state("n", 0) + 1
        ctx.set_state("n", n)
        if window.max_timestamp <= ctx.current_watermark:
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp)
        return TriggerResult.FIRE if n % 3 == 0 else TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.FIRE if time == window.max_timestamp else TriggerResult.CONTINUE

    def can_merge(self):
        return True

    def on_merge(self, window, ctx):
        ctx.merge_state("n", lambda a, b: a + b)
        if window.max_timestamp > ctx.current_watermark:
            ctx.register_event_time_timer(window.max_timestamp)

    def clear(self, window, ctx):
        ctx.delete_event_time_timer(window.max_timestamp)
        ctx.clear_state("n")


def test_documented_custom_trigger_merges_its_state_in_sessions() -> None:
    op = WindowOperator(SessionWindows(5), EveryThirdOrOnTime(), aggregate=count_sum())
    panes, _, driver = run(op, [("k", 0, 1, M), ("k", 20, 1, M), ("k", 10, 1, M),
                                ("k", 5, 1, M), ("k", 60, 0, 40)])
    # 0 and 20 open two sessions (n=1 each); 10 opens a third (n=1); 5 bridges [0,5) and
    # [10,15) into [0,15) with n = 1 + 1 + 1 = 3: an EARLY pane. At W=40 both end.
    assert [(p.window_start, p.window_end, p.values["n"], p.timing) for p in panes] == [
        (0, 15, 3, "EARLY"), (0, 15, 3, "ON_TIME"), (20, 25, 1, "ON_TIME")]
    assert driver.states["k"].windows[(60, 65)].trigger_state == {"n": 1}


class Sequence(ProcessWindowFunction):
    def process(self, key, context, elements):
        return {"seqs": [e[2] for e in elements]}


def test_merged_session_buffers_keep_arrival_order() -> None:
    op = WindowOperator(SessionWindows(5), process_function=Sequence())
    # [10,15) [0,5) -> [10,16) -> [0,6); then 6 opens [6,11), which touches both: [0,16)
    panes, _, _ = run(op, [("k", 10, 0, M), ("k", 0, 0, M), ("k", 11, 0, M), ("k", 1, 0, M),
                           ("k", 6, 0, M), ("k", 50, 0, 40)])
    assert [p.values["seqs"] for p in panes] == [[0, 1, 2, 3, 4]]


def test_evictor_removing_everything_leaves_an_empty_window() -> None:
    from operators.evictors import DeltaEvictor

    op = WindowOperator(TumblingWindows(10), CountTrigger(2), aggregate=count_sum(),
                        evictor=DeltaEvictor.on_field(0, "v", evict_after=True))
    panes, _, _ = run(op, [("k", 1, 1, M), ("k", 2, 2, M), ("k", 20, 0, 30)])
    # the pane sees both elements, then everything is evicted: no closing pane at cleanup
    assert brief(panes) == [("k", 0, 10, 0, "EARLY", False, 2, 3)]


def test_watermark_and_ingest_clock_never_go_back() -> None:
    panes, late, driver = run(tumbling(), [("k", 1, 1, M, 5), ("k", 30, 1, 12, 9),
                                           ("k", 2, 1, 3, 1)])
    assert driver.watermark == 12 and driver.processing_time == 9
    assert [r.watermark_ms for r in late] == [12]  # judged against 12, not 3


def test_continuous_event_time_trigger_negative_times_floor() -> None:
    op = WindowOperator(TumblingWindows(100), ContinuousEventTimeTrigger(30),
                        aggregate=count_sum())
    _, _, driver = run(op, [("k", -95, 1, M)])
    # window [-100, 0); floor(-95 / 30) * 30 = -120, so the first firing is at -90
    assert [ts for _, ts, _ in driver.pending_timers("k")] == [-90, -1]
