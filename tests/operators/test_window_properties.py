"""The window operator against a small reference written straight from the definitions.

The reference knows nothing of timers, triggers, heaps or state objects: per window it keeps
the list of values, whether the "end of window" firing is still pending, and its panes. Before
each record it applies what the record's watermark makes due, in the documented order
(ascending ``(time, key, window)``), then adds the record to every window that contains it by
definition (``start = offset + k * slide``, ``start <= t < start + size``) unless
``max_timestamp + allowed_lateness <= watermark``. Pane timing and is_last follow the rules of
docs/semantics.md: timing from the key's own clock (its records' watermarks and the times of
its fired timers), is_last for the cleanup timer's pane only, a closing pane when the cleanup
timer fired none. Random out-of-order streams with random non-decreasing watermarks must give
exactly the same panes, in the same order, and the same late records.

Pane timing is Beam's rule: EARLY before the window's end on the key's clock; ON_TIME only for
the pane the watermark fires by reaching the window's end, when no non-early pane came before;
LATE otherwise (a pane fired by a late record is LATE even when it is the window's first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.aggregates import ProcessWindowFunction
from operators.time import MIN_WATERMARK
from operators.window_operator import WindowDriver, WindowOperator
from operators.windows import SessionWindows, SlidingWindows, TumblingWindows
from tests.depth import examples
from tests.operators.ops_helpers import brief, count_sum, run

KEYS = ["a", "b", "c"]


@dataclass
class RefWindow:
    start: int
    end: int
    values: list[int] = field(default_factory=list)
    fire_pending: bool = False
    panes: int = 0
    on_time_done: bool = False
    last_is_last: bool = False
    closed: bool = False


def reference(records: list[tuple], lateness: int, *, size: int = 0, slide: int = 0,
              offset: int = 0, gap: int = 0) -> tuple[list[tuple], list[tuple]]:
    """Panes (as ``brief`` tuples) and late rows ``(key, t, seq, W, start, end)``."""
    windows: dict[tuple[str, int, int], RefWindow] = {}
    panes: list[tuple] = []
    late: list[tuple] = []
    key_clock: dict[str, int] = {}  # the key's watermark: its records' and fired timers'

    def emit(key: str, w: RefWindow, final: bool, at_end: bool) -> None:
        """``at_end``: fired by the watermark reaching the window's end."""
        if key_clock[key] < w.end - 1:
            timing = "EARLY"
        else:
            timing = "ON_TIME" if at_end and not w.on_time_done else "LATE"
            w.on_time_done = True
        panes.append((key, w.start, w.end, w.panes, timing, final, len(w.values),
                      sum(w.values)))
        w.panes += 1
        w.last_is_last = final

    for seq, (key, t, v, watermark) in enumerate(records):
        # 1. everything the watermark makes due, in (time, key, window) order
        due = []
        for (k, start, end), w in windows.items():
            if w.closed:
                continue
            if w.fire_pending and end - 1 <= watermark:
                due.append((end - 1, k, start, end, 0))
            if end - 1 + lateness <= watermark:
                due.append((end - 1 + lateness, k, start, end, 1))
        for ts, k, start, end, kind in sorted(due):
            w = windows[(k, start, end)]
            key_clock[k] = max(key_clock[k], ts)
            if kind == 0:  # end of window; with lateness 0 it is also the cleanup timer
                w.fire_pending = False
                emit(k, w, final=lateness == 0, at_end=True)
            else:  # cleanup: the closing pane unless this very timer already emitted one
                if w.values and not w.last_is_last:
                    emit(k, w, final=True, at_end=False)
                w.closed = True
        key_clock[key] = max(key_clock.get(key, MIN_WATERMARK), watermark)
        # 2. the record
        if gap:
            proto = (t, t + gap)
            live = [w for (k, _, _), w in windows.items()
                    if k == key and not w.closed and w.start <= proto[1] and w.end >= proto[0]]
            start = min([proto[0]] + [w.start for w in live])
            end = max([proto[1]] + [w.end for w in live])
            if end - 1 + lateness <= watermark:
                assert not live
                late.append((key, t, seq, watermark, start, end))
                continue
            if len(live) == 1 and (live[0].start, live[0].end) == (start, end):
                target = live[0]
            else:
                target = RefWindow(start, end, [x for w in live for x in w.values])
                for w in live:
                    del windows[(key, w.start, w.end)]
                windows[(key, start, end)] = target
            targets = [target]
        else:
            starts = [s for s in range(t - size + 1, t + 1) if (s - offset) % slide == 0]
            targets = []
            for s in sorted(starts, reverse=True):
                if s + size - 1 + lateness <= watermark:
                    late.append((key, t, seq, watermark, s, s + size))
                    continue
                targets.append(windows.setdefault((key, s, s + size), RefWindow(s, s + size)))
        for w in targets:
            w.values.append(v)
            if w.end - 1 <= watermark:
                emit(key, w, final=False, at_end=False)
            else:
                w.fire_pending = True
    return panes, late


