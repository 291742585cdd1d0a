"""The mistakes a new user makes, made on purpose (issue 17): each one fails loudly, with one
line naming the setting or argument and no traceback, or is handled and said; and no table
loses or gains a row it should not.

Most mistakes are caught before Spark starts, so their tests drive the real command line
(``python -m jobs ...`` in a subprocess) in a second or less. The rest share one warehouse
made the way a user makes it: the command line's ``ingest`` (which needs no Spark for a local
warehouse), interrupted with Ctrl-C, then run again; the tables are read with ``deltalake``
to count their rows. Only the backfill's test starts Spark (the session fixture); the last
test starts ``./platform ui`` and stops it with SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs import tables
from jobs.config.arguments import check_partition_range
from jobs.config.errors import SettingsError
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.console.progress import heartbeat
from jobs.generator import GeneratorConfig, generate
from tests.faults.helpers import SESSIONS
from tests.platform_home import PER_MINUTE, platform_env

REPO = Path(__file__).resolve().parents[2]
TUMBLING = "source: events\nwindow: {type: tumbling, size: 1m}\n"
TABLES = ("streams/events/arrival_log", "streams/events/quarantine",
          *(f"pipelines/{p}/versions/*/{t}" for p in ("per_minute", "sessions", "sliding_5m")
            for t in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)))
"""Every table of the warehouse, each pipeline's of every version."""


pytestmark = pytest.mark.cli  # drives the commands as processes (README, "Tests")

