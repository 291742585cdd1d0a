"""The code location loads and validates, and describes every table properly (no Spark)."""

from __future__ import annotations

from datetime import date

from dagster import AssetKey, Definitions, TableSchema

from jobs import tables
from jobs.days import final_flag, is_final, last_final_day
from platform_defs.definitions import defs

TABLE_ASSETS = [tables.ARRIVAL_LOG, tables.QUARANTINE, tables.WINDOW_RESULTS,
                tables.LATE_RECORDS, tables.LATE_DATA_METRICS, "enrichment_responses",
                "enriched_events", "enrichment_dead_letters", "late_data_metrics_batches",
                tables.WINDOW_ASSIGNMENTS]


def test_definitions_load_and_validate():
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == {"landing_files",
                                                                         *TABLE_ASSETS}
    for name in ("windowed_outputs_job", "live_job", "live_pipes_job", "live_stream_job"):
        assert defs.resolve_job_def(name) is not None
    assert defs.resolve_schedule_def("finality_schedule") is not None
    assert defs.resolve_sensor_def("landing_sensor") is not None


def test_every_table_has_description_owner_kinds_schema_and_path():
    graph = defs.resolve_asset_graph()
    for name in TABLE_ASSETS:
        node = graph.get(AssetKey(name))
        spec = node.to_asset_spec() if hasattr(node, "to_asset_spec") else None
        assert node.description, name
        assert node.owners == ["team:data-platform"], name
        assert {"spark", "delta"} <= set(node.kinds), name
        schema = node.metadata["dagster/column_schema"]
        assert isinstance(schema, TableSchema) and len(schema.columns) >= 4, name
        assert str(node.metadata["table_path"].value).endswith(name), name
        assert node.group_name in {"ingest", "windows", "monitoring", "enrichment"}, name
        del spec
    results = graph.get(AssetKey(tables.WINDOW_RESULTS))
    assert {c.name for c in results.metadata["dagster/column_schema"].columns} >= {
        "key", "window_start_ms", "pane_index", "timing", "is_last", "events", "value_sum"}
    assert results.freshness_policy is not None
    arrival = graph.get(AssetKey(tables.ARRIVAL_LOG)).metadata["dagster/column_schema"]
    assert [c.name for c in arrival.columns] == tables.ARRIVAL_LOG_SCHEMA.fieldNames()


def test_lineage_follows_the_data():
    graph = defs.resolve_asset_graph()

    def parents(name: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(AssetKey(name)).parent_keys}

    assert parents(tables.ARRIVAL_LOG) == {"landing_files"}
    assert parents(tables.WINDOW_RESULTS) == {tables.ARRIVAL_LOG}
    assert parents(tables.LATE_DATA_METRICS) == {tables.ARRIVAL_LOG, tables.QUARANTINE}
    assert parents("enriched_events") == {tables.ARRIVAL_LOG}


def test_checks_are_blocking_and_partitioned_like_the_metrics():
    graph = defs.resolve_asset_graph()
    checks = {key.name: graph.get_check_spec(key) for key in graph.asset_check_keys}
    assert set(checks) == {"dropped_late_rate", "quarantine_rate", "watermark_lag"}
    metrics = graph.get(AssetKey(tables.LATE_DATA_METRICS))
    for spec in checks.values():
        assert spec.asset_key == AssetKey(tables.LATE_DATA_METRICS) and spec.blocking
        assert spec.partitions_def == metrics.partitions_def  # each day its own verdict


def test_a_day_is_final_once_its_last_window_can_no_longer_change():
    lateness = 30_000
    midnight = 1_767_312_000_000  # 2026-01-02T00:00Z: end of day 2026-01-01
    assert not is_final(date(2026, 1, 1), midnight - 2 + lateness, lateness, "UTC")
    assert is_final(date(2026, 1, 1), midnight - 1 + lateness, lateness, "UTC")
    assert last_final_day(midnight - 1 + lateness, lateness, "UTC") == date(2026, 1, 1)
    assert last_final_day(midnight - 2 + lateness, lateness, "UTC") == date(2025, 12, 31)
    assert final_flag("2026-01-01", None, lateness, "UTC") == 0
    # in another time zone the day ends at a different instant
    assert not is_final(date(2026, 1, 1), midnight + lateness, lateness, "America/New_York")


def test_the_demo_writes_recent_days_and_a_quiet_instance(tmp_path):
    import yaml

    from platform_defs.demo import recent_start
    from platform_defs.instance import ensure_instance_config

    assert recent_start("UTC", 3, today=date(2026, 11, 23)) == "2026-11-20T00:00:00Z"
    assert recent_start("Europe/Paris", 3, today=date(2026, 11, 23)) == "2026-11-19T23:00:00Z"

    path = ensure_instance_config(tmp_path / "dagster_home")
    config = yaml.safe_load(path.read_text())
    assert config["telemetry"] == {"enabled": False} and config["nux"] == {"enabled": False}
    path.write_text("telemetry:\n  enabled: true\n")  # an operator's own choice is kept
    config = yaml.safe_load(ensure_instance_config(tmp_path / "dagster_home").read_text())
    assert config["telemetry"] == {"enabled": True} and config["nux"] == {"enabled": False}


def test_enrichment_follows_the_arrival_log_by_declarative_automation():
    graph = defs.resolve_asset_graph()
    for name in ("enrichment_responses", "enriched_events", "enrichment_dead_letters"):
        assert graph.get(AssetKey(name)).automation_condition is not None, name
    assert graph.get(AssetKey(tables.WINDOW_RESULTS)).automation_condition is None
    sensor = defs.resolve_sensor_def("default_automation_condition_sensor")
    assert sensor.default_status.value == "STOPPED"  # nothing runs until turned on