@st.composite
def streams(draw: st.DrawFn) -> list[tuple]:
    n = draw(st.integers(0, 40))
    levels = sorted(draw(st.lists(st.integers(-25, 130), min_size=n, max_size=n)))
    records = []
    for level in levels:
        watermark = MIN_WATERMARK if level < -20 else level
        base = 0 if watermark == MIN_WATERMARK else watermark
        t = draw(st.one_of(st.integers(-20, 120), st.integers(base - 30, base + 20)))
        records.append((draw(st.sampled_from(KEYS)), t, draw(st.integers(0, 9)), watermark))
    return records


lateness_values = st.sampled_from([0, 0, 1, 5, 17])


def composable_trees(depth: int = 2) -> st.SearchStrategy:
    """Random trees of Beam's composable triggers, as ``(kind, *arguments)`` tuples."""
    leaves = st.one_of(
        st.tuples(st.just("after_count"), st.integers(1, 3)),
        st.tuples(st.just("after_processing_time"), st.integers(0, 5)),
        st.tuples(st.just("after_watermark")),
    )
    if depth == 0:
        return leaves
    inner = composable_trees(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.just("after_watermark"), st.none() | inner, st.none() | inner),
        st.tuples(st.sampled_from(["after_any", "after_all", "after_each"]),
                  st.lists(inner, min_size=1, max_size=2).map(tuple)),
        st.tuples(st.just("repeatedly"), inner),
        st.tuples(st.just("or_finally"), inner, inner),
    )


def build_tree(tree: tuple):
    from operators import composable as c

    kind, *args = tree
    if kind == "after_count":
        return c.AfterCount(args[0])
    if kind == "after_processing_time":
        return c.AfterProcessingTime(args[0])
    if kind == "after_watermark":
        early, late = (args + [None, None])[:2]
        return c.AfterWatermark(build_tree(early) if early else None,
                                build_tree(late) if late else None)
    if kind == "repeatedly":
        return c.Repeatedly(build_tree(args[0]))
    if kind == "or_finally":
        return c.OrFinally(build_tree(args[0]), build_tree(args[1]))
    parts = [build_tree(t) for t in args[0]]
    return {"after_any": c.AfterAny, "after_all": c.AfterAll, "after_each": c.AfterEach}[kind](
        *parts)


def late_rows(late: list) -> list[tuple]:
    return [(r.key, r.event_time_ms, r.arrival_seq, r.watermark_ms, r.window_start,
             r.window_end) for r in late]


@settings(max_examples=examples(150), deadline=None)
@given(streams(), st.integers(1, 20), st.integers(0, 19), lateness_values)
def test_tumbling_matches_reference(records, size, offset, lateness) -> None:
    offset %= size
    op = WindowOperator(TumblingWindows(size, offset), aggregate=count_sum(),
                        allowed_lateness=lateness)
    panes, late, _ = run(op, records)
    expected_panes, expected_late = reference(records, lateness, size=size, slide=size,
                                              offset=offset)
    assert brief(panes) == expected_panes
    assert late_rows(late) == expected_late


