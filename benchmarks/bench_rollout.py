"""How long a pipeline change takes to reach readers, against plain Spark computing the same
windows over the same log, in the same run (not a test).

Run: ``.venv/bin/python benchmarks/bench_rollout.py`` (``--quick``: 200,000 events;
``--sizes 1000000 10000000`` to choose). For each size it writes an arrival log (as
bench_backfill.py does: a day of events over 1,000 keys, out of order, each with the watermark
it carried, in commits of one file), computes the first version of a tumbling-window pipeline
live (an ``available now`` run: it serves once caught up), then changes the pipeline (its
allowed lateness) and times ``run_rollout``: the new version computed from the whole log in a
cohort of its own, then readers switched. Plain Spark: ``groupBy(window, key).agg(count,
sum)`` over the same log into Delta, no lateness, no late records, no metrics.

The live stream's latency *during* a rollout is measured by
``benchmarks/bench_live.py --rollout-after S`` (the same rate with and without one).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import functions as F  # noqa: E402

from benchmarks.bench_backfill import arrival_log, timed, write_log  # noqa: E402
from benchmarks.engine import bench_spark  # noqa: E402
from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.lifecycle import versions
from jobs.live import run_live, run_rollout  # noqa: E402

PIPELINE = """
source: events
window: {{type: tumbling, size: 1m}}
allowed_lateness: {lateness}
aggregates:
  - {{name: events, fn: count}}
  - {{name: value_sum, fn: sum, field: value}}
"""
QUIET = {"progress": lambda _: None}


def measure(spark, root: Path, size: int, args) -> tuple[float, float, float]:
    """(first version live, change -> switch, plain Spark) seconds over a log of ``size``."""
    home = root / f"home-{size}"
    folder = home / "pipelines"
    folder.mkdir(parents=True)
    (folder / "counts.yaml").write_text(PIPELINE.format(lateness="30s"))
    env = {"PLATFORM_HOME": str(home), "PLATFORM_PIPELINES": str(folder)}
    first = platform_of(PlatformSettings.from_env(env)).pipelines["counts"]
    started = time.perf_counter()
    write_log(spark, arrival_log(size, args.keys), first, args.files)
    print(f"{size:,} events: arrival log written in {time.perf_counter() - started:.1f} s",
          flush=True)
    first_live = timed(lambda: run_live(spark, first.stream, **QUIET))
    assert versions.serving(first).version == first.version
    (folder / "counts.yaml").write_text(PIPELINE.format(lateness="45s"))
    changed = platform_of(PlatformSettings.from_env(env)).pipelines["counts"]
    switched: list = []
    rollout = timed(lambda: switched.extend(run_rollout(spark, changed, **QUIET).switched))
    assert switched and versions.serving(changed).version == changed.version
    out = str(root / f"plain-{size}")
    log = spark.read.format("delta").load(first.table_path(tables.ARRIVAL_LOG))
    plain = timed(lambda: log.groupBy(F.window("event_time", "1 minute"), "key")
                  .agg(F.count(F.lit(1)).alias("events"), F.sum("value").alias("value_sum"))
                  .write.format("delta").mode("overwrite").save(out))
    shutil.rmtree(home, ignore_errors=True)
    return first_live, rollout, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--files", type=int, default=40, help="arrival-log commits")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.sizes = [200_000]
    spark = bench_spark("bench-rollout", shuffle_partitions=4)
    root = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    rows = []
    try:
        for size in args.sizes:
            first_live, rollout, plain = measure(spark, root, size, args)
            rows.append((size, first_live, rollout, plain))
            print(f"{size:,} events: first version live {first_live:.1f} s; change -> switch "
                  f"{rollout:.1f} s ({size / rollout:,.0f} events/s); plain Spark "
                  f"{plain:.1f} s; ratio {rollout / plain:.2f}", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    print("\n    events  first live s  change->switch s  events/s  plain Spark s  ratio")
    for size, first_live, rollout, plain in rows:
        print(f"{size:>10,} {first_live:13.1f} {rollout:17.1f} {size / rollout:9,.0f} "
              f"{plain:14.1f} {rollout / plain:6.2f}")


if __name__ == "__main__":
    main()
