"""The same jobs on a real Spark standalone cluster (master and two workers on loopback), with
the landing folder and the warehouse (tables and the live stream's checkpoint) in a real
S3-compatible server on loopback, give the same tables as local mode on local disk, row for
row, with the project's code shipped by the platform to workers that do not have it installed.

One run covers both the cluster and the object store, as a team that outgrows one machine
deploys them: Spark's S3A connector (``hadoop-aws``, resolved from Maven Central like any
``spark.jars.packages``) on the driver and the executors, Arrow's S3 client for the landing
files and ``deltalake`` for the driver-side writes, credentials and endpoint from the
environment only. A second stream reads the same events from a topic of the project's Kafka
broker: the executors read its partitions with Spark's Kafka source, and its arrival log and
quarantine equal local mode's."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.streams.ingestors import ingest
from jobs.streams.kafka.broker import running_broker
from platform_defs.demo_kafka import produce_events
from tests.cluster.drive import SAVED, save_stream_tables, save_tables
from tests.cluster.object_store import start_object_store
from tests.cluster.standalone import start_cluster
from tests.conftest import CHILD_DRIVER_JAVA_OPTIONS
from tests.platform_home import PER_MINUTE, write_pipelines

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
DATA = GeneratorConfig(seed=31, events=3_000, keys=40, duration_ms=2 * 86_400_000,
                       flush_interval_ms=2 * 3_600_000,  # 48 files: fewer object-store trips
                       producers=2)


@pytest.fixture(scope="module")
def object_store(tmp_path_factory):
    store = start_object_store(tmp_path_factory.mktemp("object-store"))
    yield store
    store.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("kafka"), progress=lambda _: None) as running:
        yield running


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, object_store):
    running = start_cluster(tmp_path_factory.mktemp("cluster"),
                            node_environment=object_store.environment())
    yield running
    running.stop()


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def _assert_same_tables(expected: Path, actual: Path,
                        names: tuple[str, ...] = SAVED) -> None:
    """Tables saved by tests/cluster/drive.py, as Parquet files named after them."""
    for name in names:
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


def test_ingest_live_and_backfill_on_the_cluster_and_s3_equal_local_mode(cluster, object_store,
                                                                        broker, spark, tmp_path):
    landing = tmp_path / "landing"
    generate(DATA, landing / "events")
    # the same events in a Kafka topic (a partition per producer): a second stream, whose
    # partitions Spark's Kafka source reads on the executors
    produce_events(broker, DATA, topic="clicks")
    streams = tmp_path / "streams"
    streams.mkdir()
    shutil.copy(REPO / "streams" / "events.yaml", streams / "events.yaml")
    (streams / "clicks.yaml").write_text(json.dumps({
        "kind": "kafka", "kafka": {"bootstrap_servers": broker.bootstrap_servers,
                                   "topics": ["clicks"]},
        "watermark": {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s",
                      "idle_timeout": "1m"}}))
    pipelines = write_pipelines(tmp_path / "pipelines", {"per_minute": PER_MINUTE})

    # local mode, in this process's shared session
    local = PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "local"),
                                       "PLATFORM_LANDING": str(landing),
                                       "PLATFORM_STREAMS": str(streams),
                                       "PLATFORM_PIPELINES": str(pipelines)})
    for stream in platform_of(local).streams.values():
        ingest(spark, stream, progress=lambda _: None)
    (pipeline,) = platform_of(local).pipelines.values()
    run_backfill(spark, pipeline, progress=lambda _: None)
    save_tables(local, tmp_path / "expected")
    save_stream_tables(local, tmp_path / "expected" / "streams")

    # the cluster: a driver process of its own, its Python workers without the project; the
    # warehouse in the object store
    warehouse = f"{object_store.create_bucket('platform')}/warehouse"
    remote_landing = object_store.upload(landing, "platform", "landing")
    # the executors live for a minute, as the driver does (which inherits the suite's
    # SPARK_SUBMIT_OPTS): C1 only, like every job the suite starts as a process of its own
    # (measured, alternating: the whole test 79-84 s with C2 executors, 64-67 s without)
    spark_conf = {"spark.executor.memory": "1g", "spark.cores.max": "2",
                  "spark.executor.extraJavaOptions": CHILD_DRIVER_JAVA_OPTIONS,
                  **object_store.spark_conf()}
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("PLATFORM_", "AWS_")) and k != "PYTHONPATH"}
    environment.update(object_store.environment())
    environment.update(PLATFORM_HOME=str(tmp_path / "remote"), PLATFORM_LANDING=remote_landing,
                       PLATFORM_PIPELINES=str(pipelines), PLATFORM_STREAMS=str(streams),
                       PLATFORM_WAREHOUSE=warehouse, PLATFORM_SPARK_MASTER=cluster.master_url,
                       PLATFORM_INGEST_READER="spark",
                       PLATFORM_SPARK_CONF=",".join(f"{k}={v}" for k, v in spark_conf.items()),
                       PYSPARK_PYTHON=str(cluster.worker_python))
    output = tmp_path / "remote-tables"
    output.mkdir()
    result = subprocess.run([sys.executable, "-m", "tests.cluster.drive", str(output)],
                            cwd=REPO, env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    print("\n".join(line for line in result.stderr.splitlines() if line.startswith("drive:")))
    print("\n".join(line for line in result.stdout.splitlines() if line.startswith("ingest ")))

    # the workers read and parsed the landing files in the object store
    assert "read by Spark's executors" in result.stdout, result.stdout[-2000:]
    import_error = (output / "import_error.txt").read_text()
    assert "no_such_module_for_the_test on " in import_error
    assert "ModuleNotFoundError" in import_error
    _assert_same_tables(tmp_path / "expected" / "per_minute", output / "live" / "per_minute")
    _assert_same_tables(tmp_path / "expected" / "per_minute",
                        output / "backfill" / "per_minute")
    # the Kafka stream: read by the executors, the same log and quarantine as in local mode
    _assert_same_tables(tmp_path / "expected" / "streams" / "clicks",
                        output / "streams" / "clicks", (tables.ARRIVAL_LOG, tables.QUARANTINE))
    # every table and the stream's checkpoint are in the object store, nothing on local disk
    stored = object_store.keys("platform", "warehouse/")
    for name in ("streams/events/arrival_log", "streams/events/quarantine",
                 "streams/clicks/arrival_log", "streams/clicks/quarantine",
                 *(f"pipelines/per_minute/versions/*/{t}" for t in SAVED[2:])):
        assert any(fnmatch.fnmatch(key, f"warehouse/{name}/*") for key in stored), name
    assert "warehouse/pipelines/per_minute/_platform/serving.json" in stored
    for part in ("offsets", "state"):  # the live checkpoint of the stream's pipelines
        assert any(key.startswith("warehouse/streams/events/_checkpoints/live-")
                   and f"/{part}/" in key for key in stored), part
    assert not (tmp_path / "remote" / "warehouse").exists()
