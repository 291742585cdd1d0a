"""The late-data checks pass on ordinary data and fail (WARN, or ERROR and blocking) when fed
data with far too much late data."""

from __future__ import annotations

import pytest
from dagster import AssetCheckSeverity

from jobs.generator import GeneratorConfig, generate
from platform_defs.monitoring import MonitoringResource
from tests.dagster.conftest import STREAM, key, materialize_assets, windowed

pytestmark = pytest.mark.spark

WINDOWED = windowed()


def _checks(result) -> dict:
    evaluations = result.get_asset_check_evaluations()
    assert {e.partition for e in evaluations} == {"2026-01-01"}  # the day's own verdicts
    return {e.check_name: e for e in evaluations}


def test_too_much_late_data_fails_the_checks(home, spark):
    generate(GeneratorConfig(events=2000, keys=20, producers=2, duration_ms=86_400_000,
                             very_late_fraction=0.4, bad_fraction=0.2),
             home.path / "landing" / STREAM)
    assert materialize_assets(home, [key(STREAM, "arrival_log"),
                                     key(STREAM, "quarantine")]).success

    # default thresholds: 40% dropped and 20% quarantined are errors, and errors block the run
    failed = materialize_assets(home, WINDOWED, partition="2026-01-01", raise_on_error=False)
    assert not failed.success
    checks = _checks(failed)
    for name in ("dropped_late_rate", "quarantine_rate"):
        assert not checks[name].passed and checks[name].severity == AssetCheckSeverity.ERROR
        assert checks[name].metadata["value"].value > checks[name].metadata[
            "error_threshold"].value
    assert failed.get_asset_materialization_events()  # the day was still written and recorded

    # looser thresholds (as set from the launchpad or PLATFORM_* variables): only warnings
    loose = MonitoringResource(dropped_rate_warn=0.05, dropped_rate_error=0.9,
                               quarantine_rate_warn=0.05, quarantine_rate_error=0.9)
    warned = materialize_assets(home, WINDOWED, partition="2026-01-01",
                                resources=home.resources(monitoring_thresholds=loose))
    assert warned.success
    checks = _checks(warned)
    for name in ("dropped_late_rate", "quarantine_rate"):
        assert not checks[name].passed and checks[name].severity == AssetCheckSeverity.WARN
