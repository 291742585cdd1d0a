"""The live run as a separate process, launched by Dagster Pipes.

A long-running or heavy live step should not share the Dagster run worker's memory and JVM: this
script starts its own SparkSession and reports back through Dagster Pipes. Two modes:

- ``python -m jobs.pipes [--stream NAME]`` (``live_pipes_job``): one increment of a
  stream (ingest, then its pipelines' tables for the days it touched) and stop. Progress
  streams back as Pipes log lines; at the end one custom message says what was written, which
  the launching op turns into asset materialisations (per pipeline and day for the
  partitioned tables).
- ``python -m jobs.pipes --long-running --trigger "10 seconds"``
  (``live_stream_job``): the long-running live stream. It ingests new landing files every
  ``--poll`` seconds (batch after batch while a backlog remains) while the streaming query
  runs, and reports every micro-batch the moment it
  is written (records, panes, late rows and the batch's late-data figures), which the launching
  op records as asset observations, so the UI plots late data while the job runs. It stops after
  ``--max-batches`` or ``--duration``, or on SIGTERM/SIGINT (Dagster terminating the run), with
  the checkpoint kept: the next start resumes where it stopped.

Run by hand without Dagster it simply prints its progress.
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal
import sys
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes

from jobs.config.registry import platform_of


def _jsonable(value: object) -> object:
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def _row(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _jsonable(v) for k, v in values.items()}


def _ingest_message(report) -> dict[str, Any]:
    return {"batch_id": report.batch_id, "first_batch_id": report.first_batch_id,
            "records": report.records, "files": report.files,
            "quarantined": report.quarantined, "watermark_ms": report.watermark_ms}


def _stream(name: str | None):
    """The settings' stream of that name (the only one when not given)."""
    from jobs.config.errors import SettingsError
    from jobs.config.settings import PlatformSettings

    settings = PlatformSettings.from_env()
    streams = platform_of(settings).streams
    if name is None:
        if len(streams) != 1:
            raise SettingsError(f"--stream: give one of {', '.join(streams)}")
        return settings, next(iter(streams.values()))
    return settings, platform_of(settings).select_streams([name])[0]


def run_once(pipes, progress: Callable[[str], None], args: argparse.Namespace) -> None:
    from jobs.increment import run_increment
    from jobs.session import spark_for

    settings, stream = _stream(args.stream)
    spark = spark_for(settings, app_name="eventtime-live")
    step = run_increment(spark, stream, progress=progress, engine=settings.live_engine)
    pipes.report_custom_message({
        "kind": "increment", "engine": step.engine, "stream": stream.name,
        "first_day": step.first_day, "last_day": step.last_day,
        "ingest": _ingest_message(step.ingest),
        "pipelines": {key: {"pipeline": days.pipeline.name,
                            "version": days.pipeline.version,
                            "first_day": days.first_day, "last_day": days.last_day,
                            "metrics": [_row(row) for row in days.metrics]}
                      for key, days in step.pipelines.items()},
        "switched": [done.as_metadata() for done in
                     (step.live_report.switched if step.live_report else [])]})


def run_stream(pipes, progress: Callable[[str], None], args: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    from jobs import tables
    from jobs.live import run_stream as stream_job
    from jobs.session import spark_for

    settings, stream = _stream(args.stream)
    spark = spark_for(settings, app_name="eventtime-live-stream")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    def on_flush(batches: list[dict]) -> None:
        for summary in batches:
            pipes.report_custom_message({"kind": "batch", **_row(summary)})

    def on_ingest(report) -> None:
        pipes.report_custom_message({"kind": "ingest", "stream": stream.name,
                                     **_ingest_message(report)})

    def on_switch(done) -> None:
        pipes.report_custom_message({"kind": "switch", "stream": stream.name,
                                     **done.as_metadata()})

    report = stream_job(spark, stream, trigger=args.trigger, poll_s=args.poll,
                        duration_s=args.duration, max_batches=args.max_batches,
                        metrics_interval_s=args.metrics_interval, stop=stop, progress=progress,
                        on_ingest=on_ingest, on_flush=on_flush, on_switch=on_switch)
    metrics: dict[str, dict] = {}
    for key, days in report.days.items():
        pipeline = report.versions[key]
        metrics[key] = {"pipeline": pipeline.name, "version": pipeline.version,
                        "first_day": days[0], "last_day": days[1], "metrics": [] if
                        pipeline.spec.is_process else
                        [_row(row.asDict()) for row in spark.read.format("delta")
                         .load(pipeline.table_path(tables.LATE_DATA_METRICS))
                         .where(F.col("window_end_date").between(*days))
                         .orderBy("window_end_date").collect()]}
    pipes.report_custom_message({"kind": "stopped", "stream": stream.name,
                                 "batches": len(report.batches), "pipelines": metrics})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", help="the stream to run (default: the only one)")
    parser.add_argument("--long-running", action="store_true",
                        help="run the long-running live stream instead of one increment")
    parser.add_argument("--trigger", default="10 seconds",
                        help="micro-batch interval of the stream (Spark's processing time)")
    parser.add_argument("--poll", type=float, default=1.0,
                        help="seconds between ingests of new landing files")
    parser.add_argument("--max-batches", type=int, default=0, help="stop after N (0: never)")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="stop after this many seconds (0: never)")
    parser.add_argument("--metrics-interval", type=float, default=5.0,
                        help="seconds between late-data metric updates (each reported)")
    args = parser.parse_args(argv)
    with open_dagster_pipes() as pipes:
        under_dagster = PipesEnvVarParamsLoader().is_dagster_pipes_process()
        progress = pipes.log.info if under_dagster else print
        if args.long_running:
            run_stream(pipes, progress, args)
        else:
            run_once(pipes, progress, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
