"""Run the platform's jobs from the command line, without Dagster.

    python -m jobs ingest
    python -m jobs backfill [--from 2026-01-01] [--to 2026-01-02]
    python -m jobs live [--trigger available_now | "10 seconds"] [--max-files-per-trigger N]
    python -m jobs nexmark q5 [--mode backfill|live] [--param window_size_ms=10000 ...]

Settings come from the ``PLATFORM_*`` environment variables (README, "Configuration").
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ingest", help="append new landing files to the arrival log")
    backfill = commands.add_parser("backfill", help="recompute a range of daily partitions")
    backfill.add_argument("--from", dest="first_day", help="first day (YYYY-MM-DD)")
    backfill.add_argument("--to", dest="last_day", help="last day (YYYY-MM-DD)")
    live = commands.add_parser("live", help="run the live stream over the arrival log")
    live.add_argument("--trigger", default="available_now",
                      help="'available_now' (process what is there, then stop) or an interval "
                           "such as '10 seconds' (keep running until interrupted)")
    live.add_argument("--checkpoint", help="checkpoint folder inside the warehouse (default: "
                                           "<warehouse>/_checkpoints/live)")
    live.add_argument("--max-files-per-trigger", type=int)
    nexmark = commands.add_parser("nexmark", help="run a Nexmark query over the arrival log")
    nexmark.add_argument("query", choices=["q5", "q7", "q8", "q11", "q12"])
    nexmark.add_argument("--mode", choices=["backfill", "live"], default="backfill")
    nexmark.add_argument("--param", action="append", default=[], metavar="NAME=MS",
                         help="query parameter, e.g. window_size_ms=10000 (docs/nexmark.md)")
    nexmark.add_argument("--max-files-per-trigger", type=int)
    args = parser.parse_args(argv)
    parameters = {}
    for item in getattr(args, "param", []):
        name, _, value = item.partition("=")
        if not value.isdigit():
            parser.error(f"--param {item!r}: expected NAME=<milliseconds>")
        parameters[name] = int(value)

    from jobs.settings import PlatformSettings, SettingsError

    try:
        settings = PlatformSettings.from_env()
    except SettingsError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint:  # a path from the command line may not reach outside the warehouse
        try:
            checkpoint = str(settings.inside_warehouse(checkpoint, "--checkpoint"))
        except SettingsError as error:
            print(f"configuration error: {error}", file=sys.stderr)
            return 2
    if args.command == "nexmark":  # a wrong parameter fails before Spark starts
        from jobs.nexmark_job import make_query

        try:
            make_query(args.query, parameters)
        except ValueError as error:
            print(f"configuration error: --param: {error}", file=sys.stderr)
            return 2
    from jobs.spark import get_spark

    spark = get_spark()
    if args.command == "ingest":
        from jobs.ingest import ingest

        ingest(spark, settings)
    elif args.command == "backfill":
        from jobs.windowed import run_backfill

        report = run_backfill(spark, settings, args.first_day, args.last_day)
        print(f"backfill {report.first_day} .. {report.last_day}: {report.results} result rows, "
              f"{report.late} late records")
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

        run_live(spark, settings, checkpoint=checkpoint,
                 max_files_per_trigger=args.max_files_per_trigger)
    else:
        from jobs.live import start_live

        query, _ = start_live(spark, settings, trigger=args.trigger, checkpoint=checkpoint,
                              max_files_per_trigger=args.max_files_per_trigger)
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            print("stopping the live stream (the checkpoint keeps its place)")
            query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
