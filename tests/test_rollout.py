"""Changing a pipeline on Spark: its new version computed from the arrival log beside the
serving one, readers switched once it has caught up, in an ``available now`` run, in the
``rollout`` command and inside the long-running job, with the old version's tables kept.
Every version's tables equal a clean backfill of that version; readers never see another
version's rows (they are in other folders) nor a version that has not caught up.

Kills during a rollout are in tests/faults/test_kills.py; the model of what readers see
through any sequence of edits is in tests/test_versions.py."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.lifecycle import versions
from jobs.lifecycle.status import pipeline_state
from jobs.live import run_live, run_rollout, run_stream
from jobs.runtime.owed_batch import BATCHES_WITHOUT_DATA
from tests.faults.helpers import QUIET, copy_log, make_source, pipelines_of
from tests.output_tables import OUTPUTS, assert_same, output_tables
from tests.platform_home import PER_MINUTE, write_pipelines

pytestmark = pytest.mark.spark

V1 = PER_MINUTE
V2 = PER_MINUTE.replace("allowed_lateness: 30s", "allowed_lateness: 45s")
SECOND_DAY = "2026-01-02"
"""The log's events span 2026-01-01 12:00 to 2026-01-02 03:00 (UTC)."""
SLIDING = PER_MINUTE.replace("type: tumbling\n  size: 1m",
                             "type: sliding\n  size: 5m\n  slide: 1m")


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory) -> PlatformSettings:
    return make_source(spark, tmp_path_factory.mktemp("rollout") / "source")


@pytest.fixture(scope="module")
def clean(spark, source, tmp_path_factory) -> dict[str, dict]:
    """Each version's tables as one clean backfill of the whole log leaves them."""
    found = {}
    for label, text in (("v1", V1), ("v2", V2), ("sliding", SLIDING)):
        env = copy_log(source, tmp_path_factory.mktemp(label) / "home", {"per_minute": text})
        pipeline = pipelines_of(env)["per_minute"]
        run_backfill(spark, pipeline, **QUIET)
        found[label] = output_tables(spark, pipeline)
    return found


def _edit(env: dict, text: str) -> None:
    write_pipelines(Path(env["PLATFORM_PIPELINES"]), {"per_minute": text})


def test_a_change_rolls_out_in_the_next_live_run_and_a_restore_switches_back_at_once(
        spark, source, clean, tmp_path):
    env = copy_log(source, tmp_path / "home", {"per_minute": V1})
    first = pipelines_of(env)["per_minute"]
    said: list[str] = []
    run_live(spark, first.stream, progress=said.append)
    assert versions.serving(first).version == first.version  # its first, once caught up
    assert any("readers see version" in line and "its first" in line for line in said)

    _edit(env, V2)
    second = pipelines_of(env)["per_minute"]
    state = pipeline_state(second)
    assert state.serving_version == first.version
    assert "pending (replaces" in state.describe_rollout()
    report = run_live(spark, second.stream, **QUIET)
    assert [(s.from_version, s.to_version) for s in report.switched] == [
        (first.version, second.version)]
    assert versions.serving(second).version == second.version
    readers = versions.serving_pipeline(second)
    assert_same(clean["v2"], output_tables(spark, readers))
    assert_same(clean["v1"], output_tables(spark, first))  # kept, and complete

    _edit(env, V1)  # restored: its tables are kept, so readers switch back at once
    restored = pipelines_of(env)["per_minute"]
    report = run_rollout(spark, restored, progress=said.append)
    assert not report.batches and versions.serving(restored).version == first.version
    assert any("serves again" in line for line in said)
    assert [s.state for s in versions.version_states(restored)] == [versions.RETIRED,
                                                                     versions.SERVING]


def test_a_run_stopped_before_its_batch_without_data_has_already_written_what_is_due(
        spark, source, clean, tmp_path):
    """A live run whose query stopped after its last batch with data, before the batch
    without data Spark runs after it (what a kill just there leaves; Spark's setting that
    turns such batches off stops it there every time): each micro-batch has already fired
    what its watermark made due, in every bucket, those with no records in it too, so the
    tables equal a backfill at once, and the next run has nothing to run again."""
    env = copy_log(source, tmp_path / "home", {"per_minute": V1})
    pipeline = pipelines_of(env)["per_minute"]
    spark.conf.set(BATCHES_WITHOUT_DATA, "false")
    try:
        run_live(spark, pipeline.stream, max_files_per_trigger=1, **QUIET)
    finally:
        spark.conf.unset(BATCHES_WITHOUT_DATA)
    assert_same(clean["v1"], output_tables(spark, pipeline))
    said: list[str] = []
    run_live(spark, pipeline.stream, progress=said.append)
    assert not any("runs again" in line for line in said)
    assert_same(clean["v1"], output_tables(spark, pipeline))