def _cli(args: list[str], env: dict[str, str], **options) -> subprocess.Popen | \
        subprocess.CompletedProcess:
    """``python -m jobs ARGS`` as a user runs it: only the given ``PLATFORM_*`` variables."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_")}
    command = [sys.executable, "-m", "jobs", *args]
    if options.pop("background", False):
        return subprocess.Popen(command, cwd=REPO, env={**environment, **env}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    return subprocess.run(command, cwd=REPO, env={**environment, **env}, capture_output=True,
                          text=True, timeout=options.pop("timeout", 60))


def _refused(result: subprocess.CompletedProcess, *named: str, status: int = 2,
             only_line: bool = True) -> str:
    """The command failed with ``status`` and a message naming ``named``: one line (argparse
    adds its usage line before it), no traceback. Returns the message."""
    assert result.returncode == status, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    message = lines[-1]
    if only_line and lines[0].startswith("usage:"):  # argparse: its usage, then one line
        assert ": error: " in message, lines
    elif only_line:
        assert len(lines) == 1, lines
    for name in named:
        assert name in message, message
    return message


def _rows(warehouse: Path | str) -> dict[str, int]:
    """Rows of each table the warehouse holds (read by deltalake, no Spark)."""
    counts = {}
    for pattern in TABLES:
        for path in sorted(Path(warehouse).glob(pattern)):
            if (path / "_delta_log").is_dir():
                name = str(path.relative_to(warehouse))
                counts[name] = DeltaTable(str(path)).to_pyarrow_table().num_rows
    return counts


def _lines(landing: Path) -> int:
    """Non-blank landing lines: each must end in the arrival log or in quarantine."""
    return sum(sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
               for path in landing.glob("*/*.jsonl"))


# -- mistakes caught before Spark starts -----------------------------------------------------


def _file(tmp_path: Path, name: str, text: str = "") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _folder(tmp_path: Path, name: str, files: dict[str, str] | None = None) -> str:
    path = tmp_path / name
    path.mkdir()
    for file, text in (files or {}).items():
        (path / file).write_text(text, encoding="utf-8")
    return str(path)


def _events(env: dict[str, str]) -> Stream:
    return platform_of(PlatformSettings.from_env(env)).streams["events"]


CASES = {
    # the issue's own list
    "reversed range": (["backfill", "--from", "2026-01-05", "--to", "2026-01-02"], {},
                       ["--from/--to", "2026-01-05 is after 2026-01-02"]),
    "month 13": (["backfill", "--from", "2026-13-01"], {}, ["--from", "'2026-13-01'"]),
    "missing landing folder": (["ingest"], {"PLATFORM_LANDING": "{tmp}/no_such_landing"},
                               ["landing folder of stream events (PLATFORM_LANDING/events)",
                                "no_such_landing/events) does not exist"]),
    "tumbling window with a slide": (
        ["ingest"], {"PLATFORM_PIPELINES": ("dir", "p", {
            "p.yaml": "source: events\nwindow: {type: tumbling, size: 1m, slide: 30s}\n"})},
        ["p.yaml: window.slide does not belong to a tumbling window"]),
    "YAML syntax error": (
        ["backfill"], {"PLATFORM_PIPELINES": ("dir", "p", {"p.yaml": "source: {x\n"
                                                                      "window: [\n"})},
        ["p.yaml:2:7: not valid YAML"]),
    # the pipelines and streams folders
    "two pipelines whose names differ only in case": (
        ["backfill"], {"PLATFORM_PIPELINES": ("dir", "p", {"counts.yaml": TUMBLING,
                                                           "Counts.yaml": TUMBLING})},
        ["Counts.yaml and", "counts.yaml: two pipelines with names that differ only in case"]),
    "two files of one name": (
        ["backfill"], {"PLATFORM_PIPELINES": ("dir", "p", {"counts.yaml": TUMBLING,
                                                           "counts.json": "{}"})},
        ["counts.json and", "counts.yaml: two pipelines with the same name"]),
    "a name that is not an identifier": (
        ["live"], {"PLATFORM_PIPELINES": ("dir", "p", {"per-minute.yaml": TUMBLING})},
        ["per-minute.yaml: 'per-minute' is not a pipeline name", "e.g. per_minute.yaml"]),
    "a pipeline of an unknown stream": (
        ["ingest"], {"PLATFORM_PIPELINES": ("dir", "p", {
            "counts.yaml": TUMBLING.replace("events", "clicks")})},
        ["counts.yaml: source: no stream 'clicks' in PLATFORM_STREAMS", "there are: events"]),
    "a pipeline without its stream": (
        ["backfill"], {"PLATFORM_PIPELINES": ("dir", "p", {
            "counts.yaml": "window: {type: tumbling, size: 1m}\n"})},
        ["counts.yaml: source is required: the stream this pipeline reads (one of: events)"]),
    "a pipeline with its own watermark strategy": (
        ["backfill"], {"PLATFORM_PIPELINES": ("dir", "p", {
            "counts.yaml": TUMBLING + "watermark: {strategy: monotonous}\n"})},
        ["counts.yaml: watermark: the watermark strategy belongs to the stream",
         "streams/events.yaml"]),
    "a processing-time trigger": (
        ["backfill"], {"PLATFORM_PIPELINES": ("dir", "p", {
            "counts.yaml": TUMBLING + "trigger: {type: processing_time}\n"})},
        ["counts.yaml: trigger.type 'processing_time': processing-time triggers run in the "
         "eventtime-replay command only"]),
    "a pipeline named like a stream": (
        ["backfill"], {"PLATFORM_PIPELINES": ("dir", "p", {"events.yaml": TUMBLING})},
        ["events.yaml: a pipeline may not have the name of a stream"]),
    "an empty pipelines folder": (
        ["live"], {"PLATFORM_PIPELINES": ("dir", "p", {"notes.txt": "not a pipeline"})},
        ["PLATFORM_PIPELINES", "holds no pipeline description"]),
    "a missing pipelines folder": (["backfill"], {"PLATFORM_PIPELINES": "{tmp}/pipelines"},
                                   ["PLATFORM_PIPELINES", "pipelines) does not exist"]),
    "the pipelines folder is a file": (["ingest"], {"PLATFORM_PIPELINES": ("file", "p.yaml")},
                                       ["PLATFORM_PIPELINES", "is a file, not a folder"]),
    "a stream without its watermark": (
        ["ingest"], {"PLATFORM_STREAMS": ("dir", "s", {"events.yaml": "kind: landing\n"})},
        ["events.yaml: watermark: is required"]),
    "a stream of an unknown kind": (
        ["ingest"], {"PLATFORM_STREAMS": ("dir", "s", {
            "events.yaml": "kind: kinesis\nwatermark: {strategy: monotonous}\n"})},
        ["events.yaml: kind: Input should be 'landing' or 'kafka'; got 'kinesis'"]),
    "a Kafka stream without its broker and topics": (
        ["ingest"], {"PLATFORM_STREAMS": ("dir", "s", {
            "events.yaml": "kind: kafka\nwatermark: {strategy: monotonous}\n"})},
        ["events.yaml: kafka: is required for kind: kafka (bootstrap_servers, topics)"]),
    "a stream whose landing is relative": (
        ["ingest"], {"PLATFORM_STREAMS": ("dir", "s", {
            "events.yaml": "landing: here\nwatermark: {strategy: monotonous}\n"})},
        ["events.yaml: landing: must be an absolute folder or a URI"]),
    "an unknown pipeline": (["backfill", "--pipeline", "per_hour"], {},
                            ["--pipeline per_hour: no such pipeline", "there are: daily_totals, "
                             "per_minute, sessions, sliding_5m, spend_spike"]),
    "an unknown stream": (["ingest", "--stream", "clicks"], {},
                          ["--stream clicks: no such stream; there are: events"]),
    "the old single-pipeline setting": (["ingest"], {"PLATFORM_PIPELINE": "{tmp}/p.yaml"},
                                        ["PLATFORM_PIPELINE is not a setting; did you mean "
                                         "PLATFORM_PIPELINES?"]),
    # wrong types and values in environment variables
    "shuffle partitions not a number": (["ingest"], {"PLATFORM_SHUFFLE_PARTITIONS": "many"},
                                        ["PLATFORM_SHUFFLE_PARTITIONS", "'many'"]),
    "line limit not an integer": (["ingest"], {"PLATFORM_MAX_LINE_BYTES": "1.5"},
                                  ["PLATFORM_MAX_LINE_BYTES"]),
    "partitions start not a date": (["backfill"], {"PLATFORM_PARTITIONS_START": "yesterday"},
                                    ["PLATFORM_PARTITIONS_START", "'yesterday'"]),
    "unknown live engine": (["live"], {"PLATFORM_LIVE_ENGINE": "fast"},
                            ["PLATFORM_LIVE_ENGINE", "'fast'"]),
    "spark master not a URL": (["ingest"], {"PLATFORM_SPARK_MASTER": "local[two]"},
                               ["PLATFORM_SPARK_MASTER", "not a Spark master URL"]),
    "spark conf cut-off JSON": (["ingest"], {"PLATFORM_SPARK_CONF": '{"spark.x": "1"'},
                                ["PLATFORM_SPARK_CONF", "not a JSON object"]),
    "spark defaults file missing": (["ingest"], {"PLATFORM_SPARK_DEFAULTS": "{tmp}/nope.conf"},
                                    ["PLATFORM_SPARK_DEFAULTS", "No such file"]),
    "zero max future": (["ingest"], {"PLATFORM_MAX_FUTURE": "0"}, ["PLATFORM_MAX_FUTURE"]),
    "clock without field:": (["ingest"], {"PLATFORM_INGEST_CLOCK": "received_at"},
                             ["PLATFORM_INGEST_CLOCK", "field:<name>"]),
    "time zone that does not exist": (["backfill"], {"PLATFORM_TIME_ZONE": "Europe/Atlantis"},
                                      ["PLATFORM_TIME_ZONE", "not a time zone"]),
    "warn threshold above error": (["ingest"], {"PLATFORM_LATE_RATE_WARN": "0.5"},
                                   ["PLATFORM_LATE_RATE_WARN (0.5) is above "
                                    "PLATFORM_LATE_RATE_ERROR (0.2)"]),
    "misspelt variable": (["ingest"], {"PLATFORM_WAREHOUS": "{tmp}/elsewhere"},
                          ["PLATFORM_WAREHOUS is not a setting; did you mean "
                           "PLATFORM_WAREHOUSE?"]),
    "a setting in lower case": (["ingest"], {"platform_warehouse": "{tmp}/elsewhere"},
                                ["platform_warehouse is not a setting; did you mean "
                                 "PLATFORM_WAREHOUSE?"]),
    "a setting cut short": (["ingest"], {"PLATFORM_LANDING_GRACE": "10"},
                            ["PLATFORM_LANDING_GRACE is not a setting; did you mean "
                             "PLATFORM_LANDING_GRACE_SECONDS?"]),
    "spark conf with a comma inside a value": (
        ["ingest"], {"PLATFORM_SPARK_CONF": "spark.jars.packages=a:b:1,c:d:2"},
        ["PLATFORM_SPARK_CONF", "expected key=value, got 'c:d:2'", "JSON object"]),
    # paths
    "landing in an object store that does not answer": (
        ["ingest"], {"PLATFORM_LANDING": "s3a://platform-landing/in",
                     "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ALLOW_HTTP": "true",
                     "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
                     "AWS_REGION": "us-east-1"},
        ["(PLATFORM_LANDING/events) (s3a://platform-landing/in/events) cannot be read",
         "Could not connect"]),
    "landing folder is a file": (["ingest"], {"PLATFORM_LANDING": ("file", "landing")},
                                 ["PLATFORM_LANDING", "is a file, not a folder"]),
    "home is a file": (["ingest"], {"PLATFORM_HOME": ("file", "home-file")},
                       ["PLATFORM_HOME", "is a file, not a folder"]),
    # a read-only place, for root too: nothing can be created below /proc
    "warehouse on a read-only path": (["ingest"],
                                      {"PLATFORM_WAREHOUSE": "/proc/platform-warehouse"},
                                      ["PLATFORM_WAREHOUSE", "cannot be created"]),
    "landing inside the warehouse": (["ingest"], {"PLATFORM_WAREHOUSE": "{tmp}/w",
                                                  "PLATFORM_LANDING": "{tmp}/w/landing"},
                                     ["PLATFORM_LANDING", "must not be inside"]),
    # the order of things
    "backfill before any ingest": (["backfill"], {},
                                   ["stream events has no arrival log in PLATFORM_WAREHOUSE",
                                    "python -m jobs ingest"]),
    "live --no-ingest before any ingest": (["live", "--no-ingest"], {},
                                           ["stream events has no arrival log"]),
    # arguments
    "negative duration": (["live", "--trigger", "2 seconds", "--duration", "-5"], {},
                          ["--duration must be 0 (never stop) or more"]),
    "metrics interval zero": (["live", "--metrics-interval", "0"], {},
                              ["--metrics-interval must be more than 0"]),
    "trigger in hours": (["live", "--trigger", "2 hours"], {}, ["--trigger", "'2 hours'"]),
    "misspelt command": (["injest"], {}, ["invalid choice: 'injest'"]),
    "finality cron Dagster refuses": (["ingest"], {"PLATFORM_FINALITY_CRON": "not a cron"},
                                      ["PLATFORM_FINALITY_CRON", "'not a cron'"]),
    "enrichment URL without a host": (["live"], {"PLATFORM_ENRICHMENT_URL": "http://"},
                                      ["PLATFORM_ENRICHMENT_URL", "'http://'"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_mistake_is_named_in_one_line_before_anything_is_touched(tmp_path, case):
    args, variables, named = CASES[case]
    env = {"PLATFORM_HOME": str(tmp_path / "home")}
    for variable, value in variables.items():
        if isinstance(value, tuple):  # ("file", name, text) or ("dir", name, files)
            value = _file(tmp_path, *value[1:]) if value[0] == "file" \
                else _folder(tmp_path, *value[1:])
        env[variable] = value.replace("{tmp}", str(tmp_path))
    started = time.monotonic()
    result = _cli(args, env)
    _refused(result, *named)
    assert time.monotonic() - started < 30  # long before a Spark session could start
    assert not (tmp_path / "home" / "warehouse").exists()  # nothing was created or written
    assert result.stdout == ""


def test_a_dagster_ingest_with_a_missing_landing_folder_fails_naming_it(tmp_path, monkeypatch):
    """The ingest asset used to succeed with nothing ingested; it fails before Spark, with
    the command line's message."""
    from dagster import materialize

    from platform_defs.resources import DeltaSparkResource, PlatformResource
    from platform_defs.stream_assets import stream_assets

    home = tmp_path / "home"
    monkeypatch.setenv("PLATFORM_HOME", str(home))
    _, ingest_landing = stream_assets(_events({"PLATFORM_HOME": str(home)}))
    result = materialize([ingest_landing], raise_on_error=False,
                         resources={"platform": PlatformResource(),
                                    "spark": DeltaSparkResource()})
    assert not result.success
    failures = [event for event in result.all_events if event.event_type_value ==
                "STEP_FAILURE"]
    message = failures[0].step_failure_data.error.cause.message.strip()
    assert message.startswith(f"jobs.config.errors.SettingsError: the landing folder of stream "
                              f"events (PLATFORM_LANDING/events) ({home / 'landing' / 'events'})"
                              " does not exist")
    assert not (home / "warehouse" / "streams" / "events" / "arrival_log").exists()


