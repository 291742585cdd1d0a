"""The code location loads and validates, and describes every table properly (no Spark)."""

from __future__ import annotations

from datetime import date

from dagster import AssetKey, Definitions, TableSchema

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.tables.days import final_flag, is_final, last_final_day
from platform_defs.definitions import defs

PIPELINES = ("per_minute", "sessions", "sliding_5m")
STREAM_TABLES = [tables.ARRIVAL_LOG, tables.QUARANTINE, "enrichment_responses",
                 "enriched_events", "enrichment_dead_letters"]
PIPELINE_TABLES = [tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS,
                   tables.BATCH_METRICS]
PROCESSES = ("daily_totals", "spend_spike")
"""The demo's process pipelines (their own functions: output and late records)."""
TABLE_ASSETS = ([f"events/{t}" for t in STREAM_TABLES]
                + [f"{p}/{t}" for p in PIPELINES for t in PIPELINE_TABLES]
                + ["sessions/window_assignments"]  # the one the operator library runs per key
                + [f"{p}/{t}" for p in PROCESSES for t in (tables.OUTPUT, tables.LATE_RECORDS)])


def test_every_pipeline_and_stream_of_the_folders_is_defined():
    Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == {
        "events/landing_files", *TABLE_ASSETS}
    for name in ("live_job", "live_pipes_job", "live_stream_job",
                 *(f"{p}_windowed_job" for p in PIPELINES),
                 *(f"{p}_process_job" for p in PROCESSES)):
        assert defs.resolve_job_def(name) is not None
    for process in PROCESSES:  # a group each, like every pipeline
        node = graph.get(AssetKey([process, tables.OUTPUT]))
        assert node.group_name == process
        assert node.code_version == platform_of(PlatformSettings.from_env(check=False)) \
            .pipelines[process].version
        assert {c.name for c in node.metadata["dagster/column_schema"].columns} >= {
            "user", "key", "emission", "output_date"}
    assert defs.resolve_schedule_def("finality_schedule") is not None
    assert defs.resolve_sensor_def("landing_sensor") is not None
    platform = platform_of(PlatformSettings.from_env(check=False))
    for pipeline in PIPELINES:  # a group each, its version as the assets' code version
        for table in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS):
            node = graph.get(AssetKey([pipeline, table]))
            assert node.group_name == pipeline
            assert node.code_version == platform.pipelines[pipeline].version
    assert graph.get(AssetKey(["events", tables.ARRIVAL_LOG])).group_name == "events"


def test_every_table_has_description_owner_kinds_schema_and_path():
    from jobs.lifecycle.versions import serving_pipeline

    graph = defs.resolve_asset_graph()
    platform = platform_of(PlatformSettings.from_env(check=False))
    for name in TABLE_ASSETS:
        node = graph.get(AssetKey(name.split("/")))
        assert node.description, name
        assert node.owners == ["team:data-platform"], name
        assert {"spark", "delta"} <= set(node.kinds), name
        schema = node.metadata["dagster/column_schema"]
        assert isinstance(schema, TableSchema) and len(schema.columns) >= 4, name
        path = str(node.metadata["table_path"].value)
        if name.startswith("events/"):
            assert path.endswith(f"streams/{name}"), name
        else:  # the version readers see (the file's, before anything was computed)
            pipeline, table = name.split("/")
            version = serving_pipeline(platform.pipelines[pipeline]).version
            assert path.endswith(f"pipelines/{pipeline}/versions/{version}/{table}"), name
        assert node.group_name in {"events", "enrichment", *PIPELINES, *PROCESSES}, name
    results = graph.get(AssetKey(["per_minute", tables.WINDOW_RESULTS]))
    assert {c.name for c in results.metadata["dagster/column_schema"].columns} >= {
        "key", "window_start_ms", "pane_index", "timing", "is_last", "events", "value_sum"}
    assert results.freshness_policy is not None
    sliding = graph.get(AssetKey(["sliding_5m", tables.WINDOW_RESULTS]))
    assert "value_max" in {c.name for c in sliding.metadata["dagster/column_schema"].columns}
    arrival = graph.get(AssetKey(["events", tables.ARRIVAL_LOG])).metadata[
        "dagster/column_schema"]
    assert [c.name for c in arrival.columns] == tables.ARRIVAL_LOG_SCHEMA.fieldNames()


