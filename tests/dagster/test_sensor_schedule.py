"""The landing sensor asks for runs for new files only; the finality schedule targets the days
that just became final. Both against real files and a real (ephemeral) Dagster instance."""

from __future__ import annotations

import os
from datetime import date

import pytest
from dagster import DagsterInstance, SkipReason, build_schedule_context, build_sensor_context

from jobs.config.registry import platform_of
from jobs.generator import GeneratorConfig, generate
from platform_defs.resources import PlatformResource
from platform_defs.schedules import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    contiguous_ranges,
    days_to_finalise,
    finality_schedule,
)
from platform_defs.sensors import (
    LandingCursor,
    finished_files,
    landing_sensor,
    parse_cursors,
    scan,
)
from tests.platform_home import PER_MINUTE, write_pipelines


def _instance(home) -> DagsterInstance:
    """A persistent instance (schedule contexts need an instance reference)."""
    path = home.path / "dagster_home"
    path.mkdir(parents=True, exist_ok=True)
    return DagsterInstance.local_temp(str(path))


def _evaluate(home, cursor):
    context = build_sensor_context(cursor=cursor,
                                   resources={"platform": PlatformResource(home=str(home))})
    return landing_sensor(context), context


def _cursor(text: str) -> LandingCursor:
    return parse_cursors(text)["events"]


def test_sensor_requests_one_run_per_set_of_new_files(home):
    landing = home.path / "landing" / "events"
    generate(GeneratorConfig(events=200, duration_ms=3_600_000), landing)
    result, _ = _evaluate(home.path, None)
    assert len(result.run_requests) == 1
    first_key, cursor = result.run_requests[0].run_key, result.cursor
    assert first_key.startswith("events-landing-")
    # the run is the stream's: its ingest, then every pipeline reading it
    assert result.run_requests[0].run_config == {
        "ops": {"live_increment": {"config": {"stream": "events"}}}}

    again, context = _evaluate(home.path, cursor)  # nothing new: skip, cursor unchanged
    assert isinstance(again, SkipReason)
    assert context.cursor == cursor

    new_file = landing / "producer-9" / "received-late.jsonl"
    new_file.parent.mkdir()
    (landing / "producer-9" / "in-flight.jsonl.tmp").write_text("{}\n")  # not finished: ignored
    new_file.write_text('{"key": "user-0001", "event_time": "2026-01-01T00:00:00Z"}\n')
    later, _ = _evaluate(home.path, cursor)
    assert len(later.run_requests) == 1
    assert later.run_requests[0].run_key not in {first_key}
    stamp = new_file.stat().st_mtime_ns
    assert f"producer-9/received-late.jsonl@{stamp}" in _cursor(later.cursor).recent
    assert _cursor(later.cursor).newest_ns >= _cursor(cursor).newest_ns

    # a re-evaluation from the old cursor (a retried tick) asks with the same run key again,
    # so Dagster launches it once
    retried, _ = _evaluate(home.path, cursor)
    assert retried.run_requests[0].run_key == later.run_requests[0].run_key


def test_cursor_forgets_old_files_but_not_recent_ones():
    files = {"a/1.jsonl": 100, "a/2.jsonl": 200, "b/1.jsonl": 1_000}
    new, cursor = scan(files, LandingCursor(-1, frozenset()), grace_ns=300)
    assert new == sorted(files) and cursor.newest_ns == 1_000
    assert cursor.recent == {"b/1.jsonl@1000"}  # older than the grace window: not remembered
    files["a/3.jsonl"] = 900  # finished late but inside the grace window: still new
    new, cursor = scan(files, cursor, grace_ns=300)
    assert new == ["a/3.jsonl"]
    files["a/3.jsonl"] = 1_100  # rewritten in place: new again
    assert scan(files, cursor, grace_ns=300)[0] == ["a/3.jsonl"]


def test_a_half_written_file_launches_no_run_until_it_is_finished(tmp_path):
    """Ingest leaves a file without its final newline that changed within the settle time;
    the sensor must not spend a run on it, nor forget it: it is new once finished."""
    landing = tmp_path / "landing"
    (landing / "p0").mkdir(parents=True)
    done, partial = landing / "p0" / "done.jsonl", landing / "p0" / "partial.jsonl"
    done.write_text('{"key": "a"}\n', encoding="utf-8")
    partial.write_text('{"key": "b"}\n{"key": "c", "event_ti', encoding="utf-8")
    new, cursor = scan(finished_files(landing, settle_ms=60_000), LandingCursor(-1, frozenset()))
    assert new == ["p0/done.jsonl"]
    with partial.open("a", encoding="utf-8") as handle:
        handle.write('me": 5}\n')
    new, _ = scan(finished_files(landing, settle_ms=60_000), cursor)
    assert new == ["p0/partial.jsonl"]


