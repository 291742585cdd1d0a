"""Small Nexmark streams for the tests: a few thousand events, seconds of event time."""

from __future__ import annotations

from functools import cache

from nexmark.arrival import Record, arrival_log
from nexmark.config import NexmarkConfig
from nexmark.generator import plan_landing
from operators.pipeline import WatermarkSpec

SMALL = NexmarkConfig(num_events=5_000, num_event_generators=2, first_event_rate=200,
                      out_of_order_group_size=10, max_delivery_delay_ms=200,
                      occasional_delay_ms=3_000, prob_delayed_event=0.1,
                      avg_person_byte_size=0, avg_auction_byte_size=0, avg_bid_byte_size=0,
                      num_active_people=20, seed=11)
"""25 s of event time over two splits; 10-event out-of-order groups, 0.2 s delivery jitter and
a 3 s occasional delay for 10 % of events. Few active people, so that Q8 finds sellers who
have just registered."""

DISORDERED = NexmarkConfig(num_events=6_000, num_event_generators=3, first_event_rate=250,
                           out_of_order_group_size=50, max_delivery_delay_ms=5_000,
                           avg_person_byte_size=0, avg_auction_byte_size=0,
                           avg_bid_byte_size=0, num_active_people=20, seed=5)
"""Arrival far from event-time order: 50-event groups, up to 5 s (+3 s) delivery delay."""

PARAMETERS = {
    "q5": {"window_size_ms": 2_000, "window_slide_ms": 1_000},
    "q7": {"window_size_ms": 2_000},
    "q8": {"window_size_ms": 2_000},
    "q11": {"session_gap_ms": 500},
    "q12": {"window_size_ms": 2_000},
}
"""Windows scaled to the small streams (the defaults are 10 s windows)."""

GENEROUS = WatermarkSpec(max_out_of_orderness_ms=10_000)
"""Behind every record by more than the worst disorder: nothing is late."""
TIGHT = WatermarkSpec(max_out_of_orderness_ms=0)
"""Monotonous: everything behind the newest event time is late."""
SOME_SLACK = WatermarkSpec(max_out_of_orderness_ms=1_000)


@cache
def _log(config: NexmarkConfig, watermark: WatermarkSpec) -> tuple[Record, ...]:
    return tuple(arrival_log(plan_landing(config), watermark))


def stream(config: NexmarkConfig, watermark: WatermarkSpec) -> list[Record]:
    """The arrival log of ``config`` under ``watermark`` (cached; copies are cheap)."""
    return list(_log(config, watermark))
