"""The same jobs on a real Spark standalone cluster (master and two workers on loopback) give
the same tables as local mode, row for row, with the project's code shipped by the platform to
workers that do not have it installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from jobs.backfill import run_backfill
from jobs.generator import GeneratorConfig, generate
from jobs.ingest import ingest
from jobs.settings import PlatformSettings
from tests.cluster.drive import SAVED, save_tables
from tests.cluster.standalone import start_cluster

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
DATA = GeneratorConfig(seed=31, events=3_000, keys=40, duration_ms=2 * 86_400_000,
                       producers=2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield running
    running.stop()


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def _assert_same_tables(expected: Path, actual: Path) -> None:
    for name in SAVED:
        pd.testing.assert_frame_equal(_sorted(pd.read_parquet(expected / f"{name}.parquet")),
                                      _sorted(pd.read_parquet(actual / f"{name}.parquet")),
                                      check_exact=True, obj=f"{name} ({actual.name})")


def test_the_workers_cannot_import_the_project_by_themselves(cluster):
    result = subprocess.run([str(cluster.worker_python), "-c", "import jobs"], cwd="/",
                            capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert "No module named 'jobs'" in result.stderr
    ok = subprocess.run([str(cluster.worker_python), "-c", "import pyspark, pandas, pyarrow"],
                        cwd="/", capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_ingest_live_and_backfill_on_the_cluster_equal_local_mode(cluster, spark, tmp_path):
    landing = tmp_path / "landing"
    generate(DATA, landing)

    # local mode, in this process's shared session
    local = PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "local"),
                                       "PLATFORM_LANDING": str(landing)})
    ingest(spark, local, progress=lambda _: None)
    run_backfill(spark, local, progress=lambda _: None)
    save_tables(local, tmp_path / "expected")

    # the cluster: a driver process of its own, its Python workers without the project
    remote_home = tmp_path / "remote"
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("PLATFORM_") and k != "PYTHONPATH"}
    environment.update(PLATFORM_HOME=str(remote_home), PLATFORM_LANDING=str(landing),
                       PLATFORM_SPARK_MASTER=cluster.master_url,
                       PLATFORM_SPARK_CONF="spark.executor.memory=1g,spark.cores.max=2",
                       PYSPARK_PYTHON=str(cluster.worker_python))
    output = tmp_path / "remote-tables"
    output.mkdir()
    result = subprocess.run([sys.executable, "-m", "tests.cluster.drive", str(output)],
                            cwd=REPO, env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    print("\n".join(line for line in result.stderr.splitlines() if line.startswith("drive:")))

    import_error = (output / "import_error.txt").read_text()
    assert "no_such_module_for_the_test on " in import_error
    assert "ModuleNotFoundError" in import_error
    _assert_same_tables(tmp_path / "expected", output / "live")
    _assert_same_tables(tmp_path / "expected", output / "backfill")
    shutil.rmtree(remote_home / "warehouse", ignore_errors=True)