def test_lineage_follows_the_data():
    graph = defs.resolve_asset_graph()

    def parents(*key: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(AssetKey(list(key))).parent_keys}

    assert parents("events", tables.ARRIVAL_LOG) == {"events/landing_files"}
    for pipeline in PIPELINES:  # every pipeline reads the one stream's log
        assert parents(pipeline, tables.WINDOW_RESULTS) == {"events/arrival_log"}
        assert parents(pipeline, tables.LATE_DATA_METRICS) == {"events/arrival_log",
                                                               "events/quarantine"}
    assert parents("events", "enriched_events") == {"events/arrival_log"}


def test_checks_are_blocking_and_partitioned_like_each_pipelines_metrics():
    graph = defs.resolve_asset_graph()
    checks = [graph.get_check_spec(key) for key in graph.asset_check_keys]
    assert {(c.asset_key.path[0], c.name) for c in checks} == {
        (p, name) for p in PIPELINES
        for name in ("dropped_late_rate", "quarantine_rate", "watermark_lag")}
    for spec in checks:
        metrics = graph.get(spec.asset_key)
        assert spec.asset_key.path[-1] == tables.LATE_DATA_METRICS and spec.blocking
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
        assert graph.get(AssetKey(["events", name])).automation_condition is not None, name
    assert graph.get(AssetKey(["per_minute", tables.WINDOW_RESULTS])).automation_condition \
        is None
    sensor = defs.resolve_sensor_def("default_automation_condition_sensor")
    assert sensor.default_status.value == "STOPPED"  # nothing runs until turned on


def test_a_translator_of_its_own_describes_every_table_the_component_builds():
    """dagster-dbt's way: a subclass of the component returns a subclass of the translator,
    and every asset, job and schedule it builds follows it; nothing else changes."""
    import dagster as dg

    from platform_defs.components import EventTimePipelines
    from platform_defs.translator import PlatformTranslator

    class Analytics(PlatformTranslator):
        def get_asset_key(self, of, table):
            return super().get_asset_key(of, table).with_prefix("analytics")

        def get_group_name(self, of, table):
            return f"analytics_{super().get_group_name(of, table)}"

        def get_description(self, of, table):
            return f"[{of.name}] {super().get_description(of, table)}"

        def get_metadata(self, of, table):
            return {**super().get_metadata(of, table), "team": "analytics"}

    class AnalyticsPipelines(EventTimePipelines):
        def get_translator(self) -> PlatformTranslator:
            return Analytics(owners=self.owners)

    built = dg.Definitions.merge(
        AnalyticsPipelines(owners=["team:analytics"]).build_defs(
            dg.ComponentTree.for_test().load_context),
        dg.Definitions(resources=defs.resources))
    dg.Definitions.validate_loadable(built)
    graph, default = built.resolve_asset_graph(), defs.resolve_asset_graph()
    keys = graph.get_all_asset_keys()
    assert {AssetKey(k.path[1:]) for k in keys} == {
        k for k in default.get_all_asset_keys() if default.get(k).group_name != "enrichment"}
    for key in keys:
        node, before = graph.get(key), default.get(AssetKey(key.path[1:]))
        assert key.path[0] == "analytics", key
        assert node.group_name == f"analytics_{before.group_name}", key
        assert node.owners == ["team:analytics"], key
        assert node.description == f"[{key.path[1]}] {before.description}", key
        assert node.metadata["team"] == "analytics", key
        assert node.kinds == before.kinds and node.code_version == before.code_version, key
        assert {AssetKey(k.path[1:]) for k in node.parent_keys} == before.parent_keys, key
    windowed = {AssetKey(["analytics", p, t]) for p in PIPELINES
                for t in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)}
    assert {k for p in PIPELINES for k in built.resolve_job_def(f"{p}_windowed_job")
            .asset_layer.executable_asset_keys} == windowed
    schedule = built.resolve_schedule_def("finality_schedule")
    assert set(schedule.target.resolvable_to_job.selection.resolve(graph)) == windowed
    assert graph.asset_check_keys and all(
        c.asset_key.path[0] == "analytics" for c in graph.asset_check_keys)
