"""The README's main command: ``./platform demo`` runs the whole asset graph and prints where
everything is; run again with the same options it adds nothing, with other options it refuses
to mix two data sets."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.enrichment import DEAD_LETTERS, ENRICHED, RESPONSES
from jobs.lifecycle import versions
from platform_defs import demo

pytestmark = pytest.mark.spark


def _rows_in_summary(output: str) -> dict[tuple[str, str], int]:
    """``(stream or pipeline, table) -> rows`` from the summary's sections."""
    rows, section = {}, ""
    for line in output.splitlines():
        heading = re.match(r"^  (?:stream|pipeline) (\w+)", line)
        if heading:
            section = heading.group(1)
        counted = re.match(r"^\s{4}(\w+)\s+(\d+) rows", line)
        if counted:
            rows[(section, counted.group(1))] = int(counted.group(2))
    return rows


@pytest.fixture
def suite_session(spark):
    """The demo's Dagster resource asks the shared session for its own shuffle partitions;
    give the rest of the suite its two back."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", before)


def test_the_demo_runs_the_asset_graph_and_reruns_safely(suite_session, tmp_path, monkeypatch,
                                                        capsys):
    spark = suite_session
    home = tmp_path / "home"
    for name in ("PLATFORM_WAREHOUSE", "PLATFORM_LANDING", "PLATFORM_PIPELINES",
                 "PLATFORM_STREAMS", "PLATFORM_INGEST_CLOCK", "PLATFORM_TIME_ZONE"):
        monkeypatch.delenv(name, raising=False)
    # ./platform exports these for .platform; --home on the command line must win over them
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("PLATFORM_HOME", str(elsewhere))
    monkeypatch.setenv("DAGSTER_HOME", str(elsewhere / "dagster_home"))

    assert demo.main(["--home", str(home), "--events", "3000", "--late-fraction", "0.1"]) == 0
    output = capsys.readouterr().out
    rows = _rows_in_summary(output)
    assert not elsewhere.exists()
    assert (home / "dagster_home" / "dagster.yaml").exists() and str(home / "warehouse") in output
    platform = platform_of(PlatformSettings.from_env({"PLATFORM_HOME": str(home)}))
    stream = platform.streams["events"]
    assert set(platform.pipelines) == {"per_minute", "sliding_5m", "sessions", "daily_totals",
                                       "spend_spike"}
    for name in (tables.ARRIVAL_LOG, tables.QUARANTINE, ENRICHED, DEAD_LETTERS, RESPONSES):
        assert rows[("events", name)] == spark.read.format("delta").load(
            stream.table_path(name)).count()
    for pipeline in platform.pipelines.values():  # every pipeline of the folder, one ingest
        names = (tables.OUTPUT, tables.LATE_RECORDS) if pipeline.spec.is_process else \
            (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)
        for name in names:
            rows_of = spark.read.format("delta").load(pipeline.table_path(name)).count()
            assert rows[(pipeline.name, name)] == rows_of, (pipeline.name, name)
            # 3,000 events are too few for a spike alert to be sure; every other table has rows
            assert rows_of > 0 or (pipeline.name, name) == ("spend_spike", tables.OUTPUT)
    events = {name: rows[("events", name)] for name in
              (tables.ARRIVAL_LOG, tables.QUARANTINE, ENRICHED, DEAD_LETTERS, RESPONSES)}
    assert events[tables.ARRIVAL_LOG] + events[tables.QUARANTINE] == 3000
    assert events[ENRICHED] + events[DEAD_LETTERS] == events[RESPONSES] == \
        events[tables.ARRIVAL_LOG]
    assert events[ENRICHED] > 0 and events[tables.QUARANTINE] > 0
    assert re.search(r"pipeline per_minute \(stream events, version [0-9a-f]{16}\): on time "
                     r"\d+, late within lateness \d+, dropped as too late \d+, quarantined "
                     r"\d+", output)
    assert f"PLATFORM_HOME={home} ./platform ui" in output  # opens what was just built
    # the last three whole days before today: the UI's per-partition plots show recent days
    per_minute = platform.pipelines["per_minute"]
    days = {str(d[0]) for d in spark.read.format("delta").load(
        per_minute.table_path(tables.LATE_DATA_METRICS)).select("window_end_date").collect()}
    today = date.today()  # PLATFORM_TIME_ZONE is UTC here
    assert days == {str(today - timedelta(days=n)) for n in (1, 2, 3)}, days
    # every pipeline's version serves, the process functions' too (their assets used to skip
    # the version bookkeeping: `python -m jobs pipelines` said "serving: none yet")
    for pipeline in platform.pipelines.values():
        serving = versions.serving(pipeline)
        assert serving is not None and serving.version == pipeline.version, pipeline.name
    # and the README's example commands, on those days
    first, last = str(today - timedelta(days=3)), str(today - timedelta(days=1))
    assert f"The demo's days are {first} .. {last}." in output
    assert (f"PLATFORM_HOME={home} .venv/bin/python -m jobs backfill --pipeline per_minute "
            f"--from {first} --to {last}") in output
    assert f"--partition {last}" in output

    # the same options again: nothing new is ingested, the same tables come out
    assert demo.main(["--home", str(home), "--events", "3000", "--late-fraction", "0.1"]) == 0
    assert _rows_in_summary(capsys.readouterr().out) == rows

    # other options would mix two data sets in one landing folder: refused, nothing touched
    assert demo.main(["--home", str(home), "--events", "5000"]) == 2
    assert "Delete" in capsys.readouterr().err
    assert spark.read.format("delta").load(stream.arrival_log).count() == \
        events[tables.ARRIVAL_LOG]
