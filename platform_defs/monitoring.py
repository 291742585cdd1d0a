"""Late-data monitoring: the numbers the UI plots per day, and the checks that judge each day.

Per day of window end, the late-data metrics become metadata on that day's materialisation:
numbers Dagster plots per partition (counts, the dropped and late-within-lateness rates, the
lateness percentiles over the late records, the watermark lag), each duration also in human
units beside its milliseconds, a lateness histogram and a sample of the day's late records
(Markdown), and whether the day is final yet. A day with no window and no quarantined line
says so instead of showing zeros. How each is worded (human units, Markdown) is the
translator's (``platform_defs.translator``).

Three asset checks are *partitioned* like the asset (``AssetCheckSpec(partitions_def=...)``),
so every day carries its own verdict: over the *warn* threshold a check fails with WARN (the
run goes on), over the *error* threshold with ERROR; the checks are blocking, so an ERROR
fails the run and nothing downstream consumes a day that lost too much data. Thresholds are
fields of the ``monitoring_thresholds`` resource, defaulting to ``PLATFORM_*`` variables.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetRecordsFilter,
    ConfigurableResource,
    DagsterInstance,
    MetadataValue,
    PreviewWarning,
    deserialize_value,
)
from pydantic import Field

from jobs.config.registry import Pipeline
from jobs.config.settings import PlatformSettings
from jobs.views.late_detail import DayLateness
from platform_defs.partitions import daily_partitions
from platform_defs.translator import DEFAULT_TRANSLATOR, PlatformTranslator

_DEFAULTS = PlatformSettings.from_env(check=False)

COUNT_FIELDS = ("on_time", "late_within_lateness", "dropped_late", "quarantined")
FLOAT_FIELDS = ("lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms",
                "watermark_lag_p50_ms")
INT_FIELDS = ("lateness_max_ms", "watermark_lag_max_ms")
RATE_FIELDS = ("dropped_late_rate", "late_within_lateness_rate", "quarantine_rate")
EMPTY_DAY = "no window ends on this day and no line was quarantined: nothing to measure"


class MonitoringResource(ConfigurableResource):
    """Thresholds of the late-data checks (fractions of records; lag in milliseconds)."""

    dropped_rate_warn: float = Field(
        default=_DEFAULTS.late_rate_warn,
        description="Share of (record, window) pairs dropped as too late (past allowed "
                    "lateness) above which to WARN; PLATFORM_LATE_RATE_WARN")
    dropped_rate_error: float = Field(
        default=_DEFAULTS.late_rate_error,
        description="Dropped share above which the check fails with ERROR (blocking); "
                    "PLATFORM_LATE_RATE_ERROR")
    quarantine_rate_warn: float = Field(
        default=_DEFAULTS.quarantine_rate_warn,
        description="Quarantined share of lines above which to WARN")
    quarantine_rate_error: float = Field(
        default=_DEFAULTS.quarantine_rate_error,
        description="Quarantined share above which the check fails with ERROR (blocking)")
    watermark_lag_warn_ms: float = Field(
        default=_DEFAULTS.watermark_lag_warn_ms,
        description="Maximum watermark lag of a day (ingest time - watermark) above which to "
                    "WARN")
    watermark_lag_error_ms: float = Field(
        default=_DEFAULTS.watermark_lag_error_ms,
        description="Maximum watermark lag above which the check fails with ERROR (blocking)")


@dataclass(frozen=True)
class CheckDefinition:
    name: str
    description: str
    value_key: str
    """Key of the judged value in :func:`day_metadata`'s output."""
    warn_field: str
    error_field: str
    is_duration: bool = False


CHECKS = (
    CheckDefinition("dropped_late_rate", "Share of the day's (record, window) pairs dropped as "
                    "too late (past allowed lateness; late records within it are not counted)",
                    "dropped_late_rate", "dropped_rate_warn", "dropped_rate_error"),
    CheckDefinition("quarantine_rate", "Share of the day's landed lines quarantined",
                    "quarantine_rate", "quarantine_rate_warn", "quarantine_rate_error"),
    CheckDefinition("watermark_lag", "The day's maximum watermark lag (ingest time - "
                    "watermark): how far behind the ingest clock event time was at worst; a "
                    "median hides the stalls an operator must see",
                    "watermark_lag_max_ms", "watermark_lag_warn_ms", "watermark_lag_error_ms",
                    is_duration=True),
)


