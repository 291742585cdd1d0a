"""Run the platform's jobs from the command line, without Dagster.

    python -m jobs settings [--markdown]     # every setting: default, value, origin
    python -m jobs pipelines                 # every pipeline: stream, version, tables, state
    python -m jobs ingest [--stream events]  # every stream's new landing files
    python -m jobs backfill [--pipeline per_minute ...] [--from 2026-01-01] [--to 2026-01-02]
    python -m jobs live [--pipeline per_minute ...]   # ingest what is new, update, stop
    python -m jobs live --trigger "2 seconds" [--duration 600]   # the long-running job
    python -m jobs rollout NAME              # compute a changed pipeline's new version, switch
    python -m jobs kafka [--topic events:4]  # an Apache Kafka broker on 127.0.0.1:9092
    python -m jobs nexmark q5 [--mode backfill|live] [--param window_size_ms=10000 ...]

Settings come from the ``PLATFORM_*`` environment variables (docs/settings.md); the
pipelines and streams from the folders ``PLATFORM_PIPELINES`` and ``PLATFORM_STREAMS`` name.
Every argument, setting and description is checked before Spark starts; a wrong one exits
with status 2 and one message naming it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.config.registry import platform_of

if TYPE_CHECKING:
    from jobs.config.registry import Pipeline
    from jobs.config.settings import PlatformSettings
    from jobs.config.streams import Stream
    from jobs.console.interrupts import StopRequests


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
    reference = commands.add_parser("settings", help="every setting: its default, its value "
                                                     "now and where that came from")
    reference.add_argument("--markdown", action="store_true",
                           help="the reference page (docs/settings.md) instead")
    listing = commands.add_parser("pipelines", help="list every pipeline: its stream, version, "
                                                    "tables and state")
    listing.add_argument("--json", action="store_true", help="one JSON object per pipeline")
    checking = commands.add_parser(
        "check", help="check pipeline descriptions as every entry point does: their format, "
                      "the stream they read, what the runtimes can run (no files: the "
                      "settings and both folders)")
    checking.add_argument("files", nargs="*", help="pipeline description files (.yaml, .json)")
    ingest = commands.add_parser("ingest", help="append new landing files to the arrival logs")
    ingest.add_argument("--stream", action="append", default=[], metavar="NAME",
                        help="only this stream (repeatable; default: every stream)")
    backfill = commands.add_parser("backfill", help="recompute a range of daily partitions")
    backfill.add_argument("--pipeline", action="append", default=[], metavar="NAME",
                          help="only this pipeline (repeatable; default: every pipeline)")
    backfill.add_argument("--from", dest="first_day", type=_day, help="first day (YYYY-MM-DD)")
    backfill.add_argument("--to", dest="last_day", type=_day, help="last day (YYYY-MM-DD)")
    live = commands.add_parser("live", help="ingest and run the live stream of each stream")
    live.add_argument("--pipeline", action="append", default=[], metavar="NAME",
                      help="only this pipeline (repeatable; default: every pipeline of every "
                           "stream)")
    live.add_argument("--trigger", default="available_now", type=_interval,
                      help="'available_now' (ingest what is new, process it, stop) or an "
                           "interval such as '2 seconds' (keep ingesting and streaming until "
                           "interrupted)")
    live.add_argument("--no-ingest", action="store_true",
                      help="only process what is already in the arrival log")
    live.add_argument("--checkpoint", help="checkpoint folder inside the warehouse (one stream "
                                           "only; default: the cohorts' own, <warehouse>/"
                                           "streams/<stream>/_checkpoints/live-*)")
    live.add_argument("--max-files-per-trigger", type=int,
                      help="arrival-log files per micro-batch at most (default: as many as "
                           "the stream's max_bytes_per_micro_batch allows)")
    live.add_argument("--duration", type=float, default=0.0,
                      help="with an interval trigger: stop after this many seconds (0: never)")
    live.add_argument("--metrics-interval", type=float, default=60.0,
                      help="with an interval trigger: seconds between late-data metric updates")
    rolling = commands.add_parser("rollout", help="compute a changed pipeline's new version "
                                                  "from the arrival log, then switch readers "
                                                  "to it (without the long-running job)")
    rolling.add_argument("pipeline", metavar="NAME", help="the pipeline whose file changed")
    rolling.add_argument("--no-ingest", action="store_true",
                         help="only use what is already in the arrival log")
    rolling.add_argument("--max-files-per-trigger", type=int,
                         help="arrival-log files per micro-batch (default: all at once)")
    broker = commands.add_parser("kafka", help="run an Apache Kafka broker (KRaft, in its own "
                                               "JVM, jars from Maven Central) on 127.0.0.1 "
                                               "until interrupted")
    broker.add_argument("--port", type=int, default=9092)
    broker.add_argument("--data", help="its folder (default: <PLATFORM_HOME>/kafka)")
    broker.add_argument("--topic", action="append", default=[], metavar="NAME[:PARTITIONS]",
                        help="create this topic if it is not there (repeatable)")
    nexmark = commands.add_parser("nexmark", help="run a Nexmark query over a stream's "
                                                  "arrival log")
    nexmark.add_argument("query", choices=["q5", "q7", "q8", "q11", "q12"])
    nexmark.add_argument("--stream", help="the stream holding the Nexmark events (default: "
                                          "the only stream)")
    nexmark.add_argument("--mode", choices=["backfill", "live"], default="backfill")
    nexmark.add_argument("--param", action="append", default=[], metavar="NAME=MS",
                         help="query parameter, e.g. window_size_ms=10000 (docs/nexmark.md)")
    nexmark.add_argument("--max-files-per-trigger", type=int)
    return parser


@dataclass
class Plan:
    """What a command runs, checked: the streams to ingest, the pipelines per stream."""

    settings: PlatformSettings
    streams: list[Stream] = field(default_factory=list)
    pipelines: dict[Stream, list[Pipeline]] = field(default_factory=dict)
    checkpoint: str | None = None


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

    from jobs.config.errors import SettingsError
    from jobs.console.interrupts import StopRequests
    from jobs.console.storage_faults import is_out_of_space, out_of_space_line

    if args.command == "settings":
        return _settings(args.markdown)
    if args.command == "check":
        return _check(args.files)
    stops = StopRequests().install()
    if args.command == "kafka":
        return _kafka(args, stops)
    try:
        plan = _checked(args)
    except (SettingsError, ValueError) as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Interrupted too
        return _interrupted(args, stops)
    try:
        _run(args, plan, parameters, stops)
        stops.raise_if_stopped()  # a signal the run heard out (the long-running job's)
        return 0
    except SettingsError as error:  # found only once Spark reads (a remote location)
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Interrupted too
        return _interrupted(args, stops)
    except _expected_errors() as error:
        if stops.signum is not None:
            return _interrupted(args, stops)
        print(f"{args.command}: error: {error}", file=sys.stderr)
        return 1
    except Exception as error:
        if stops.signum is not None:  # a Spark job cancelled by the signal fails its caller
            return _interrupted(args, stops)
        if is_out_of_space(error):
            print(out_of_space_line(args.command, _locations(plan.settings)), file=sys.stderr)
            _stop_spark()
            return 1
        raise


def _locations(settings: PlatformSettings) -> dict[str, str]:
    """The folders a command writes, by the setting that names them (a full disk is said by
    the one with the least space left)."""
    import tempfile

    return {"PLATFORM_WAREHOUSE": settings.warehouse, "PLATFORM_LANDING": settings.landing,
            "PLATFORM_HOME": settings.home, "the temporary folder": tempfile.gettempdir()}


def _check(files: list[str]) -> int:
    """The platform's own check of descriptions (jobs.config.registry), the one every entry
    point runs, Dagster's included: a line per file, ``ok`` or what is wrong; status 2 if any
    is wrong."""
    from pathlib import Path

    from jobs.config.errors import SettingsError
    from jobs.config.registry import load_pipeline_file, load_streams
    from jobs.config.settings import PlatformSettings

    try:
        settings = PlatformSettings.from_env()
        if not files:
            for pipeline in platform_of(settings).pipelines.values():
                print(f"{pipeline.path}: ok (reads stream {pipeline.stream.name}, version "
                      f"{pipeline.version})")
            return 0
        streams = load_streams(settings)
    except SettingsError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    status = 0
    for file in files:
        try:
            spec = load_pipeline_file(Path(file), streams)
        except SettingsError as error:
            print(f"configuration error: {error}", file=sys.stderr)
            status = 2
        else:
            print(f"{file}: ok (reads stream {spec.source})")
    return status


def _interrupted(args: argparse.Namespace, stops: StopRequests) -> int:
    """The one line a stopped command ends with (docs/operations.md, "Stopping"), after
    Spark's session is stopped so that no process of the command outlives it."""
    import signal as signals

    from jobs.console.interrupts import Interrupted

    stopped = Interrupted(stops.signum if stops.signum is not None else signals.SIGINT)
    _stop_spark()
    if args.command == "live" and args.trigger != "available_now":
        said = ("stopped; every micro-batch reported is committed and the checkpoints keep "
                "their place: run the same command to go on")
    else:
        said = ("nothing committed is lost and nothing half-done counts: run the same "
                "command again to finish")
    print(f"{args.command}: interrupted by {stopped}; {said}", file=sys.stderr)
    return stopped.status


