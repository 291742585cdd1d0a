"""Enrichment on Spark: the async per-partition operator against a plain synchronous UDF.

Not a test. Both run in the same Spark session over the same records against the same real
service (its own process, 20 ms latency by default):

- ``plain UDF``: a Python UDF that calls the service once per record, blocking (what people
  write first); its ideal is ``tasks / latency``;
- ``platform``: ``jobs.enrichment.enrich_frame`` (``mapInPandas``, one asyncio loop and one
  HTTP session per partition, ``capacity`` calls in flight per task); its ideal is
  ``tasks * capacity / latency``. Each task reports its call latencies (p50/p95/p99 of every
  attempt, as the client saw it); the worst task's are printed, and the largest task's rate
  over its call phase alone (the job's rate also pays Spark's range partitioning, shuffle and
  Arrow conversions).

    .venv/bin/python benchmarks/bench_enrichment_spark.py [--quick] [--records 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import functions as F  # noqa: E402

from benchmarks.bench_enrichment import service_process  # noqa: E402
from benchmarks.engine import bench_spark  # noqa: E402
from jobs.enrichment import METRICS_STATUS, enrich_frame, sum_counters  # noqa: E402
from operators.async_io import AsyncEnrichConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--udf-records", type=int, default=1_000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--capacities", default="10,50,100")
    parser.add_argument("--tasks", type=int, default=2,
                        help="Spark tasks (partitions) at once; the service shares the cores")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.records, args.udf_records = 2_000, 200
    tasks = args.tasks
    spark = bench_spark("bench-enrichment", shuffle_partitions=tasks,
                        master=f"local[{tasks}]")
    latency_s = args.latency_ms / 1000

    def records(n: int):
        return (spark.range(n).select(F.col("id").alias("arrival_seq"),
                                      F.lit(0).cast("long").alias("watermark_ms"),
                                      F.format_string("user-%04d", F.col("id") % 5000)
                                      .alias("key"))
                .repartition(tasks).cache())

    with service_process(args.latency_ms) as url:
        udf_input = records(args.udf_records)
        udf_input.count()

        @F.udf("string")
        def lookup(key: str) -> str:
            import urllib.request

            with urllib.request.urlopen(f"{url}/users/{key}", timeout=10) as response:
                return response.read().decode()

        start = time.perf_counter()
        udf_input.select(lookup("key").alias("r")).write.format("noop").mode("overwrite").save()
        udf_s = time.perf_counter() - start
        udf_rate = args.udf_records / udf_s
        udf_ideal = tasks / latency_s
        print(f"plain UDF      {args.udf_records:>7,} records {udf_s:7.2f}s {udf_rate:9,.0f}/s "
              f"({udf_rate / udf_ideal:.0%} of its ideal {udf_ideal:,.0f}/s)", flush=True)

        frame = records(args.records)
        frame.count()
        for capacity in (int(c) for c in args.capacities.split(",")):
            config = AsyncEnrichConfig(capacity=capacity, timeout_ms=5_000, record=False)
            enrich_frame(frame.limit(200), None, url, config).write.format("noop") \
                .mode("overwrite").save()  # warm-up: Python workers
            start = time.perf_counter()
            # every outcome is computed; only the tasks' counter rows come back
            reports = (enrich_frame(frame, None, url, config, partitions=tasks)
                       .where(F.col("status") == METRICS_STATUS).select("response_json")
                       .collect())
            seconds = time.perf_counter() - start
            counters = sum_counters([row.response_json for row in reports])
            rate = args.records / seconds
            ideal = tasks * capacity / latency_s
            print(f"platform c={capacity:<4} {args.records:>7,} records {seconds:7.2f}s "
                  f"{rate:9,.0f}/s ({rate / ideal:.0%} of ideal {ideal:,.0f}/s; "
                  f"{rate / udf_rate:.1f}x the plain UDF); call latency ms p50 "
                  f"{counters.get('call_p50_ms', 0):.1f} p95 {counters.get('call_p95_ms', 0):.1f}"
                  f" p99 {counters.get('call_p99_ms', 0):.1f} (worst task); max in flight "
                  f"{counters.get('max_in_flight', 0)}", flush=True)
            phase, task_records = counters.get("call_phase_s"), counters.get("task_records")
            if phase and task_records:  # the largest task: its calls alone, no Spark stages
                per_task = task_records / phase
                print(f"  in the largest task: {task_records:,} records in {phase:.2f}s of "
                      f"calls, {per_task:,.0f}/s ({per_task / (capacity / latency_s):.0%} of "
                      f"the per-task ideal {capacity / latency_s:,.0f}/s)", flush=True)


if __name__ == "__main__":
    main()
