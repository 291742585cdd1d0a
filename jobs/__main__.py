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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.settings import PlatformSettings


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
    if getattr(args, "max_files_per_trigger", None) is not None and args.max_files_per_trigger < 1:
        parser.error("--max-files-per-trigger must be at least 1")
    if args.command == "live" and args.duration < 0:
        parser.error(f"--duration must be 0 (never stop) or more, got {args.duration:g}")
    if args.command == "live" and args.metrics_interval <= 0:
        parser.error(f"--metrics-interval must be more than 0 seconds, got "
                     f"{args.metrics_interval:g}")

    if args.command == "nexmark":  # a wrong parameter fails before Spark starts
        from jobs.nexmark_job import make_query

        try:
            make_query(args.query, parameters)
        except ValueError as error:
            print(f"configuration error: --param: {error}", file=sys.stderr)
            return 2

    from jobs.settings import SettingsError

    try:
        settings, checkpoint = _checked(args)
    except (SettingsError, ValueError) as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    try:
        return _run(args, settings, checkpoint, parameters)
    except SettingsError as error:  # found only once Spark reads (a remote location)
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{args.command}: interrupted; nothing committed is lost and nothing half-done "
              "counts: run the same command again to finish", file=sys.stderr)
        return 130
    except _expected_errors() as error:
        print(f"{args.command}: error: {error}", file=sys.stderr)
        return 1


def _checked(args: argparse.Namespace) -> tuple[PlatformSettings, str | None]:
    """The settings and the live checkpoint, checked against the command before Spark starts
    (jobs/checks.py): every mistake found here is one line naming the setting, status 2."""
    import os

    from jobs import checks
    from jobs.settings import PlatformSettings

    checks.check_variable_names(os.environ)
    if args.command == "backfill":
        checks.check_day_range(args.first_day, args.last_day)
    settings = PlatformSettings.from_env()
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint:  # a path from the command line may not reach outside the warehouse
        checkpoint = settings.inside_warehouse(checkpoint, "--checkpoint")
    ingests = args.command == "ingest" or (args.command == "live" and not args.no_ingest)
    if ingests:
        checks.check_landing(settings)
    else:
        checks.check_ingested(settings)
    if args.command == "live":
        from jobs.live.stream import DEFAULT_BUCKETS, default_checkpoint
        from jobs.runtime import check_runnable

        check_runnable(settings.pipeline)
        checks.check_checkpoint(checkpoint or default_checkpoint(settings), settings.pipeline,
                                DEFAULT_BUCKETS)
    if args.command != "nexmark":  # Nexmark's tables do not depend on the pipeline
        checks.check_pipeline_mark(settings, remember=True)
    return settings, checkpoint


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that are a state of the data, not a bug: one line, no traceback."""
    from jobs.backfill import BackfillRaceError
    from jobs.ingest import ConcurrentIngestError, LandingReadError, StaleWarehouseError

    return (ConcurrentIngestError, LandingReadError, StaleWarehouseError, BackfillRaceError)


def _run(args: argparse.Namespace, settings: PlatformSettings, checkpoint: str | None,
         parameters: dict[str, int]) -> int:
    from jobs import storage
    from jobs.spark import spark_for

    once = args.command == "ingest" or (args.command == "live"
                                        and args.trigger == "available_now")
    if once and storage.is_local(settings.warehouse):
        # a local warehouse needs no JVM to ingest: the ingest log is plain files and the
        # appends go through deltalake (jobs/fast_writes.py), so ingest answers in seconds
        # and Spark starts only if there is something to stream
        from jobs.ingest import ingest

        if args.command == "ingest" or not args.no_ingest:
            ingest(None, settings)
        if args.command == "ingest":
            return 0
        from jobs.fast_writes import table_exists

        if not table_exists(settings.table_path("arrival_log")):
            print(f"live: nothing to do: nothing has landed in {settings.landing} yet")
            return 0
        args.no_ingest = True
    if args.command == "backfill":
        from jobs.backfill import BackfillReport
        from jobs.checks import nothing_to_backfill

        if nothing_to_backfill(settings, args.first_day, args.last_day):
            print(BackfillReport(args.first_day, args.last_day, 0, 0, []).summary())
            return 0
    spark = spark_for(settings)
    if args.command == "ingest":
        from jobs.ingest import ingest

        ingest(spark, settings)
    elif args.command == "backfill":
        from jobs.backfill import run_backfill

        run_backfill(spark, settings, args.first_day, args.last_day)  # prints its summary
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
        from jobs.delta_io import table_exists
        from jobs.live import run_live

        if not args.no_ingest:
            from jobs.ingest import ingest

            ingest(spark, settings)
        if not table_exists(spark, settings.table_path("arrival_log")):
            print(f"live: nothing to do: nothing has landed in {settings.landing} yet")
            return 0
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
