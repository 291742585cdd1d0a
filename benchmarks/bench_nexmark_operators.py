"""Throughput of the Nexmark queries on the pure-Python operators (not a test).

Run: ``.venv/bin/python benchmarks/bench_nexmark_operators.py`` (add ``--quick`` for a smoke
run). Generates a seeded Nexmark stream at two sizes (1,000 events/s of event time over four
splits, Beam's out-of-order groups and occasional delay), builds its arrival log in pure
Python as ingest would (watermark: 1 s bounded out-of-orderness), then times each query over
the whole log. Events/s counts every record of the log (each one advances the query's clocks);
the numbers are for comparing changes on one machine, and are the baseline the Spark runtime
(live and backfill) is compared against.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nexmark.arrival import arrival_log  # noqa: E402
from nexmark.config import NexmarkConfig  # noqa: E402
from nexmark.generator import plan_landing  # noqa: E402
from nexmark.queries import QUERIES  # noqa: E402
from operators.pipeline import WatermarkSpec  # noqa: E402

WATERMARK = WatermarkSpec(max_out_of_orderness_ms=1_000)


def build(events: int) -> tuple[list[dict], float, float]:
    config = NexmarkConfig(num_events=events, num_event_generators=4, first_event_rate=1_000,
                           out_of_order_group_size=100, seed=1, avg_person_byte_size=0,
                           avg_auction_byte_size=0, avg_bid_byte_size=0)
    start = time.perf_counter()
    plan = plan_landing(config)
    generated = time.perf_counter() - start
    start = time.perf_counter()
    records = arrival_log(plan, WATERMARK)
    return records, generated, time.perf_counter() - start


def _window(definition: object) -> str:
    window = definition.parameters()["window"]  # type: ignore[attr-defined]
    return " ".join(f"{k}={v}" for k, v in window.items() if v not in (None, 0))


def bench(events: int) -> None:
    records, generated_s, arrival_s = build(events)
    span_s = (records[-1]["ingest_time_ms"] - records[0]["ingest_time_ms"]) / 1000
    print(f"\n{events:,} events ({span_s:,.0f} s of ingest clock): generated in "
          f"{generated_s:.1f}s ({events / generated_s:,.0f}/s), arrival log in "
          f"{arrival_s:.1f}s ({events / arrival_s:,.0f}/s)")
    for name, query in QUERIES.items():
        definition = query()
        start = time.perf_counter()
        result = definition.run(records)
        elapsed = time.perf_counter() - start
        print(f"  {name:>4}: {events / elapsed:>9,.0f} events/s  ({elapsed:5.2f}s; "
              f"{len(result.rows):,} rows, {len(result.late):,} late)  {_window(definition)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    args = parser.parse_args(argv)
    sizes = (10_000, 30_000) if args.quick else (100_000, 300_000)
    print(f"Nexmark on the pure-Python operators; query defaults (10 s windows, 5 s slide, "
          f"10 s session gap); watermark {WATERMARK.max_out_of_orderness_ms} ms bounded")
    for events in sizes:
        bench(events)


if __name__ == "__main__":
    main()
