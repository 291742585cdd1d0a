"""A backfill and the live stream writing the same Delta tables at the same time: Delta's
conflict errors are retried where that is safe, and when both are done the tables are exactly
those a clean backfill writes. The race runs the keyed (session) pipeline, whose live batches
write four tables (the vectorised one writes a subset of them through the same sink); the
log growing under a backfill runs the default (tumbling) pipeline."""

from __future__ import annotations

import random
import threading

import pytest

from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.live import run_live
from jobs.store import delta_io
from tests.faults.helpers import QUIET, SESSIONS, copy_log, pipelines_of
from tests.output_tables import assert_same, output_tables

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("pipeline", [SESSIONS], ids=["sessions"])
def test_backfills_while_the_live_stream_runs_end_as_one_clean_backfill(
        spark, source, tmp_path, monkeypatch, pipeline):
    clean = pipelines_of(copy_log(source, tmp_path / "clean", {"sessions": pipeline}))
    run_backfill(spark, clean["sessions"], **QUIET)
    expected = output_tables(spark, clean["sessions"])

    conflicts = []
    original = delta_io.is_conflict

    def counting(error):
        found = original(error)
        if found:
            conflicts.append(type(error).__name__)
        return found

    monkeypatch.setattr(delta_io, "is_conflict", counting)
    shared = pipelines_of(copy_log(source, tmp_path / "shared", {"sessions": pipeline}))
    settings = shared["sessions"]
    failure: list[BaseException] = []

    def live() -> None:
        try:
            run_live(spark, settings.stream, max_files_per_trigger=1, **QUIET)
        except BaseException as error:  # reported below, not lost in the thread
            failure.append(error)

    stream = threading.Thread(target=live)
    stream.start()
    rng = random.Random(3)
    days = ["2026-01-01", "2026-01-02"]
    backfills = overlapping = 0
    while stream.is_alive() or backfills < 2:  # the first one always overlaps the stream
        overlapping += stream.is_alive()
        first = rng.choice(days)
        run_backfill(spark, settings, first, rng.choice([d for d in days if d >= first]),
                     **QUIET)
        backfills += 1
    stream.join()
    assert not failure, failure
    print(f"{overlapping} of {backfills} backfills started during the live run; "
          f"{len(conflicts)} conflicts retried: {sorted(set(conflicts))}")
    assert overlapping >= 1
    assert_same(expected, output_tables(spark, settings))


def test_records_ingested_during_a_backfill_are_not_erased_by_it(
        spark, source, tmp_path, monkeypatch):
    """Ingest appends to the log while a backfill computes from its older snapshot (the live
    job may then write rows from the new records, which the backfill's replacement would
    erase for good). The backfill notices and computes its range again: the end state is a
    clean backfill of the whole log."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from jobs import backfill, tables

    clean = pipelines_of(copy_log(source, tmp_path / "clean"))["per_minute"]
    run_backfill(spark, clean, **QUIET)
    expected = output_tables(spark, clean)

    settings = pipelines_of(copy_log(source, tmp_path / "racing"))["per_minute"]
    log_path = settings.table_path(tables.ARRIVAL_LOG)
    full = spark.read.format("delta").load(
        platform_of(source).streams["events"].table_path(tables.ARRIVAL_LOG))
    cut = int(full.agg(F.max("arrival_seq")).first()[0] * 0.75)
    DeltaTable.forPath(spark, log_path).delete(F.col("arrival_seq") > cut)  # an older log
    late_arrivals = full.where(F.col("arrival_seq") > cut).localCheckpoint()

    original = backfill.compute_windows
    calls = []

    def ingest_meanwhile(arrivals, *args, **kwargs):
        outputs = original(arrivals, *args, **kwargs)
        if not calls:  # the first pass has its snapshot: now the rest of the log lands
            late_arrivals.write.format("delta").mode("append").save(log_path)
        calls.append(1)
        return outputs

    monkeypatch.setattr(backfill, "compute_windows", ingest_meanwhile)
    messages = []
    report = run_backfill(spark, settings, progress=messages.append)
    assert report.passes == 2 and len(calls) == 2
    assert any("computing the range again" in m for m in messages)
    assert_same(expected, output_tables(spark, settings))
