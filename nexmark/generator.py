"""Write Nexmark events into the platform's landing folder as JSON lines ingest accepts.

Each split (Beam's ``GeneratorConfig.split``: a contiguous range of event ids on its own,
parallel timeline) is one source partition, ``<landing>/split-<i>/``, and writes one file per
``flush_interval_ms`` of ``received_at``, lines in the order the collector received them. A
line is::

    {"key": "1003", "event_time": 1767225600012, "received_at": 1767225600150,
     "value": 1289.0, "type": "bid", "event_id": 54, "auction": 1003, "bidder": 1001, ...}

``key`` is the grouping key most queries want: the person id for a person, the auction id for
an auction *and for a bid* (so bids and their auction share a key). Queries that group
otherwise (Q7 globally, Q8 by seller, Q11/Q12 by bidder) re-key from the payload, as Flink's
``keyBy`` would. ``value`` is the bid price, the auction's reserve, 0 for a person.

Everything is a pure function of the :class:`~nexmark.config.NexmarkConfig`: the same seed
writes byte-identical files.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nexmark.config import NexmarkConfig
from nexmark.javarandom import JavaRandom
from nexmark.model import AUCTION, BID, PERSON, event_type, next_auction, next_bid, next_person

_SEED_MIX = 0x9E3779B97F4A7C15
_DELIVERY_SALT = 0x5851F42D4C957F2D
_MASK64 = (1 << 64) - 1

LandingPlan = dict[str, list[dict[str, Any]]]
"""Landing files before they are written: relative path -> lines (as dicts), in order."""


def _splitmix64(value: int) -> int:
    """SplitMix64's finaliser: neighbouring inputs give unrelated outputs."""
    z = (value + _SEED_MIX) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def event_seed(config: NexmarkConfig, event_id: int) -> int:
    """The ``java.util.Random`` seed of an event.

    Seed 0 is the published generator exactly: ``new Random(eventId)``, weakness included:
    the first draw of ``java.util.Random`` hardly varies between neighbouring small seeds
    (``new Random(s).nextInt(4)`` is 2 for every ``s`` below 60), so in the first thousands of
    events every auction goes to the hot seller, and over 20,000 events 37 % of bids (not
    50 %) go to the hot auction. Any other seed scrambles ``(seed, event id)`` with SplitMix64
    first, so the configured hot ratios hold (docs/nexmark.md).
    """
    if config.seed == 0:
        return event_id
    return _splitmix64((config.seed * _SEED_MIX + event_id) & _MASK64)


def delivery_delay_ms(config: NexmarkConfig, event_id: int) -> int:
    """How long after emission the collector stamps the event: uniform up to
    ``max_delivery_delay_ms``, plus Beam's occasional delay for ``prob_delayed_event`` of them.
    Drawn from its own seeded stream so it never disturbs the event's attributes."""
    random = JavaRandom(_splitmix64(event_seed(config, event_id) ^ _DELIVERY_SALT))
    delay = random.next_int(config.max_delivery_delay_ms + 1)
    if random.next_double() < config.prob_delayed_event:
        delay += random.next_int(config.occasional_delay_ms + 1)
    return delay


def make_event(config: NexmarkConfig, event_number: int, first_event_id: int,
               max_events: int) -> dict[str, Any]:
    """The ``event_number``-th emission of the split of ``max_events`` events starting at
    ``first_event_id`` (Beam's ``NexmarkGenerator.nextEvent``), as a landing line."""
    adjusted = config.adjusted_event_number(event_number, max_events)
    event_id = first_event_id + adjusted
    timestamp = config.timestamp_for_event(adjusted)
    emitted_at = config.timestamp_for_event(event_number)
    random = JavaRandom(event_seed(config, event_id))
    kind = event_type(config, event_id)
    if kind == PERSON:
        fields = next_person(config, event_id, random, timestamp)
        key, value = fields["id"], 0
    elif kind == AUCTION:
        fields = next_auction(config, adjusted, event_id, random, timestamp)
        key, value = fields["id"], fields["reserve"]
    else:
        fields = next_bid(config, event_id, random, timestamp)
        key, value = fields["auction"], fields["price"]
    line = {"key": str(key), "event_time": timestamp,
            "received_at": emitted_at + delivery_delay_ms(config, event_id),
            "value": value, "type": kind, "event_id": event_id}
    line.update(fields)
    return line


def split_events(config: NexmarkConfig, split: int) -> Iterator[dict[str, Any]]:
    """The events of one split in emission order."""
    first_event_id, size = config.split_sizes()[split]
    for number in range(size):
        yield make_event(config, number, first_event_id, size)


def partition_name(split: int) -> str:
    return f"split-{split}"


def plan_landing(config: NexmarkConfig) -> LandingPlan:
    """Every landing file's lines: per split, in ``received_at`` order (emission order breaks
    ties), one file per ``flush_interval_ms`` of ``received_at``."""
    plan: LandingPlan = {}
    for split in range(config.num_event_generators):
        events = list(split_events(config, split))
        order = sorted(range(len(events)), key=lambda i: (events[i]["received_at"], i))
        for i in order:
            event = events[i]
            bucket = event["received_at"] // config.flush_interval_ms * config.flush_interval_ms
            plan.setdefault(f"{partition_name(split)}/received-{bucket}.jsonl", []).append(event)
    return dict(sorted(plan.items()))


def write_landing(plan: LandingPlan, landing: Path) -> dict[str, int]:
    """Write the files (each atomically, as a collector must) and count what was written."""
    counts = {"files": 0, "events": 0, PERSON: 0, AUCTION: 0, BID: 0}
    for relative, lines in plan.items():
        path = landing / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # ingest never sees a half-written file
        counts["files"] += 1
        counts["events"] += len(lines)
        for line in lines:
            counts[line["type"]] += 1
    return counts


def read_landing(landing: Path) -> LandingPlan:
    """The landing files as written (for tests and the pure-Python arrival log)."""
    plan: LandingPlan = {}
    for path in sorted(landing.glob("*/*.jsonl")):
        relative = str(path.relative_to(landing))
        plan[relative] = [json.loads(line) for line in path.read_text("utf-8").splitlines()
                          if line.strip()]
    return plan


def generate(config: NexmarkConfig, landing: Path) -> dict[str, int]:
    """Generate and write; return the counts."""
    return write_landing(plan_landing(config), landing)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Write seeded Nexmark events into a landing folder (one folder per split).")
    parser.add_argument("landing", type=Path)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--rate", type=int, default=10_000, help="events per second, all splits")
    parser.add_argument("--seed", type=int, default=0, help="0: exactly Beam's generator")
    parser.add_argument("--out-of-order-group-size", type=int, default=1)
    parser.add_argument("--max-delivery-delay-ms", type=int, default=200)
    parser.add_argument("--base-time-ms", type=int, default=NexmarkConfig.base_time_ms)
    args = parser.parse_args(argv)
    config = NexmarkConfig(num_events=args.events, num_event_generators=args.splits,
                           first_event_rate=args.rate, seed=args.seed,
                           out_of_order_group_size=args.out_of_order_group_size,
                           max_delivery_delay_ms=args.max_delivery_delay_ms,
                           base_time_ms=args.base_time_ms)
    print(json.dumps(generate(config, args.landing), indent=2))


if __name__ == "__main__":
    main()
