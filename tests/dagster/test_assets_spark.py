"""Every asset materialises in process against real Spark and Delta, and a single-run backfill
of a range writes exactly what materialising its days one by one writes."""

from __future__ import annotations

import pandas as pd
import pytest
from dagster import AssetKey, AssetRecordsFilter

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.store.table_stats import max_column_value
from tests.dagster.conftest import (
    INGEST,
    PIPELINE,
    STREAM,
    key,
    landing_config,
    materialize_assets,
    windowed,
)
from tests.output_tables import output_tables

pytestmark = pytest.mark.spark

WINDOWED = [tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS]
DAYS = ("2026-01-01", "2026-01-02")  # the generator's two days


@pytest.fixture(scope="module")
def ingested(module_home, spark):
    result = materialize_assets(module_home, INGEST, run_config=landing_config())
    assert result.success
    return module_home


def _partition_events(home, asset: AssetKey) -> dict[str, dict]:
    records = home.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=asset), limit=1000).records
    latest: dict[str, dict] = {}
    for record in sorted(records, key=lambda r: r.storage_id):
        event = record.asset_materialization
        latest[event.partition] = {k: v.value for k, v in event.metadata.items()}
    return latest


def test_ingest_records_the_table_and_its_watermark(ingested, spark):
    event = ingested.instance.get_latest_materialization_event(key(STREAM, "arrival_log"))
    metadata = event.asset_materialization.metadata
    stream = platform_of(PlatformSettings.from_env()).streams[STREAM]
    assert metadata["dagster/uri"].value == stream.arrival_log
    log = spark.read.format("delta").load(stream.arrival_log)
    assert metadata["batch_records"].value == log.count() > 1900
    assert (metadata["first_batch_id"].value, metadata["batch_id"].value) == (0, 0)
    watermark = log.agg({"watermark_ms": "max"}).first()[0]
    assert max_column_value(stream.arrival_log, "watermark_ms") == watermark
    assert metadata["watermark"].value.startswith("2026-01-0")  # in words beside the number


def test_single_run_backfill_equals_day_by_day(ingested, spark):
    settings = platform_of(PlatformSettings.from_env()).pipelines[PIPELINE]
    ranged = materialize_assets(ingested, windowed(), partition_range=DAYS)
    assert ranged.success
    by_range = output_tables(spark, settings)
    assert len(by_range[tables.WINDOW_RESULTS]) > 0 and len(by_range[tables.LATE_RECORDS]) > 0

    # per-day metadata the UI plots: one materialisation per partition, each with its own day
    metrics = _partition_events(ingested, key(PIPELINE, tables.LATE_DATA_METRICS))
    assert {"2026-01-01", "2026-01-02"} <= set(metrics)
    first = metrics["2026-01-01"]
    for name in ("on_time", "late_within_lateness", "dropped_late", "quarantined",
                 "lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms",
                 "watermark_lag_p50_ms", "dropped_late_rate", "late_within_lateness_rate",
                 "quarantine_rate", "final"):
        assert isinstance(first[name], int | float), name
    assert isinstance(first["lateness_p99"], str) and first["finality"].startswith("final")
    table = by_range[tables.LATE_DATA_METRICS].set_index("window_end_date")
    for day in ("2026-01-01", "2026-01-02"):
        row = table.loc[pd.Timestamp(day).date()]
        assert metrics[day]["dropped_late"] == row.dropped_late
        assert metrics[day]["on_time"] == row.on_time
        # percentiles over the late records only: not flattened to 0 by the on-time majority
        assert 0 < metrics[day]["lateness_p50_ms"] <= metrics[day]["lateness_p99_ms"]
        # the histogram adds up to the day's late records; the sample shows some of them
        histogram = metrics[day]["lateness_histogram"]
        counted = sum(int(n) for line in histogram.splitlines()[2:]
                      for n in line.split("|")[2:4])
        assert counted == row.dropped_late + row.late_within_lateness
        assert "user-" in metrics[day]["late_records_sample"]
    assert metrics["2026-01-01"]["final"] == 1 and metrics["2026-01-02"]["final"] == 0

    # one verdict per check and day, on that day's partition, aimed at its materialisation
    checks = ranged.get_asset_check_evaluations()
    assert {(c.partition, c.check_name) for c in checks} == {
        (day, name) for day in DAYS
        for name in ("dropped_late_rate", "quarantine_rate", "watermark_lag")}
    assert all(c.passed for c in checks if c.check_name != "watermark_lag")
    records = ingested.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key(PIPELINE, tables.LATE_DATA_METRICS)),
        limit=10).records
    latest = {r.asset_materialization.partition: r.storage_id for r in records[::-1]}
    for check in checks:
        assert check.target_materialization_data.storage_id == latest[check.partition]

    for day in ("2026-01-01", "2026-01-02"):
        assert materialize_assets(ingested, windowed(), partition=day).success
    by_day = output_tables(spark, settings)
    for name in WINDOWED:
        pd.testing.assert_frame_equal(by_range[name], by_day[name], check_like=True)


def test_enrichment_assets_call_the_service_with_the_token(ingested, spark):
    from platform_defs.enrichment_assets import EnrichmentServiceResource
    from services.enrichment_service import running_service

    token = "s3cret-token-value"
    with running_service(users=15, token=token) as service:
        resources = ingested.resources(enrichment_service=EnrichmentServiceResource(
            service_url=service.base_url, token=token, retry_delay_ms=1))
        result = materialize_assets(ingested, [key(STREAM, "enrichment_responses"),
                                               key(STREAM, "enriched_events"),
                                               key(STREAM, "enrichment_dead_letters")],
                                    resources=resources)
    assert result.success
    settings = platform_of(PlatformSettings.from_env()).streams[STREAM]
    enriched = spark.read.format("delta").load(settings.table_path("enriched_events"))
    dead = spark.read.format("delta").load(settings.table_path("enrichment_dead_letters"))
    assert enriched.count() > 0  # a wrong or missing token would make every call a 401
    assert dead.where("error_type LIKE '%Unauthorized%'").count() == 0
    assert dead.where("error_type LIKE '%NotFound%'").count() > 0  # user-0015.. are unknown
    for event in result.all_events:  # the token never reaches logs or metadata
        assert token not in str(event)
