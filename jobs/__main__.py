"""Run the platform's jobs from the command line, without Dagster.

    python -m jobs ingest
    python -m jobs backfill [--from 2026-01-01] [--to 2026-01-02]
    python -m jobs live                      # ingest what is new, update the tables, stop
    python -m jobs live --trigger "2 seconds" [--duration 600]   # the long-running job
    python -m jobs nexmark q5 [--mode backfill|live] [--param window_size_ms=10000 ...]

Settings come from the ``PLATFORM_*`` environment variables (README, "Configuration"). Every
argument and setting is checked before Spark starts; a wrong one exits with status 2 and one
message naming it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal
import sys
import threading


def _day(text: str) -> str:
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a day like 2026-01-31, got {text!r}") \
            from None


def _interval(text: str) -> str:
    if text == "available_now":
        return text
    parts = text.split()
    units = ("second", "seconds", "minute", "minutes", "millisecond", "milliseconds")
    if len(parts) != 2 or not parts[0].replace(".", "", 1).isdigit() or parts[1] not in units:
        raise argparse.ArgumentTypeError(
            f"expected 'available_now' or an interval like '2 seconds', got {text!r}")
    return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ingest", help="append new landing files to the arrival log")
    backfill = commands.add_parser("backfill", help="recompute a range of daily partitions")
    backfill.add_argument("--from", dest="first_day", type=_day, help="first day (YYYY-MM-DD)")
    backfill.add_argument("--to", dest="last_day", type=_day, help="last day (YYYY-MM-DD)")
    live = commands.add_parser("live", help="ingest and run the live stream")
    live.add_argument("--trigger", default="available_now", type=_interval,
                      help="'available_now' (ingest what is new, process it, stop) or an "
                           "interval such as '2 seconds' (keep ingesting and streaming until "
                           "interrupted)")
    live.add_argument("--no-ingest", action="store_true",
                      help="only process what is already in the arrival log")
    live.add_argument("--checkpoint", help="checkpoint folder inside the warehouse (default: "
                                           "<warehouse>/_checkpoints/live)")
    live.add_argument("--max-files-per-trigger", type=int)
    live.add_argument("--duration", type=float, default=0.0,
                      help="with an interval trigger: stop after this many seconds (0: never)")
    live.add_argument("--metrics-interval", type=float, default=60.0,
                      help="with an interval trigger: seconds between late-data metric updates")
    nexmark = commands.add_parser("nexmark", help="run a Nexmark query over the arrival log")
    nexmark.add_argument("query", choices=["q5", "q7", "q8", "q11", "q12"])
    nexmark.add_argument("--mode", choices=["backfill", "live"], default="backfill")
    nexmark.add_argument("--param", action="append", default=[], metavar="NAME=MS",
                         help="query parameter, e.g. window_size_ms=10000 (docs/nexmark.md)")
    nexmark.add_argument("--max-files-per-trigger", type=int)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    parameters = {}
    for item in getattr(args, "param", []):
        name, _, value = item.partition("=")
        if not value.isdigit():
            parser.error(f"--param {item!r}: expected NAME=<milliseconds>")
        parameters[name] = int(value)
    if args.command == "backfill" and args.first_day and args.last_day \
            and args.first_day > args.last_day:
        parser.error(f"--from {args.first_day} is after --to {args.last_day}")
    if getattr(args, "max_files_per_trigger", None) is not None and args.max_files_per_trigger < 1:
        parser.error("--max-files-per-trigger must be at least 1")

    from jobs.settings import PlatformSettings, SettingsError

    try:
        settings = PlatformSettings.from_env()
        checkpoint = getattr(args, "checkpoint", None)
        if checkpoint:  # a path from the command line may not reach outside the warehouse
            checkpoint = settings.inside_warehouse(checkpoint, "--checkpoint")
        if args.command == "live":
            from jobs.runtime import check_runnable

            check_runnable(settings.pipeline)
    except (SettingsError, ValueError) as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    if args.command == "nexmark":  # a wrong parameter fails before Spark starts
        from jobs.nexmark_job import make_query

        try:
            make_query(args.query, parameters)
        except ValueError as error:
            print(f"configuration error: --param: {error}", file=sys.stderr)
            return 2
    from jobs.spark import spark_for

    spark = spark_for(settings)
    if args.command == "ingest":
        from jobs.ingest import ingest

        ingest(spark, settings)
    elif args.command == "backfill":
        from jobs.backfill import run_backfill

        report = run_backfill(spark, settings, args.first_day, args.last_day)
        print(report.summary())
    elif args.command == "nexmark":
        from jobs import nexmark_job

        if args.mode == "backfill":
            nexmark_job.run_backfill(spark, settings, args.query, parameters)
        else:
            report = nexmark_job.run_live(spark, settings, args.query, parameters,
                                          max_files_per_trigger=args.max_files_per_trigger)
            print(f"nexmark {args.query} live: {len(report.batches)} micro-batches, "
                  f"{report.rows} rows, {report.late} late")
    elif args.trigger == "available_now":
        from jobs.live import run_live

        if not args.no_ingest:
            from jobs.ingest import ingest

            ingest(spark, settings)
        run_live(spark, settings, checkpoint=checkpoint,
                 max_files_per_trigger=args.max_files_per_trigger)
    else:
        from jobs.live import run_stream

        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        print("live: running until interrupted (Ctrl-C stops it; the checkpoint keeps its "
              "place)")
        run_stream(spark, settings, trigger=args.trigger, checkpoint=checkpoint,
                   duration_s=args.duration, metrics_interval_s=args.metrics_interval,
                   stop=stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