@settings(max_examples=examples(150), deadline=None)
@given(streams(), st.integers(1, 20), st.integers(1, 20), st.integers(0, 19), lateness_values)
def test_sliding_matches_reference(records, size, slide, offset, lateness) -> None:
    if slide > size:
        size, slide = slide, size
    offset %= slide
    op = WindowOperator(SlidingWindows(size, slide, offset), aggregate=count_sum(),
                        allowed_lateness=lateness)
    panes, late, _ = run(op, records)
    expected_panes, expected_late = reference(records, lateness, size=size, slide=slide,
                                              offset=offset)
    assert brief(panes) == expected_panes
    assert late_rows(late) == expected_late


@settings(max_examples=examples(150), deadline=None)
@given(streams(), st.integers(1, 15), lateness_values)
def test_sessions_match_reference(records, gap, lateness) -> None:
    op = WindowOperator(SessionWindows(gap), aggregate=count_sum(), allowed_lateness=lateness)
    panes, late, _ = run(op, records)
    expected_panes, expected_late = reference(records, lateness, gap=gap)
    assert brief(panes) == expected_panes
    assert late_rows(late) == expected_late


def _check_invariants(panes: list) -> None:
    """Per window: indexes 0, 1, ...; at most one ON_TIME; nothing after the last pane."""
    seen: dict[tuple, list] = {}
    for p in panes:
        seen.setdefault((p.key, p.window_start, p.window_end), []).append(p)
    for window_panes in seen.values():
        assert [p.pane_index for p in window_panes] == list(range(len(window_panes)))
        assert sum(p.timing == "ON_TIME" for p in window_panes) <= 1
        assert all(not p.is_last for p in window_panes[:-1])


class CountSumFunction(ProcessWindowFunction):
    def process(self, key, context, elements):
        return {"n": len(elements), "s": sum(e[1]["v"] for e in elements)}


assigners = st.one_of(
    st.builds(TumblingWindows, st.integers(1, 20)),
    st.builds(lambda s, k: SlidingWindows(s * k, s), st.integers(1, 8), st.integers(1, 3)),
    st.builds(SessionWindows, st.integers(1, 15)),
)


@settings(max_examples=examples(75), deadline=None)
@given(streams(), assigners, lateness_values)
def test_buffered_process_function_equals_incremental_aggregate(records, assigner,
                                                               lateness) -> None:
    incremental = WindowOperator(assigner, aggregate=count_sum(), allowed_lateness=lateness)
    buffered = WindowOperator(assigner, process_function=CountSumFunction(),
                              allowed_lateness=lateness)
    a, la, _ = run(incremental, records)
    b, lb, _ = run(buffered, records)
    assert brief(a) == brief(b)
    assert late_rows(la) == late_rows(lb)
    _check_invariants(a)


@settings(max_examples=examples(75), deadline=None)
@given(streams(), assigners, lateness_values, st.data())
def test_one_key_at_a_time_with_snapshots_equals_the_whole_stream(records, assigner, lateness,
                                                                  data) -> None:
    """What a per-key runtime does: for each key, a driver that holds only that key, is
    advanced with every record's watermark and ingest time, processes that key's records, and
    is snapshotted (through JSON) and restored into a fresh driver at random points."""
    def new_driver() -> WindowDriver:
        return WindowDriver(WindowOperator(assigner, aggregate=count_sum(),
                                           allowed_lateness=lateness))

    whole, whole_late, _ = run(new_driver().operator, records)
    for key in KEYS:
        driver = new_driver()
        panes: list = []
        late: list = []
        for seq, (k, t, v, watermark) in enumerate(records):
            if data.draw(st.booleans(), label="checkpoint"):
                snap = json.loads(json.dumps(driver.snapshot_key(key, evict=True)))
                wm, now = driver.watermark, driver.processing_time
                driver = new_driver()
                driver.restore_key(key, snap)
                driver.advance(wm, now)
            if k == key:
                driver.process(k, t, {"v": v}, arrival_seq=seq, watermark=watermark,
                               ingest_time=seq)
            else:
                driver.advance(watermark, seq)
            p, lt = driver.take_output()
            panes += p
            late += lt
        assert brief(panes) == [b for b in brief(whole) if b[0] == key]
        assert late_rows(late) == [r for r in late_rows(whole_late) if r[0] == key]


