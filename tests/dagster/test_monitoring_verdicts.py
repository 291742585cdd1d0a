"""The late-data checks' verdicts over metrics rows, without Spark: each check passes, warns
and fails at its own thresholds, and names the worst day. (The Spark test feeds real data
through the assets; this one drives each check, the watermark lag included, past each level.)"""

from __future__ import annotations

from dagster import AssetCheckSeverity

from platform_defs.monitoring import MonitoringResource, check_evaluations


def _day(day: str, *, dropped: int = 0, quarantined: int = 0, lag_ms: float = 0.0) -> dict:
    return {"window_end_date": day, "on_time": 1_000 - dropped, "late_within_lateness": 0,
            "dropped_late": dropped, "quarantined": quarantined, "lateness_p50_ms": 0.0,
            "lateness_p95_ms": 0.0, "lateness_p99_ms": 0.0, "lateness_max_ms": 0,
            "watermark_lag_p50_ms": lag_ms, "watermark_lag_max_ms": int(lag_ms)}


def _verdicts(rows: list[dict], thresholds: MonitoringResource) -> dict:
    return {e.check_name: e for e in check_evaluations(rows, thresholds)}


THRESHOLDS = MonitoringResource(late_rate_warn=0.05, late_rate_error=0.2,
                                quarantine_rate_warn=0.02, quarantine_rate_error=0.1,
                                watermark_lag_warn_ms=60_000, watermark_lag_error_ms=600_000)


def test_ordinary_days_pass_every_check():
    verdicts = _verdicts([_day("2026-01-01", dropped=10, quarantined=5, lag_ms=5_000),
                          _day("2026-01-02", lag_ms=30_000)], THRESHOLDS)
    assert all(v.passed for v in verdicts.values()), verdicts


def test_each_check_warns_then_fails_on_its_worst_day():
    for lag_ms, expected in ((120_000, AssetCheckSeverity.WARN),
                             (3_600_000, AssetCheckSeverity.ERROR)):
        verdicts = _verdicts([_day("2026-01-01", lag_ms=1_000),
                              _day("2026-01-02", lag_ms=lag_ms)], THRESHOLDS)
        lag = verdicts["watermark_lag"]
        assert not lag.passed and lag.severity == expected
        assert lag.metadata["worst_day"].value == "2026-01-02"
        assert lag.metadata["value"].value == lag_ms
        assert verdicts["late_rate"].passed and verdicts["quarantine_rate"].passed

    verdicts = _verdicts([_day("2026-01-01", dropped=100), _day("2026-01-02", dropped=300)],
                         THRESHOLDS)
    late = verdicts["late_rate"]
    assert not late.passed and late.severity == AssetCheckSeverity.ERROR
    assert late.metadata["worst_day"].value == "2026-01-02"

    verdicts = _verdicts([_day("2026-01-01", quarantined=40)], THRESHOLDS)
    assert verdicts["quarantine_rate"].severity == AssetCheckSeverity.WARN
    assert not verdicts["quarantine_rate"].passed