def test_the_rollout_command_computes_the_new_version_alone_then_switches(spark, source,
                                                                         clean, tmp_path):
    """A backfilled first version (no live checkpoint at all), then a change to another
    window effective from the log's second day: ``rollout`` computes only the new version, in
    a cohort of its own, through the whole log, and switches; the first day keeps the first
    version's rows, and a backfill of it changes nothing."""
    env = copy_log(source, tmp_path / "home", {"per_minute": V1})
    first = pipelines_of(env)["per_minute"]
    run_backfill(spark, first, **QUIET)
    _edit(env, SLIDING + f"effective_from: {SECOND_DAY}\n")
    changed = pipelines_of(env)["per_minute"]
    report = run_rollout(spark, changed, **QUIET)
    assert {v.version for v in report.versions.values()} == {changed.version}
    assert report.switched and versions.serving(changed).version == changed.version
    expected = {name: _by_day(clean["v1"][name], clean["sliding"][name]) for name in OUTPUTS}
    assert_same(expected, output_tables(spark, changed))
    assert_same(clean["v1"], output_tables(spark, first))
    said: list[str] = []
    run_backfill(spark, changed, first_day="2026-01-01", last_day="2026-01-01",
                 progress=said.append)
    assert "the days before it keep the rows of the version this one replaced" in said[-1]
    assert_same(expected, output_tables(spark, changed))


def _by_day(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """``before``'s rows of the days before the second day, ``after``'s from it on."""
    day = dt.date.fromisoformat(SECOND_DAY)
    frame = pd.concat([before[before["window_end_date"] < day],
                       after[after["window_end_date"] >= day]])
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def test_the_long_running_job_rolls_out_a_change_without_a_gap(spark, source, clean,
                                                               tmp_path):
    """While the job runs: the file changes, the new version catches up in a cohort of its own
    while the serving one keeps being written, and readers switch once it is within a poll of
    the live position. A reader polling all along sees the first version, then the second,
    never nothing and never back; each version it sees has its tables. New landing files
    keep arriving throughout."""
    env = copy_log(source, tmp_path / "home", {"per_minute": V1})
    settings = PlatformSettings.from_env(env)
    stream = platform_of(settings).streams["events"]
    first = platform_of(settings).pipelines["per_minute"]
    run_live(spark, stream, max_files_per_trigger=2, **QUIET)  # v1 serves and is live
    stop = threading.Event()
    seen: list[str | None] = []
    said: list[str] = []
    report: list = []

    def job() -> None:
        report.append(run_stream(spark, stream, trigger="1 second", poll_s=0.5,
                                 metrics_interval_s=5, stop=stop, progress=said.append,
                                 registry_poll_s=1.0))

    def reader() -> None:
        while not stop.is_set():
            readers = versions.serving_pipeline(first)
            current = versions.serving(first)
            seen.append(current.version if current else None)
            assert versions.has_tables(readers)
            time.sleep(0.2)

    threads = [threading.Thread(target=job), threading.Thread(target=reader, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        _wait(lambda: said or report, 120, said)  # running (nothing new to compute yet)
        time.sleep(3)
        _edit(env, V2)
        second = pipelines_of(env)["per_minute"]
        for index in range(3):  # new records keep landing while the new version catches up
            generate(GeneratorConfig(events=200, duration_ms=600_000, keys=12, producers=1,
                                     seed=900 + index,
                                     start_ms=1_767_225_600_000 + 24 * 3_600_000),
                     stream.landing)
            time.sleep(2)
        _wait(lambda: any("readers switched from version" in s for s in said) or report,
              240, said)
        time.sleep(2)
    finally:
        stop.set()
        threads[0].join(timeout=240)
    assert report, said[-20:]
    (done,) = report[0].switched
    assert (done.from_version, done.to_version) == (first.version, second.version)
    assert seen and seen[0] == first.version and seen[-1] == second.version
    assert seen == sorted(seen, key=lambda v: v == second.version)  # once, never back
    during = [b for b in report[0].pipeline_batches[f"per_minute@{first.version}"]]
    assert during, "the serving version kept being written while the new one caught up"
    # the job's final tables of each version equal clean backfills of the grown log
    grown = copy_log(PlatformSettings.from_env(env), tmp_path / "clean", {"per_minute": V2})
    expected = pipelines_of(grown)["per_minute"]
    run_backfill(spark, expected, **QUIET)
    run_live(spark, second.stream, **QUIET)  # what the stop left due (timers) fires
    assert_same(output_tables(spark, expected), output_tables(spark, second))


def _wait(condition, timeout_s: float, said: list[str]) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s: {said[-15:]}")
        time.sleep(0.25)