def check_specs(metrics_asset: AssetKey) -> list[AssetCheckSpec]:
    """The checks of a pipeline's late-data metrics, partitioned like the asset: each day
    shows its own verdict in the UI."""
    with warnings.catch_warnings():  # partitioned checks are a preview in 1.13; knowingly
        warnings.simplefilter("ignore", PreviewWarning)
        return [AssetCheckSpec(c.name, asset=metrics_asset, description=c.description,
                               blocking=True, partitions_def=daily_partitions)
                for c in CHECKS]


def is_empty(row: Mapping) -> bool:
    """No (record, window) pair ends on the day and nothing was quarantined."""
    return not any(int(row.get(name) or 0) for name in COUNT_FIELDS)


def day_numbers(row: Mapping) -> dict[str, int | float]:
    """One day's metrics as plottable numbers, rates included (thresholds can be read off)."""
    counts = {name: int(row.get(name) or 0) for name in COUNT_FIELDS}
    assigned = counts["on_time"] + counts["late_within_lateness"] + counts["dropped_late"]
    lines = assigned + counts["quarantined"]
    values: dict[str, int | float] = dict(counts)
    values["dropped_late_rate"] = round(counts["dropped_late"] / assigned, 6) if assigned else 0.0
    values["late_within_lateness_rate"] = (
        round(counts["late_within_lateness"] / assigned, 6) if assigned else 0.0)
    values["quarantine_rate"] = round(counts["quarantined"] / lines, 6) if lines else 0.0
    for name in FLOAT_FIELDS:
        values[name] = float(row.get(name) or 0.0)
    for name in INT_FIELDS:
        values[name] = int(row.get(name) or 0)
    return values


