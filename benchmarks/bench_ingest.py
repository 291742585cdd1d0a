"""Ingest: the driver reader against Spark's executors, and both against plain Spark.

    .venv/bin/python benchmarks/bench_ingest.py [--quick] [--events N ...] [--repeats R]

The same landing files (generated once per size: several producers, 10,000 keys, about 5 %
bad lines) are ingested into a fresh warehouse by each of

- ``driver``: ``PLATFORM_INGEST_READER=driver``, the ingest process reads, parses, orders and
  appends through ``deltalake`` (no Spark job);
- ``executors``: ``PLATFORM_INGEST_READER=spark``, the executors read and parse, the driver
  walks the small columns for arrival order and watermarks, the executors append;
- ``plain``: plain Spark on the same files: ``spark.read.json`` with the three fields, bad
  lines dropped, appended to a Delta table (no arrival order, no watermarks, no quarantine,
  no exactly-once bookkeeping: the floor any ingest on this engine pays).

Runs alternate (driver, executors, plain) ``--repeats`` times in one process on one session,
so each ratio is measured side by side on the same noisy machine; the median is reported.
Every run's first Spark job pays for the Python workers once, so a warm-up run precedes them.
The engine is ``PLATFORM_SPARK_MASTER`` (default ``local[2]``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.engine import bench_spark  # noqa: E402
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.generator import GeneratorConfig, generate  # noqa: E402
from jobs.streams.landing.ingestor import Ingestor

READERS = ("driver", "executors", "plain")


def _config(events: int) -> GeneratorConfig:
    return GeneratorConfig(seed=7, events=events, keys=10_000, producers=4,
                           duration_ms=6 * 3_600_000, bad_fraction=0.05,
                           flush_interval_ms=300_000)


def _ingest(spark, landing: Path, home: Path, reader: str) -> tuple[float, int, dict]:
    settings = PlatformSettings(home=str(home),
                                ingest_reader="spark" if reader == "executors" else "driver")
    events = platform_of(settings).streams["events"]  # the project's stream, this landing folder
    stream = Stream(events.name, events.spec.model_copy(update={"landing": str(landing)}),
                    events.path, settings)
    started = time.monotonic()
    # as a one-shot ingest runs: batches of at most max_bytes_per_batch on the driver
    report = Ingestor(spark, stream, progress=lambda _: None).run_until_caught_up()
    return time.monotonic() - started, report.records, report.timings


def _plain(spark, landing: Path, home: Path) -> tuple[float, int, dict]:
    from pyspark.sql import functions as F

    started = time.monotonic()
    frame = (spark.read.schema("key string, event_time string, value decimal(38,9)")
             .option("mode", "DROPMALFORMED").json(f"{landing}/*/*.jsonl")
             .where(F.col("key").isNotNull() & F.col("event_time").isNotNull())
             .withColumn("source_file", F.input_file_name()))
    frame.write.format("delta").mode("append").save(str(home / "plain"))
    seconds = time.monotonic() - started
    rows = spark.read.format("delta").load(str(home / "plain")).count()
    return seconds, rows, {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=[300_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 events, 2 repeats")
    args = parser.parse_args()
    sizes, repeats = ([100_000], 2) if args.quick else (args.events, args.repeats)
    spark = bench_spark("bench-ingest", shuffle_partitions=4)
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    summary: dict[int, dict[str, float]] = {}
    try:
        warm = work / "warm"
        generate(_config(2_000), warm / "landing")
        for reader in ("executors", "plain"):
            (_plain(spark, warm / "landing", warm / reader) if reader == "plain"
             else _ingest(spark, warm / "landing", warm / reader, reader))
        for size in sizes:
            landing = work / f"landing-{size}"
            counts = generate(_config(size), landing)
            megabytes = sum(f.stat().st_size for f in landing.rglob("*.jsonl")) / 1e6
            files = sum(1 for _ in landing.rglob("*.jsonl"))
            print(f"\n{size:,} events: {counts['lines']:,} lines, {files} files, "
                  f"{megabytes:.0f} MB", flush=True)
            seconds: dict[str, list[float]] = {reader: [] for reader in READERS}
            for repeat in range(repeats):
                for reader in READERS:
                    home = work / f"run-{size}-{repeat}-{reader}"
                    took, records, timings = (_plain(spark, landing, home) if reader == "plain"
                                              else _ingest(spark, landing, home, reader))
                    seconds[reader].append(took)
                    phases = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
                    print(f"  {reader:<9} {took:6.1f} s  {records / took:>9,.0f} records/s  "
                          f"({records:,} records{'; ' + phases if phases else ''})", flush=True)
                    shutil.rmtree(home, ignore_errors=True)
            summary[size] = {reader: statistics.median(values)
                             for reader, values in seconds.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nevents      driver s  executors s  plain s   driver/plain  executors/plain")
    for size, med in summary.items():
        print(f"{size:>9,} {med['driver']:9.1f} {med['executors']:12.1f} {med['plain']:8.1f} "
              f"{med['driver'] / med['plain']:13.2f} {med['executors'] / med['plain']:16.2f}")
    size = max(summary)
    med = summary[size]
    print(f"ingest: {size / med['driver']:,.0f} events/s driver, {size / med['executors']:,.0f} "
          f"events/s executors; plain Spark {size / med['plain']:,.0f} events/s; ratio "
          f"{med['driver'] / med['plain']:.2f} driver, {med['executors'] / med['plain']:.2f} "
          "executors")
    spark.stop()


if __name__ == "__main__":
    main()