def _stop_spark(timeout_s: float = 30.0) -> None:
    """Stop the session, if one runs, within ``timeout_s`` (the JVM then exits, and its
    Python workers with it)."""
    if "pyspark" not in sys.modules:
        return
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return
    stopping = threading.Thread(target=session.stop, name="stop-spark", daemon=True)
    stopping.start()
    stopping.join(timeout_s)


def _checked(args: argparse.Namespace) -> Plan:
    """The settings, streams and pipelines, checked against the command before Spark starts
    (jobs.config, jobs.streams.checks): every mistake found here is one line naming the
    setting, status 2."""
    import os

    from jobs.config.arguments import check_day_range
    from jobs.config.errors import SettingsError
    from jobs.config.settings import PlatformSettings
    from jobs.config.settings_reference import check_variable_names
    from jobs.lifecycle import versions
    from jobs.live.cohorts import check_claim, member_of
    from jobs.live.queries import DEFAULT_BUCKETS, all_live
    from jobs.streams.checks import check_ingested, check_landing, check_stream_mark

    for warning in check_variable_names(os.environ):
        print(warning, file=sys.stderr)
    if args.command == "backfill":
        check_day_range(args.first_day, args.last_day)
    settings = PlatformSettings.from_env()
    platform = platform_of(settings)
    plan = Plan(settings)
    if args.command == "pipelines":
        return plan
    if args.command == "ingest":
        plan.streams = platform.select_streams(args.stream)
        for stream in plan.streams:
            check_landing(stream)
            check_stream_mark(stream, remember=False)
        return plan
    if args.command == "nexmark":
        names = [args.stream] if args.stream else []
        if not names and len(platform.streams) != 1:
            raise SettingsError(f"--stream: give the stream holding the Nexmark events (one "
                                f"of {', '.join(platform.streams)})")
        plan.streams = platform.select_streams(names)
        check_ingested(plan.streams[0])
        return plan
    selection = [args.pipeline] if args.command == "rollout" else args.pipeline
    plan.pipelines = platform.by_stream(platform.select_pipelines(selection))
    ingests = args.command in ("live", "rollout") and not args.no_ingest
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint and len(plan.pipelines) > 1:
        raise SettingsError(f"--checkpoint: the pipelines read {len(plan.pipelines)} streams "
                            f"({', '.join(s.name for s in plan.pipelines)}), each with a "
                            "checkpoint of its own; give --pipeline of one stream")
    if checkpoint:  # a path from the command line may not reach outside the warehouse
        plan.checkpoint = settings.inside_warehouse(checkpoint, "--checkpoint")
    for pipelines in plan.pipelines.values():
        for pipeline in pipelines:  # a source changed is named first: nothing else applies
            versions.check_same_source(pipeline)
    for stream, pipelines in plan.pipelines.items():
        if ingests:
            check_landing(stream)
            check_stream_mark(stream, remember=False)
            plan.streams.append(stream)
        else:
            check_ingested(stream)
        if args.command == "live" and plan.checkpoint:
            check_claim(plan.checkpoint, stream, pipelines, DEFAULT_BUCKETS,
                        still_live=[member_of(p) for p in all_live(stream)])
    return plan