@settings(max_examples=examples(50), deadline=None)
@given(streams(), assigners, lateness_values, st.integers(0, 40))
def test_full_snapshot_and_restore_mid_stream_changes_nothing(records, assigner, lateness,
                                                              cut) -> None:
    def operator() -> WindowOperator:
        return WindowOperator(assigner, aggregate=count_sum(), allowed_lateness=lateness)

    whole, _, _ = run(operator(), records)
    cut = min(cut, len(records))
    first, _, driver = run(operator(), records[:cut])
    snap = json.loads(json.dumps(driver.snapshot()))
    resumed = WindowDriver(operator())
    resumed.restore(snap)
    rest = []
    for seq, (k, t, v, watermark) in enumerate(records[cut:], start=cut):
        resumed.process(k, t, {"v": v}, arrival_seq=seq, watermark=watermark, ingest_time=seq)
        rest += resumed.take_output()[0]
    assert brief(first + rest) == brief(whole)


def reference_purging_count(records: list[tuple], lateness: int, size: int, slide: int,
                            count: int) -> list[tuple]:
    """Panes of PurgingTrigger(CountTrigger(count)): every ``count`` elements of a window emit
    those elements and forget them; what is left at cleanup is the closing pane."""
    windows: dict[tuple[str, int], dict] = {}
    panes: list[tuple] = []

    def emit(key: str, start: int, w: dict, watermark: int, closing: bool = False) -> None:
        # ``watermark``: the record's, or the cleanup time for the closing pane; only the
        # closing pane's timer can be the window's end (with allowed lateness 0)
        if watermark < start + size - 1:
            timing = "EARLY"
        else:
            at_end = closing and lateness == 0
            timing = "ON_TIME" if at_end and not w["on_time"] else "LATE"
            w["on_time"] = True
        panes.append((key, start, start + size, w["panes"], timing, closing,
                      len(w["values"]), sum(w["values"])))
        w["panes"] += 1

    for key, t, v, watermark in records:
        for (k, start), w in sorted(windows.items(), key=lambda i: (i[0][1] + size - 1 +
                                                                    lateness, i[0])):
            if not w["closed"] and start + size - 1 + lateness <= watermark:
                if w["values"]:
                    emit(k, start, w, start + size - 1 + lateness, closing=True)
                w["closed"] = True
        for start in sorted((s for s in range(t - size + 1, t + 1) if s % slide == 0),
                            reverse=True):
            if start + size - 1 + lateness <= watermark:
                continue
            w = windows.setdefault((key, start), {"values": [], "n": 0, "panes": 0,
                                                  "on_time": False, "closed": False})
            w["values"].append(v)
            w["n"] += 1
            if w["n"] == count:
                emit(key, start, w, watermark)
                w["values"], w["n"] = [], 0
    return panes


@settings(max_examples=examples(100), deadline=None)
@given(streams(), st.integers(1, 20), st.integers(1, 3), st.integers(1, 4), lateness_values)
def test_purging_count_trigger_matches_reference(records, slide, factor, count,
                                                 lateness) -> None:
    from operators.triggers import CountTrigger, PurgingTrigger

    size = slide * factor
    op = WindowOperator(SlidingWindows(size, slide), PurgingTrigger(CountTrigger(count)),
                        aggregate=count_sum(), allowed_lateness=lateness)
    panes, _, _ = run(op, records)
    assert brief(panes) == reference_purging_count(records, lateness, size, slide, count)


@settings(max_examples=examples(75), deadline=None)
@given(streams(), assigners, lateness_values, st.none() | composable_trees(), st.booleans(),
       st.data())