def day_metadata(row: Mapping, detail: DayLateness | None = None,
                 translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> dict[str, object]:
    """What a day's materialisation carries: the numbers (each duration followed by the same
    in human units), the lateness histogram and the latest late records; an empty day only
    says it is empty, so it never shows as a state of all zeros."""
    if is_empty(row):
        return {"status": EMPTY_DAY}
    metadata = translator.with_human_units(day_numbers(row))
    if detail is not None and detail.histogram:
        metadata["lateness_histogram"] = MetadataValue.md(translator.histogram_markdown(detail))
    if detail is not None and detail.sample:
        metadata["late_records_sample"] = MetadataValue.md(translator.sample_markdown(detail))
    return metadata


def day_partition_metadata(pipeline: Pipeline, day: str, row: Mapping,
                           detail: DayLateness | None, watermark: int | None,
                           translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> dict:
    """A day's materialisation of a pipeline's late-data metrics: its figures
    (:func:`day_metadata`), whether it is final yet, and the versions."""
    return {**day_metadata(row, detail, translator),
            **translator.get_finality_metadata(pipeline, day, watermark),
            **translator.get_version_metadata(pipeline)}


def summarise(rows: Iterable[Mapping]) -> dict[str, int | float | str]:
    """Totals and worst days over the metrics rows of a run (the range's summary)."""
    days = {str(row["window_end_date"]): day_numbers(row) for row in rows}
    summary: dict[str, int | float | str] = {
        name: sum(int(d[name]) for d in days.values()) for name in COUNT_FIELDS}
    for field in (*RATE_FIELDS, "lateness_p99_ms", "watermark_lag_max_ms"):
        worst = max(days.items(), key=lambda item, f=field: item[1][f], default=None)
        summary[f"{field}_max"] = worst[1][field] if worst else 0
        if worst:
            summary[f"{field}_max_day"] = worst[0]
    summary["days"] = len(days)
    return summary


@dataclass(frozen=True)
class Verdict:
    check: str
    passed: bool
    severity: AssetCheckSeverity
    metadata: dict
    description: str


def day_verdicts(row: Mapping, thresholds: MonitoringResource,
                 translator: PlatformTranslator = DEFAULT_TRANSLATOR) -> list[Verdict]:
    """Every check's verdict on one day: passed, or failed with WARN or ERROR severity."""
    values = day_numbers(row)
    verdicts = []
    for check in CHECKS:
        value = float(values[check.value_key])
        warn = float(getattr(thresholds, check.warn_field))
        error = float(getattr(thresholds, check.error_field))
        shown = translator.duration_text if check.is_duration else (lambda v: f"{v:.2%}")
        metadata = {"value": value, "warn_threshold": warn, "error_threshold": error,
                    "day": str(row["window_end_date"])}
        if check.is_duration:
            metadata.update(value_human=shown(value), warn_threshold_human=shown(warn),
                            error_threshold_human=shown(error))
        if is_empty(row):
            verdicts.append(Verdict(check.name, True, AssetCheckSeverity.WARN, metadata,
                                    EMPTY_DAY))
            continue
        if value > error:
            passed, severity, word = False, AssetCheckSeverity.ERROR, "above the error"
        elif value > warn:
            passed, severity, word = False, AssetCheckSeverity.WARN, "above the warn"
        else:
            passed, severity, word = True, AssetCheckSeverity.ERROR, "within the warn"
        verdicts.append(Verdict(check.name, passed, severity, metadata,
                                f"{shown(value)}: {word} threshold ({shown(warn)} warn, "
                                f"{shown(error)} error)"))
    return verdicts


def latest_materialization_target(instance: DagsterInstance, day: str,
                                  metrics_asset: AssetKey):
    """The latest materialisation of ``day``'s metrics, as the target of a check evaluation.

    The UI shows a partition's check status only while the evaluation targets the partition's
    latest materialisation. ``AssetCheckResult`` finds it by itself, but only in a run of one
    partition; a single-run backfill of a range logs one evaluation per day and must name
    it. Dagster 1.13 exports no constructor for that pointer, so it is built through the
    public serdes API from its stored form (the form Dagster keeps readable in event logs)."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=metrics_asset, asset_partitions=[day]),
        limit=1).records
    if not records:
        return None
    record = records[0]
    return deserialize_value(
        '{"__class__": "AssetCheckEvaluationTargetMaterializationData", '
        f'"storage_id": {int(record.storage_id)}, "run_id": "{record.run_id}", '
        f'"timestamp": {float(record.timestamp)}}}')


def check_evaluations(rows: Iterable[Mapping], thresholds: MonitoringResource,
                      metrics_asset: AssetKey, instance: DagsterInstance | None = None,
                      translator: PlatformTranslator = DEFAULT_TRANSLATOR
                      ) -> Iterator[AssetCheckEvaluation]:
    """One evaluation per check and day, on that day's partition (call it once the days'
    materialisations are logged, so each evaluation targets its day's latest one)."""
    first_partition = daily_partitions.start.date().isoformat()
    for row in rows:
        day = str(row["window_end_date"])
        if day < first_partition:
            continue  # written, but before the first Dagster partition
        target = latest_materialization_target(instance, day, metrics_asset) \
            if instance else None
        for v in day_verdicts(row, thresholds, translator):
            yield AssetCheckEvaluation(
                asset_key=metrics_asset, check_name=v.check, passed=v.passed,
                severity=v.severity, metadata=v.metadata, description=v.description,
                blocking=True, partition=day, target_materialization_data=target)


def batch_metadata(summary: Mapping, translator: PlatformTranslator = DEFAULT_TRANSLATOR
                   ) -> dict[str, object]:
    """A live micro-batch's figures as plottable numbers (an observation's metadata), each
    duration followed by the same in human units."""
    values = translator.with_human_units(day_numbers(summary))
    for name in ("batch_id", "records", "panes", "late_records"):
        values[name] = int(summary.get(name) or 0)
    if summary.get("version"):
        values["pipeline_version"] = str(summary["version"])
    return values
