"""The platform's main job on the embedded default, from the command line.

Generates the demo landing files (``--source kafka``: produces the events into a topic of the
project's own Kafka broker instead, platform_defs.demo_kafka), then materialises the whole
asset graph through Dagster (so every run shows up in the UI, stored in the local
``DAGSTER_HOME``), and prints where everything is.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from zoneinfo import ZoneInfo

from jobs.config.errors import SettingsError, causes
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import add_lateness_arguments, lateness_options
from platform_defs.instance import ensure_instance_config

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}
DEMO_RECORD = "demo.json"
DEMO_DAYS = 3
"""Whole days of events, ending at today's midnight in ``PLATFORM_TIME_ZONE``."""
LEGACY_START = "2026-01-01T00:00:00Z"
"""Where a demo recorded before the start was chosen put its events."""


def recent_start(time_zone: str, days: int = DEMO_DAYS, today: dt.date | None = None) -> str:
    """Midnight ``days`` days before today in ``time_zone``, as an ISO instant: the demo's
    events fill the last ``days`` whole days, so the UI's per-partition plots (which show the
    most recent partitions) have points on the first visit."""
    zone = ZoneInfo(time_zone)
    today = today or dt.datetime.now(zone).date()
    start = dt.datetime.combine(today - dt.timedelta(days=days), dt.time(), tzinfo=zone)
    return start.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _check_same_demo(home: Path, options: dict, time_zone: str) -> tuple[str | None, dict]:
    """The landing folder keeps what earlier demos wrote, and ingest takes each file once: a
    second demo with other options would mix two data sets (and skip the files whose names
    repeat). Refuse that, with what to do; the same options again are a harmless re-run, on
    the days the first run chose (a later day does not make it a different data set).
    Returns the problem, or the generator's options with their first day."""
    record = home / DEMO_RECORD
    if record.exists():
        previous = json.loads(record.read_text(encoding="utf-8"))
        start = previous.pop("start", LEGACY_START)
        if previous != options:
            return (f"{home} already holds a demo generated with {previous}; these options "
                    f"are {options}. Delete {home} to start over, or pass --home <new "
                    "folder>."), {}
    else:
        start = recent_start(time_zone)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({**options, "start": start}, sort_keys=True),
                          encoding="utf-8")
    return None, {**options, "start": start, "duration": f"{DEMO_DAYS}d"}


