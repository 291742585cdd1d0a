"""Backfill and live throughput against plain Spark on the same data, in the same run.

Not a test. Run: ``.venv/bin/python benchmarks/bench_backfill.py`` (``--quick`` for a smoke
run, ``--sizes 1000000 3000000`` to choose). For each size it builds an arrival log (one
partition, bounded out-of-orderness, the watermark each record carried computed exactly as
ingest does), then times:

- plain Spark: ``groupBy(window(event_time, ...), key).agg(count, sum)`` written to Delta (no
  watermark, no lateness: the number users compare with);
- the platform's vectorised backfill, results only (``compute_windows(...).results`` to Delta),
  and the full backfill (results, late records and late-data metrics, as Dagster runs it);

for a tumbling and a sliding window (vectorised), and a session window (the operator library
per key, ``mapInPandas`` over key-cut partitions; plain Spark's ``session_window`` as the
comparison), and prints times and the ratio to plain Spark. Then the live job over the smaller
log, one arrival-log file per micro-batch: per-batch latency.
Absolute times on a shared 2-core machine are noisy; the ratio is the figure that counts.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import functions as F  # noqa: E402

from benchmarks.engine import bench_spark  # noqa: E402
from jobs import tables  # noqa: E402
from jobs.backfill import run_backfill  # noqa: E402
from jobs.config.registry import Pipeline, platform_of
from jobs.config.settings import PlatformSettings
from jobs.live import run_live  # noqa: E402
from jobs.windows import compute_windows  # noqa: E402
from operators.time import MIN_WATERMARK  # noqa: E402

START_MS = 1_767_225_600_000
PIPELINES = {  # name: (pipeline's window, plain Spark's window column)
    "tumbling 1m": ("window: {type: tumbling, size: 1m}",
                    lambda: F.window("event_time", "1 minute")),
    "sliding 5m/1m": ("window: {type: sliding, size: 5m, slide: 1m}",
                      lambda: F.window("event_time", "5 minutes", "1 minute")),
    "session 4m": ("window: {type: session, gap: 4m}",
                   lambda: F.session_window("event_time", "4 minutes")),
}
PIPELINE_TEMPLATE = """
source: events
{window}
allowed_lateness: 30s
aggregates:
  - {{name: events, fn: count}}
  - {{name: value_sum, fn: sum, field: value}}
"""


def arrival_log(n: int, keys: int, seed: int = 1) -> pd.DataFrame:
    """``n`` records over a day, out of order by an exponential delay (some very late), in
    arrival order, each with the watermark in force when it arrived (max event time of the
    records before it - 5 s - 1 ms, as the bounded out-of-orderness strategy gives)."""
    rng = np.random.default_rng(seed)
    event = START_MS + np.sort(rng.integers(0, 86_400_000, n))
    delay = rng.exponential(1_000, n) + (rng.random(n) < 0.01) * rng.uniform(0, 600_000, n)
    order = np.argsort(event + delay.astype(np.int64), kind="stable")
    event = event[order]
    seen = np.maximum.accumulate(event)
    watermark = np.empty(n, dtype=np.int64)
    watermark[0] = MIN_WATERMARK
    watermark[1:] = seen[:-1] - 5_000 - 1
    ingest = np.maximum.accumulate(event + delay[order].astype(np.int64))
    return pd.DataFrame({
        "arrival_seq": np.arange(n, dtype=np.int64),
        "key": pd.Series(rng.integers(0, keys, n)).map(lambda k: f"user-{k:04d}").to_numpy(),
        "event_time_ms": event, "ingest_time_ms": ingest, "watermark_ms": watermark,
        "value": np.round(rng.gamma(2.0, 10.0, n), 2),
    })


def home_with(home: Path, window: str) -> Pipeline:
    """A home whose one pipeline has ``window`` (over the project's stream ``events``)."""
    folder = home / "pipelines"
    folder.mkdir(parents=True)
    (folder / "bench.yaml").write_text(PIPELINE_TEMPLATE.format(window=window))
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home),
                                          "PLATFORM_PIPELINES": str(folder)})
    return platform_of(settings).pipelines["bench"]


