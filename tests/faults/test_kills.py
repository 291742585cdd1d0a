"""SIGKILL, not a polite stop: the live stream's process killed at random points again and
again, then resumed from its checkpoint, and a backfill killed mid-write then re-run, must
leave every output table exactly as a clean backfill of the same arrival log leaves it.

``FAULT_KILLS`` sets how many kills each test makes (the suite's default keeps it short; the
closing notes of the fault work ran it with many more)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jobs.backfill import run_backfill
from jobs.live import run_live
from tests.faults.helpers import KILLS, QUIET, SESSIONS, copy_log, pipelines_of
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