def _settings(markdown: bool) -> int:
    """The settings reference: the page, or every setting with its value in force."""
    import os

    from jobs.config.errors import SettingsError
    from jobs.config.settings import PlatformSettings
    from jobs.config.settings_reference import (
        check_variable_names,
        reference_rows,
        render_markdown,
        render_text,
    )

    if markdown:
        print(render_markdown(), end="")
        return 0
    try:
        warnings = check_variable_names(os.environ)
        settings = PlatformSettings.from_env(check=False)
    except SettingsError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    print(render_text(reference_rows(settings, os.environ)))
    for warning in warnings:
        print(warning, file=sys.stderr)
    return 0


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that are a state of the data, not a bug: one line, no traceback."""
    from jobs.backfill import BackfillRaceError
    from jobs.streams.landing.ingestor import (
        ConcurrentIngestError,
        LandingReadError,
        StaleWarehouseError,
    )
    from operators.process_pipeline import ProcessFunctionError

    return (ConcurrentIngestError, LandingReadError, StaleWarehouseError, BackfillRaceError,
            ProcessFunctionError)


def _list(plan: Plan, as_json: bool) -> int:
    import json

    from jobs.lifecycle.status import platform_states, render

    states = platform_states(platform_of(plan.settings))
    if as_json:
        for state in states:
            print(json.dumps(state.as_dict()))
    else:
        print(render(states, plan.settings.warehouse,
                     retention_ms=plan.settings.versions_retention_ms))
    return 0


def _run(args: argparse.Namespace, plan: Plan, parameters: dict[str, int],
         stops: StopRequests) -> None:
    from jobs.store import storage

    settings = plan.settings
    if args.command == "pipelines":
        _list(plan, args.json)
        return
    once = args.command in ("ingest", "rollout") or (args.command == "live"
                                                     and args.trigger == "available_now")
    if once and storage.is_local(settings.warehouse):
        # a local warehouse needs no JVM to ingest: the ingest log is plain files and the
        # appends go through deltalake (jobs.store.fast_writes), so ingest answers in seconds
        # and Spark starts only if there is something to stream
        from jobs.store.fast_writes import table_exists
        from jobs.streams.ingestors import ingest

        for stream in plan.streams:
            ingest(None, stream)
        if args.command == "ingest":
            return
        waiting = [s for s in plan.pipelines if not table_exists(s.arrival_log)]
        for stream in waiting:
            print(f"{args.command} {stream.name}: nothing to do: {stream.nothing_yet}")
            del plan.pipelines[stream]
        if not plan.pipelines:
            return
        plan.streams = []  # ingested
    if args.command == "backfill":
        from jobs.backfill import BackfillReport, nothing_to_backfill

        todo = {s: [p for p in ps if not nothing_to_backfill(p, args.first_day, args.last_day)]
                for s, ps in plan.pipelines.items()}
        for pipelines in plan.pipelines.values():
            for pipeline in pipelines:
                if pipeline not in todo[pipeline.stream]:
                    print(BackfillReport(args.first_day, args.last_day, 0, 0, [],
                                         pipeline.name).summary())
        plan.pipelines = {s: ps for s, ps in todo.items() if ps}
        if not plan.pipelines:
            return
    if args.command == "rollout" and not _pending_rollouts(plan):
        return
    from jobs.session import spark_for

    spark = spark_for(settings)
    stops.install()  # again: PySpark's SparkContext installed its own SIGINT handler
    long_running = args.command == "live" and args.trigger != "available_now"
    stops.cancel_with((lambda: None) if long_running  # its streams stop between batches
                      else spark.sparkContext.cancelAllJobs)
    if args.command == "ingest":
        from jobs.streams.ingestors import ingest

        for stream in plan.streams:
            ingest(spark, stream, check_stop=stops.raise_if_stopped)
    elif args.command == "backfill":
        from jobs.backfill import run_backfill

        for pipelines in plan.pipelines.values():
            for pipeline in pipelines:  # each prints its summary
                stops.raise_if_stopped()
                run_backfill(spark, pipeline, args.first_day, args.last_day)
    elif args.command == "nexmark":
        from jobs import nexmark_job

        stream = plan.streams[0]
        if args.mode == "backfill":
            nexmark_job.run_backfill(spark, stream, args.query, parameters)
        else:
            report = nexmark_job.run_live(spark, stream, args.query, parameters,
                                          max_files_per_trigger=args.max_files_per_trigger)
            print(f"nexmark {args.query} live: {len(report.batches)} micro-batches, "
                  f"{report.rows} rows, {report.late} late{report.hint}")
    elif args.command == "rollout":
        from jobs.live.catch_up import run_rollout
        from jobs.streams.ingestors import ingest

        for stream in plan.streams:
            ingest(spark, stream, check_stop=stops.raise_if_stopped)
        for pipelines in plan.pipelines.values():
            for pipeline in pipelines:
                stops.raise_if_stopped()
                run_rollout(spark, pipeline,
                            max_files_per_trigger=args.max_files_per_trigger)
    elif args.trigger == "available_now":
        from jobs.live import run_live
        from jobs.store.delta_io import table_exists
        from jobs.streams.ingestors import ingest

        for stream, pipelines in plan.pipelines.items():
            if stream in plan.streams:
                ingest(spark, stream, check_stop=stops.raise_if_stopped)
            if not table_exists(spark, stream.arrival_log):
                print(f"live {stream.name}: nothing to do: {stream.nothing_yet}")
                continue
            stops.raise_if_stopped()
            run_live(spark, stream, pipelines, checkpoint=plan.checkpoint,
                     max_files_per_trigger=args.max_files_per_trigger)
    else:
        _run_long(spark, args, plan, stops.event)


def _kafka(args: argparse.Namespace, stops: StopRequests) -> int:
    """A broker for users and the demo, until SIGINT or SIGTERM (then stopped cleanly)."""
    from pathlib import Path

    from jobs.config.errors import SettingsError
    from jobs.config.settings import PlatformSettings
    from jobs.streams.kafka.broker import BrokerError, KafkaBroker, create_topics

    try:
        settings = PlatformSettings.from_env()
        topics = {}
        for item in args.topic:
            name, _, count = item.partition(":")
            if not name or (count and not count.isdigit()):
                raise SettingsError(f"--topic {item!r}: expected NAME or NAME:PARTITIONS")
            topics[name] = int(count or 1)
    except SettingsError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    folder = Path(args.data or Path(settings.home) / "kafka")
    broker = KafkaBroker(folder, args.port)
    try:
        broker.start()
        create_topics(broker.bootstrap_servers, topics)
        print(f"kafka: bootstrap servers {broker.bootstrap_servers}; Ctrl-C stops the broker "
              "(its data stays in " f"{folder})", flush=True)
        stops.event.wait()
    except BrokerError as error:
        print(f"kafka: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    signum = stops.signum or 2
    print(f"kafka: interrupted by {'SIGINT' if signum == 2 else 'SIGTERM'}; the broker "
          f"stopped cleanly, its data kept in {folder}", file=sys.stderr)
    return 130 if signum == 2 else 143


def _pending_rollouts(plan: Plan) -> bool:
    """Whether a rollout has anything to compute, said before Spark starts when not (the
    file's version already serves, or was restored and serves again)."""
    from jobs.lifecycle import versions

    for stream, pipelines in list(plan.pipelines.items()):
        for pipeline in list(pipelines):
            said = versions.reconcile(pipeline, first_serves_at_once=False).said(pipeline)
            if said:
                print(said)
            if not versions.pending(pipeline):
                print(f"rollout {pipeline.name}: nothing to roll out: version "
                      f"{pipeline.version}, its file's, is the one readers see")
                pipelines.remove(pipeline)
        if not pipelines:
            del plan.pipelines[stream]
    return bool(plan.pipelines)


def _run_long(spark, args: argparse.Namespace, plan: Plan, stop: threading.Event) -> None:
    """The long-running job: one live stream per stream (each ingesting its landing files),
    side by side in this process, until interrupted."""
    from jobs.live import run_stream

    print("live: running until interrupted (Ctrl-C stops it; the checkpoints keep their "
          "place)")
    failures: list[BaseException] = []

    def run(stream: Stream, pipelines: list[Pipeline]) -> None:
        try:
            run_stream(spark, stream, pipelines, trigger=args.trigger,
                       checkpoint=plan.checkpoint, duration_s=args.duration,
                       metrics_interval_s=args.metrics_interval, stop=stop,
                       max_files_per_trigger=args.max_files_per_trigger)
        except BaseException as error:
            failures.append(error)
            stop.set()  # one stream failing stops the others cleanly

    threads = [threading.Thread(target=run, args=item, name=f"live-{item[0].name}")
               for item in plan.pipelines.items()]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(timeout=0.5)
    if failures:
        raise failures[0]


if __name__ == "__main__":
    sys.exit(main())
