"""Ordered mode keeps input order; unordered mode never reorders across a watermark tick."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.async_io import AsyncEnrichConfig, OutputMode, enrich, enrich_batch
from services.enrichment_client import user_lookup
from services.enrichment_service import running_service
from tests.enrichment.enrichment_helpers import make_records, user_keys


def _assert_tick_rule(outcomes: list[Any], records: list[dict[str, Any]]) -> None:
    """Every input appears once, and emission never goes back to an earlier watermark."""
    assert sorted(o.arrival_seq for o in outcomes) == [r["arrival_seq"] for r in records]
    watermarks = [o.watermark_ms for o in outcomes]
    assert watermarks == sorted(watermarks), "a result crossed a watermark tick"


def test_ordered_mode_emits_in_input_order_despite_jitter() -> None:
    records = make_records(user_keys(60), tick_every=7)
    with running_service(latency_ms=1, jitter_ms=30, seed=3) as svc:
        config = AsyncEnrichConfig(capacity=20, output=OutputMode.ORDERED)
        result = enrich_batch(records, user_lookup(svc.base_url), config)
    assert [o.arrival_seq for o in result.outcomes] == [r["arrival_seq"] for r in records]
    assert [o.response["key"] for o in result.outcomes] == [r["key"] for r in records]


def test_unordered_mode_reorders_within_ticks_only_against_real_service() -> None:
    records = make_records(user_keys(60), tick_every=10)
    with running_service(latency_ms=1, jitter_ms=40, seed=5) as svc:
        config = AsyncEnrichConfig(capacity=30, output=OutputMode.UNORDERED)
        result = enrich_batch(records, user_lookup(svc.base_url), config)
    _assert_tick_rule(result.outcomes, records)
    order = [o.arrival_seq for o in result.outcomes]
    assert order != sorted(order), "with 40 ms of jitter some results should overtake others"


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[int, float], int]:
    n = draw(st.integers(min_value=1, max_value=30))
    ticks = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    latencies = draw(st.lists(st.integers(min_value=0, max_value=4), min_size=n, max_size=n))
    capacity = draw(st.integers(min_value=1, max_value=8))
    records, watermark = [], 0
    for i in range(n):
        if ticks[i] and i > 0:
            watermark += draw(st.integers(min_value=1, max_value=5_000))
        records.append({"arrival_seq": 10 + 2 * i, "watermark_ms": watermark})
    delays = {r["arrival_seq"]: latencies[i] / 1000 for i, r in enumerate(records)}
    return records, delays, capacity


async def _run(
    records: list[dict[str, Any]], delays: dict[int, float], capacity: int, output: OutputMode
) -> list[Any]:
    """Run the operator with an in-process call that sleeps; check admission on the way."""
    started: set[int] = set()
    emitted: list[Any] = []

    async def call(record: dict[str, Any], session: Any) -> int:
        started.add(record["arrival_seq"])
        assert len(started) - len(emitted) <= capacity, "more records admitted than capacity"
        await asyncio.sleep(delays[record["arrival_seq"]])
        return record["arrival_seq"] * 10

    config = AsyncEnrichConfig(capacity=capacity, output=output, timeout_ms=None)
    async for outcome in enrich(records, call, config):
        emitted.append(outcome)
    return emitted


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenarios())
def test_unordered_never_crosses_a_tick_property(scenario: Any) -> None:
    records, delays, capacity = scenario
    outcomes = asyncio.run(_run(records, delays, capacity, OutputMode.UNORDERED))
    _assert_tick_rule(outcomes, records)
    assert all(o.response == o.arrival_seq * 10 for o in outcomes)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenarios())
def test_ordered_is_input_order_property(scenario: Any) -> None:
    records, delays, capacity = scenario
    outcomes = asyncio.run(_run(records, delays, capacity, OutputMode.ORDERED))
    assert [o.arrival_seq for o in outcomes] == [r["arrival_seq"] for r in records]


def test_unordered_emits_a_fast_result_before_a_slow_one_in_the_same_segment() -> None:
    records = [
        {"arrival_seq": 1, "watermark_ms": 0},
        {"arrival_seq": 2, "watermark_ms": 0},
        {"arrival_seq": 3, "watermark_ms": 5},
    ]
    delays = {1: 0.2, 2: 0.0, 3: 0.0}
    outcomes = asyncio.run(_run(records, delays, 3, OutputMode.UNORDERED))
    # 2 overtakes 1 (same segment); 3 is after the tick, so it waits for 1 although it is fast.
    assert [o.arrival_seq for o in outcomes] == [2, 1, 3]


def test_input_order_violations_are_rejected() -> None:
    async def call(record: dict[str, Any], session: Any) -> int:
        return 1

    async def consume(records: list[dict[str, Any]]) -> None:
        async for _ in enrich(records, call, AsyncEnrichConfig()):
            pass

    with pytest.raises(ValueError, match="arrival_seq must increase"):
        asyncio.run(
            consume([{"arrival_seq": 2, "watermark_ms": 0}, {"arrival_seq": 2, "watermark_ms": 0}])
        )
    with pytest.raises(ValueError, match="watermark_ms went back"):
        asyncio.run(
            consume([{"arrival_seq": 1, "watermark_ms": 5}, {"arrival_seq": 2, "watermark_ms": 4}])
        )


@pytest.mark.parametrize("output", [OutputMode.UNORDERED, OutputMode.ORDERED])
def test_an_async_source_slower_than_the_calls_loses_nothing(output: OutputMode) -> None:
    """While the source is awaited the calls in flight finish, so the queue's head can hold
    only finished results when the operator waits (unordered mode used to fail there with
    'Set of Tasks/Futures is empty')."""
    async def call(record: dict[str, Any], session: Any) -> int:
        await asyncio.sleep(0.001 * (record["arrival_seq"] % 3))
        return record["arrival_seq"]

    records = [{"arrival_seq": i, "watermark_ms": i // 4} for i in range(30)]

    async def source():
        for record in records:
            yield record
            await asyncio.sleep(0.005)

    async def consume() -> list[Any]:
        config = AsyncEnrichConfig(capacity=2, timeout_ms=1000, output=output, record=False)
        return [o async for o in enrich(source(), call, config)]

    outcomes = asyncio.run(consume())
    _assert_tick_rule(outcomes, records)
    assert all(o.ok for o in outcomes)
    if output == OutputMode.ORDERED:
        assert [o.arrival_seq for o in outcomes] == list(range(30))
