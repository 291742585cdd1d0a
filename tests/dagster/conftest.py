"""Shared set-up for the Dagster tests: one generated, ingested platform home per module.

Spark work dominates the suite's time, so the landing files are generated and ingested once
per module (a module-scoped home with its own environment), and each test reads or rebuilds
only what it needs. Everything runs against the suite's real local SparkSession and Delta.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")

SMALL = {"events": 2000, "keys": 20, "producers": 2}
"""Two days of events (2026-01-01 and 2026-01-02), the demo's shape at a tenth of a percent."""

ENV_NAMES = ("PLATFORM_HOME", "PLATFORM_WAREHOUSE", "PLATFORM_LANDING", "PLATFORM_PIPELINES",
             "PLATFORM_STREAMS", "PLATFORM_INGEST_CLOCK", "PLATFORM_TIME_ZONE")
STREAM = "events"
PIPELINE = "per_minute"
"""The project's stream and its per-minute pipeline (the project's folders: three pipelines)."""


def key(*path: str):
    from dagster import AssetKey

    return AssetKey(list(path))


@dataclass
class Home:
    path: Path
    instance: object

    def resources(self, **overrides) -> dict:
        from platform_defs.enrichment_assets import EnrichmentServiceResource
        from platform_defs.monitoring import MonitoringResource
        from platform_defs.pipes_messages import subprocess_client
        from platform_defs.resources import DeltaSparkResource, PlatformResource

        resources = {"platform": PlatformResource(home=str(self.path)),
                     "spark": DeltaSparkResource.from_settings(shuffle_partitions=2),
                     "monitoring_thresholds": MonitoringResource(),
                     "enrichment_service": EnrichmentServiceResource(),
                     "pipes_subprocess_client": subprocess_client()}
        resources.update(overrides)
        return resources


HOME_PIPELINES = ("per_minute", "sliding_5m")
"""A test home's pipelines: two of the project's three over its stream (the vectorised ones:
the keyed runtime has tests of its own), so every run updates more than one pipeline."""


def make_home(path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    from dagster import DagsterInstance

    from tests.platform_home import REPO, write_pipelines

    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLATFORM_HOME", str(path))
    folder = write_pipelines(path.parent / f"{path.name}-pipelines", {
        name: (REPO / "pipelines" / f"{name}.yaml").read_text() for name in HOME_PIPELINES})
    monkeypatch.setenv("PLATFORM_PIPELINES", str(folder))
    return Home(path, DagsterInstance.ephemeral())


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """A platform home for a whole module (the env is restored afterwards)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield make_home(tmp_path_factory.mktemp("dagster") / "platform", monkeypatch)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    """A fresh platform home for one test."""
    return make_home(tmp_path / "platform", monkeypatch)


def materialize_assets(home: Home, selection: list, *, partition: str | None = None,
                       partition_range: tuple[str, str] | None = None,
                       run_config: dict | None = None, resources: dict | None = None,
                       raise_on_error: bool = True):
    """Materialise ``selection`` (asset keys) of the project's assets in process against
    ``home``."""
    from dagster import AssetSelection, materialize

    from platform_defs.definitions import defs
    from platform_defs.schedules import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    tags = {}
    if partition_range is not None:
        tags = {ASSET_PARTITION_RANGE_START_TAG: partition_range[0],
                ASSET_PARTITION_RANGE_END_TAG: partition_range[1]}
    return materialize(list(defs.assets), instance=home.instance,
                       resources=resources or home.resources(),
                       selection=AssetSelection.assets(*selection), partition_key=partition,
                       tags=tags, run_config=run_config or {}, raise_on_error=raise_on_error)


def landing_config(**overrides) -> dict:
    return {"ops": {f"{STREAM}__landing_files": {"config": {**SMALL, **overrides}}}}


INGEST = [key(STREAM, "landing_files"), key(STREAM, "arrival_log"), key(STREAM, "quarantine")]


def windowed(pipeline: str = PIPELINE) -> list:
    return [key(pipeline, t) for t in ("window_results", "late_records", "late_data_metrics")]