def test_a_reversed_or_empty_dagster_range_fails_with_the_command_lines_words(tmp_path,
                                                                              monkeypatch):
    """``dagster asset materialize --partition-range 2026-01-05...2026-01-02`` ran as a
    SUCCESS with materialisations for partition None; now the run fails before Spark, with
    the message the command line gives for ``--from 2026-01-05 --to 2026-01-02``."""
    from dagster import materialize

    from platform_defs.monitoring import MonitoringResource
    from platform_defs.pipeline_assets import pipeline_assets
    from platform_defs.resources import DeltaSparkResource, PlatformResource
    from platform_defs.schedules import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    home = tmp_path / "home"
    monkeypatch.setenv("PLATFORM_HOME", str(home))
    resources = {"platform": PlatformResource(), "spark": DeltaSparkResource(),
                 "monitoring_thresholds": MonitoringResource()}
    per_minute = platform_of(PlatformSettings.from_env()).pipelines["per_minute"]
    windowed_outputs = pipeline_assets(per_minute)[0]

    def run(first: str, last: str) -> str:
        result = materialize([windowed_outputs], resources=resources, raise_on_error=False,
                             tags={ASSET_PARTITION_RANGE_START_TAG: first,
                                   ASSET_PARTITION_RANGE_END_TAG: last})
        assert not result.success
        failures = [event for event in result.all_events if event.event_type_value ==
                    "STEP_FAILURE"]
        assert len(failures) == 1
        assert not result.get_asset_materialization_events()
        return failures[0].step_failure_data.error.cause.message.strip()

    command_line = _cli(["backfill", "--from", "2026-01-05", "--to", "2026-01-02"],
                        {"PLATFORM_HOME": str(home)})
    words = "2026-01-05 is after 2026-01-02: the range is empty (give the earlier day first)"
    assert words in _refused(command_line)
    assert run("2026-01-05", "2026-01-02") == \
        f"jobs.config.errors.SettingsError: partition range: {words}"
    assert run("2025-06-01", "2025-06-02") == (
        "jobs.config.errors.SettingsError: partition range: 2025-06-01 is before the first daily "
        "partition 2026-01-01 (PLATFORM_PARTITIONS_START)")
    assert not (home / "warehouse").exists()


