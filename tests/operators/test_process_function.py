"""KeyedProcessFunction: keyed state, timers, firing order and per-key snapshots."""

from __future__ import annotations

import json

from operators.process_function import KeyedProcessDriver, KeyedProcessFunction
from operators.time import MIN_WATERMARK
from operators.timers import EVENT_TIME, PROCESSING_TIME

M = MIN_WATERMARK


class Timeout(KeyedProcessFunction):
    """Emit a key when it has been silent for 10 ms of event time; count elements."""

    def process_element(self, element, ctx, out):
        last = ctx.value_state("last")
        if last.value() is not None:
            ctx.delete_event_time_timer(last.value() + 10)
        last.update(ctx.timestamp)
        ctx.register_event_time_timer(ctx.timestamp + 10)
        ctx.list_state("values").add(element["v"])
        ctx.map_state("by_parity").put(str(element["v"] % 2),
                                       ctx.map_state("by_parity").get(str(element["v"] % 2), 0)
                                       + 1)

    def on_timer(self, timestamp, ctx, out):
        out.append((ctx.key, timestamp, ctx.time_domain, ctx.list_state("values").get(),
                    dict(ctx.map_state("by_parity").items())))
        ctx.value_state("last").clear()
        ctx.list_state("values").clear()
        ctx.map_state("by_parity").clear()


def test_timeout_with_state_and_deleted_timers() -> None:
    driver = KeyedProcessDriver(Timeout())
    driver.process("a", 0, {"v": 1}, watermark=M, ingest_time=0)
    driver.process("b", 3, {"v": 2}, watermark=M, ingest_time=0)
    driver.process("a", 5, {"v": 3}, watermark=2, ingest_time=0)  # moves a's timer to 15
    driver.process("b", 14, {"v": 4}, watermark=13, ingest_time=0)  # b's timer 13 fires first
    assert driver.take_output() == [("b", 13, EVENT_TIME, [2], {"0": 1})]
    driver.process("c", 30, {"v": 0}, watermark=30, ingest_time=0)
    assert driver.take_output() == [("a", 15, EVENT_TIME, [1, 3], {"1": 2}),
                                    ("b", 24, EVENT_TIME, [4], {"0": 1})]
    assert set(driver.states) == {"c"}  # empty state is dropped


class Ping(KeyedProcessFunction):
    def process_element(self, element, ctx, out):
        ctx.register_processing_time_timer(ctx.current_processing_time + 5)
        ctx.register_event_time_timer(ctx.timestamp)

    def on_timer(self, timestamp, ctx, out):
        out.append((ctx.time_domain, timestamp, ctx.key))
        if ctx.time_domain == PROCESSING_TIME and ctx.key == "b":
            ctx.register_event_time_timer(0)  # due at once: fires in the same pass


def test_event_time_first_then_processing_time_and_same_pass() -> None:
    driver = KeyedProcessDriver(Ping())
    driver.process("b", 5, {}, watermark=M, ingest_time=0)
    driver.process("a", 7, {}, watermark=M, ingest_time=1)
    driver.process("z", 100, {}, watermark=7, ingest_time=6)
    assert driver.take_output() == [
        (EVENT_TIME, 5, "b"), (EVENT_TIME, 7, "a"),
        (PROCESSING_TIME, 5, "b"), (EVENT_TIME, 0, "b"), (PROCESSING_TIME, 6, "a")]


def test_per_key_snapshot_round_trip() -> None:
    driver = KeyedProcessDriver(Timeout())
    driver.process("a", 0, {"v": 1}, watermark=M, ingest_time=0)
    snap = json.loads(json.dumps(driver.snapshot_key("a", evict=True)))
    assert driver.snapshot_key("a") is None
    fresh = KeyedProcessDriver(Timeout())
    fresh.restore_key("a", snap)
    fresh.advance(10, 0)
    assert fresh.take_output() == [("a", 10, EVENT_TIME, [1], {"1": 1})]


class SeesClock(KeyedProcessFunction):
    def process_element(self, element, ctx, out):
        out.append(("element", ctx.key, ctx.current_watermark))
        ctx.register_event_time_timer(ctx.timestamp + 10)

    def on_timer(self, timestamp, ctx, out):
        out.append(("timer", ctx.key, ctx.current_watermark))


def test_callbacks_see_the_keys_own_clock() -> None:
    """A timer fired by a watermark that jumped far past it still sees its own timestamp (the
    key's clock), so the output does not depend on when a runtime notices the timer."""
    driver = KeyedProcessDriver(SeesClock())
    driver.process("a", 0, {}, watermark=M, ingest_time=0)
    driver.process("b", 100, {}, watermark=50, ingest_time=0)
    assert driver.take_output() == [("element", "a", M), ("timer", "a", 10),
                                    ("element", "b", 50)]
