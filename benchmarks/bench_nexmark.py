"""Nexmark on the platform against plain Spark, same data, same run (not a test).

Run: ``.venv/bin/python benchmarks/bench_nexmark.py`` (``--quick`` for a smoke run, ``--sizes
100000 300000`` to choose). For each size it generates a seeded Nexmark stream (1,000 events/s
of event time over four splits, Beam's out-of-order groups, 1 s bounded out-of-orderness),
lands it and ingests it through the platform in four batches (so the live stream has four
micro-batches), then for each query times

- **backfill**: ``jobs.nexmark_job.run_backfill`` (per-key operator library, Delta tables);
- **live**: ``jobs.nexmark_job.run_live`` from an empty checkpoint (Structured Streaming,
  RocksDB state, one arrival-log file per micro-batch);
- **plain Spark**: the closest formulation in Spark's own operators over the same arrival log,
  written to Delta: ``groupBy(window(...))`` counts and maxima, ``session_window`` for Q11, a
  window join for Q8, the ingest time as the time column for Q12 (no watermark, no lateness,
  no late-record output: what a user would write by hand, and what the platform's extra
  guarantees are measured against).

It prints events/s (every record of the log counts, as every record moves the query's clocks),
the ratio of each platform run's time to plain Spark's, and the peak resident memory of the
whole process tree (driver, JVM, Python workers) during each run. Absolute times on a shared
2-core machine are noisy; the ratios are the figures that count.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import DataFrame, Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from benchmarks.engine import bench_spark  # noqa: E402
from jobs import tables  # noqa: E402
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.nexmark_job import run_backfill, run_live  # noqa: E402
from jobs.streams.landing.ingestor import ingest
from nexmark.config import NexmarkConfig  # noqa: E402
from nexmark.generator import generate  # noqa: E402

QUERIES = ("q5", "q7", "q8", "q11", "q12")
STREAM = "watermark: {strategy: bounded_out_of_orderness, max_out_of_orderness: 1s}\n"
PIPELINE = "source: nexmark\nwindow: {type: tumbling, size: 10s}\n"
INGESTS = 4


def _tree_rss_mb() -> float:
    """Resident memory of this process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 2**20


def measured(action: Callable[[], object]) -> tuple[float, float]:
    """Seconds and peak tree RSS (MB) of ``action``."""
    peak = [_tree_rss_mb()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], _tree_rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    try:
        action()
    finally:
        elapsed = time.perf_counter() - start
        done.set()
        sampler.join()
    return elapsed, peak[0]


# -- plain Spark -------------------------------------------------------------------------------


def _field(name: str, kind: str = "long"):
    return F.get_json_object("payload", f"$.{name}").cast(kind)


def plain(log: DataFrame, query: str, out: str) -> None:
    """The query as a user writes it in Spark's own operators (see the module docstring)."""
    typ = F.get_json_object("payload", "$.type")
    bids = (log.where(typ == "bid")
            .select("event_time", "ingest_time", _field("auction").alias("auction"),
                    _field("bidder").alias("bidder"), _field("price").alias("price")))
    if query == "q5":
        counts = bids.groupBy(F.window("event_time", "10 seconds", "5 seconds"),
                              "auction").count()
        best = Window.partitionBy("window")
        result = (counts.withColumn("_max", F.max("count").over(best))
                  .where(F.col("count") == F.col("_max")).drop("_max"))
    elif query == "q7":
        windowed = bids.withColumn("window", F.window("event_time", "10 seconds"))
        best = windowed.groupBy("window").agg(F.max("price").alias("price"))
        result = windowed.join(best, ["window", "price"])
    elif query == "q8":
        people = (log.where(typ == "person")
                  .select(F.window("event_time", "10 seconds").alias("window"),
                          _field("id").alias("person_id"),
                          F.get_json_object("payload", "$.name").alias("name")))
        auctions = (log.where(typ == "auction")
                    .select(F.window("event_time", "10 seconds").alias("window"),
                            _field("seller").alias("person_id"))
                    .groupBy("window", "person_id").count())
        result = people.join(auctions, ["window", "person_id"])
    elif query == "q11":
        result = bids.groupBy(F.session_window("event_time", "10 seconds"), "bidder").count()
    else:
        result = bids.groupBy(F.window("ingest_time", "10 seconds"), "bidder").count()
    result.write.format("delta").mode("overwrite").save(out)


# -- the run -----------------------------------------------------------------------------------


