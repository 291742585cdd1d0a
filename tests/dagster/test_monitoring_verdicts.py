"""The late-data checks' verdicts and the metadata a person reads, without Spark: each check
passes, warns and fails at its own thresholds on each day's own partition; the watermark lag
is judged on its maximum; rates are named for what they count; durations come in human units
beside the raw numbers; an empty day says so instead of showing zeros."""

from __future__ import annotations

from dagster import AssetCheckSeverity, AssetKey, MetadataValue

from jobs.views.late_detail import DayLateness, bucket_labels, bucket_of, histograms
from platform_defs.monitoring import EMPTY_DAY, MonitoringResource, check_evaluations, day_metadata
from platform_defs.translator import DEFAULT_TRANSLATOR

human_duration = DEFAULT_TRANSLATOR.duration_text

METRICS = AssetKey(["per_minute", "late_data_metrics"])


def _day(day: str, *, dropped: int = 0, within: int = 0, quarantined: int = 0,
         lag_p50_ms: float = 0.0, lag_max_ms: int = 0) -> dict:
    return {"window_end_date": day, "on_time": 1_000 - dropped - within,
            "late_within_lateness": within, "dropped_late": dropped, "quarantined": quarantined,
            "lateness_p50_ms": 2_000.0, "lateness_p95_ms": 50_000.0,
            "lateness_p99_ms": 83_000.0, "lateness_max_ms": 7_500_000,
            "watermark_lag_p50_ms": lag_p50_ms, "watermark_lag_max_ms": lag_max_ms}


def _verdicts(rows: list[dict], thresholds: MonitoringResource) -> dict:
    return {(e.partition, e.check_name): e for e in check_evaluations(rows, thresholds, METRICS)}


THRESHOLDS = MonitoringResource(dropped_rate_warn=0.05, dropped_rate_error=0.2,
                                quarantine_rate_warn=0.02, quarantine_rate_error=0.1,
                                watermark_lag_warn_ms=60_000, watermark_lag_error_ms=600_000)


def test_ordinary_days_pass_every_check_on_their_own_partition():
    verdicts = _verdicts([_day("2026-01-01", dropped=10, quarantined=5, lag_max_ms=5_000),
                          _day("2026-01-02", lag_max_ms=30_000)], THRESHOLDS)
    assert len(verdicts) == 6 and all(v.passed for v in verdicts.values()), verdicts
    assert all(v.blocking for v in verdicts.values())
    assert {day for day, _ in verdicts} == {"2026-01-01", "2026-01-02"}


def test_each_check_warns_then_fails_on_the_day_that_deserves_it():
    for lag_ms, expected in ((120_000, AssetCheckSeverity.WARN),
                             (3_600_000, AssetCheckSeverity.ERROR)):
        # the median is harmless, the maximum is not: the maximum is judged
        verdicts = _verdicts([_day("2026-01-01", lag_max_ms=1_000),
                              _day("2026-01-02", lag_p50_ms=1_000, lag_max_ms=lag_ms)],
                             THRESHOLDS)
        lag = verdicts[("2026-01-02", "watermark_lag")]
        assert not lag.passed and lag.severity == expected
        assert lag.metadata["value"].value == lag_ms
        assert lag.metadata["value_human"].value == human_duration(lag_ms)
        assert verdicts[("2026-01-01", "watermark_lag")].passed
        assert verdicts[("2026-01-02", "dropped_late_rate")].passed

    verdicts = _verdicts([_day("2026-01-01", dropped=100), _day("2026-01-02", dropped=300)],
                         THRESHOLDS)
    assert verdicts[("2026-01-01", "dropped_late_rate")].severity == AssetCheckSeverity.WARN
    assert verdicts[("2026-01-02", "dropped_late_rate")].severity == AssetCheckSeverity.ERROR
    assert "30.00%" in verdicts[("2026-01-02", "dropped_late_rate")].description

    # late within lateness is counted in the results: it is not what the dropped check judges
    verdicts = _verdicts([_day("2026-01-01", within=400)], THRESHOLDS)
    assert verdicts[("2026-01-01", "dropped_late_rate")].passed

    verdicts = _verdicts([_day("2026-01-01", quarantined=40)], THRESHOLDS)
    assert verdicts[("2026-01-01", "quarantine_rate")].severity == AssetCheckSeverity.WARN
    assert not verdicts[("2026-01-01", "quarantine_rate")].passed


def test_day_metadata_names_rates_and_shows_durations_for_people():
    detail = DayLateness(histogram=[(label, 1, 2) for label in bucket_labels()], sample=[{
        "key": "user-0003", "arrival_seq": 17, "event_time_ms": 1_767_225_600_000,
        "ingest_time_ms": 1_767_232_800_000, "watermark_ms": 1_767_232_795_000,
        "window_start_ms": 1_767_225_600_000, "window_end_ms": 1_767_225_660_000,
        "lateness_ms": 7_195_000, "fate": "dropped_late"}])
    metadata = day_metadata(_day("2026-01-01", dropped=20, within=30), detail)
    assert "late_rate" not in metadata
    assert metadata["dropped_late_rate"] == 0.02
    assert metadata["late_within_lateness_rate"] == 0.03
    assert metadata["lateness_p99_ms"] == 83_000.0 and metadata["lateness_p99"] == "1 min 23 s"
    assert metadata["lateness_max"] == "2 h 5 min"
    names = list(metadata)
    assert names.index("lateness_p99") == names.index("lateness_p99_ms") + 1  # side by side
    histogram = metadata["lateness_histogram"]
    assert isinstance(histogram, MetadataValue.md("").__class__)
    assert "| 10 s-1 min | 1 | 2 |" in histogram.value
    sample = metadata["late_records_sample"].value
    assert "user-0003" in sample and "2026-01-01 00:00:00.000Z" in sample
    assert "00:00:00-00:01:00" in sample and "dropped" in sample and "1 h 59 min" in sample

    assert day_metadata({"window_end_date": "2026-01-03"}) == {"status": EMPTY_DAY}
    empty = _verdicts([{"window_end_date": "2026-01-03"}], THRESHOLDS)
    assert all(v.passed and v.description == EMPTY_DAY for v in empty.values())


def test_histogram_buckets_every_day_fully():
    assert [bucket_of(ms) for ms in (0, 999, 1_000, 59_999, 60_000, 7_200_000, 10**9)] == [
        "< 1 s", "< 1 s", "1-10 s", "10 s-1 min", "1-10 min", "1-6 h", "≥ 6 h"]
    days = histograms([
        {"window_end_date": "2026-01-01", "bucket": "1-10 s", "_class": "late_within_lateness",
         "n": 4},
        {"window_end_date": "2026-01-01", "bucket": "1-10 s", "_class": "dropped_late", "n": 1},
        {"window_end_date": "2026-01-02", "bucket": "≥ 6 h", "_class": "dropped_late", "n": 2}])
    assert len(days["2026-01-01"]) == len(bucket_labels())
    assert ("1-10 s", 4, 1) in days["2026-01-01"] and days["2026-01-02"][-1] == ("≥ 6 h", 0, 2)
    assert DayLateness(histogram=days["2026-01-01"]).late == 5
    assert [human_duration(ms) for ms in (12, 1_500, 60_000, 3_600_000, 5_430_000)] == [
        "12 ms", "1.5 s", "1 min", "1 h", "1 h 30 min"]