def test_firing_due_timers_late_at_batch_boundaries_changes_nothing(records, assigner,
                                                                    lateness, tree,
                                                                    accumulating, data) -> None:
    """A micro-batch runtime learns that a key's timers are due only at batch boundaries (or
    at the key's next record). Pane fields depend only on the key's records and timers, so
    firing them late, with whatever larger watermark the batch ended at, gives the same panes;
    with the default trigger and with Beam's composable triggers on event time (what the
    Spark runtimes run; processing-time parts are refused there)."""
    from operators.composable import ComposedTrigger

    if tree is not None and build_tree(tree).uses_processing_time():
        tree = None

    def new_driver() -> WindowDriver:
        trigger = (ComposedTrigger(build_tree(tree), accumulating=accumulating)
                   if tree is not None else None)
        return WindowDriver(WindowOperator(assigner, trigger, aggregate=count_sum(),
                                           allowed_lateness=lateness))

    whole, whole_late, _ = run(new_driver().operator, records)
    for key in KEYS:
        driver = new_driver()
        panes: list = []
        late: list = []
        top = (MIN_WATERMARK, MIN_WATERMARK)
        for seq, (k, t, v, watermark) in enumerate(records):
            top = (max(top[0], watermark), max(top[1], seq))
            if k == key:
                driver.process(k, t, {"v": v}, arrival_seq=seq, watermark=watermark,
                               ingest_time=seq)
            p, lt = driver.take_output()
            panes += p
            late += lt
            if data.draw(st.booleans(), label="batch boundary"):
                snap = json.loads(json.dumps(driver.snapshot_key(key, evict=True)))
                driver = new_driver()
                driver.restore_key(key, snap)
                driver.advance(*top)
        driver.advance(*top)
        panes += driver.take_output()[0]
        expected = [b for b in brief(whole) if b[0] == key]
        # the whole-stream run stops at the last record; firing at the end may add panes that
        # the whole stream only emits with its next record
        assert brief(panes)[:len(expected)] == expected
        assert late_rows(late) == [r for r in late_rows(whole_late) if r[0] == key]


@settings(max_examples=examples(75), deadline=None)
@given(streams(), st.integers(1, 8), st.integers(1, 3), st.integers(0, 7), lateness_values)
def test_agrees_with_the_vectorised_backfills_reference(records, slide, factor, offset,
                                                        lateness) -> None:
    """The Spark backfill's closed form is tested against ``tests/window_reference.py``; the
    operator library must agree with that reference too (latest pane per window, late rows),
    or a live stream and a backfill would differ."""
    from tests.window_reference import Arrival, simulate

    size, offset = slide * factor, offset % slide
    op = WindowOperator(SlidingWindows(size, slide, offset), aggregate=count_sum(),
                        allowed_lateness=lateness)
    panes, late, _ = run(op, records)
    latest = {}
    for p in panes:
        latest[(p.key, p.window_start, p.window_end)] = {
            "pane_index": p.pane_index, "timing": p.timing, "is_last": p.is_last,
            "events": p.values["n"], "value_sum": p.values["s"]}
    arrivals = [Arrival(seq, k, t, w, v) for seq, (k, t, v, w) in enumerate(records)]
    expected_latest, expected_late, classes = simulate(arrivals, size, slide, offset, lateness)
    # tests/window_reference.py still labels a first pane fired by a late record ON_TIME
    # (issue 16); the timing the vectorised backfill must compute is this closed form
    log_end = max((w for _, _, _, w in records), default=MIN_WATERMARK)
    for (key, start, end), row in expected_latest.items():
        on_time = sum(c == (key, start, end, "on_time") for c in classes)
        late_within = sum(c == (key, start, end, "late_within") for c in classes)
        row["timing"] = closed_form_timing(on_time, late_within, log_end >= end - 1,
                                           log_end >= end - 1 + lateness > end - 1)
    assert latest == expected_latest
    assert [(r.key, r.arrival_seq, r.window_start, r.window_end) for r in late] == expected_late