SESSIONS_2M = "source: events\nwindow: {type: session, gap: 1m}\nallowed_lateness: 2m\n"


def _platform(home) -> PlatformResource:
    """Two pipelines of different allowed lateness: per_minute (30 s) and sessions (2 min)."""
    folder = write_pipelines(home.path.parent / "pipelines", {"per_minute": PER_MINUTE,
                                                              "sessions": SESSIONS_2M})
    return PlatformResource(home=str(home.path), pipelines=str(folder))


def _schedule(platform: PlatformResource):
    return finality_schedule(list(platform_of(platform.settings()).pipelines.values()))


def test_schedule_targets_each_pipelines_days_that_just_became_final(home, monkeypatch):
    from dagster import AssetKey, AssetMaterialization

    from tests.dagster.delta_log_helpers import write_arrival_log_stats

    lateness = 30_000
    day_end = 1_767_312_000_000  # end of 2026-01-01 (UTC)
    write_arrival_log_stats(home.path / "warehouse" / "streams" / "events" / "arrival_log",
                            day_end + lateness)
    instance = _instance(home)
    platform = _platform(home)
    context = build_schedule_context(instance=instance, resources={"platform": platform})
    requests = _schedule(platform)(context)
    # final for per_minute (30 s of lateness), not yet for sessions (2 min)
    assert [(r.tags["platform/pipeline"], r.tags[ASSET_PARTITION_RANGE_START_TAG],
             r.tags[ASSET_PARTITION_RANGE_END_TAG]) for r in requests] == [
        ("per_minute", "2026-01-01", "2026-01-01")]
    assert requests[0].asset_selection == [AssetKey(["per_minute", t]) for t in (
        "window_results", "late_records", "late_data_metrics")]
    later = day_end + 2 * 60_000
    write_arrival_log_stats(home.path / "warehouse" / "streams" / "events" / "arrival_log",
                            later)
    requests = _schedule(platform)(context)
    assert {r.tags["platform/pipeline"] for r in requests} == {"per_minute", "sessions"}

    # once 2026-01-01 is recorded final, only days that became final later are asked for
    pipeline = platform_of(platform.settings()).pipelines["per_minute"]
    metrics = AssetKey(["per_minute", "late_data_metrics"])
    instance.report_runless_asset_event(AssetMaterialization(
        metrics, partition="2026-01-01", metadata={"final": 1}))
    assert days_to_finalise(instance, pipeline, day_end + lateness) == []
    three_days_later = day_end + 3 * 86_400_000 + lateness
    assert days_to_finalise(instance, pipeline, three_days_later) == [
        date(2026, 1, 2), date(2026, 1, 3), date(2026, 1, 4)]
    instance.report_runless_asset_event(AssetMaterialization(
        metrics, partition="2026-01-03", metadata={"final": 0}))  # provisional
    assert days_to_finalise(instance, pipeline, three_days_later, lookback_days=3) == [
        date(2026, 1, 2), date(2026, 1, 3), date(2026, 1, 4)]
    assert contiguous_ranges([date(2026, 1, 2), date(2026, 1, 4), date(2026, 1, 3),
                              date(2026, 1, 7)]) == [(date(2026, 1, 2), date(2026, 1, 4)),
                                                     (date(2026, 1, 7), date(2026, 1, 7))]


def test_a_final_run_is_retried_by_dagster_run_retries(home):
    """Dagster launches a run key once: a failed finalisation is re-launched by the daemon's
    run retries (the tags), not by a new run key of the schedule's own."""
    from platform_defs.instance import INSTANCE_SETTINGS
    from platform_defs.schedules import MAX_RETRIES
    from tests.dagster.delta_log_helpers import write_arrival_log_stats

    write_arrival_log_stats(home.path / "warehouse" / "streams" / "events" / "arrival_log",
                            1_767_312_000_000 + 30_000)
    instance = _instance(home)
    platform = _platform(home)
    context = build_schedule_context(instance=instance, resources={"platform": platform})
    request = _schedule(platform)(context)[0]
    assert request.tags["dagster/max_retries"] == str(MAX_RETRIES) and MAX_RETRIES > 0
    assert request.tags["dagster/retry_strategy"] == "ALL_STEPS"
    assert INSTANCE_SETTINGS["run_retries"] == {"enabled": True}  # the demo's instance


@pytest.mark.skipif(os.name != "posix", reason="paths")
def test_schedule_skips_without_an_arrival_log(home):
    platform = _platform(home)
    context = build_schedule_context(instance=_instance(home), resources={"platform": platform})
    assert isinstance(_schedule(platform)(context), SkipReason)
