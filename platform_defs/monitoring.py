"""Late-data monitoring: the numbers the UI plots and the checks that judge them.

Per day of window end, the late-data metrics become numeric metadata on that day's
materialisation (Dagster plots int and float metadata per partition). Three asset checks turn
them into a verdict with two levels: over the *warn* threshold a check fails with WARN severity
(the run goes on), over the *error* threshold it fails with ERROR severity, and since the checks
are blocking that fails the run, so nothing downstream consumes a day that lost too much data.
Thresholds are fields of the ``monitoring`` resource, defaulting to ``PLATFORM_*`` variables.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    ConfigurableResource,
)
from pydantic import Field

from jobs.settings import PlatformSettings

_DEFAULTS = PlatformSettings.from_env(check=False)

METRICS_ASSET = "late_data_metrics"
COUNT_FIELDS = ("on_time", "late_within_lateness", "dropped_late", "quarantined")
FLOAT_FIELDS = ("lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms",
                "watermark_lag_p50_ms")
INT_FIELDS = ("lateness_max_ms", "watermark_lag_max_ms")


class MonitoringResource(ConfigurableResource):
    """Thresholds of the late-data checks (fractions of records; lag in milliseconds)."""

    late_rate_warn: float = Field(
        default=_DEFAULTS.late_rate_warn,
        description="Dropped-late share of (record, window) pairs above which to WARN")
    late_rate_error: float = Field(
        default=_DEFAULTS.late_rate_error,
        description="Dropped-late share above which the check fails with ERROR (blocking)")
    quarantine_rate_warn: float = Field(
        default=_DEFAULTS.quarantine_rate_warn,
        description="Quarantined share of lines above which to WARN")
    quarantine_rate_error: float = Field(
        default=_DEFAULTS.quarantine_rate_error,
        description="Quarantined share above which the check fails with ERROR (blocking)")
    watermark_lag_warn_ms: float = Field(
        default=_DEFAULTS.watermark_lag_warn_ms,
        description="Median watermark lag (ingest time - watermark) above which to WARN")
    watermark_lag_error_ms: float = Field(
        default=_DEFAULTS.watermark_lag_error_ms,
        description="Median watermark lag above which the check fails with ERROR (blocking)")


@dataclass(frozen=True)
class CheckDefinition:
    name: str
    description: str
    value_key: str
    """Key of the measured value in ``summarise``'s output."""
    warn_field: str
    error_field: str


CHECKS = (
    CheckDefinition("late_rate", "Share of (record, window) pairs dropped as too late, on the "
                    "worst day of the run", "late_rate_max", "late_rate_warn", "late_rate_error"),
    CheckDefinition("quarantine_rate", "Share of landed lines quarantined, on the worst day",
                    "quarantine_rate_max", "quarantine_rate_warn", "quarantine_rate_error"),
    CheckDefinition("watermark_lag", "Median watermark lag (ingest time - watermark, ms), on "
                    "the worst day", "watermark_lag_p50_ms_max", "watermark_lag_warn_ms",
                    "watermark_lag_error_ms"),
)

CHECK_SPECS = [AssetCheckSpec(c.name, asset=METRICS_ASSET, description=c.description,
                              blocking=True) for c in CHECKS]


def day_metadata(row: Mapping) -> dict[str, int | float]:
    """One day's metrics as plottable numbers (rates included, so thresholds can be read off)."""
    counts = {name: int(row.get(name) or 0) for name in COUNT_FIELDS}
    assigned = counts["on_time"] + counts["late_within_lateness"] + counts["dropped_late"]
    lines = assigned + counts["quarantined"]
    values: dict[str, int | float] = dict(counts)
    values["late_rate"] = round(counts["dropped_late"] / assigned, 6) if assigned else 0.0
    values["quarantine_rate"] = round(counts["quarantined"] / lines, 6) if lines else 0.0
    for name in FLOAT_FIELDS:
        values[name] = float(row.get(name) or 0.0)
    for name in INT_FIELDS:
        values[name] = int(row.get(name) or 0)
    return values


def summarise(rows: Iterable[Mapping]) -> dict[str, int | float | str]:
    """Totals and worst days over the metrics rows of a run (the checks' inputs)."""
    days = {str(row["window_end_date"]): day_metadata(row) for row in rows}
    summary: dict[str, int | float | str] = {
        name: sum(int(d[name]) for d in days.values()) for name in COUNT_FIELDS}
    for key, field in (("late_rate_max", "late_rate"), ("quarantine_rate_max", "quarantine_rate"),
                       ("watermark_lag_p50_ms_max", "watermark_lag_p50_ms"),
                       ("lateness_p99_ms_max", "lateness_p99_ms"),
                       ("watermark_lag_max_ms", "watermark_lag_max_ms")):
        worst = max(days.items(), key=lambda item, f=field: item[1][f], default=None)
        summary[key] = worst[1][field] if worst else 0
        if worst and key in {c.value_key for c in CHECKS}:
            summary[f"{key}_day"] = worst[0]
    summary["days"] = len(days)
    return summary


def _verdicts(summary: Mapping, thresholds: MonitoringResource
              ) -> list[tuple[str, bool, AssetCheckSeverity, dict]]:
    """Per check: its name, whether it passed, the severity if not, and its metadata."""
    verdicts = []
    for check in CHECKS:
        value = float(summary.get(check.value_key, 0) or 0)
        warn = float(getattr(thresholds, check.warn_field))
        error = float(getattr(thresholds, check.error_field))
        metadata = {"value": value, "warn_threshold": warn, "error_threshold": error,
                    "worst_day": str(summary.get(f"{check.value_key}_day", "")),
                    "days": int(summary.get("days", 0))}
        if value > error:
            verdicts.append((check.name, False, AssetCheckSeverity.ERROR, metadata))
        elif value > warn:
            verdicts.append((check.name, False, AssetCheckSeverity.WARN, metadata))
        else:
            verdicts.append((check.name, True, AssetCheckSeverity.ERROR, metadata))
    return verdicts


def evaluate(summary: Mapping, thresholds: MonitoringResource) -> list[AssetCheckResult]:
    """One result per check: passed, or failed with WARN or ERROR severity (for the assets
    that carry the checks)."""
    return [AssetCheckResult(check_name=name, asset_key=METRICS_ASSET, passed=passed,
                             severity=severity, metadata=metadata)
            for name, passed, severity, metadata in _verdicts(summary, thresholds)]


def check_evaluations(rows: Iterable[Mapping], thresholds: MonitoringResource
                      ) -> list[AssetCheckEvaluation]:
    """The same verdicts over the metrics rows an op job wrote (the live runs), as events an
    op logs: the checks' history then shows live and backfilled days alike. An op cannot
    block its downstream the way the asset's blocking checks do; the run logs the failure."""
    summary = summarise(rows)
    return [AssetCheckEvaluation(asset_key=AssetKey(METRICS_ASSET), check_name=name,
                                 passed=passed, severity=severity, metadata=metadata)
            for name, passed, severity, metadata in _verdicts(summary, thresholds)]


def batch_metadata(summary: Mapping) -> dict[str, int | float]:
    """A live micro-batch's figures as plottable numbers (an observation's metadata)."""
    values = day_metadata(summary)
    for name in ("batch_id", "records", "panes", "late_records"):
        values[name] = int(summary.get(name) or 0)
    return values
