"""The keyed timer service: uniqueness, firing order, same-pass firing, serialisation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.timers import EVENT_TIME, PROCESSING_TIME, VOID_NAMESPACE, TimerService
from tests.depth import examples


def drain(service: TimerService, watermark: int, now: int) -> list[tuple]:
    return list(service.iter_due(watermark, now))


def test_register_twice_keeps_one() -> None:
    service = TimerService()
    service.register_event_time_timer("k", (0, 10), 9)
    service.register_event_time_timer("k", (0, 10), 9)
    assert len(service) == 1
    assert drain(service, 100, 0) == [(EVENT_TIME, 9, "k", (0, 10))]
    assert drain(service, 100, 0) == []


def test_delete_absent_timer_is_a_noop() -> None:
    service = TimerService()
    service.delete_event_time_timer("k", (0, 10), 9)
    service.delete_processing_time_timer("nobody", VOID_NAMESPACE, 1)
    service.register_event_time_timer("k", (0, 10), 9)
    service.delete_event_time_timer("k", (0, 10), 8)  # other timestamp
    service.delete_event_time_timer("k", (0, 11), 9)  # other namespace
    service.delete_processing_time_timer("k", (0, 10), 9)  # other kind
    assert len(service) == 1
    assert drain(service, 9, 0) == [(EVENT_TIME, 9, "k", (0, 10))]


def test_deleted_timer_does_not_fire_and_can_be_registered_again() -> None:
    service = TimerService()
    service.register_event_time_timer("k", (0, 10), 9)
    service.delete_event_time_timer("k", (0, 10), 9)
    assert drain(service, 100, 0) == []
    service.register_event_time_timer("k", (0, 10), 9)
    service.delete_event_time_timer("k", (0, 10), 9)
    service.register_event_time_timer("k", (0, 10), 9)
    assert drain(service, 100, 0) == [(EVENT_TIME, 9, "k", (0, 10))]
    assert drain(service, 100, 0) == []


def test_event_time_before_processing_time_then_timestamp_key_namespace() -> None:
    service = TimerService()
    service.register_processing_time_timer("a", (0, 10), 1)
    service.register_event_time_timer("b", (0, 10), 5)
    service.register_event_time_timer("a", (5, 15), 5)
    service.register_event_time_timer("a", (0, 20), 5)
    service.register_event_time_timer("a", (0, 10), 5)
    service.register_event_time_timer("z", (0, 10), 4)
    fired = drain(service, 5, 1)
    assert fired == [
        (EVENT_TIME, 4, "z", (0, 10)),
        (EVENT_TIME, 5, "a", (0, 10)),
        (EVENT_TIME, 5, "a", (0, 20)),
        (EVENT_TIME, 5, "a", (5, 15)),
        (EVENT_TIME, 5, "b", (0, 10)),
        (PROCESSING_TIME, 1, "a", (0, 10)),
    ]


def test_only_due_timers_fire() -> None:
    service = TimerService()
    service.register_event_time_timer("k", VOID_NAMESPACE, 10)
    service.register_processing_time_timer("k", VOID_NAMESPACE, 10)
    assert drain(service, 9, 9) == []
    assert drain(service, 10, 9) == [(EVENT_TIME, 10, "k", VOID_NAMESPACE)]
    assert drain(service, 10, 10) == [(PROCESSING_TIME, 10, "k", VOID_NAMESPACE)]


def test_timer_registered_in_callback_fires_in_same_pass_in_order() -> None:
    service = TimerService()
    service.register_event_time_timer("b", VOID_NAMESPACE, 5)
    service.register_event_time_timer("c", VOID_NAMESPACE, 8)
    fired = []
    for kind, ts, key, _ns in service.iter_due(10, 0):
        fired.append((kind, ts, key))
        if key == "b":
            service.register_event_time_timer("a", VOID_NAMESPACE, 6)  # due, before c@8
            service.register_event_time_timer("a", VOID_NAMESPACE, 11)  # not due
            service.register_processing_time_timer("p", VOID_NAMESPACE, 0)  # due, after events
        if key == "p":
            service.register_event_time_timer("e", VOID_NAMESPACE, 1)  # event time again first
    assert fired == [(EVENT_TIME, 5, "b"), (EVENT_TIME, 6, "a"), (EVENT_TIME, 8, "c"),
                     (PROCESSING_TIME, 0, "p"), (EVENT_TIME, 1, "e")]
    assert service.next_event_time() == 11


def test_extreme_timestamps_and_snapshots_round_trip() -> None:
    service = TimerService()
    service.register_event_time_timer("k", (MIN_WATERMARK, MAX_TIMESTAMP), MAX_TIMESTAMP)
    service.register_event_time_timer("k", (-20, -10), -11)
    service.register_processing_time_timer("ü", (0, 5), 4)
    expected = service.timers()
    snap = json.loads(json.dumps(service.snapshot()))
    assert TimerService.restore(snap).timers() == expected


def test_per_key_export_and_import() -> None:
    service = TimerService()
    service.register_event_time_timer("a", (0, 10), 9)
    service.register_processing_time_timer("a", (0, 10), 3)
    service.register_event_time_timer("b", (0, 10), 9)
    flat = service.export_key("a", remove=True)
    assert flat == [EVENT_TIME, 9, 0, 10, PROCESSING_TIME, 3, 0, 10]
    assert service.export_key("a") == []
    assert [t[2] for t in service.timers()] == ["b"]
    other = TimerService()
    other.import_key("a", json.loads(json.dumps(flat)))
    assert drain(other, 100, 100) == [(EVENT_TIME, 9, "a", (0, 10)),
                                      (PROCESSING_TIME, 3, "a", (0, 10))]


operations = st.lists(
    st.tuples(st.sampled_from(["reg", "del", "fire"]),
              st.sampled_from([EVENT_TIME, PROCESSING_TIME]), st.integers(-5, 30),
              st.sampled_from(["a", "b", "c"]),
              st.sampled_from([(0, 10), (5, 15), (0, 20)])),
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_behaves_like_a_sorted_set(ops: list[tuple]) -> None:
    """Against the obvious model: a set of timers; firing = the due ones, sorted."""
    service = TimerService()
    model: set[tuple] = set()
    for op, kind, ts, key, ns in ops:
        if op == "reg":
            if kind == EVENT_TIME:
                service.register_event_time_timer(key, ns, ts)
            else:
                service.register_processing_time_timer(key, ns, ts)
            model.add((kind, ts, key, ns))
        elif op == "del":
            if kind == EVENT_TIME:
                service.delete_event_time_timer(key, ns, ts)
            else:
                service.delete_processing_time_timer(key, ns, ts)
            model.discard((kind, ts, key, ns))
        else:
            watermark, now = ts, ts - 3
            due = sorted(t for t in model if t[1] <= (watermark if t[0] == EVENT_TIME else now))
            assert drain(service, watermark, now) == due
            model -= set(due)
        assert len(service) == len(model)
    assert service.timers() == sorted(model)
    assert TimerService.restore(json.loads(json.dumps(service.snapshot()))).timers() == \
        sorted(model)


def test_many_deletes_keep_the_heap_bounded() -> None:
    service = TimerService()
    for i in range(5000):
        service.register_event_time_timer(str(i % 7), VOID_NAMESPACE, i)
    for i in range(0, 5000, 2):
        service.delete_event_time_timer(str(i % 7), VOID_NAMESPACE, i)
    assert len(service) == 2500
    assert service._event._stored <= 2 * 2500 + 1024
    fired = [ts for _, ts, _, _ in service.iter_due(10**9, 0)]
    assert fired == list(range(1, 5000, 2))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([10, 3_000, 60_000, 10**12]),
       st.sampled_from([1, 64, 512]))
def test_bulk_registrations_fire_in_the_same_order(seed: int, spread: int, bulk: int) -> None:
    """Thousands of timers registered between two firings take the sorted-run path (numpy);
    interleaved with deletes, re-registrations and timers registered while firing (which go
    through the heaps), the firing order is still that of the sorted model. ``spread`` makes
    shared timestamps everywhere (10, 3,000: the buckets order them), rare (60,000: a few
    tied groups inside a run) or absent; ``bulk`` moves the threshold between the paths."""
    import random

    from operators import timers as module

    rng = random.Random(seed)
    saved, module._BULK = module._BULK, bulk
    try:
        service = TimerService()
        model: set[tuple] = set()
        keys = [f"k{i}" for i in range(30)]
        for _ in range(3):
            for _ in range(rng.randrange(500, 2_000)):
                ts, key = rng.randrange(spread), rng.choice(keys)
                ns = (ts - ts % 7, ts - ts % 7 + 7)
                service.register_event_time_timer(key, ns, ts)
                model.add((EVENT_TIME, ts, key, ns))
            for timer in rng.sample(sorted(model), len(model) // 10):
                service.delete_event_time_timer(timer[2], timer[3], timer[1])
                model.discard(timer)
            for timer in rng.sample(sorted(model), len(model) // 20):  # register again: kept
                service.register_event_time_timer(timer[2], timer[3], timer[1])
            watermark = rng.randrange(spread)
            fired = []
            for timer in service.iter_due(watermark, MIN_WATERMARK):
                assert timer in model  # never a deleted or unknown timer
                fired.append(timer)
                model.discard(timer)
                if rng.random() < 0.05:  # a callback registers a due and a later timer
                    for later in (timer[1], timer[1] + rng.randrange(spread)):
                        service.register_event_time_timer("z", (0, 7), later)
                        model.add((EVENT_TIME, later, "z", (0, 7)))
            assert fired == sorted(fired)
            assert all(t[1] > watermark for t in model)
            assert service.timers() == sorted(model)
            assert len(service) == len(model)
    finally:
        module._BULK = saved


# -- the batch path ----------------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "ab", "a\x00", "é", "\U0001f600", "key-10", "key-9", ""])
_TIMER = st.tuples(_KEYS, st.integers(-1, 1), st.integers(-1, 1), st.integers(-2, 12))
_BATCH_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("bulk"), st.lists(_TIMER, max_size=40)),
    st.tuples(st.just("one"), _TIMER),
    st.tuples(st.just("delete"), _TIMER),
    st.tuples(st.just("pop_batch"), st.integers(-4, 14)),
    st.tuples(st.just("pop_one"), st.integers(-4, 14)),
    st.tuples(st.just("has"), _KEYS),
    st.tuples(st.just("export"), _KEYS),
), max_size=30)


@settings(max_examples=examples(200), deadline=None)
@given(_BATCH_OPERATIONS)
def test_the_batch_path_behaves_like_a_sorted_set(ops: list[tuple]) -> None:
    """Batch registrations and batch firing, mixed in any order with the per-timer calls, give
    what a sorted set of ``(timestamp, key, start, end)`` gives: one timer per identity, firing
    in ascending order, deletes and per-key views that see batch-registered timers."""
    service = TimerService()
    reference: set[tuple] = set()
    for op in ops:
        if op[0] == "bulk":
            timers = op[1]
            service.register_event_time_timers([t[0] for t in timers], [t[1] for t in timers],
                                               [t[2] for t in timers], [t[3] for t in timers])
            reference |= {(ts, key, start, end) for key, start, end, ts in timers}
        elif op[0] == "one":
            key, start, end, ts = op[1]
            service.register_event_time_timer(key, (start, end), ts)
            reference.add((ts, key, start, end))
        elif op[0] == "delete":
            key, start, end, ts = op[1]
            service.delete_event_time_timer(key, (start, end), ts)
            reference.discard((ts, key, start, end))
        elif op[0] == "pop_batch":
            due = sorted(t for t in reference if t[0] <= op[1])
            assert service.pop_due_event_time_timers(op[1]).entries() == due
            reference -= set(due)
        elif op[0] == "pop_one":
            due = sorted(t for t in reference if t[0] <= op[1])
            timer = service.pop_due_event_time(op[1])
            if due:
                ts, key, start, end = due[0]
                assert timer == (ts, key, (start, end))
                reference.discard(due[0])
            else:
                assert timer is None
        elif op[0] == "has":
            assert service.has_timers(op[1]) == any(t[1] == op[1] for t in reference)
        else:
            exported = service.export_key(op[1])
            assert exported == [v for t in sorted(t for t in reference if t[1] == op[1])
                                for v in (EVENT_TIME, t[0], t[2], t[3])]
        assert len(service) == len(reference)
    restored = TimerService.restore(json.loads(json.dumps(service.snapshot())))
    assert [t[1:] for t in restored.timers()] == [
        (ts, key, (start, end)) for ts, key, start, end in sorted(reference)]


def test_the_batch_path_names_what_it_cannot_take() -> None:
    service = TimerService()
    with pytest.raises(ValueError, match="of one length"):
        service.register_event_time_timers(["a", "b"], [0], [10], [9])
    with pytest.raises(ValueError, match="64 bits"):
        service.register_event_time_timers(["a"], [0], [10], [2**63])
    with pytest.raises(ValueError, match="64 bits"):
        service.register_event_time_timers(["a", "b"], [0, 0], [10, 10], [2**63, 2**64 + 1])
    with pytest.raises(TypeError, match="strings"):
        service.register_event_time_timers([1], [0], [10], [9])
    with pytest.raises(TypeError, match="integers"):
        service.register_event_time_timers(["a"], [0], [10], [9.5])  # not truncated to 9
    assert len(service) == 0


@pytest.mark.parametrize("nul_key", [False, True])
def test_batch_firing_orders_ties_by_key_then_namespace_as_one_by_one(nul_key: bool) -> None:
    """Also with a key ending in NUL, which numpy's string columns cannot hold (those timers
    take the per-timer path)."""
    timers = [("b", 0, 10, 9), ("a", 5, 15, 9), ("a", 0, 20, 9), ("a", 0, 10, 9),
              ("b", 0, 10, 9), ("z", 0, 10, 4)] + ([("a\x00", 0, 10, 9)] if nul_key else [])
    one_by_one, batch = TimerService(), TimerService()
    for key, start, end, ts in timers:
        one_by_one.register_event_time_timer(key, (start, end), ts)
    batch.register_event_time_timers(*zip(*timers, strict=True))
    expected = []
    while (timer := one_by_one.pop_due_event_time(9)) is not None:
        expected.append(timer)
    assert [(ts, key, (start, end)) for ts, key, start, end in
            batch.pop_due_event_time_timers(9).entries()] == expected
    assert [t[1] for t in expected] == ["z", "a", "a", "a", *(["a\x00"] if nul_key else []),
                                        "b"]
