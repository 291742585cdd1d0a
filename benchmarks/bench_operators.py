"""Throughput of the event-time operators (not a test): timers, snapshots, windows.

Run: ``.venv/bin/python benchmarks/bench_operators.py`` (add ``--quick`` for a smoke run).
Prints records (or timers) per second; the numbers are for comparing changes on one machine.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from operators.aggregates import NamedAggregates  # noqa: E402
from operators.pipeline import AggregateSpec  # noqa: E402
from operators.timers import TimerService  # noqa: E402
from operators.window_operator import WindowDriver, WindowOperator  # noqa: E402
from operators.windows import SessionWindows, SlidingWindows, TumblingWindows  # noqa: E402


def bench_timers(n: int, clustered: bool) -> None:
    """Register ``n`` event-time timers, delete every tenth, snapshot, fire the rest.

    ``clustered``: timers at window ends (1,000 distinct timestamps), as a window operator
    with many keys has them; otherwise (nearly) every timestamp is distinct, the worst case.
    """
    rng = random.Random(1)
    keys = [f"key-{i}" for i in range(max(1, n // 100))]
    if clustered:
        timers = [(rng.choice(keys), rng.randrange(0, 1000) * 10_000 + 9_999) for _ in range(n)]
    else:
        timers = [(rng.choice(keys), rng.randrange(0, 10_000_000)) for _ in range(n)]
    service = TimerService()
    start = time.perf_counter()
    for key, ts in timers:
        start_ms = ts - ts % 60_000
        service.register_event_time_timer(key, (start_ms, start_ms + 60_000), ts)
    registered = time.perf_counter() - start

    start = time.perf_counter()
    for key, ts in timers[::10]:
        start_ms = ts - ts % 60_000
        service.delete_event_time_timer(key, (start_ms, start_ms + 60_000), ts)
    deleted_s = time.perf_counter() - start
    live = len(service)

    start = time.perf_counter()
    snapshot = json.dumps(service.snapshot(), separators=(",", ":"))
    to_json_s = time.perf_counter() - start
    start = time.perf_counter()
    TimerService.restore(json.loads(snapshot))
    from_json_s = time.perf_counter() - start

    start = time.perf_counter()
    fired = 0
    pop = service.pop_due_event_time
    for watermark in range(0, 10_000_001, 100_000):
        while pop(watermark) is not None:
            fired += 1
    fire_s = time.perf_counter() - start
    assert fired == live, (fired, live)

    label = "clustered" if clustered else "distinct"
    print(f"timers ({label} timestamps): {n:,} registered in {registered:.2f}s "
          f"({n / registered:,.0f}/s); "
          f"{len(timers[::10]):,} deleted ({len(timers[::10]) / deleted_s:,.0f}/s); "
          f"{fired:,} fired ({fired / fire_s:,.0f}/s); "
          f"register+fire {n / (registered + fire_s):,.0f} timers/s")
    per_million = 1_000_000 / max(1, live)
    print(f"  snapshot: {len(snapshot) * per_million / 1e6:.2f} MB per million timers as JSON "
          f"({to_json_s:.2f}s to write, {from_json_s:.2f}s to read)")
    # in memory: the same registrations again, traced (a separate pass: tracing slows it)
    tracemalloc.start()
    traced = TimerService()
    for key, ts in timers:
        start_ms = ts - ts % 60_000
        traced.register_event_time_timer(key, (start_ms, start_ms + 60_000), ts)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"  in memory: {held * 1_000_000 / max(1, len(traced)) / 1e6:.0f} MB per million "
          f"live timers (Python objects: heap entries, index, key and window tuples)")


def bench_timer_batches(n: int, clustered: bool, batch: int = 10_000, repeats: int = 3) -> None:
    """The batch path beside the per-timer path, on the same ``n`` timers in the same run: a
    stream's micro-batches of ``batch`` registrations (keys as Python strings, as a caller has
    them), each followed by firing what the advancing watermark makes due. Best and median of
    ``repeats``; the figure is register+fire timers per second, as above."""
    rng = random.Random(1)
    keys = [f"key-{i}" for i in range(max(1, n // 100))]
    span = 10_000_000
    if clustered:
        stamps = sorted(rng.randrange(0, 1000) * 10_000 + 9_999 for _ in range(n))
    else:
        stamps = sorted(rng.randrange(0, span) for _ in range(n))
    # event times arrive roughly in order: each batch holds the next stretch of time, shuffled
    timers = [(rng.choice(keys), ts) for ts in stamps]
    batches = []
    for first in range(0, n, batch):
        chunk = timers[first:first + batch]
        rng.shuffle(chunk)
        batches.append(([k for k, _ in chunk], [ts - ts % 60_000 for _, ts in chunk],
                        [ts - ts % 60_000 + 60_000 for _, ts in chunk], [ts for _, ts in chunk],
                        max(ts for _, ts in chunk) - 60_000))

    def per_timer() -> tuple[float, int]:
        service = TimerService()
        register, pop = service.register_event_time_timer, service.pop_due_event_time
        fired = 0
        start = time.perf_counter()
        for chunk_keys, starts, ends, chunk_stamps, watermark in batches:
            for key, first, last, ts in zip(chunk_keys, starts, ends, chunk_stamps, strict=True):
                register(key, (first, last), ts)
            while pop(watermark) is not None:
                fired += 1
        while pop(span) is not None:
            fired += 1
        return time.perf_counter() - start, fired

    def batched() -> tuple[float, int]:
        service = TimerService()
        fired = 0
        start = time.perf_counter()
        for chunk_keys, starts, ends, chunk_stamps, watermark in batches:
            service.register_event_time_timers(chunk_keys, starts, ends, chunk_stamps)
            fired += len(service.pop_due_event_time_timers(watermark))
        fired += len(service.pop_due_event_time_timers(span))
        return time.perf_counter() - start, fired

    singles = [per_timer() for _ in range(repeats)]
    runs = [batched() for _ in range(repeats)]
    assert {fired for _, fired in singles} == {fired for _, fired in runs}, (singles, runs)
    one = sorted(seconds for seconds, _ in singles)
    many = sorted(seconds for seconds, _ in runs)
    label = "clustered" if clustered else "distinct"
    print(f"timers, batch path ({label} timestamps, {n:,} in micro-batches of {batch:,}, "
          f"{runs[0][1]:,} distinct fired): register+fire {n / many[0]:,.0f}/s best, "
          f"{n / many[len(many) // 2]:,.0f}/s median; per-timer path {n / one[0]:,.0f}/s best, "
          f"{n / one[len(one) // 2]:,.0f}/s median; ratio {one[0] / many[0]:.1f}x")


def stream(n: int, keys: int, delay: int, seed: int = 2) -> list[tuple[str, int, dict, int]]:
    """Out-of-order records (up to ``delay`` ms late, a few much later) with the bounded
    out-of-orderness watermark in force for each."""
    rng = random.Random(seed)
    records = []
    max_seen = None
    for i in range(n):
        base = i * 10
        t = base - rng.randrange(0, delay) if rng.random() > 0.01 else base - 5 * delay
        watermark = -(2**63) if max_seen is None else max_seen - delay - 1
        records.append((f"k{rng.randrange(keys)}", t, {"v": rng.randrange(100)}, watermark))
        max_seen = t if max_seen is None else max(max_seen, t)
    return records


def bench_window(name: str, operator: WindowOperator, records: list) -> None:
    driver = WindowDriver(operator)
    start = time.perf_counter()
    panes = late = 0
    for seq, (key, t, payload, watermark) in enumerate(records):
        driver.process(key, t, payload, arrival_seq=seq, watermark=watermark, ingest_time=seq)
        if seq % 10_000 == 0:
            p, lt = driver.take_output()
            panes += len(p)
            late += len(lt)
    p, lt = driver.take_output()
    panes += len(p)
    late += len(lt)
    elapsed = time.perf_counter() - start
    print(f"window {name}: {len(records):,} records in {elapsed:.2f}s "
          f"({len(records) / elapsed:,.0f} records/s), {panes:,} panes, {late:,} late rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10x smaller inputs")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    bench_timers(1_000_000 // scale, clustered=False)
    bench_timers(1_000_000 // scale, clustered=True)
    bench_timer_batches(1_000_000 // scale, clustered=False)
    bench_timer_batches(1_000_000 // scale, clustered=True)
    records = stream(500_000 // scale, keys=100, delay=2_000)

    def aggregates() -> NamedAggregates:
        return NamedAggregates.from_specs([AggregateSpec("n", "count"),
                                           AggregateSpec("s", "sum", "v")])

    bench_window("tumbling 10s count+sum",
                 WindowOperator(TumblingWindows(10_000), aggregate=aggregates()), records)
    bench_window("tumbling 10s count+sum, lateness 5s",
                 WindowOperator(TumblingWindows(10_000), aggregate=aggregates(),
                                allowed_lateness=5_000), records)
    bench_window("sliding 40s/10s count+sum",
                 WindowOperator(SlidingWindows(40_000, 10_000), aggregate=aggregates()),
                 records)
    bench_window("session gap 5s count+sum",
                 WindowOperator(SessionWindows(5_000), aggregate=aggregates()),
                 records[: len(records) // 5])


if __name__ == "__main__":
    main()