def write_log(spark, frame: pd.DataFrame, pipeline: Pipeline, files: int) -> None:
    """The log as ingest writes it: ``files`` commits of one file each, in arrival order."""
    path = pipeline.table_path(tables.ARRIVAL_LOG)
    for part in np.array_split(frame, files):
        (spark.createDataFrame(part)
         .withColumn("value", F.col("value").cast("decimal(38,9)"))
         .withColumn("payload", F.lit("{}"))
         .withColumn("event_time", F.timestamp_millis("event_time_ms"))
         .coalesce(1).write.format("delta").mode("append").save(path))


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def plain_spark(spark, settings: Pipeline, window, out: str) -> None:
    log = spark.read.format("delta").load(settings.table_path(tables.ARRIVAL_LOG))
    (log.groupBy(window(), "key")
     .agg(F.count(F.lit(1)).alias("events"), F.sum("value").alias("value_sum"))
     .write.format("delta").mode("overwrite").save(out))


def platform_results_only(spark, settings: Pipeline, out: str) -> None:
    log = spark.read.format("delta").load(settings.table_path(tables.ARRIVAL_LOG))
    outputs = compute_windows(log, None, settings.spec, first_day="2026-01-01",
                              last_day="2026-01-02")
    try:
        outputs.results.write.format("delta").mode("overwrite").save(out)
    finally:
        outputs.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 3_000_000])
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--live-batches", type=int, default=12)
    parser.add_argument("--live-batch-records", type=int, default=5_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--windows", nargs="+", choices=[n.split()[0] for n in PIPELINES],
                        help="only these pipelines (default: all three)")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.live_batches, args.live_batch_records = [50_000, 150_000], 4, 2_000
    spark = bench_spark("bench", shuffle_partitions=4)
    root = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    rows = []
    try:
        for size in args.sizes:
            frame = arrival_log(size, args.keys)
            for name, (window, spark_window) in PIPELINES.items():
                if args.windows and name.split()[0] not in args.windows:
                    continue
                home = root / f"{size}-{name.split()[0]}"
                settings = home_with(home, window)
                write_log(spark, frame, settings, files=4)
                timings = {}
                for label, action in (
                    ("plain", lambda s=settings, w=spark_window, h=home:
                        plain_spark(spark, s, w, str(h / "plain"))),
                    ("results", lambda s=settings, h=home:
                        platform_results_only(spark, s, str(h / "results"))),
                    ("full", lambda s=settings: run_backfill(spark, s, progress=lambda _: None)),
                ):
                    action()  # warm-up: JIT, Python workers, file listing caches
                    timings[label] = min(timed(action) for _ in range(2))
                rows.append((size, name, timings))
                print(f"{size:>9,} {name:<14} plain {timings['plain']:6.2f}s   platform results "
                      f"{timings['results']:6.2f}s ({timings['results'] / timings['plain']:.2f}x)"
                      f"   full backfill {timings['full']:6.2f}s "
                      f"({timings['full'] / timings['plain']:.2f}x)", flush=True)
        if args.live_batches:
            live_latency(spark, root, args.live_batches, args.live_batch_records, args.keys)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\nsize       window         plain s   results s  ratio   full s  ratio  "
          "records/s (results)")
    for size, name, t in rows:
        print(f"{size:>9,}  {name:<13} {t['plain']:8.2f} {t['results']:10.2f} "
              f"{t['results'] / t['plain']:6.2f} {t['full']:8.2f} {t['full'] / t['plain']:6.2f}"
              f"  {size / t['results']:>12,.0f}")


def live_latency(spark, root: Path, batches: int, per_batch: int, keys: int) -> None:
    """The live job with one arrival-log file per micro-batch of ``per_batch`` records."""
    settings = home_with(root / "live", PIPELINES["tumbling 1m"][0])
    write_log(spark, arrival_log(batches * per_batch, keys, seed=2), settings, files=batches)
    durations: list[float] = []
    last = [time.perf_counter()]

    def tick(message: str) -> None:
        if message.startswith("live events: batch"):
            now = time.perf_counter()
            durations.append(now - last[0])
            last[0] = now

    report = run_live(spark, settings.stream, max_files_per_trigger=1, progress=tick)
    steady = durations[1:-1] or durations  # the first batch starts Python workers
    print(f"\nlive: {len(report.batches)} micro-batches of ~{per_batch:,} records: batch "
          f"latency p50 {statistics.median(steady):.2f}s, max {max(steady):.2f}s, first "
          f"{durations[0]:.2f}s; steady throughput {per_batch / statistics.median(steady):,.0f}"
          f" records/s")


if __name__ == "__main__":
    main()