def test_the_partition_range_check_passes_a_good_range():
    assert check_partition_range("2026-01-01", "2026-01-02", "2026-01-01") \
        == ("2026-01-01", "2026-01-02")
    with pytest.raises(SettingsError, match="2026-01-03 is after 2026-01-02"):
        check_partition_range("2026-01-03", "2026-01-02", "2026-01-01")


def test_a_long_step_says_something_every_few_seconds():
    said: list[str] = []
    with heartbeat(said.append, "windows: writing window_results", every_s=0.05,
                   detail=lambda: "micro-batch 3"):
        time.sleep(0.28)
    assert len(said) >= 3
    assert said[0].startswith("windows: writing window_results: still running, ")
    assert said[0].endswith("; micro-batch 3")
    count = len(said)
    time.sleep(0.15)
    assert len(said) == count  # quiet once the step is over
    with heartbeat(said.append, "quick", every_s=10):
        pass
    assert len(said) == count  # a step shorter than the period says nothing extra


# -- mistakes on a warehouse with data -------------------------------------------------------


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory) -> dict:
    """A user lands 40,000 lines, starts ``python -m jobs ingest`` and presses Ctrl-C while it
    runs (SIGINT to the process group, as a terminal sends it), once the batch is planned."""
    home = tmp_path_factory.mktemp("misuse") / "home"
    landing = home / "landing" / "events"
    generate(GeneratorConfig(events=40_000, keys=40, producers=3, seed=17), landing)
    env = {"PLATFORM_HOME": str(home)}
    process = _cli(["ingest"], env, background=True)
    plans = home / "warehouse" / "streams" / "events" / "_ingest" / "plans"
    deadline = time.monotonic() + 90
    while process.poll() is None and time.monotonic() < deadline:
        if plans.is_dir() and any(plans.iterdir()):
            os.killpg(process.pid, signal.SIGINT)
            break
        time.sleep(0.01)
    stdout, stderr = process.communicate(timeout=60)
    return {"home": home, "env": env, "returncode": process.returncode, "stdout": stdout,
            "stderr": stderr, "lines": _lines(landing)}


