"""The window operator on hand-made streams: what needs Python to say (user-defined triggers
and functions, evictors, metrics, snapshots, invalid configurations).

The pane-by-pane cases of the built-in windows and triggers are transcripts
(tests/operators/transcripts/, run by test_transcripts.py); expected values here are worked
out from the definitions in docs/semantics.md in the comments.
"""

from __future__ import annotations

import json

import pytest

from operators.aggregates import ProcessWindowFunction
from operators.evictors import CountEvictor, TimeEvictor
from operators.time import MIN_WATERMARK
from operators.triggers import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EventTimeTrigger,
    Trigger,
    TriggerResult,
)
from operators.window_operator import WindowOperator
from operators.windows import SessionWindows, TumblingWindows
from tests.operators.ops_helpers import brief, count_sum, run

M = MIN_WATERMARK


def tumbling(lateness: int = 0, trigger: Trigger | None = None, **kw) -> WindowOperator:
    return WindowOperator(TumblingWindows(10), trigger, aggregate=count_sum(),
                          allowed_lateness=lateness, **kw)




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