def closed_form_timing(on_time: int, late_within: int, end_reached: bool,
                       cleanup_reached: bool) -> str:
    """The timing of a window's latest pane from per-(key, window) counts, as the vectorised
    backfill computes it: ``on_time`` records added before the watermark reached the window's
    max timestamp, ``late_within`` records added after (within allowed lateness); the on-time
    pane fired iff ``on_time > 0`` and the log's last watermark reached the max timestamp. The
    latest pane is ON_TIME iff it is that on-time pane: nothing came after it (no late record,
    no closing pane). Every other latest pane is LATE (standard windows have no EARLY pane)."""
    on_time_fired = on_time > 0 and end_reached
    return "ON_TIME" if on_time_fired and late_within == 0 and not cleanup_reached else "LATE"


def _configured_operator(draw) -> callable:
    """A factory of window operators over every configuration: merging or not, buffered or
    not, every trigger (the processing-time ones on the ingest clock, which the replay command
    runs; the ingest clock here, the arrival position, soon passes the windows' ends), purging,
    evictors."""
    from operators.composable import ComposedTrigger
    from operators.evictors import CountEvictor, TimeEvictor
    from operators.triggers import (
        ContinuousEventTimeTrigger,
        ContinuousProcessingTimeTrigger,
        CountTrigger,
        DeltaTrigger,
        EventTimeTrigger,
        ProcessingTimeTrigger,
        PurgingTrigger,
    )

    assigner = draw(assigners)
    trigger_kind = draw(st.sampled_from(["event_time", "count", "continuous", "delta",
                                         "processing_time", "continuous_processing_time",
                                         "composable", "composable"]))
    tree = draw(composable_trees())
    accumulating = draw(st.booleans())
    count = draw(st.integers(1, 3))
    interval = draw(st.integers(1, 6))
    purging = draw(st.booleans())
    evictor_kind = draw(st.sampled_from([None, "count", "time"]))
    buffered = draw(st.booleans())
    lateness = draw(lateness_values)

    def make() -> WindowOperator:
        trigger = {"event_time": EventTimeTrigger, "count": lambda: CountTrigger(count),
                   "continuous": lambda: ContinuousEventTimeTrigger(interval),
                   "delta": lambda: DeltaTrigger.on_field(2, "v"),
                   "processing_time": ProcessingTimeTrigger,
                   "continuous_processing_time": lambda: ContinuousProcessingTimeTrigger(
                       interval),
                   "composable": lambda: ComposedTrigger(build_tree(tree),
                                                         accumulating=accumulating),
                   }[trigger_kind]()
        if purging and trigger_kind != "composable":
            trigger = PurgingTrigger(trigger)
        evictor = {None: None, "count": CountEvictor(2), "time": TimeEvictor(3)}[evictor_kind]
        if buffered:
            return WindowOperator(assigner, trigger, process_function=CountSumFunction(),
                                  evictor=evictor, allowed_lateness=lateness)
        return WindowOperator(assigner, trigger, aggregate=count_sum(), evictor=evictor,
                              allowed_lateness=lateness)

    make()  # a configuration the operator refuses (a trigger that cannot merge) is skipped
    return make


