"""Process pipelines' backfill against plain Spark's per-key Python loop, on the same data, in
the same run (not a test).

Run: ``.venv/bin/python benchmarks/bench_process.py`` (``--quick``: 200,000 events; ``--sizes
1000000`` by default). For each size it writes an arrival log (as bench_backfill.py does: a
day of events over 1,000 keys, out of order, each with the watermark it carried) and times,
for the two examples of the repository (``pipelines/daily_totals.yaml``,
``pipelines/spend_spike.yaml``):

- **plain Spark**: ``groupBy("key").applyInPandas`` running the same logic as a plain Python
  loop over each key's records in arrival order, written to Delta: no watermark-driven timers,
  no state objects, no output checks, no late records;
- **platform**: the pipeline's backfill (``jobs.process.backfill``): every key's history through
  the user's ``KeyedProcessFunction`` with its state and timers, output and late records written.

The live rate of a process pipeline is ``benchmarks/bench_live.py --windows daily_totals``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from benchmarks.bench_backfill import arrival_log, timed  # noqa: E402
from benchmarks.engine import bench_spark  # noqa: E402
from jobs import tables  # noqa: E402
from jobs.backfill import run_backfill  # noqa: E402
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("daily_totals", "spend_spike")


def daily_totals_loop(frame: pd.DataFrame) -> pd.DataFrame:
    """Per key, per UTC day, the total and the count, in a Python loop over its records."""
    frame = frame.sort_values("arrival_seq")
    totals: dict[str, list] = {}
    for event, value in zip(frame.event_time_ms.tolist(), frame.value.tolist(), strict=True):
        day = str(pd.Timestamp(event, unit="ms").date())
        entry = totals.setdefault(day, [0.0, 0])
        entry[0] += float(value)
        entry[1] += 1
    key = frame.key.iloc[0]
    return pd.DataFrame([(key, day, total, count) for day, (total, count) in totals.items()],
                        columns=["user", "day", "total", "events"])


SPIKE_SMALL, SPIKE_LARGE, SPIKE_WITHIN_MS = 2.0, 60.0, 1_800_000


def spend_spike_loop(frame: pd.DataFrame) -> pd.DataFrame:
    """A large amount within ``SPIKE_WITHIN_MS`` after a small one, in a Python loop over the
    key (one parameter: ``applyInPandas`` takes a function of the data, or of key and data)."""
    small, large, within = SPIKE_SMALL, SPIKE_LARGE, SPIKE_WITHIN_MS
    frame = frame.sort_values("arrival_seq")
    alerts, flag = [], None
    key = frame.key.iloc[0]
    for event, value in zip(frame.event_time_ms.tolist(), frame.value.tolist(), strict=True):
        amount = float(value)
        if flag is not None and amount > large and event - flag[0] <= within:
            alerts.append((key, flag[0], event, flag[1], amount))
            flag = None
        if amount < small:
            flag = (event, amount)
    return pd.DataFrame(alerts, columns=["user", "small_at_ms", "large_at_ms", "small_amount",
                                         "large_amount"])


def write_log(spark, frame: pd.DataFrame, pipeline, files: int) -> None:
    """The log as ingest writes it, each record's payload its landing line (the function
    reads its fields from there): ``files`` commits in arrival order."""
    path = pipeline.table_path(tables.ARRIVAL_LOG)
    for part in np.array_split(frame, files):
        (spark.createDataFrame(part)
         .withColumn("payload", F.to_json(F.struct(
             "key", F.col("event_time_ms").alias("event_time"), "value")))
         .withColumn("value", F.col("value").cast("decimal(38,9)"))
         .withColumn("event_time", F.timestamp_millis("event_time_ms"))
         .coalesce(1).write.format("delta").mode("append").save(path))


PLAIN = {
    "daily_totals": (daily_totals_loop, "user string, day string, total double, events long"),
    "spend_spike": (spend_spike_loop, "user string, small_at_ms long, large_at_ms long, "
                                      "small_amount double, large_amount double"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.sizes = [200_000]
    spark = bench_spark("bench-process", shuffle_partitions=4)
    root = Path(tempfile.mkdtemp(prefix="bench-process-"))
    rows = []
    try:
        for size in args.sizes:
            frame = arrival_log(size, args.keys)
            for name in EXAMPLES:
                home = root / f"{size}-{name}"
                folder = home / "pipelines"
                folder.mkdir(parents=True)
                (folder / f"{name}.yaml").write_text(
                    (REPO / "pipelines" / f"{name}.yaml").read_text())
                env = {"PLATFORM_HOME": str(home), "PLATFORM_PIPELINES": str(folder)}
                pipeline = platform_of(PlatformSettings.from_env(env)).pipelines[name]
                write_log(spark, frame, pipeline, files=4)
                log = spark.read.format("delta").load(pipeline.table_path(tables.ARRIVAL_LOG))
                loop, schema = PLAIN[name]
                out = str(home / "plain")

                def plain(log=log, loop=loop, schema=schema, out=out) -> None:
                    (log.select("key", "arrival_seq", "event_time_ms", "value")
                     .groupBy("key").applyInPandas(loop, schema)
                     .write.format("delta").mode("overwrite").save(out))

                def platform(pipeline=pipeline) -> None:
                    run_backfill(spark, pipeline, progress=lambda _: None)

                timings = {}
                for label, action in (("plain", plain), ("platform", platform)):
                    action()  # warm-up: Python workers, file listings
                    timings[label] = min(timed(action) for _ in range(2))
                rows.append((size, name, timings))
                print(f"{size:>9,} {name:<13} plain Spark applyInPandas "
                      f"{timings['plain']:6.2f}s   platform backfill {timings['platform']:6.2f}s"
                      f" ({timings['platform'] / timings['plain']:.2f}x)", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    print("\n     size  pipeline      plain s  platform s  ratio  events/s (platform)")
    for size, name, t in rows:
        print(f"{size:>9,}  {name:<12} {t['plain']:8.2f} {t['platform']:11.2f} "
              f"{t['platform'] / t['plain']:6.2f}  {size / t['platform']:>12,.0f}")


if __name__ == "__main__":
    main()