def _prepare_environment(home: Path, explicit: bool) -> None:
    """``--home`` given on the command line wins over the environment (``./platform`` exports
    ``PLATFORM_HOME`` and ``DAGSTER_HOME`` for ``.platform``): data, tables and Dagster storage
    must all go to the folder the user named, or the guard above protects the wrong one."""
    if explicit:
        os.environ["PLATFORM_HOME"] = str(home)
        os.environ["DAGSTER_HOME"] = str(home / "dagster_home")
    os.environ.setdefault("PLATFORM_HOME", str(home))
    ensure_instance_config(Path(os.environ.setdefault("DAGSTER_HOME",
                                                      str(home / "dagster_home"))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./platform demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, default=None,
                        help="where data, tables and Dagster storage go (default "
                             "$PLATFORM_HOME, else .platform)")
    parser.add_argument("--events", type=int, default=50_000,
                        help=f"how many events to generate over the last {DEMO_DAYS} days (default "
                             "50000)")
    parser.add_argument("--seed", type=int, default=7,
                        help="the generator's seed: the same seed, the same events "
                             "(default 7)")
    parser.add_argument("--source", choices=("landing", "kafka"), default="landing",
                        help="where the events come from: landing files (default), or a topic "
                             "of an Apache Kafka broker the demo starts in <home>/kafka")
    add_lateness_arguments(parser)
    args = parser.parse_args(argv)
    options = {"events": args.events, "seed": args.seed, **lateness_options(args)}
    if args.source == "kafka":  # another data set than landing files': recorded as such
        options["source"] = "kafka"
    home = (args.home or Path(os.environ.get("PLATFORM_HOME", ".platform"))).absolute()
    try:
        time_zone = PlatformSettings.from_env(check=False).time_zone
    except SettingsError as error:  # one line, as every entry point says a bad setting
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    problem, generator = _check_same_demo(home, options, time_zone)
    if problem:
        print(f"demo: {problem}", file=sys.stderr)
        return 2
    _prepare_environment(home, explicit=args.home is not None)
    if args.source == "kafka":
        from platform_defs.demo_kafka import kafka_stream

        os.environ["PLATFORM_STREAMS"] = str(home / "streams")
        with kafka_stream(home) as broker:
            return _run(home, generator, broker)
    return _run(home, generator, None)


def _settings_error_in(error: BaseException) -> SettingsError | None:
    """The platform's one-line error that a failure at Dagster's load came from, if any."""
    return next((e for e in causes(error) if isinstance(e, SettingsError)), None)


def _run(home: Path, generator: dict, broker) -> int:
    """The asset graph over the stream; ``broker``: the demo's Kafka broker, whose topic
    gets the events instead of landing files."""
    from dagster import AssetKey, AssetSelection, DagsterInstance, materialize

    from jobs.session import SparkStartError
    from jobs.views.reports import log_day_range
    from platform_defs.schedules import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    try:
        from platform_defs.definitions import defs
    except Exception as error:  # Dagster's component tree wraps the platform's own error
        said = _settings_error_in(error)
        if said is None:
            raise
        print(f"configuration error: {said}", file=sys.stderr)
        return 2

    started = time.monotonic()
    instance = DagsterInstance.get()
    resources = defs.resources
    try:
        settings = resources["platform"].settings()
        platform = platform_of(settings)
    except SettingsError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2
    try:  # before Dagster, so a missing Java or unreachable Maven Central is one clear line
        spark = resources["spark"].session()
    except SparkStartError as error:
        print(f"demo: {error}", file=sys.stderr)
        return 1
    assets = list(defs.assets)
    what = "landing files" if broker is None else "Kafka topic"
    print(f"[1/3] {what} + ingest of {', '.join(platform.streams)} (Dagster home "
          f"{os.environ['DAGSTER_HOME']})")
    for stream in platform.streams.values():
        tables_of = ("arrival_log", "quarantine")
        run_config: dict = dict(QUIET_LOGS)
        if broker is None:
            tables_of = ("landing_files", *tables_of)
            run_config["ops"] = {f"{stream.name}__landing_files": {"config": generator}}
        else:
            _produce(broker, generator)
        keys = [AssetKey([stream.name, t]) for t in tables_of]
        result = materialize(assets, instance=instance, resources=resources,
                             selection=AssetSelection.assets(*keys), run_config=run_config)
        if not result.success:
            return 1
    for index, pipeline in enumerate(platform.pipelines.values(), start=1):
        days = log_day_range(spark, pipeline)
        if days is None:
            print(f"demo: no event reached the arrival log of {pipeline.stream.name}",
                  file=sys.stderr)
            return 1
        first_day, last_day = days
        print(f"[2/3] pipeline {pipeline.name} ({index} of {len(platform.pipelines)}): "
              f"partitions {first_day} .. {last_day} (one Spark job)")
        result = materialize(
            assets, instance=instance, resources=resources,
            selection=AssetSelection.assets(*[AssetKey([pipeline.name, t]) for t in
                                              _materialised(pipeline)]),
            tags={ASSET_PARTITION_RANGE_START_TAG: first_day,
                  ASSET_PARTITION_RANGE_END_TAG: last_day},
            run_config=QUIET_LOGS,
        )
        if not result.success:
            return 1
    if not _enrich(assets, instance, resources, platform):
        return 1
    print_summary(spark, settings, time.monotonic() - started)
    return 0


def _produce(broker, generator: dict) -> None:
    from platform_defs.demo_kafka import TOPIC, produce_events
    from platform_defs.stream_assets import LandingConfig

    config = LandingConfig(**{k: v for k, v in generator.items() if k != "source"})
    produced = produce_events(broker, config.generator_config())
    if produced is None:
        print(f"      topic {TOPIC} on {broker.bootstrap_servers} already holds the demo's "
              "events (produced by an earlier run): ingest takes what it has not read")
    else:
        print(f"      produced {produced:,} events into topic {TOPIC} on "
              f"{broker.bootstrap_servers}")


def _materialised(pipeline) -> tuple[str, ...]:
    """The tables a pipeline's Dagster run materialises (the others its runtimes write)."""
    if pipeline.spec.is_process:
        return ("output", "late_records")
    return ("window_results", "late_records", "late_data_metrics")


def _enrich(assets: list, instance, resources: dict, platform) -> bool:
    """The enrichment assets against the real user-catalogue service, started on a free
    loopback port for the demo and stopped after (production points the
    ``enrichment_service`` resource at its own service)."""
    from dagster import AssetKey, AssetSelection, materialize

    from platform_defs.enrichment_assets import EnrichmentServiceResource
    from services.enrichment_service import running_service

    keys = [AssetKey([stream, table]) for stream in platform.streams
            for table in ("enrichment_responses", "enriched_events", "enrichment_dead_letters")]
    with running_service(latency_ms=2) as service:
        print(f"[3/3] enrichment against the catalogue service at {service.base_url}")
        result = materialize(
            assets, instance=instance,
            resources={**resources, "enrichment_service": EnrichmentServiceResource(
                service_url=service.base_url, capacity=50)},
            selection=AssetSelection.assets(*keys), run_config=QUIET_LOGS)
    return result.success


def _print_days(spark, platform, prefix: str, dagster_home: str) -> None:
    """The days the demo wrote, and the README's commands on them: its examples name fixed
    dates, the demo's events fill the last days before today."""
    from jobs.views.reports import log_day_range

    windowed = [p for p in platform.pipelines.values() if not p.spec.is_process]
    days = log_day_range(spark, windowed[0]) if windowed else None
    if days is None:
        return
    first, last = days
    name = windowed[0].name
    tables = ",".join(f"{name}/{t}" for t in ("window_results", "late_records",
                                               "late_data_metrics"))
    print(f"\nThe demo's days are {first} .. {last}. The README's commands on them:\n"
          f"  {prefix}.venv/bin/python -m jobs backfill --pipeline {name} --from {first} "
          f"--to {last}\n"
          f"  {prefix}DAGSTER_HOME={dagster_home} .venv/bin/dagster asset materialize "
          f"-m platform_defs.definitions --select {tables} --partition {last}")


def print_summary(spark, settings, seconds: float) -> None:
    from jobs import tables
    from jobs.enrichment import DEAD_LETTERS, ENRICHED, RESPONSES
    from jobs.lifecycle import versions
    from jobs.views.reports import metric_totals, table_counts

    platform = platform_of(settings)
    print("\nTables (Delta) in", settings.warehouse)
    for stream in platform.streams.values():
        names = [tables.ARRIVAL_LOG, tables.QUARANTINE, ENRICHED, DEAD_LETTERS, RESPONSES]
        paths = {name: stream.table_path(name) for name in names}
        print(f"  stream {stream.name}")
        for name, rows in table_counts(spark, paths).items():
            shown = "-" if rows is None else rows
            print(f"    {name:<25} {shown:>9} rows   {paths[name]}")
    for pipeline in map(versions.serving_pipeline, platform.pipelines.values()):
        names = list(_materialised(pipeline))
        paths = {name: pipeline.table_path(name) for name in names}
        if pipeline.spec.is_process:
            print(f"  pipeline {pipeline.name} (stream {pipeline.stream.name}, version "
                  f"{pipeline.version}): process function {pipeline.spec.process}")
            for name, rows in table_counts(spark, paths).items():
                shown = "-" if rows is None else rows
                print(f"    {name:<25} {shown:>9} rows   {paths[name]}")
            continue
        totals = metric_totals(spark, pipeline)
        print(f"  pipeline {pipeline.name} (stream {pipeline.stream.name}, version "
              f"{pipeline.version}): on time "
              f"{totals['on_time']}, late within lateness {totals['late_within_lateness']}, "
              f"dropped as too late {totals['dropped_late']}, quarantined "
              f"{totals['quarantined']}")
        for name, rows in table_counts(spark, paths).items():
            shown = "-" if rows is None else rows
            print(f"    {name:<25} {shown:>9} rows   {paths[name]}")
    home = os.environ["PLATFORM_HOME"]
    default_home = str(Path(".platform").absolute())
    _print_days(spark, platform, "" if home == default_home else f"PLATFORM_HOME={home} ",
                os.environ["DAGSTER_HOME"])
    ui = "./platform ui" if home == default_home else f"PLATFORM_HOME={home} ./platform ui"
    print(f"\nDone in {seconds:.0f} s. Dagster runs are stored in "
          f"{os.environ['DAGSTER_HOME']}.\nOpen the UI with:  {ui}   (then "
          "http://127.0.0.1:3000)")


if __name__ == "__main__":
    sys.exit(main())
