"""The warehouse's disk fills mid-batch: a real filesystem of limited size (tmpfs, mounted by
the test; CI runs as root), filled but for half of what the next command writes: ingest, the
live job, then a backfill (whose writes go through Spark's JVM). The command stops with one
line naming the full location, a non-zero status and no traceback; once space is freed, the
same command run again ends with every table equal to a run that never met the fault:
nothing lost, nothing twice."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.live import run_live
from jobs.streams.landing.ingestor import ingest
from tests.faults.helpers import QUIET, SESSIONS
from tests.output_tables import assert_same, output_tables
from tests.platform_home import PER_MINUTE, REPO, events, platform_env

pytestmark = pytest.mark.spark

PIPELINES = {"per_minute": PER_MINUTE, "sessions": SESSIONS}
DISK_BYTES = 256 * 2**20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A filesystem of :data:`DISK_BYTES`, unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)],
                   check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _used(folder: Path) -> int:
    """Bytes of the disk's blocks that the files below ``folder`` take."""
    return sum(p.lstat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def _fill_leaving(disk: Path, free_bytes: int) -> Path:
    """A file taking all of ``disk`` but ``free_bytes``."""
    stats = os.statvfs(disk)
    available = stats.f_bavail * stats.f_frsize
    filler = disk / f"filler-{uuid.uuid4().hex}"
    with filler.open("wb") as out:
        os.posix_fallocate(out.fileno(), 0, max(0, available - free_bytes))
    return filler


def _command(args: list[str], env: dict) -> subprocess.CompletedProcess:
    environment = {**os.environ, **env, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-m", "jobs", *args], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=600)


def _assert_stopped_naming_the_warehouse(done: subprocess.CompletedProcess, command: str,
                                         warehouse: Path) -> None:
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said and "Py4JJavaError" not in said, said
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{command}: error: no space left on the filesystem of "
                           f"PLATFORM_WAREHOUSE {warehouse} ("), said
    assert "run the same command again" in last


def _log_rows(settings: PlatformSettings) -> dict[str, pd.DataFrame]:
    """The arrival log and quarantine, rows in a fixed order."""
    frames = {}
    for name in (tables.ARRIVAL_LOG, tables.QUARANTINE):
        frame = DeltaTable(events(settings).table_path(name)).to_pandas()
        frame = frame[sorted(frame.columns)]
        frames[name] = frame.sort_values(["source_partition", "source_file",
                                          "line_number"]).reset_index(drop=True)
    return frames


def test_ingest_and_live_on_a_full_disk_stop_with_one_line_and_resume_exactly(
        spark, tmp_path, small_disk):
    landing = tmp_path / "landing"
    for index in range(2):
        generate(GeneratorConfig(events=6_000, duration_ms=4 * 3_600_000, keys=40,
                                 producers=3, seed=300 + index,
                                 start_ms=1_767_225_600_000 + index * 4 * 3_600_000),
                 landing / "events")

    clean_env = {**platform_env(tmp_path / "clean", PIPELINES), "PLATFORM_LANDING": str(landing)}
    clean = PlatformSettings.from_env(clean_env)
    ingest(spark, events(clean), **QUIET)
    logged = _used(Path(clean.warehouse))
    run_live(spark, events(clean), max_files_per_trigger=1, **QUIET)
    live_writes = _used(Path(clean.warehouse)) - logged

    warehouse = small_disk / "warehouse"
    env = {**platform_env(tmp_path / "faulty", PIPELINES), "PLATFORM_LANDING": str(landing),
           "PLATFORM_WAREHOUSE": str(warehouse)}
    faulty = PlatformSettings.from_env(env)

    filler = _fill_leaving(small_disk, logged // 2)
    _assert_stopped_naming_the_warehouse(_command(["ingest"], env), "ingest", warehouse)
    filler.unlink()
    ingest(spark, events(faulty), **QUIET)
    for name, frame in _log_rows(clean).items():
        pd.testing.assert_frame_equal(frame, _log_rows(faulty)[name], check_exact=True,
                                      obj=name)

    filler = _fill_leaving(small_disk, live_writes // 2)
    _assert_stopped_naming_the_warehouse(
        _command(["live", "--max-files-per-trigger", "1"], env), "live", warehouse)
    filler.unlink()
    run_live(spark, events(faulty), max_files_per_trigger=1, **QUIET)
    for name, pipeline in platform_of(faulty).pipelines.items():
        assert_same(output_tables(spark, platform_of(clean).pipelines[name]),
                    output_tables(spark, pipeline))

    # the backfill writes through Spark's JVM, whose error says it another way
    filler = _fill_leaving(small_disk, 64 * 1024)
    _assert_stopped_naming_the_warehouse(_command(["backfill"], env), "backfill", warehouse)
    filler.unlink()
    for name, pipeline in platform_of(faulty).pipelines.items():
        run_backfill(spark, pipeline, **QUIET)
        assert_same(output_tables(spark, platform_of(clean).pipelines[name]),
                    output_tables(spark, pipeline))
    shutil.rmtree(warehouse, ignore_errors=True)
