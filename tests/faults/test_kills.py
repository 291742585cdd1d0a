"""SIGKILL, not a polite stop: the live stream's process killed at random points again and
again, then resumed from its checkpoint, and a backfill killed mid-write then re-run, must
leave every output table exactly as a clean backfill of the same arrival log leaves it.

``FAULT_KILLS`` sets how many kills each test makes (the suite's default keeps it short; the
closing notes of the fault work ran it with many more)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jobs import tables
from jobs.backfill import run_backfill
from jobs.generator import GeneratorConfig, generate
from jobs.live import cohorts, run_live
from jobs.streams.landing.ingestor import ingest
from tests.faults.helpers import KILLS, QUIET, SESSIONS, copy_log, pipelines_of
from tests.log_replay import late_of, replay, results_of
from tests.output_tables import assert_same, output_tables
from tests.platform_home import PER_MINUTE, REPO

pytestmark = pytest.mark.spark

SLIDING = (REPO / "pipelines" / "sliding_5m.yaml").read_text()


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    """``python -m jobs ...`` in its own process group (its JVM and Python workers too)."""
    environment = {**os.environ, **env, "PYSPARK_PYTHON": sys.executable,
                   "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "jobs", *args], cwd=REPO, env=environment,
                            stdout=log.open("a"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _kill_when(process: subprocess.Popen, log: Path, marker: str, count: int,
               delay_s: float, timeout_s: float = 90) -> bool:
    """SIGKILL the whole process group ``delay_s`` after ``log`` shows ``marker`` for the
    ``count``-th time since this process started (``count`` 0: after ``delay_s`` from the
    start; a long-running stream with nothing left to do is killed after ``timeout_s``);
    False if the process ended first."""
    already = log.read_text(errors="replace").count(marker) if log.exists() else 0
    deadline = time.monotonic() + timeout_s
    while count and log.read_text(errors="replace").count(marker) < already + count:
        if process.poll() is not None:
            return False
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    end = time.monotonic() + delay_s
    while time.monotonic() < end:
        if process.poll() is not None:
            return False
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return True


def _kill_repeatedly(args: list[str], env: dict, log: Path,
                     when: Callable[[random.Random], tuple[str, int, float]]) -> list[tuple]:
    """``KILLS`` times: start ``python -m jobs <args>`` and SIGKILL it where ``when`` says
    (log marker, how many times it must appear, seconds after), from ``FAULT_SEED``; the
    kills that landed as ``(marker, count, seconds)`` (the process may finish first)."""
    rng = random.Random(int(os.environ.get("FAULT_SEED", "5")))
    kills = []
    for _ in range(KILLS):
        marker, count, delay = when(rng)
        if _kill_when(_start(args, env, log), log, marker, count, delay):
            kills.append((marker, count, round(delay, 1)))
    return kills


def test_the_live_stream_killed_again_and_again_loses_and_doubles_nothing(spark, source,
                                                                         tmp_path):
    """Two pipelines in one live job, tumbling and sliding windows (vectorised metrics, one
    MERGE of panes per batch each): a kill lands in a micro-batch that writes both pipelines'
    tables, and neither may lose or double a row. ``FAULT_LIVE_PIPELINE=sessions`` puts the
    keyed sessions pipeline (per-key snapshots in RocksDB, four writes per batch) beside the
    tumbling one, as the closing notes' longer runs did."""
    second = ("sessions", SESSIONS) if os.environ.get("FAULT_LIVE_PIPELINE") == "sessions" \
        else ("sliding_5m", SLIDING)
    pipelines = {"per_minute": PER_MINUTE, second[0]: second[1]}
    expected_env = copy_log(source, tmp_path / "backfill", pipelines)
    expected = {}
    for name, pipeline in pipelines_of(expected_env).items():
        run_backfill(spark, pipeline, **QUIET)
        expected[name] = output_tables(spark, pipeline)

    env = copy_log(source, tmp_path / "live", pipelines)

    def when(rng: random.Random) -> tuple[str, int, float]:
        # during start-up, or at a random moment after the n-th micro-batch was written (most
        # land inside the next batch: its state-store commit, a Delta write, the checkpoint)
        after_batches = rng.choice([0, 1, 1, 2])
        return "live events: batch ", after_batches, (rng.uniform(2, 12) if after_batches == 0
                                                      else rng.uniform(0, 4))

    kills = _kill_repeatedly(["live", "--trigger", "1 second", "--max-files-per-trigger", "1"],
                             env, tmp_path / "live.log", when)
    print(f"{len(kills)} kills (batches written before each, seconds after): "
          f"{[(count, delay) for _, count, delay in kills]}")
    live = pipelines_of(env)
    run_live(spark, live["per_minute"].stream, **QUIET)  # resumes from the checkpoint
    for name, pipeline in live.items():
        assert_same(expected[name], output_tables(spark, pipeline))
    assert len(kills) >= KILLS - 1  # the stream may, rarely, finish before the last one


