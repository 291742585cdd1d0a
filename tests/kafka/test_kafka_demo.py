"""``./platform demo --source kafka``: the demo starts its own broker, produces the generated
events into a topic with a partition per producer, and runs the same asset graph over it;
every produced record reaches the arrival log or the quarantine once, with its partition and
offset, and a second run produces nothing again."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from platform_defs import demo
from platform_defs.demo_kafka import kafka_stream, produce_events
from platform_defs.stream_assets import LandingConfig
from tests.platform_home import PER_MINUTE, write_pipelines

pytestmark = pytest.mark.spark


@pytest.fixture
def suite_session(spark):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", before)


def test_the_demo_reads_its_events_from_a_kafka_topic(suite_session, tmp_path, monkeypatch,
                                                      capsys):
    home = tmp_path / "home"
    for name in ("PLATFORM_WAREHOUSE", "PLATFORM_LANDING", "PLATFORM_STREAMS",
                 "PLATFORM_INGEST_CLOCK", "PLATFORM_TIME_ZONE"):
        monkeypatch.delenv(name, raising=False)
    pipelines = write_pipelines(tmp_path / "pipelines", {"per_minute": PER_MINUTE})
    monkeypatch.setenv("PLATFORM_PIPELINES", str(pipelines))  # one pipeline: the graph's shape
    arguments = ["--home", str(home), "--events", "2000", "--source", "kafka"]
    assert demo.main(arguments) == 0
    output = capsys.readouterr().out
    assert "[1/3] Kafka topic + ingest of events" in output
    assert "produced 2,000 events into topic events" in output
    env = {"PLATFORM_HOME": str(home), "PLATFORM_STREAMS": str(home / "streams"),
           "PLATFORM_PIPELINES": str(pipelines)}
    platform = platform_of(PlatformSettings.from_env(env))
    stream = platform.streams["events"]
    assert stream.spec.kind == "kafka"
    log = DeltaTable(stream.arrival_log).to_pandas()
    quarantine = DeltaTable(stream.quarantine).to_pandas()
    offsets = list(zip(log.kafka_partition, log.kafka_offset, strict=True)) + \
        list(zip(quarantine.kafka_partition, quarantine.kafka_offset, strict=True))
    assert len(offsets) == len(set(offsets)) == 2000  # each record once
    assert set(log.kafka_partition) == {0, 1, 2}  # a partition per producer
    results = platform.pipelines["per_minute"].table_path(tables.WINDOW_RESULTS)
    assert len(DeltaTable(results).to_pandas()) > 0

    # the topic already holds the events: a second producer run adds nothing
    with kafka_stream(home, progress=lambda _: None) as broker:
        config = LandingConfig(events=2000).generator_config()
        assert produce_events(broker, config) is None