@pytest.fixture(scope="module")
def ingested(interrupted) -> dict:
    """... then runs ingest again (in this process, as the command line does: no Spark)."""
    from jobs.streams.landing.ingestor import ingest

    settings = PlatformSettings.from_env(interrupted["env"])
    said: list[str] = []
    report = ingest(None, platform_of(settings).streams["events"], progress=said.append)
    return {**interrupted, "settings": settings, "rerun": said, "report": report}


def test_ctrl_c_during_ingest_then_a_rerun_loses_and_doubles_nothing(ingested):
    assert ingested["returncode"] == 130, ingested["stderr"][-2000:]
    last = ingested["stderr"].strip().splitlines()[-1]
    assert last.startswith("ingest: interrupted by SIGINT; nothing committed is lost"), last
    assert "Traceback" not in ingested["stderr"]
    assert any("was planned but not committed" in line for line in ingested["rerun"])
    log = DeltaTable(_events(ingested["env"]).arrival_log).to_pyarrow_table()
    quarantine = _rows(ingested["settings"].warehouse)["streams/events/quarantine"]
    assert log.num_rows + quarantine == ingested["lines"]  # every line, exactly once
    assert sorted(log.column("arrival_seq").to_pylist()) == list(range(log.num_rows))


def test_ingest_with_nothing_new_says_so_and_writes_nothing(ingested):
    before = _rows(ingested["settings"].warehouse)
    result = _cli(["ingest"], ingested["env"])
    assert (result.returncode, result.stdout, result.stderr) == \
        (0, "ingest events: no new landing files\n", "")
    assert _rows(ingested["settings"].warehouse) == before


@pytest.mark.spark
def test_a_backfill_reports_its_own_rows_and_says_when_it_wrote_nothing(spark, tmp_path):
    from jobs.backfill import run_backfill
    from jobs.streams.landing.ingestor import ingest

    home = tmp_path / "home"
    env = platform_env(home, {"per_minute": PER_MINUTE})
    pipeline = platform_of(PlatformSettings.from_env(env)).pipelines["per_minute"]
    # two days of events, none bad: nothing is quarantined on the day after them
    generate(GeneratorConfig(events=3_000, keys=10, producers=2, seed=5, bad_fraction=0.0),
             pipeline.stream.landing)
    said: list[str] = []
    ingest(None, pipeline.stream, progress=said.append)
    day = run_backfill(spark, pipeline, "2026-01-01", "2026-01-01", progress=said.append)
    results = DeltaTable(pipeline.table_path(tables.WINDOW_RESULTS)).to_pyarrow_table()
    late = DeltaTable(pipeline.table_path(tables.LATE_RECORDS)).to_pyarrow_table()
    assert (day.results, day.late) == (results.num_rows, late.num_rows) and day.results > 0
    assert said[-1] == (f"backfill per_minute 2026-01-01..2026-01-01: wrote {results.num_rows} "
                        f"result rows, {late.num_rows} late records, 1 days of metrics")
    warehouse = pipeline.settings.warehouse
    before = _rows(warehouse)

    # the day after the data: within reach of its windows, so Spark computes it, finds
    # nothing, replaces nothing and commits nothing; the summary used to read the previous
    # commit (the day above) and report its rows as this run's
    said.clear()
    after = run_backfill(spark, pipeline, "2026-01-03", "2026-01-03", progress=said.append)
    assert "per_minute: computing partitions 2026-01-03 .. 2026-01-03" in said  # Spark's path
    assert said[-1] == ("backfill per_minute: nothing to do for 2026-01-03..2026-01-03 (no "
                        "arrivals in range)")
    assert (after.results, after.late) == (0, 0)
    assert _rows(warehouse) == before

    # a day range far outside the data: answered from Delta's statistics, before Spark
    started = time.monotonic()
    far = _cli(["backfill", "--from", "2030-01-01", "--to", "2030-01-02"], env)
    assert (far.returncode, far.stdout, far.stderr) == \
        (0, "backfill per_minute: nothing to do for 2030-01-01..2030-01-02 (no arrivals in "
            "range)\n", "")
    assert time.monotonic() - started < 30
    assert _rows(warehouse) == before


def test_a_landing_file_rewritten_after_ingest_is_quarantined_whole_with_a_warning(tmp_path):
    """The issue's silent loss: a producer reused a file name with new content, and ingest
    skipped the known name. Now its lines are quarantined, counted and warned about."""
    home = tmp_path / "home"
    landing = home / "landing" / "events"
    generate(GeneratorConfig(events=600, keys=5, producers=2, seed=3), landing)
    env = {"PLATFORM_HOME": str(home)}
    first = _cli(["ingest"], env)
    assert first.returncode == 0 and first.stdout.startswith("ingest events: ingested batch 0: ")
    before = _rows(home / "warehouse")
    victim = sorted(landing.glob("*/*.jsonl"))[0]
    victim.write_text("".join(json.dumps({"key": "k", "event_time": 1_767_225_600_000 + i,
                                          "received_at": 1_767_225_600_000 + i}) + "\n"
                              for i in range(7)), encoding="utf-8")
    second = _cli(["ingest"], env)
    assert second.returncode == 0, second.stderr
    assert "WARNING 1 files changed after ingest (lines quarantined as " \
           "file_changed_after_ingest)" in second.stdout
    after = _rows(home / "warehouse")
    log, quarantine = "streams/events/arrival_log", "streams/events/quarantine"
    assert after[log] == before[log]
    assert after[quarantine] == before[quarantine] + 7


