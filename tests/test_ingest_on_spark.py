"""Ingest read and parsed by Spark's executors gives the very rows the driver path gives.

The same landing history (every kind of bad line, a duplicate file, a file that grew, a file
rewritten after ingest, invalid UTF-8, a line longer than the quarantine keeps) is ingested
batch by batch twice, once per reader, with the same planning clock; every row of the arrival
log and the quarantine, and every ingest-log commit, must be equal.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.generator import GeneratorConfig, generate
from jobs.streams.landing import on_spark
from jobs.streams.landing.batch import RAW_LINE_LIMIT
from jobs.streams.landing.ingestor import Ingestor

pytestmark = pytest.mark.spark

NANOSECONDS = 1_767_225_600_000_123_457  # an event time in ns: too far in the future, kept exact
PLANNED_AT_MS = 1_767_300_000_000  # 2026-01-01T20:40Z, after every generated stamp
HISTORY = GeneratorConfig(events=1_500, duration_ms=2 * 3_600_000, keys=6, producers=3,
                          bad_fraction=0.06, flush_interval_ms=900_000)


def _first_batch(landing: Path) -> None:
    generate(HISTORY, landing)
    odd = landing / "p-odd"
    odd.mkdir(parents=True, exist_ok=True)
    stamp = '"received_at": 1767225600000'
    long_text = "é" * (RAW_LINE_LIMIT + 50)
    (odd / "a.jsonl").write_bytes(
        b'{"key": "k1", "event_time": 1767225500000, "value": 1.5, ' + stamp.encode() + b'}\n'
        b'\xff\xfe not utf-8\n'
        b'\n'
        + f'{{"key": "k2", "event_time": "x{long_text}", {stamp}}}\n'.encode()
        + b'{"key": "k3", "event_time": 1767225550000}\n'
        + f'{{"key": "k4", "event_time": {NANOSECONDS}, {stamp}}}\n'.encode())
    (odd / "grows.jsonl").write_text(
        f'{{"key": "g", "event_time": 1767225560000, {stamp}}}\n', encoding="utf-8")
    (odd / "rewritten.jsonl").write_text(
        f'{{"key": "r", "event_time": 1767225570000, {stamp}}}\n', encoding="utf-8")
    shutil.copy(odd / "a.jsonl", odd / "a-again.jsonl")


def _second_batch(landing: Path) -> None:
    odd = landing / "p-odd"
    with (odd / "grows.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"key": "g", "event_time": 1767225580000, '
                     '"received_at": 1767225700000}\n')
    (odd / "rewritten.jsonl").write_text(
        '{"key": "r", "event_time": 1767225590000, "received_at": 1767225700000}\n'
        '{"key": "r2", "event_time": 1767225591000, "received_at": 1767225700000}\n',
        encoding="utf-8")


def _rows(spark, stream: Stream, name: str, order: list[str]) -> list[dict]:
    """Every row as exact Python values (no float64 on the way)."""
    rows = spark.read.format("delta").load(stream.table_path(name)).toArrow().to_pylist()
    return sorted(rows, key=lambda row: [row[column] for column in order])


def test_spark_reader_gives_the_driver_readers_rows(spark, tmp_path, platform_env,
                                                    monkeypatch):
    runs = {}
    for run in ("driver", "spark", "spark-quarantine"):
        reader = run.split("-")[0]
        # few bad lines are appended by the driver; many, by the executors: both checked
        monkeypatch.setattr(on_spark, "_DRIVER_QUARANTINE_ROWS",
                            0 if run == "spark-quarantine" else 200_000)
        home = tmp_path / run
        stream = platform_of(PlatformSettings(home=str(home), ingest_reader=reader)) \
            .streams["events"]
        landing = Path(stream.landing)
        ingestor = Ingestor(spark, stream, progress=lambda _: None,
                            clock_ms=lambda: PLANNED_AT_MS)
        _first_batch(landing)
        first = ingestor.run_once()
        _second_batch(landing)
        second = ingestor.run_once()
        assert ingestor.run_once().batch_id is None
        runs[run] = (stream, [first, second], ingestor.commits)

    driver, driver_reports, driver_commits = runs.pop("driver")
    assert not any(r.on_executors for r in driver_reports)
    for run, (executors, spark_reports, spark_commits) in runs.items():
        # counts, reasons and the watermark state after each batch
        assert driver_commits == spark_commits, run
        for ours, theirs in zip(driver_reports, spark_reports, strict=True):
            assert (ours.records, ours.quarantined, ours.reasons, ours.appended,
                    ours.changed) == (theirs.records, theirs.quarantined, theirs.reasons,
                                      theirs.appended, theirs.changed), run
        assert spark_reports[1].appended == 1 and spark_reports[1].changed == 1
        assert all(r.on_executors for r in spark_reports)
        for name, order in ((tables.ARRIVAL_LOG, ["arrival_seq"]),
                            (tables.QUARANTINE, ["ingest_batch", "source_file", "line_number"])):
            expected = _rows(spark, driver, name, order)
            assert _rows(spark, executors, name, order) == expected, (run, name)
    executors = runs["spark"][0]
    reasons = {row["reason"] for row in _rows(spark, executors, tables.QUARANTINE, ["reason"])}
    assert {"invalid_utf8", "duplicate_file", "file_changed_after_ingest",
            "unparsable_event_time"} <= reasons
    assert NANOSECONDS in {row["event_time_ms"] for row in _rows(spark, executors,
                                                                 tables.QUARANTINE, ["reason"])}
    long_line = [row for row in _rows(spark, executors, tables.QUARANTINE, ["line_number"])
                 if row["reason"] == "unparsable_event_time" and "é" in row["raw_line"]]
    assert len(long_line[0]["raw_line"]) == RAW_LINE_LIMIT