def nexmark_home(home: Path) -> Stream:
    """A home whose one stream, ``nexmark``, holds the Nexmark events (its pipelines folder
    has one pipeline over it: a home has one at least; the queries read the stream)."""
    descriptions = home.parent / f"{home.name}-descriptions"
    for folder, name, text in (("streams", "nexmark", STREAM), ("pipelines", "counts", PIPELINE)):
        (descriptions / folder).mkdir(parents=True, exist_ok=True)
        (descriptions / folder / f"{name}.yaml").write_text(text, encoding="utf-8")
    settings = PlatformSettings.from_env({
        "PLATFORM_HOME": str(home), "PLATFORM_STREAMS": str(descriptions / "streams"),
        "PLATFORM_PIPELINES": str(descriptions / "pipelines")})
    return platform_of(settings).streams["nexmark"]


def prepare(spark, root: Path, events: int) -> Stream:
    """Generate, land and ingest ``events`` Nexmark events in :data:`INGESTS` batches."""
    root.mkdir(parents=True)
    settings = nexmark_home(root / "platform")
    config = NexmarkConfig(num_events=events, num_event_generators=4, first_event_rate=1_000,
                           out_of_order_group_size=100, seed=1, avg_person_byte_size=0,
                           avg_auction_byte_size=0, avg_bid_byte_size=0)
    staging = root / "staging"
    generate(config, staging)
    files = sorted(staging.glob("*/*.jsonl"), key=lambda p: (p.name, p.parent.name))
    share = -(-len(files) // INGESTS)
    start = time.perf_counter()
    for first in range(0, len(files), share):
        for path in files[first:first + share]:
            target = settings.landing_dir / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
        ingest(spark, settings, progress=lambda _: None)
    elapsed = time.perf_counter() - start
    print(f"\n{events:,} events: ingested in {INGESTS} batches in {elapsed:.1f}s "
          f"({events / elapsed:,.0f} events/s)", flush=True)
    return settings


def copy_of(source: Stream, home: Path) -> Stream:
    fresh = nexmark_home(home)
    shutil.copytree(source.arrival_log, fresh.arrival_log)
    return fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--queries", nargs="+", default=list(QUERIES), choices=QUERIES)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.sizes = [20_000, 60_000]
    spark = bench_spark("bench-nexmark", shuffle_partitions=4)
    root = Path(tempfile.mkdtemp(prefix="bench-nexmark-"))
    quiet = {"progress": lambda _: None}
    results = []
    try:
        for size in args.sizes:
            source = prepare(spark, root / f"source-{size}", size)
            log = spark.read.format("delta").load(source.table_path(tables.ARRIVAL_LOG))
            plain(log, "q7", str(root / "warm-up"))  # JIT and file listings, not measured
            for query in args.queries:
                home = root / f"{size}-{query}"
                backfill = copy_of(source, home / "backfill")
                live = copy_of(source, home / "live")
                figures = {
                    "plain": measured(lambda q=query, h=home, lg=log: plain(
                        lg, q, str(h / "plain"))),
                    "backfill": measured(lambda q=query, s=backfill: run_backfill(
                        spark, s, q, **quiet)),
                    "live": measured(lambda q=query, s=live: run_live(
                        spark, s, q, max_files_per_trigger=1, **quiet)),
                }
                results.append((size, query, figures))
                print(_line(size, query, figures), flush=True)
                shutil.rmtree(home, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n| events | query | plain Spark ev/s | backfill ev/s | backfill / plain | "
          "live ev/s | live / plain | peak MB plain / backfill / live |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for size, query, f in results:
        print(f"| {size:,} | {query} | {size / f['plain'][0]:,.0f} | "
              f"{size / f['backfill'][0]:,.0f} | {f['backfill'][0] / f['plain'][0]:.1f}x | "
              f"{size / f['live'][0]:,.0f} | {f['live'][0] / f['plain'][0]:.1f}x | "
              f"{f['plain'][1]:,.0f} / {f['backfill'][1]:,.0f} / {f['live'][1]:,.0f} |")


def _line(size: int, query: str, f: dict) -> str:
    return (f"{size:>9,} {query:<4} plain {f['plain'][0]:6.1f}s  backfill {f['backfill'][0]:6.1f}s "
            f"({f['backfill'][0] / f['plain'][0]:.1f}x)  live {f['live'][0]:6.1f}s "
            f"({f['live'][0] / f['plain'][0]:.1f}x)")


if __name__ == "__main__":
    main()
