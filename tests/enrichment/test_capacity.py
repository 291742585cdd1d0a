"""At most ``capacity`` calls in flight, as the server counts them, and capacity is reached."""

from __future__ import annotations

import pytest

from operators.async_io import AsyncEnrichConfig, OutputMode, enrich_batch
from services.enrichment_client import user_lookup
from services.enrichment_service import running_service
from tests.enrichment.enrichment_helpers import fetch_stats, make_records, user_keys


@pytest.mark.parametrize(
    ("capacity", "output"),
    [
        (1, OutputMode.ORDERED),
        (4, OutputMode.UNORDERED),
        (16, OutputMode.ORDERED),
        (16, OutputMode.UNORDERED),
    ],
)
def test_server_concurrency_never_exceeds_capacity_and_reaches_it(
    capacity: int, output: OutputMode
) -> None:
    # 80 ms latency, 3x capacity records: long enough for the operator to fill every slot
    # even on a loaded machine; no timeouts, so no abandoned request lingers server-side.
    records = make_records(user_keys(3 * capacity), tick_every=5)
    with running_service(latency_ms=80, jitter_ms=10) as svc:
        config = AsyncEnrichConfig(capacity=capacity, timeout_ms=None, output=output)
        result = enrich_batch(records, user_lookup(svc.base_url), config)
        stats = fetch_stats(svc.base_url)
    assert len(result.results) == len(records)
    assert stats["requests"] == len(records)
    assert stats["max_in_flight"] == capacity
    assert result.metrics.max_in_flight == capacity


def test_ordered_head_of_line_blocking_still_respects_capacity() -> None:
    # The first record is slow; in ordered mode finished results queue behind it and count
    # toward capacity (as in Flink), so no more than `capacity` records are ever admitted.
    records = make_records(user_keys(12))
    with running_service(latency_ms=5, fail_first={"user-0000": 1}) as svc:
        config = AsyncEnrichConfig(capacity=3, timeout_ms=None)
        result = enrich_batch(records, user_lookup(svc.base_url), config)
        stats = fetch_stats(svc.base_url)
    assert [o.arrival_seq for o in result.outcomes] == [r["arrival_seq"] for r in records]
    assert stats["max_in_flight"] <= 3
