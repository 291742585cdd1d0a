"""The Nexmark generator: Java's RNG, determinism, event mix, id model, time model, landing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from jobs.streams.landing.parsing import ParsedEvent, parse_line
from nexmark.arrival import arrival_log, record_from_arrival_row
from nexmark.config import (
    AUCTION_ID_LEAD,
    FIRST_AUCTION_ID,
    FIRST_PERSON_ID,
    PERSON_ID_LEAD,
    NexmarkConfig,
)
from nexmark.generator import generate, plan_landing, read_landing, split_events
from nexmark.javarandom import JavaRandom
from nexmark.model import last_base0_auction_id, last_base0_person_id
from operators.watermarks import assign_watermarks
from tests.nexmark.helpers import GENEROUS, SMALL


def _events(config: NexmarkConfig) -> list[dict]:
    return [e for split in range(config.num_event_generators)
            for e in split_events(config, split)]


def test_java_random_matches_java():
    # Well-known outputs of java.util.Random
    assert JavaRandom(42).next_int32() == -1170105035
    assert JavaRandom(0).next_int32() == -1155484576
    assert JavaRandom(42).next_double() == 0.7275636800328681
    values = [JavaRandom(7).next_int(10) for _ in range(3)]
    assert all(0 <= v < 10 for v in values)
    r = JavaRandom(3)
    assert all(0 <= r.next_int(1000) < 1000 for _ in range(1000))
    assert all(0 <= r.next_int(64) < 64 for _ in range(1000))


def test_same_seed_writes_identical_files(tmp_path: Path):
    config = NexmarkConfig(num_events=2_000, num_event_generators=3, first_event_rate=100,
                           out_of_order_group_size=5, seed=3, flush_interval_ms=5_000)
    counts_a = generate(config, tmp_path / "a")
    counts_b = generate(config, tmp_path / "b")
    assert counts_a == counts_b
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.jsonl"))
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.jsonl"))
    assert files_a == files_b and len(files_a) > 3
    for relative in files_a:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes()
    other = plan_landing(NexmarkConfig(**{**config.__dict__, "seed": 4}))
    assert other != read_landing(tmp_path / "a")


def test_landing_layout_and_ingest_parses_every_line(tmp_path: Path):
    counts = generate(SMALL, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split-0", "split-1"]
    assert counts["events"] == SMALL.num_events
    assert not list(tmp_path.rglob("*.tmp"))
    for path in tmp_path.rglob("*.jsonl"):
        received = []
        for text in path.read_text("utf-8").splitlines():
            parsed = parse_line(text)
            assert isinstance(parsed, ParsedEvent), parsed
            line = parsed.fields
            received.append(line["received_at"])
            assert parsed.event_time_ms == line["event_time"] == line["date_time"]
            expected_key = {"person": line.get("id"), "auction": line.get("id"),
                            "bid": line.get("auction")}[line["type"]]
            assert parsed.key == str(expected_key)
            expected_value = {"person": 0, "auction": line.get("reserve"),
                              "bid": line.get("price")}[line["type"]]
            assert parsed.value == expected_value
        assert received == sorted(received)


def test_event_mix_and_unique_ids():
    config = NexmarkConfig(num_events=10_000, num_event_generators=4, out_of_order_group_size=25,
                           avg_person_byte_size=0, avg_auction_byte_size=0, avg_bid_byte_size=0)
    events = _events(config)
    assert sorted(e["event_id"] for e in events) == list(range(10_000))
    mix = Counter(e["type"] for e in events)
    assert mix == {"person": 200, "auction": 600, "bid": 9_200}  # 1:3:46 per 50
    for e in events:
        rem = e["event_id"] % 50
        assert e["type"] == ("person" if rem < 1 else "auction" if rem < 4 else "bid")
    people = [e["id"] for e in events if e["type"] == "person"]
    auctions = [e["id"] for e in events if e["type"] == "auction"]
    assert sorted(people) == list(range(FIRST_PERSON_ID, FIRST_PERSON_ID + 200))
    assert sorted(auctions) == list(range(FIRST_AUCTION_ID, FIRST_AUCTION_ID + 600))


def test_id_model_relative_to_event_id():
    config = NexmarkConfig(num_events=20_000, num_event_generators=2, avg_person_byte_size=0,
                           avg_auction_byte_size=0, avg_bid_byte_size=0, seed=9)
    events = _events(config)
    bids = [e for e in events if e["type"] == "bid"]
    hot_auction = hot_bidder = 0
    for e in events:
        eid = e["event_id"]
        last_person = last_base0_person_id(config, eid)
        last_auction = last_base0_auction_id(config, eid)
        if e["type"] == "auction":
            assert e["id"] == FIRST_AUCTION_ID + last_auction
            assert e["expires"] > e["date_time"]
            assert e["reserve"] >= e["initial_bid"] > 0
            assert 10 <= e["category"] < 15
            seller = e["seller"] - FIRST_PERSON_ID
            assert max(0, last_person + 1 - config.num_active_people) <= seller \
                <= last_person + PERSON_ID_LEAD
        if e["type"] == "bid":
            auction = e["auction"] - FIRST_AUCTION_ID
            assert max(0, last_auction - config.num_in_flight_auctions) <= auction \
                <= last_auction + AUCTION_ID_LEAD
            bidder = e["bidder"] - FIRST_PERSON_ID
            assert bidder <= last_person + PERSON_ID_LEAD
            assert 0 < e["price"] <= 100_000_000
            hot_auction += auction == last_auction // 100 * 100
            hot_bidder += bidder == last_person // 100 * 100 + 1
    # P(hot) = 1 - 1/ratio, plus the random picks that land on the hot one
    assert 0.48 < hot_auction / len(bids) < 0.56  # ratio 2
    assert 0.73 < hot_bidder / len(bids) < 0.80   # ratio 4


def test_event_times_follow_the_rate_and_out_of_order_groups():
    config = NexmarkConfig(num_events=3_000, num_event_generators=3, first_event_rate=1_000,
                           out_of_order_group_size=20, max_delivery_delay_ms=0,
                           prob_delayed_event=0.0, avg_person_byte_size=0,
                           avg_auction_byte_size=0, avg_bid_byte_size=0)
    assert config.inter_event_delay_us == 3_000  # 1 ms per event, times three splits
    bound = config.max_out_of_orderness_ms()
    assert bound == 57
    for split in range(3):
        events = list(split_events(config, split))
        adjusted = [config.adjusted_event_number(n, len(events)) for n in range(len(events))]
        assert sorted(adjusted) == list(range(len(events)))  # a permutation per group
        emitted = [config.timestamp_for_event(n) for n in range(len(events))]
        lags = [e["event_time"] - at for e, at in zip(events, emitted, strict=True)]
        assert max(abs(lag) for lag in lags) <= bound
        assert max(lags) > bound // 2 and min(lags) < -bound // 2  # really out of order
        assert [e["received_at"] for e in events] == emitted  # no delivery delay configured
        assert events[-1]["event_time"] - events[0]["event_time"] < 3 * len(events)


def test_delivery_delay_is_bounded():
    events = _events(SMALL)
    bound = SMALL.max_out_of_orderness_ms()
    slack = [e["received_at"] - e["event_time"] for e in events]
    assert min(slack) >= -bound
    assert max(slack) <= bound + SMALL.max_delivery_delay_ms + SMALL.occasional_delay_ms
    delayed = sum(s > bound + SMALL.max_delivery_delay_ms for s in slack)
    assert 0.05 < delayed / len(events) < 0.15  # prob_delayed_event 0.1, some draw ~0


def test_arrival_log_is_what_ingest_would_append(tmp_path: Path):
    generate(SMALL, tmp_path)
    plan = read_landing(tmp_path)
    assert plan == plan_landing(SMALL)
    log = arrival_log(plan, GENEROUS)
    assert [r["arrival_seq"] for r in log] == list(range(SMALL.num_events))
    order = [(r["ingest_time_ms"], r["source_partition"]) for r in log]
    assert order == sorted(order)
    expected = assign_watermarks(GENEROUS, [(r["source_partition"], r["event_time_ms"],
                                             r["ingest_time_ms"], r) for r in log])
    assert [r["watermark_ms"] for r in log] == expected
    # an arrival-log row (payload = the landing line) gives back the same record
    for record in log[:200]:
        row = {"arrival_seq": record["arrival_seq"], "key": record["key"],
               "event_time_ms": record["event_time_ms"],
               "source_partition": record["source_partition"],
               "ingest_time_ms": record["ingest_time_ms"],
               "watermark_ms": record["watermark_ms"],
               "payload": json.dumps({k: v for k, v in record.items() if k not in (
                   "arrival_seq", "source_partition", "event_time_ms", "ingest_time_ms",
                   "watermark_ms")} | {"value": int(record["value"])})}
        assert record_from_arrival_row(row) == record


def test_configuration_is_validated():
    # a partial last group is permuted within itself: every event id exactly once
    partial = NexmarkConfig(num_events=100, num_event_generators=3, out_of_order_group_size=7)
    assert sorted(e["event_id"] for e in _events(partial)) == list(range(100))
    with pytest.raises(ValueError, match="num_events"):
        NexmarkConfig(num_events=0)
    with pytest.raises(ValueError, match="prob_delayed_event"):
        NexmarkConfig(prob_delayed_event=2.0)