def test_a_backfill_killed_mid_write_and_run_again_is_exact(spark, source, tmp_path):
    """Session windows: the keyed backfill writes four tables (the assignments and metrics
    from the driver while Spark writes the results and late records), so a kill can fall
    between any two of them, or inside one."""
    pipelines = {"sessions": SESSIONS}
    expected_env = copy_log(source, tmp_path / "clean", pipelines)
    run_backfill(spark, pipelines_of(expected_env)["sessions"], **QUIET)
    expected = output_tables(spark, pipelines_of(expected_env)["sessions"])

    env = copy_log(source, tmp_path / "killed", pipelines)

    def when(rng: random.Random) -> tuple[str, int, float]:
        # while computing (before any table is written), or right after the n-th table
        # written, inside the next one's write
        marker, count = rng.choice([("sessions: computing", 1), ("sessions: wrote", 1),
                                    ("sessions: wrote", 2), ("sessions: wrote", 3)])
        return marker, count, rng.uniform(0, 3)

    kills = _kill_repeatedly(["backfill"], env, tmp_path / "backfill.log", when)
    print(f"{len(kills)} kills of the backfill (after, times, seconds): "
          f"{[(marker.split(': ')[1], count, delay) for marker, count, delay in kills]}")
    pipeline = pipelines_of(env)["sessions"]
    run_backfill(spark, pipeline, **QUIET)
    assert_same(expected, output_tables(spark, pipeline))



NO_BATCHES_WITHOUT_DATA = json.dumps({"spark.sql.streaming.noDataMicroBatches.enabled":
                                      "false"})
"""Spark then never runs the batch without data after a batch with data: every kill lands
where a kill between the two would, the place where a reader once saw a version short of
the panes that batch's watermark made due."""


def test_a_reader_after_a_kill_sees_a_whole_prefix_of_the_log(spark, source, tmp_path):
    """Killed right after a micro-batch (or inside the next one's writes) and read before
    any restart: each pipeline's ``window_results`` and ``late_records`` are what a replay of
    the log up to some micro-batch's end gives. The log's last ingest batch holds one key's
    records only, an hour past the rest, so its micro-batch's watermark makes due the last
    windows of eleven keys with no record in it; the last kill comes right after it.
    Tumbling windows (the standard engine) and sessions (the keyed one)."""
    pipelines = {"per_minute": PER_MINUTE, "sessions": SESSIONS}
    env = {**copy_log(source, tmp_path / "live", pipelines),
           "PLATFORM_SPARK_CONF": NO_BATCHES_WITHOUT_DATA}
    live = pipelines_of(env)
    stream = live["per_minute"].stream
    generate(GeneratorConfig(events=20, duration_ms=600_000, keys=1, producers=1, seed=9,
                             start_ms=1_767_225_600_000 + 28 * 3_600_000, late_fraction=0,
                             very_late_fraction=0, bad_fraction=0), stream.landing)
    ingest(spark, stream, **QUIET)
    log = spark.read.format("delta").load(stream.arrival_log).toPandas()
    rng = random.Random(int(os.environ.get("FAULT_SEED", "5")))
    kills = [("live events: batch ", rng.randint(1, 3)) for _ in range(KILLS - 1)]
    due_without_a_record = 0
    for attempt, (marker, count) in enumerate([*kills, ("live events: batch 4:", 1)]):
        started = _start(["live", "--trigger", "1 second", "--max-files-per-trigger", "1"],
                         env, tmp_path / "live.log")
        assert _kill_when(started, tmp_path / "live.log", marker, count,
                          rng.uniform(0, 1.5)), attempt
        ends = [0, *_batch_ends(stream)]
        for pipeline in live.values():
            frames = output_tables(spark, pipeline)
            results = results_of(frames[tables.WINDOW_RESULTS], pipeline.spec)
            late = late_of(frames[tables.LATE_RECORDS])
            replays = {end: replay(log[log.arrival_seq < end], pipeline.spec) for end in ends}
            matching = [end for end, expected in replays.items() if expected.latest == results]
            assert matching, (f"{pipeline.name} after kill {attempt}: window_results are "
                              f"no replay of the log up to a micro-batch's end {ends}")
            assert any(expected.late == late for expected in replays.values()), (
                f"{pipeline.name} after kill {attempt}: late_records")
            end = matching[-1]
            if end:
                before = max(e for e in ends if e < end)
                due_without_a_record += _due_without_a_record(
                    replays[before].latest, replays[end].latest,
                    set(log[(log.arrival_seq >= before) & (log.arrival_seq < end)].key))
    assert due_without_a_record  # the case the kills were for did arise
    run_live(spark, stream, **QUIET)  # and resuming still ends where a backfill does
    for name, pipeline in live.items():
        expected = replay(log, pipeline.spec)
        assert results_of(output_tables(spark, pipeline)[tables.WINDOW_RESULTS],
                          pipeline.spec) == expected.latest, name


def _batch_ends(stream) -> list[int]:
    """Each micro-batch's end in arrival positions, from its cohort's offset log."""
    (cohort,) = cohorts.cohorts_of(stream)
    folder = Path(cohort.checkpoint, "offsets")
    ends = []
    for entry in sorted((p for p in folder.iterdir() if p.name.isdigit()),
                        key=lambda p: int(p.name)):
        ends.append(json.loads(entry.read_text().splitlines()[2])["next_arrival_seq"])
    return ends


def _due_without_a_record(before: dict, after: dict, keys_in_batch: set[str]) -> int:
    """Panes a micro-batch's watermark made due (new, or fired again) for keys that had no
    record in it."""
    return sum(1 for window, pane in after.items()
               if window[0] not in keys_in_batch and before.get(window) != pane)