def test_live_with_nothing_landed_says_so(tmp_path):
    landing = tmp_path / "home" / "landing" / "events"
    landing.mkdir(parents=True)
    result = _cli(["live"], {"PLATFORM_HOME": str(tmp_path / "home")})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"ingest events: no new landing files\nlive events: nothing to "
                             f"do: nothing has landed in {landing} yet\n")


@pytest.mark.spark
def test_the_long_running_live_job_waits_for_the_first_landing_file_and_stops_on_sigterm(
        tmp_path):
    """With an interval trigger the job is meant to keep running: it waits for data, saying
    so; a SIGTERM (what a service manager sends) ends it with the one line, status 143, no
    traceback, and none of its processes (the JVM, Python workers) left running."""
    landing = tmp_path / "home" / "landing" / "events"
    landing.mkdir(parents=True)
    process = _cli(["live", "--trigger", "1 second"], {"PLATFORM_HOME": str(tmp_path / "home")},
                   background=True)
    said = _watch(process)
    waiting = f"live events: waiting for the first landing file in {landing}"
    _wait_for(said, waiting, process)
    children = _descendants(process.pid)
    assert children, "the JVM runs as a child of the command"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=90) == 143
    stdout, stderr = "".join(said), process.stderr.read()
    assert f"live events stopped: nothing landed in {landing}" in stdout
    assert stderr.strip().splitlines() == [
        "live: interrupted by SIGTERM; stopped; every micro-batch reported is committed and "
        "the checkpoints keep their place: run the same command to go on"], stderr[-3000:]
    _assert_ended(children)
    assert "Streaming TransformWithStateInPandas" not in stdout  # Spark's chatter: the log
    assert (tmp_path / "home" / "logs" / "spark.log").is_file()


@pytest.mark.spark
def test_ctrl_c_during_a_backfill_ends_with_one_line_and_no_process_left(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while Spark computes: the
    jobs are cancelled, the one line, status 130, no py4j or PySpark traceback, nothing left
    running; the same command then finishes the work."""
    from jobs.streams.landing.ingestor import ingest

    home = tmp_path / "home"
    generate(GeneratorConfig(events=6_000, keys=40, producers=2, seed=5),
             home / "landing" / "events")
    env = platform_env(home, {"per_minute": PER_MINUTE})
    ingest(None, _events(env), progress=lambda _: None)
    process = _cli(["backfill"], env, background=True)
    said = _watch(process)
    _wait_for(said, "per_minute: computing partitions", process)
    children = _descendants(process.pid)
    os.killpg(process.pid, signal.SIGINT)
    assert process.wait(timeout=90) == 130
    stderr = process.stderr.read()
    assert stderr.strip().splitlines() == [
        "backfill: interrupted by SIGINT; nothing committed is lost and nothing half-done "
        "counts: run the same command again to finish"], stderr[-3000:]
    _assert_ended(children)
    again = _cli(["backfill"], env, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "backfill per_minute" in again.stdout


def _watch(process: subprocess.Popen) -> list[str]:
    """The command's stdout lines as they come (read by a thread: a pipe must be drained)."""
    import threading

    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")),
                     daemon=True).start()
    return lines