@settings(max_examples=examples(150), deadline=None)
@given(streams(), st.data())
def test_every_configuration_survives_per_key_snapshots_at_any_point(records, data) -> None:
    """The live runtime snapshots each key to JSON after every micro-batch: whatever the
    trigger, purging, evictor or buffering, a key restored at any point must go on exactly as
    if it had never stopped (same panes, late rows and assignments)."""
    try:
        make = _configured_operator(data.draw)
    except ValueError:
        return
    whole = WindowDriver(make())
    whole.record_assignments()
    for seq, (k, t, v, watermark) in enumerate(records):
        whole.process(k, t, {"v": v}, arrival_seq=seq, watermark=watermark, ingest_time=seq)
    panes, late = whole.take_output()
    assignments = whole.take_assignments()
    for key in KEYS:
        driver = WindowDriver(make())
        driver.record_assignments()
        got_panes: list = []
        got_late: list = []
        got_assignments: list = []
        for seq, (k, t, v, watermark) in enumerate(records):
            if data.draw(st.booleans(), label="snapshot before this record"):
                # as the live runtime does: a new driver, the key's state (its own clocks
                # included) restored, and the driver's clocks moved only by the next record
                snap = json.loads(json.dumps(driver.snapshot_key(key, evict=True)))
                driver = WindowDriver(make())
                driver.record_assignments()
                driver.restore_key(key, snap)
            if k == key:
                driver.process(k, t, {"v": v}, arrival_seq=seq, watermark=watermark,
                               ingest_time=seq)
            else:
                driver.advance(watermark, seq)
            p, lt = driver.take_output()
            got_panes += p
            got_late += lt
            got_assignments += driver.take_assignments()
        key_seqs = {seq for seq, r in enumerate(records) if r[0] == key}
        assert brief(got_panes) == [b for b in brief(panes) if b[0] == key]
        assert late_rows(got_late) == [r for r in late_rows(late) if r[0] == key]
        assert got_assignments == [a for a in assignments if a[0] in key_seqs]


@settings(max_examples=examples(75), deadline=None)
@given(streams(), assigners, lateness_values)
def test_reduce_functions_equal_the_panes_they_reduce(records, assigner, lateness) -> None:
    """Flink's ReduceFunction: reducing the field with ``max`` gives the largest value of the
    pane's elements, and reducing whole elements keeps an element with the largest value, also
    across session merges; the reference is the buffered elements of the very same panes."""
    from operators.aggregates import NamedAggregates, Reduce

    class Elements(ProcessWindowFunction):
        def process(self, key, context, elements):
            return {"elements": [(e[1]["v"], e[2]) for e in elements]}

    def keep_larger(a, b):
        return b if b["v"] > a["v"] else a

    reduced = WindowOperator(assigner, aggregate=NamedAggregates([
        ("largest", Reduce(max, field="v")), ("winner", Reduce(keep_larger))]),
        allowed_lateness=lateness)
    buffered = WindowOperator(assigner, process_function=Elements(), allowed_lateness=lateness)
    panes, _, _ = run(reduced, records)
    reference, _, _ = run(buffered, records)
    assert len(panes) == len(reference)
    for pane, ref in zip(panes, reference, strict=True):
        values = [v for v, _ in ref.values["elements"]]
        assert pane.values["largest"] == max(values)
        assert pane.values["winner"]["v"] == max(values)


@settings(max_examples=examples(75), deadline=None)
@given(streams(), st.data())
def test_a_pane_is_on_time_only_when_the_watermark_reaching_the_window_end_fires_it(
        records, data) -> None:
    """Beam's PaneInfo, for every configuration (triggers, purging, evictors, sessions): an
    ON_TIME pane is fired by the event-time timer at the window's max timestamp, i.e. by the
    watermark reaching the window's end, and is the window's first non-early pane. A pane fired
    by a record (late within allowed lateness, or a count/delta trigger) never is."""
    try:
        make = _configured_operator(data.draw)
    except ValueError:
        return
    driver = WindowDriver(make())
    driver.record_firings()
    panes: list = []
    firings: list = []
    for seq, (k, t, v, watermark) in enumerate(records):
        driver.process(k, t, {"v": v}, arrival_seq=seq, watermark=watermark, ingest_time=seq)
        panes += driver.take_output()[0]
        firings += driver.take_firings()
    assert len(firings) == len(panes)
    non_early_seen: set[tuple] = set()
    for pane, (cause, at) in zip(panes, firings, strict=True):
        window = (pane.key, pane.window_start, pane.window_end)
        if pane.timing == "ON_TIME":
            assert (cause, at) == ("watermark", pane.window_end - 1)
            assert window not in non_early_seen
        if cause == "arrival_seq":
            assert pane.timing != "ON_TIME"
            assert records[at][0] == pane.key
        if pane.timing != "EARLY":
            non_early_seen.add(window)
    _check_invariants(panes)
