"""The incremental runs (in process, and in a subprocess through Dagster Pipes) leave the
windowed tables exactly as a full backfill would, and record what they wrote."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from dagster import AssetRecordsFilter

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from platform_defs.live_job import live_job
from platform_defs.live_pipes import live_pipes_job
from tests.dagster.conftest import PIPELINE, STREAM, key
from tests.output_tables import output_tables

pytestmark = pytest.mark.spark

WINDOWED = (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)


def _engine(op: str) -> dict:
    """The vectorised engine: jobs.live (the streaming runtime) has tests of its own."""
    return {"ops": {op: {"config": {"engine": "backfill"}}}}


def _equal_a_backfill(spark, settings: PlatformSettings) -> None:
    """Every pipeline's tables as its backfill of every day, from scratch, writes them."""
    for pipeline in platform_of(settings).pipelines.values():
        live = output_tables(spark, pipeline)
        run_backfill(spark, pipeline, progress=lambda _: None)
        backfilled = output_tables(spark, pipeline)
        for name in WINDOWED:
            pd.testing.assert_frame_equal(live[name], backfilled[name], check_like=True)


def test_increments_in_process_and_through_pipes_equal_a_backfill(home, spark):
    landing = home.path / "landing" / STREAM
    generate(GeneratorConfig(events=2000, keys=20, producers=2), landing)
    files = sorted(landing.glob("*/*.jsonl"), key=lambda p: p.name)
    held = home.path / "held"
    for path in files[len(files) // 2:]:  # the second half lands later
        target = held / path.relative_to(landing)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, target)

    resources = home.resources()
    first = live_job.execute_in_process(instance=home.instance, resources=resources,
                                        run_config=_engine("live_increment"))
    assert first.success
    settings = PlatformSettings.from_env()
    for name in platform_of(settings).pipelines:  # one run of the stream updated every pipeline
        metrics = home.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key(name, tables.LATE_DATA_METRICS)), limit=100).records
        assert metrics and all(r.asset_materialization.partition for r in metrics), name
        assert all(r.asset_materialization.metadata["pipeline_version"].value ==
                   platform_of(settings).pipelines[name].version for r in metrics)
    metrics = home.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key(PIPELINE, tables.LATE_DATA_METRICS)), limit=100).records
    assert "dropped_late" in metrics[0].asset_materialization.metadata
    # the live days carry the late records a person reads, as backfilled days do
    assert any("late_records_sample" in r.asset_materialization.metadata for r in metrics)
    verdicts = first.get_asset_check_evaluations()
    assert verdicts and all(v.partition and v.target_materialization_data for v in verdicts)

    for path in held.glob("*/*.jsonl"):
        shutil.move(path, landing / path.relative_to(held))
    second = live_pipes_job.execute_in_process(instance=home.instance, resources=resources,
                                               run_config=_engine("live_increment_pipes"))
    assert second.success
    logs = [record.user_message for record in home.instance.all_logs(second.run_id)]
    assert any("ingest events: ingested batch 1" in m for m in logs)  # from the subprocess
    arrival = home.instance.get_latest_materialization_event(key(STREAM, tables.ARRIVAL_LOG))
    metadata = arrival.asset_materialization.metadata  # the batches the run ingested
    assert (metadata["first_batch_id"].value, metadata["batch_id"].value) == (1, 1)
    log = spark.read.format("delta").load(platform_of(settings).streams[STREAM].arrival_log)
    assert log.count() == sum(1 for _ in log.toLocalIterator()) and \
        log.select("ingest_batch").distinct().count() == 2
    _equal_a_backfill(spark, settings)


def test_the_long_running_stream_through_pipes_observes_each_micro_batch(home, spark):
    """``live_stream_job``: a processing-time stream in its own process, stopped after its
    first micro-batch with its checkpoint kept; every batch it wrote is an observation of the
    metrics asset with plottable numbers, the days it touched are materialised and judged by
    the checks, and a later run from the same checkpoint finishes exactly like a backfill."""
    from dagster import DagsterEventType

    from jobs.live import run_live
    from platform_defs.live_pipes import live_stream_job

    generate(GeneratorConfig(events=1500, keys=15, producers=2),
             home.path / "landing" / STREAM)
    result = live_stream_job.execute_in_process(
        instance=home.instance, resources=home.resources(),
        run_config={"ops": {"live_stream_pipes": {"config": {
            "trigger": "1 second", "poll_seconds": 0.5, "max_batches": 1,
            "duration_seconds": 120}}}})
    assert result.success
    observed = home.instance.fetch_observations(
        AssetRecordsFilter(asset_key=key(PIPELINE, tables.LATE_DATA_METRICS)), limit=1000,
        ascending=True).records
    # a micro-batch's figures; the version's switch is an observation of the asset too, before
    # or after the batch's as the machine's timing falls
    observed = [r for r in observed if "batch_id" in r.asset_observation.metadata]
    assert len(observed) >= 1
    metadata = observed[-1].asset_observation.metadata
    for name in ("batch_id", "records", "on_time", "dropped_late", "dropped_late_rate",
                 "lateness_p99_ms", "watermark_lag_max_ms", "watermark_lag_max"):
        assert name in metadata, name
    assert not metadata["watermark_lag_max"].value.isdigit()  # "2.3 s", not milliseconds
    assert sum(r.asset_observation.metadata["records"].value for r in observed) > 0
    checks = home.instance.all_logs(result.run_id,
                                    of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    assert {entry.dagster_event.event_specific_data.check_name
            for entry in checks} == {"dropped_late_rate", "quarantine_rate", "watermark_lag"}
    settings = PlatformSettings.from_env()
    for name in platform_of(settings).pipelines:
        days = home.instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key(name, tables.LATE_DATA_METRICS)), limit=100).records
        assert days and all(r.asset_materialization.partition for r in days), name

    run_live(spark, platform_of(settings).streams[STREAM], progress=lambda _: None)  # the rest
    _equal_a_backfill(spark, settings)