def _wait_for(lines: list[str], text: str, process: subprocess.Popen,
              timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(text in line for line in list(lines)):
        if process.poll() is not None:
            pytest.fail(f"the command ended ({process.returncode}) before saying {text!r}: "
                        f"{''.join(lines)[-2000:]} {process.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"no {text!r} within {timeout_s:g} s: {''.join(lines)[-2000:]}")
        time.sleep(0.1)


def _assert_ended(processes: list[int], timeout_s: float = 30) -> None:
    """Every one of ``processes`` ends soon after the command (the JVM notices its parent's
    end; its Python workers follow it)."""
    deadline = time.monotonic() + timeout_s
    while any(_running(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in processes if _running(pid)] == []


def test_a_changed_pipeline_is_a_pending_version_and_another_source_is_refused(ingested,
                                                                            tmp_path):
    """A changed description is a new version: listed as pending while readers keep the one
    that serves, its tables apart. One that names another stream is a new pipeline, refused
    before anything is written, naming the file and what to do."""
    from jobs.lifecycle import versions

    folder = Path(_folder(tmp_path, "pipelines", {"per_minute.yaml": PER_MINUTE}))
    streams = Path(_folder(tmp_path, "streams", {
        "events.yaml": (REPO / "streams" / "events.yaml").read_text(),
        "clicks.yaml": (REPO / "streams" / "events.yaml").read_text()}))
    env = {**ingested["env"], "PLATFORM_PIPELINES": str(folder),
           "PLATFORM_STREAMS": str(streams)}
    first = platform_of(PlatformSettings.from_env(env)).pipelines["per_minute"]
    versions.reconcile(first)  # as its first backfill does
    (folder / "per_minute.yaml").write_text(PER_MINUTE.replace("30s", "45s"), encoding="utf-8")
    listed = _cli(["pipelines"], env)
    assert listed.returncode == 0, listed.stderr
    changed = platform_of(PlatformSettings.from_env(env)).pipelines["per_minute"]
    assert f"serving: {first.version}" in listed.stdout
    assert f"rollout: version {changed.version} pending (replaces {first.version})" in \
        listed.stdout
    before = _rows(ingested["settings"].warehouse)
    (folder / "per_minute.yaml").write_text(PER_MINUTE.replace("source: events",
                                                               "source: clicks"))
    for args in (["backfill"], ["live", "--no-ingest"], ["rollout", "per_minute"]):
        result = _cli(args, env)
        _refused(result, "per_minute.yaml: source: 'clicks', but pipeline per_minute's "
                         "tables were computed from stream 'events'",
                 "another source is a new pipeline: give it a new file")
    assert _rows(ingested["settings"].warehouse) == before


def test_a_stream_whose_watermark_changed_after_ingest_is_refused(ingested, tmp_path):
    streams = Path(_folder(tmp_path, "streams", {
        "events.yaml": "watermark: {strategy: bounded_out_of_orderness, "
                       "max_out_of_orderness: 10s}\n"}))
    before = _rows(ingested["settings"].warehouse)
    for args in (["ingest"], ["live"]):
        result = _cli(args, {**ingested["env"], "PLATFORM_STREAMS": str(streams)})
        _refused(result, "events.yaml: watermark: the stream's watermark strategy changed "
                         "since its first ingest")
    assert _rows(ingested["settings"].warehouse) == before


def test_a_checkpoint_of_other_pipelines_is_refused_before_spark(ingested, tmp_path):
    """A live checkpoint's state was built for its versions from the beginning of the log:
    one started for another pipeline cannot take these in (refused naming what it holds),
    and one shared with another live pipeline cannot leave it behind."""
    from jobs.live.cohorts import claim
    from jobs.live.queries import DEFAULT_BUCKETS

    settings = ingested["settings"]
    folder = _folder(tmp_path, "pipelines", {"sessions.yaml": SESSIONS})
    sessions = PlatformSettings.from_env({**ingested["env"], "PLATFORM_PIPELINES": folder})
    stream = platform_of(sessions).streams["events"]
    checkpoint = str(Path(stream.checkpoints) / "sessions")
    # what the live stream writes first into a new checkpoint, here for the sessions pipeline
    claim(checkpoint, stream, list(platform_of(sessions).pipelines.values()), DEFAULT_BUCKETS)
    before = _rows(settings.warehouse)
    result = _cli(["live", "--no-ingest", "--checkpoint", checkpoint], ingested["env"])
    _refused(result, "--checkpoint", "its state was not built for ", "per_minute@",
             "give a new --checkpoint")
    shared = str(Path(stream.checkpoints) / "both")
    platform = platform_of(settings)
    claim(shared, stream, list(platform.pipelines.values()), DEFAULT_BUCKETS)
    result = _cli(["live", "--no-ingest", "--checkpoint", shared, "--pipeline", "per_minute"],
                  ingested["env"])
    _refused(result, "--checkpoint", "also runs ", "sessions@", "which this run would leave "
                                                                 "behind for good")
    assert _rows(settings.warehouse) == before


def test_skewed_collector_clocks_move_no_watermark_and_lose_no_line(tmp_path):
    """One collector's clock runs an hour behind, another stamps a line in 2099: every line
    lands once, the ingest clock never goes back, the 2099 stamp is quarantined and moves
    nothing."""
    from jobs.streams.landing.batch import BAD_INGEST_STAMP
    from jobs.streams.landing.ingestor import ingest

    settings = _events({"PLATFORM_HOME": str(tmp_path / "home")})
    start = 1_767_225_600_000
    for producer, skew in (("p0", 0), ("p1", -3_600_000)):
        folder = settings.landing_dir / producer
        folder.mkdir(parents=True)
        lines = [json.dumps({"key": f"k{i % 3}", "event_time": start + i * 1_000, "value": i,
                             "received_at": start + i * 1_000 + 500 + skew})
                 for i in range(30)]
        if producer == "p0":
            lines.insert(10, json.dumps({"key": "k0", "event_time": start + 10_000, "value": 1,
                                         "received_at": 4_070_908_800_000}))  # 2099
        (folder / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = ingest(None, settings, progress=lambda _: None)
    assert (report.records, report.quarantined) == (60, 1)
    assert report.reasons == {BAD_INGEST_STAMP: 1}
    log = DeltaTable(settings.arrival_log).to_pyarrow_table().sort_by("arrival_seq")
    clock = log.column("ingest_time_ms").to_pylist()
    assert clock == sorted(clock) and max(clock) < 4_070_908_800_000
    assert max(log.column("watermark_ms").to_pylist()) < start + 30_000


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_landing_file_stops_ingest_before_anything_is_written(tmp_path):
    from jobs.streams.landing.ingestor import LandingReadError, ingest

    settings = _events({"PLATFORM_HOME": str(tmp_path / "home")})
    folder = settings.landing_dir / "p0"
    folder.mkdir(parents=True)
    (folder / "a.jsonl").write_text('{"key": "k", "event_time": 1}\n', encoding="utf-8")
    locked = folder / "b.jsonl"
    locked.write_text('{"key": "k", "event_time": 2}\n', encoding="utf-8")
    locked.chmod(0)
    with pytest.raises(LandingReadError, match="b.jsonl: Permission denied"):
        ingest(None, settings, progress=lambda _: None)
    assert _rows(settings.settings.warehouse) == {}
    locked.chmod(0o644)
    assert ingest(None, settings, progress=lambda _: None).records == 2


# -- ./platform ui ---------------------------------------------------------------------------


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[0] != "Z":
                children.setdefault(int(stat[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_platform_ui_stops_with_all_its_children_on_sigterm(tmp_path):
    """``./platform ui`` as a user starts it (its setup finds an installed .venv: this
    interpreter's), then SIGTERM: the webserver, the daemon and the code servers stop too."""
    import socket
    import urllib.request

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("platform", "workspace.yaml", "pyproject.toml", "requirements.lock"):
        (checkout / name).write_bytes((REPO / name).read_bytes())
    (checkout / "platform").chmod(0o755)
    for name in ("jobs", "operators", "platform_defs", "services", "pipelines", "streams",
                 "native"):
        (checkout / name).symlink_to(REPO / name)
    bin_folder = checkout / ".venv" / "bin"
    bin_folder.mkdir(parents=True)
    # this interpreter, with its environment (a symlink to it would start Python without the
    # virtual environment's packages, which are found from the link's own folder)
    (bin_folder / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_folder / "python").chmod(0o755)
    (bin_folder / "dagster").symlink_to(Path(sys.executable).parent / "dagster")
    (checkout / ".venv" / ".installed").touch()  # newer than pyproject.toml: no install
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_")}
    process = subprocess.Popen(
        ["./platform", "ui"], cwd=checkout, start_new_session=True,
        env={**environment, "PORT": str(port), "PLATFORM_HOME": str(tmp_path / "home"),
             "PYTHON_BIN": sys.executable},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert process.poll() is None, "./platform ui stopped on its own"
                time.sleep(0.5)
        else:
            pytest.fail("the UI did not answer within 90 s")
        children = _descendants(process.pid)
        assert len(children) >= 3  # dagster dev, its webserver, its daemon (+ code servers)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=40) == 143  # one SIGTERM is enough (docs: "Stopping")
        # once the command has returned, nothing of it is left running
        assert [pid for pid in children if _running(pid)] == []
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def test_the_platform_script_and_the_demo_explain_themselves():
    """``--help`` prints the commands and succeeds; an unknown command says which, status 2;
    the demo's help names the command a user types and every default."""
    shown = subprocess.run(["./platform", "--help"], cwd=REPO, capture_output=True, text=True,
                           timeout=30)
    assert shown.returncode == 0, shown.stderr
    for command in ("demo", "test", "setup", "ui"):
        assert f"./platform {command}" in shown.stdout
    unknown = subprocess.run(["./platform", "frobnicate"], cwd=REPO, capture_output=True,
                             text=True, timeout=30)
    assert unknown.returncode == 2
    assert unknown.stderr.strip().endswith("platform: unknown command 'frobnicate'")
    demo = subprocess.run([sys.executable, "-m", "platform_defs.demo", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.startswith("usage: ./platform demo")
    assert "demo.py" not in demo.stdout
    for default in ("(default 50000)", "(default 7)", "(default 0.05)"):
        assert default in " ".join(demo.stdout.split()), default


SCRIPT_CASES = {
    "demo, a bad setting": (["demo"], {"PLATFORM_TIME_ZONE": "Nowhere/City"},
                            ["PLATFORM_TIME_ZONE", "'Nowhere/City'"]),
    "demo, a bad pipeline": (["demo"], {"PLATFORM_PIPELINES": ("dir", "bad-pipelines", {
        "lost.yaml": "source: nosuch\nwindow: {type: tumbling, size: 1m}\n"
                     "aggregates: [{name: n, fn: count}]\n"})}, ["lost.yaml", "'nosuch'"]),
    "ui, a bad pipeline": (["ui"], {"PLATFORM_PIPELINES": ("dir", "bad-pipelines", {
        "lost.yaml": "source: nosuch\nwindow: {type: tumbling, size: 1m}\n"
                     "aggregates: [{name: n, fn: count}]\n"})}, ["lost.yaml", "'nosuch'"]),
    "ui, a bad cron": (["ui"], {"PLATFORM_FINALITY_CRON": "not a cron"},
                       ["PLATFORM_FINALITY_CRON", "'not a cron'"]),
}


@pytest.mark.parametrize("case", list(SCRIPT_CASES))
def test_the_scripts_commands_name_a_mistake_in_one_line_too(tmp_path, case):
    """``./platform demo`` and ``./platform ui`` (whose Dagster load would print the
    component tree's traceback) say a bad setting or description as ``python -m jobs`` does."""
    args, variables, named = SCRIPT_CASES[case]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_")}
    env["PLATFORM_HOME"] = str(tmp_path / "home")
    for variable, value in variables.items():
        env[variable] = _folder(tmp_path, *value[1:]) if isinstance(value, tuple) else value
    result = subprocess.run([str(REPO / "platform"), *args], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=240)
    message = _refused(result, *named)
    assert message.startswith("configuration error: ")
