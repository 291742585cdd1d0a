"""The Nexmark configuration and the event schedule derived from it.

Field names and defaults follow Beam's ``NexmarkConfiguration`` and ``GeneratorConfig`` (Flink's
Nexmark uses the same generator). Two things are ours and are documented in docs/nexmark.md:
``seed`` (0 reproduces the published generator exactly; another value mixes into every event's
random seed) and the *delivery* model (``max_delivery_delay_ms`` plus Beam's occasional delay),
which turns the generator's emission time into the collector's ``received_at`` stamp.

The schedule is a constant rate (Beam's ``RateShape.SQUARE`` with equal first and next rates):
event number ``n`` of a split has timestamp ``base_time_ms + n * inter_event_delay_us // 1000``
where ``inter_event_delay_us = 1_000_000 / first_event_rate * num_event_generators``. The
splits run on parallel timelines (same event numbers, disjoint event ids), so together they
produce ``first_event_rate`` events per second.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
HOT_AUCTION_RATIO = 100
"""Bids on a hot auction go to the first auction of the last batch of this many."""
HOT_SELLER_RATIO = 100
HOT_BIDDER_RATIO = 100
AUCTION_ID_LEAD = 10
PERSON_ID_LEAD = 10


@dataclass(frozen=True)
class NexmarkConfig:
    """Everything that decides the generated events (Beam's names, snake_case)."""

    num_events: int = 100_000
    num_event_generators: int = 1
    """Splits: each writes its own source partition (landing folder ``split-<i>``)."""
    first_event_rate: int = 10_000
    """Events per second over all splits (Beam's ``firstEventRate``, ``PER_SECOND``)."""
    base_time_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    first_event_id: int = 0
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    hot_auction_ratio: int = 2
    """P(bid on a hot auction) = 1 - 1/hot_auction_ratio."""
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100
    """Sizes pad the ``extra`` field; 0 leaves it empty (faster, same other fields)."""
    out_of_order_group_size: int = 1
    """Beam's ``outOfOrderGroupSize``: event numbers are permuted within groups of this many,
    so event time runs up to ``(size - 1)`` inter-event delays ahead of or behind emission."""
    occasional_delay_ms: int = 3_000
    prob_delayed_event: float = 0.1
    """Beam's occasional delay: this share of events is delivered up to
    ``occasional_delay_ms`` later (uniform)."""
    max_delivery_delay_ms: int = 200
    """Every event is delivered a uniform ``[0, max_delivery_delay_ms]`` after emission."""
    seed: int = 0
    flush_interval_ms: int = 60_000
    """A split's landing file covers this much of ``received_at``."""

    def __post_init__(self) -> None:
        for name in ("num_events", "num_event_generators", "first_event_rate",
                     "out_of_order_group_size", "flush_interval_ms", "hot_auction_ratio",
                     "hot_sellers_ratio", "hot_bidders_ratio", "num_active_people",
                     "num_in_flight_auctions"):
            if getattr(self, name) <= 0:
                raise ValueError(f"nexmark {name} must be positive, got {getattr(self, name)}")
        for name in ("person_proportion", "auction_proportion", "bid_proportion",
                     "occasional_delay_ms", "max_delivery_delay_ms", "first_event_id"):
            if getattr(self, name) < 0:
                raise ValueError(f"nexmark {name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.prob_delayed_event <= 1:
            raise ValueError("nexmark prob_delayed_event must be within [0, 1]")
        if self.person_proportion < 1 or self.auction_proportion < 1:
            raise ValueError("nexmark needs people and auctions (proportions >= 1)")

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    @property
    def inter_event_delay_us(self) -> int:
        """Beam's ``RateShape.interEventDelayUs``: the rounded period of one event per second
        rate, times the number of generators (integer microseconds, as Beam's ``long``)."""
        rate = self.first_event_rate
        return (1_000_000 + rate // 2) // rate * self.num_event_generators

    def split_sizes(self) -> list[tuple[int, int]]:
        """``(first_event_id, max_events)`` per split, as Beam's ``GeneratorConfig.split``:
        contiguous id ranges, each split starting at event number 0."""
        n = self.num_event_generators
        sub = self.num_events // n
        result = []
        first = self.first_event_id
        for i in range(n):
            size = self.num_events - sub * (n - 1) if i == n - 1 else sub
            result.append((first, size))
            first += size
        return result

    def adjusted_event_number(self, event_number: int, max_events: int | None = None) -> int:
        """Beam's ``nextAdjustedEventNumber``: the permutation within out-of-order groups.

        Beam permutes a split's last, partial group as if it were whole, which repeats some
        event ids and skips others; given the split's ``max_events`` we permute the partial
        group within itself instead, so every id appears once.
        """
        n = self.out_of_order_group_size
        base = (event_number // n) * n
        if max_events is not None and base + n > max_events:
            n = max_events - base
        return base + (event_number * 953) % n

    def timestamp_for_event(self, event_number: int) -> int:
        """Beam's ``timestampAndInterEventDelayUsForEvent`` for a constant rate."""
        return self.base_time_ms + event_number * self.inter_event_delay_us // 1000

    def max_out_of_orderness_ms(self) -> int:
        """How far an event's time can be from its emission time (within a split): at most
        ``group size - 1`` inter-event delays, rounded up to whole milliseconds."""
        return ((self.out_of_order_group_size - 1) * self.inter_event_delay_us + 999) // 1000
