"""Kafka streams against a real broker (KRaft, its own JVM, started once for this module):
every offset once in the arrival log or the quarantine, batch after batch and across SIGKILLs;
watermarks per partition as Flink's KafkaSource keeps them (a lagging partition's records are
not late because of the others, unlike Spark's one watermark per query; an idle partition stops
holding them back; a partition added while running joins without moving them back);
retention's gaps stop the ingest or, when accepted, are recorded; the mistakes a user meets
are named before Spark starts."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from deltalake import DeltaTable

from jobs.backfill import run_backfill
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.store.storage import Files
from jobs.streams.ingestors import ingest
from jobs.streams.kafka.broker import create_topics, running_broker
from jobs.streams.kafka.ingest import KafkaDataLossError, KafkaIngestLog
from tests.platform_home import PER_MINUTE, write_pipelines

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
QUIET = {"progress": lambda _: None}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("kafka") / "broker", progress=lambda _: None) \
            as running:
        yield running


def _home(tmp_path: Path, broker, topic: str, partitions: int, pipeline: str = PER_MINUTE,
          **kafka: object) -> dict[str, str]:
    """A platform home whose one stream reads ``topic`` (created with ``partitions``)."""
    create_topics(broker.bootstrap_servers, {topic: partitions})
    streams = tmp_path / "streams"
    streams.mkdir(parents=True, exist_ok=True)
    settings = {"bootstrap_servers": broker.bootstrap_servers, "topics": [topic], **kafka}
    (streams / "clicks.yaml").write_text(json.dumps({
        "kind": "kafka", "kafka": settings,
        "watermark": {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s",
                      "idle_timeout": "1m"}}))
    pipelines = write_pipelines(tmp_path / "pipelines",
                                {"per_minute": pipeline.replace("source: events",
                                                                "source: clicks")})
    return {"PLATFORM_HOME": str(tmp_path / "home"), "PLATFORM_STREAMS": str(streams),
            "PLATFORM_PIPELINES": str(pipelines), "PLATFORM_MAX_LINE_BYTES": "10000"}


def _stream(env: dict[str, str]):
    return platform_of(PlatformSettings.from_env(env)).streams["clicks"]


def _produce(broker, topic: str, records: list[tuple[int, bytes | None, int, bytes | None]]
             ) -> None:
    """``(partition, value, timestamp ms, key)`` records, in this order per partition."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for partition, value, stamp, key in records:
        producer.produce(topic, value=value, key=key, partition=partition, timestamp=stamp)
    assert producer.flush(30) == 0


def _line(key: str, event_ms: int, value: float = 1.5) -> bytes:
    return json.dumps({"key": key, "event_time": event_ms, "value": value}).encode()


def _table(stream, name: str) -> pd.DataFrame:
    return DeltaTable(stream.table_path(name)).to_pyarrow_table().to_pandas()


def _offsets(stream) -> list[tuple[int, int]]:
    """Every (partition, offset) in the arrival log and the quarantine (with repeats)."""
    found = []
    for name in ("arrival_log", "quarantine"):
        frame = _table(stream, name)
        found += list(zip(frame.kafka_partition.astype(int), frame.kafka_offset.astype(int),
                          strict=True))
    return found


def test_every_offset_lands_once_good_in_the_log_bad_in_quarantine(spark, broker, tmp_path):
    env = _home(tmp_path, broker, "every-offset", 3)
    stream = _stream(env)
    good = [(p, _line(f"user-{i % 7}", START + i * 1000), START + i * 1000, None)
            for i, p in enumerate([0, 1, 2] * 40)]
    bad = [(0, b"{not json", START + 200_000, None), (1, None, START + 201_000, b"k"),
           (2, json.dumps({"key": "", "event_time": START}).encode(), START + 202_000, None),
           (0, json.dumps({"key": "k", "event_time": 4_102_444_800_000}).encode(),
            START + 203_000, None),
           (1, b"\xff\xfe", START + 204_000, None),
           (2, json.dumps({"key": "k", "event_time": START, "x": "y" * 20_000}).encode(),
            START + 205_000, None)]  # over PLATFORM_MAX_LINE_BYTES (10,000 here)
    _produce(broker, "every-offset", good[:60])
    ingest(spark, stream, **QUIET)
    _produce(broker, "every-offset", good[60:] + bad)
    first = ingest(spark, stream, **QUIET)
    assert ingest(spark, stream, **QUIET).batch_id is None  # nothing new
    assert first.batch_id == 1
    offsets = _offsets(stream)
    assert len(offsets) == len(set(offsets)) == len(good) + len(bad)
    quarantine = _table(stream, "quarantine")
    assert set(quarantine.reason) == {"malformed_json", "null_value", "bad_key",
                                      "too_far_in_future", "invalid_utf8", "line_too_long"}
    log = _table(stream, "arrival_log")
    assert sorted(log.arrival_seq) == list(range(len(log)))
    for partition, frame in log.groupby("kafka_partition"):  # a partition arrives in order
        frame = frame.sort_values("arrival_seq")
        assert list(frame.kafka_offset) == sorted(frame.kafka_offset), partition
        assert set(frame.source_partition) == {f"every-offset-{partition}"}


def test_a_backlog_is_ingested_in_batches_of_bounded_size(spark, broker, tmp_path):
    """``max_records_per_batch: 10`` over 25 records in two partitions: one ``ingest`` takes
    them all, in batches of at most ten records (five per partition), reported as one; the
    log holds every offset once, in each partition's order."""
    env = _home(tmp_path, broker, "backlog", 2, max_records_per_batch=10)
    stream = _stream(env)
    _produce(broker, "backlog", [(i % 2, _line(f"user-{i % 3}", START + i * 1000),
                                  START + i * 1000, None) for i in range(25)])
    report = ingest(spark, stream, **QUIET)
    assert (report.records, report.quarantined) == (25, 0)
    log = KafkaIngestLog(Files(spark), stream.folder)
    batches = log.batch_ids(log.commits_folder)
    assert len(batches) == 3  # 10, 10, then the last 5
    assert all(log.plan(b).records <= 10 for b in batches)
    frame = _table(stream, "arrival_log")
    assert sorted(zip(frame.kafka_partition, frame.kafka_offset, strict=True)) == \
        sorted((p, o) for p in (0, 1) for o in range(13 if p == 0 else 12))
    assert sorted(frame.arrival_seq) == list(range(25))
    assert ingest(spark, stream, **QUIET).batch_id is None


def test_a_catch_up_stops_at_the_offsets_its_first_batch_saw(spark, broker, tmp_path):
    """Producers keep writing while a one-shot ingest works through a backlog, ten records a
    batch: it ends at the offsets it found when it started (as ``Trigger.AvailableNow``),
    and the next ingest takes what came meanwhile; nothing is skipped or taken twice."""
    env = _home(tmp_path, broker, "filling", 2, max_records_per_batch=10)
    stream = _stream(env)
    sent = iter(range(10**6))

    def produce(count: int) -> None:
        _produce(broker, "filling", [(i % 2, _line("user", START + i * 1000), START + i * 1000,
                                      None) for i in (next(sent) for _ in range(count))])

    def meanwhile(line: str) -> None:  # each batch a producer writes ten more records
        if "ingested batch" in line:
            lines.append(line)
            if len(lines) < 8:  # (a catch-up without an end would take 95 records)
                produce(10)
            if len(lines) == 1:  # and a partition is added, with records of its own
                admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
                for future in admin.create_partitions([NewPartitions("filling", 3)]).values():
                    future.result(30)
                _produce(broker, "filling", [(2, _line("new", START + i), START + i, None)
                                             for i in range(4)])

    lines: list[str] = []
    produce(25)
    first = ingest(spark, stream, progress=meanwhile)
    assert first.records == 25 and len(lines) == 3  # 10, 10, 5: then it stops
    second = ingest(spark, stream, **QUIET)
    assert second.records == 34  # what the producers wrote during the first
    log = _table(stream, "arrival_log")
    assert sorted(zip(log.kafka_partition, log.kafka_offset, strict=True)) == \
        sorted([(p, o) for p in (0, 1) for o in range(28 if p == 0 else 27)]
               + [(2, o) for o in range(4)])


def test_a_lagging_partition_is_not_late_because_of_the_others(spark, broker, tmp_path):
    """Partition 1's events trail partition 0's by ten minutes. Per partition, minimum over
    the partitions (Flink's KafkaSource): none of them is late. Spark's one watermark per
    query, the maximum event time over all partitions minus the delay, would drop nearly all
    of partition 1's records as late: the difference, computed on the same records."""
    env = _home(tmp_path, broker, "lagging", 2)
    stream = _stream(env)
    records = []
    for i in range(120):
        arrival = START + i * 1_000
        records.append((0, _line("fast", arrival), arrival, None))
        records.append((1, _line("slow", arrival - 600_000), arrival, None))
    _produce(broker, "lagging", records)
    ingest(spark, stream, **QUIET)
    pipeline = platform_of(PlatformSettings.from_env(env)).pipelines["per_minute"]
    run_backfill(spark, pipeline, **QUIET)
    late = DeltaTable(pipeline.table_path("late_records")).to_pyarrow_table().to_pandas()
    assert (late.key == "slow").sum() == 0  # none of the lagging partition's records
    log = _table(stream, "arrival_log").sort_values("arrival_seq")
    spark_watermark = log.event_time_ms.cummax().shift(1) - 5_000  # one per query, Spark's
    spark_late = log[(log.key == "slow") & (log.event_time_ms < spark_watermark)]
    assert len(spark_late) > 100  # what plain Spark would drop
    assert log.watermark_ms.is_monotonic_increasing


def test_an_idle_partition_stops_holding_the_watermark_back(spark, broker, tmp_path):
    env = _home(tmp_path, broker, "idle", 2)
    stream = _stream(env)
    records = [(1, _line("quiet", START), START, None)]  # then nothing from partition 1
    records += [(0, _line("busy", START + i * 10_000), START + i * 10_000, None)
                for i in range(1, 30)]
    _produce(broker, "idle", records)
    ingest(spark, stream, **QUIET)
    log = _table(stream, "arrival_log").sort_values("arrival_seq")
    last = log.iloc[-1]
    # partition 1 idle after a minute of ingest clock: the watermark follows partition 0
    assert last.watermark_ms == log[log.key == "busy"].event_time_ms.iloc[:-1].max() - 5_001
    assert last.watermark_ms > START  # not held at partition 1's lone record


def test_a_partition_added_while_running_joins_without_moving_the_watermark_back(
        spark, broker, tmp_path):
    env = _home(tmp_path, broker, "growing", 1)
    stream = _stream(env)
    _produce(broker, "growing", [(0, _line("a", START + i * 1000), START + i * 1000, None)
                                 for i in range(50)])
    ingest(spark, stream, **QUIET)
    before = _table(stream, "arrival_log").watermark_ms.max()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_partitions([NewPartitions("growing", 2)]).values():
        future.result(30)
    # the controller has the partition; wait until the broker's metadata, which planning
    # reads, has it too (on a busy machine it lagged, and the next batch, not this one,
    # took the new partition's record)
    deadline = time.monotonic() + 30
    while len(admin.list_topics("growing", timeout=10).topics["growing"].partitions) < 2:
        assert time.monotonic() < deadline, "the broker never showed the new partition"
        time.sleep(0.1)
    _produce(broker, "growing", [(1, _line("b", START), START + 60_000, None),
                                 (0, _line("a", START + 70_000), START + 70_000, None)])
    ingest(spark, stream, **QUIET)
    log = _table(stream, "arrival_log").sort_values("arrival_seq")
    assert set(log.kafka_partition) == {0, 1}
    assert log.watermark_ms.is_monotonic_increasing
    assert log[log.arrival_seq >= 50].watermark_ms.min() >= before  # never back


def test_offsets_retention_deleted_stop_the_ingest_or_are_recorded_when_accepted(
        spark, broker, tmp_path):
    env = _home(tmp_path, broker, "retention", 1)
    stream = _stream(env)
    _produce(broker, "retention", [(0, _line("a", START + i), START + i, None)
                                   for i in range(10)])
    ingest(spark, stream, **QUIET)
    _produce(broker, "retention", [(0, _line("a", START + i), START + i, None)
                                   for i in range(10, 30)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.delete_records([TopicPartition("retention", 0, 20)]).values():
        future.result(30)
    with pytest.raises(KafkaDataLossError, match=r"retention-0 offsets 10\.\.19.*"
                                                 r"accept_data_loss: true"):
        ingest(spark, stream, **QUIET)
    accepting = _home(tmp_path, broker, "retention", 1, accept_data_loss=True)
    ingest(spark, _stream(accepting), **QUIET)
    quarantine = _table(stream, "quarantine")
    (gap,) = quarantine[quarantine.reason == "offsets_lost"].itertuples()
    assert "offsets 10..19 (10 records) were deleted by retention" in gap.detail
    assert sorted(_table(stream, "arrival_log").kafka_offset) == [*range(10), *range(20, 30)]


def _arrivals(stream) -> list[tuple]:
    """Every record's place: partition, offset, arrival position, ingest time, watermark."""
    frame = _table(stream, "arrival_log")
    return sorted(zip(frame.kafka_partition.astype(int), frame.kafka_offset.astype(int),
                      frame.arrival_seq.astype(int), frame.ingest_time_ms.astype(int),
                      frame.watermark_ms.astype(int), strict=True))


def test_a_backlog_gives_one_arrival_log_however_ingest_batches_it(spark, broker, tmp_path):
    """The issue's backlog, small: partition 1's event times lag 8 minutes behind its
    timestamps and it sends four times as often, partition 2 goes quiet for three minutes,
    partition 3 is added after the first wave. Ingested in batches of a few dozen records (40,
    60 or 90, drawn by FAULT_SEED), with SIGKILLs, it gives every record the arrival position,
    ingest time and watermark one uncapped batch gives; cut by count alone, partition 1 was
    counted idle inside a batch while its next records were in the topic, and records were
    made late."""
    topic = "batched"
    rng = random.Random(int(os.environ.get("FAULT_SEED", "7")))
    cap = rng.choice([40, 60, 90])
    once_env = _home(tmp_path / "once", broker, topic, 3)
    capped_env = _home(tmp_path / "capped", broker, topic, 3, max_records_per_batch=cap)
    records = []
    for i in range(400):  # partition 1: a record every 2.5 s, 8 minutes behind in event time
        stamp = START + i * 2_500
        records.append((1, _line(f"p1-{i % 5}", stamp - 480_000), stamp, None))
    for i in range(100):  # partitions 0 and 2: every 10 s; 2 quiet from 200 s to 380 s
        stamp = START + i * 10_000
        records.append((0, _line(f"p0-{i % 5}", stamp - rng.randrange(3_000)), stamp, None))
        if not 200_000 <= i * 10_000 < 380_000:
            records.append((2, _line(f"p2-{i % 5}", stamp - 1_000), stamp, None))
    _produce(broker, topic, sorted(records, key=lambda r: r[2]))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_partitions([NewPartitions(topic, 4)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < 4:
        assert time.monotonic() < deadline, "the broker never showed the new partition"
        time.sleep(0.1)
    _produce(broker, topic, [(3, _line(f"p3-{i % 5}", START + 700_000 + i * 5_000),
                              START + 700_000 + i * 5_000, None) for i in range(60)])

    ingest(spark, _stream(once_env), **QUIET)
    log = tmp_path / "ingest.log"
    for _ in range(3):  # killed mid-catch-up, then run again
        process = _cli(["ingest"], capped_env, background=True, stdout=log.open("a"))
        time.sleep(rng.uniform(4.0, 12.0))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finished = _cli(["ingest"], capped_env, timeout=300)
    assert finished.returncode == 0, finished.stdout + finished.stderr

    once, capped = _arrivals(_stream(once_env)), _arrivals(_stream(capped_env))
    assert len(once) == len(records) + 60  # every record produced
    assert capped == once
    batches = KafkaIngestLog(Files(spark), _stream(capped_env).folder)
    assert len(batches.batch_ids(batches.commits_folder)) >= len(once) // cap


def _cli(args: list[str], env: dict[str, str], **options) -> subprocess.Popen | \
        subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_")}
    command = [sys.executable, "-m", "jobs", *args]
    if options.pop("background", False):
        return subprocess.Popen(command, cwd=REPO, env={**environment, **env},
                                stdout=options.pop("stdout"), stderr=subprocess.STDOUT,
                                start_new_session=True)
    return subprocess.run(command, cwd=REPO, env={**environment, **env}, capture_output=True,
                          text=True, timeout=options.pop("timeout", 120))


def test_ingest_killed_again_and_again_loses_and_doubles_no_offset(spark, broker, tmp_path):
    """``python -m jobs ingest`` SIGKILLed at random points while records keep coming; then
    ingest to the end: every offset of the topic once, in the log or the quarantine."""
    env = _home(tmp_path, broker, "killed", 3)
    rng = random.Random(int(os.environ.get("FAULT_SEED", "5")))
    log = tmp_path / "ingest.log"
    produced = 0
    for round_ in range(2):
        batch = [(rng.randrange(3), _line(f"k{produced + i}", START + produced + i)
                  if rng.random() > 0.05 else b"oops", START + produced + i, None)
                 for i in range(400)]
        produced += len(batch)
        _produce(broker, "killed", batch)
        process = _cli(["ingest"], env, background=True, stdout=log.open("a"))
        time.sleep(rng.uniform(2.0, 9.0))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        print(f"round {round_}: killed; log so far: {log.read_text()[-300:]!r}")
    for _ in range(6):  # a killed batch is run again first, then what came after it
        finished = _cli(["ingest"], env, timeout=240)
        assert finished.returncode == 0, finished.stdout + finished.stderr
        if "no new records" in finished.stdout:
            break
    offsets = _offsets(_stream(env))
    assert len(offsets) == len(set(offsets)) == produced


def test_a_broker_that_does_not_answer_and_a_missing_topic_are_named_before_spark(
        broker, tmp_path):
    env = _home(tmp_path, broker, "present", 1)
    closed = subprocess.run([sys.executable, "-c", "import socket; s = socket.socket(); "
                             "s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"],
                            capture_output=True, text=True).stdout.strip()
    streams = Path(env["PLATFORM_STREAMS"])
    described = json.loads((streams / "clicks.yaml").read_text())
    described["kafka"]["bootstrap_servers"] = f"127.0.0.1:{closed}"
    (streams / "clicks.yaml").write_text(json.dumps(described))
    started = time.monotonic()
    result = _cli(["ingest"], env)
    assert result.returncode == 2, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert f"kafka.bootstrap_servers: no Kafka broker answered at 127.0.0.1:{closed}" in line
    assert time.monotonic() - started < 30
    described["kafka"]["bootstrap_servers"] = broker.bootstrap_servers
    described["kafka"]["topics"] = ["absent"]
    (streams / "clicks.yaml").write_text(json.dumps(described))
    result = _cli(["ingest"], env)
    assert result.returncode == 2, result.stderr
    assert "kafka.topics: topic 'absent' does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_long_running_job_waits_out_a_stopped_broker_and_loses_nothing(
        spark, broker, tmp_path):
    """The broker stops mid-stream: the job says it waits (at least every 10 s), keeps
    running, and when the broker is back it ingests what came after, every offset once; its
    tables (three records late among them) then equal a backfill of the log."""
    import threading

    from jobs.live import run_live, run_stream
    from tests.output_tables import assert_same, output_tables

    env = _home(tmp_path, broker, "outage", 2)
    stream = _stream(env)
    said: list[str] = []
    stop = threading.Event()
    report: list = []

    def job() -> None:
        report.append(run_stream(spark, stream, trigger="1 second", poll_s=0.5, stop=stop,
                                 progress=said.append, metrics_interval_s=5))

    thread = threading.Thread(target=job)
    _produce(broker, "outage", [(i % 2, _line(f"k{i % 5}", START + i * 1000),
                                 START + i * 1000, None) for i in range(200)])
    thread.start()
    try:
        _wait_for(lambda: any("live clicks: batch" in s for s in said), said)
        broker.stop()
        _wait_for(lambda: any("does not answer; waiting" in s for s in said), said, 90)
        broker.start(progress=lambda _: None)  # the same folder and ports: its data kept
        late = [(i % 2, _line("k1", START + 1000), START + 300_000, None) for i in range(3)]
        _produce(broker, "outage", [(i % 2, _line(f"k{i % 5}", START + i * 1000),
                                     START + i * 1000, None) for i in range(200, 300)] + late)
        _wait_for(lambda: len(_offsets(stream)) == 303, said, 120)
    finally:
        stop.set()
        thread.join(timeout=120)
    assert report, said[-20:]
    offsets = _offsets(stream)
    assert len(offsets) == len(set(offsets)) == 303
    pipeline = platform_of(PlatformSettings.from_env(env)).pipelines["per_minute"]
    run_live(spark, stream, **QUIET)  # what the stop left due
    live = output_tables(spark, pipeline)
    (tmp_path / "clean").mkdir()
    clean = _home(tmp_path / "clean", broker, "outage", 2)
    for name in ("arrival_log", "quarantine"):
        shutil.copytree(stream.table_path(name), _stream(clean).table_path(name))
    expected = platform_of(PlatformSettings.from_env(clean)).pipelines["per_minute"]
    run_backfill(spark, expected, **QUIET)
    assert_same(output_tables(spark, expected), live)


def _wait_for(condition, said: list[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s: {said[-10:]}")
        time.sleep(0.5)


def test_dagster_shows_each_partitions_lag_and_watermark_and_starts_a_run_for_new_records(
        spark, broker, tmp_path):
    """The stream's group has the topics (not landing files) upstream of its ingest; the
    sensor asks for a run while the topics hold records not ingested, one per set of offsets;
    the arrival log's metadata gives each partition's lag, watermark and idleness."""
    from dagster import AssetsDefinition

    from platform_defs.sensors import kafka_request
    from platform_defs.stream_assets import stream_assets
    from platform_defs.translator import DEFAULT_TRANSLATOR

    kafka_metadata = DEFAULT_TRANSLATOR.get_kafka_metadata

    env = _home(tmp_path, broker, "watched", 2)
    stream = _stream(env)
    keys = {key.to_user_string() for item in stream_assets(stream)
            for key in (item.keys if isinstance(item, AssetsDefinition) else [item.key])}
    assert keys == {"clicks/topics", "clicks/arrival_log", "clicks/quarantine"}
    assert kafka_request(stream, print) is None  # an empty topic: nothing to run
    _produce(broker, "watched", [(1, _line("quiet", START), START, None)] +
             [(0, _line("busy", START + i * 10_000), START + i * 10_000, None)
              for i in range(1, 13)])
    request = kafka_request(stream, print)
    assert request.tags["platform/new_records"] == "13"
    assert request.run_config == {"ops": {"live_increment": {"config": {"stream": "clicks"}}}}
    before = kafka_metadata(stream)
    assert before["kafka_lag_records"] == 13
    assert (before["kafka_lag_watched-0"], before["kafka_lag_watched-1"]) == (12, 1)

    ingest(spark, stream, **QUIET)
    after = kafka_metadata(stream)
    assert after["kafka_lag_records"] == 0 and kafka_request(stream, print) is None
    table = after["kafka_partitions"].value
    # partition 0's watermark: its newest event - 5 s - 1 ms; partition 1 idle after a minute
    assert "| watched-0 | 12 | 12 | 0 | 2026-01-01 00:01:54.999Z | active |" in table, table
    assert "| watched-1 | 1 | 1 | 0 | 2025-12-31 23:59:54.999Z | idle |" in table, table
    assert after["kafka_idle_partitions"] == 1

    _produce(broker, "watched", [(1, _line("quiet", START + 200_000), START + 200_000, None)])
    again = kafka_request(stream, print)
    assert again.tags["platform/new_records"] == "1" and again.run_key != request.run_key


def test_partition_numbers_are_read_from_the_source_partitions_names():
    """The arrival log's ``kafka_partition`` from ``<topic>-<number>``, whatever dashes the
    topic's name holds."""
    import pyarrow as pa

    from jobs.streams.kafka.ingest import _partition_numbers

    names = ["a-b-c-10", "clicks-0", "a-b-c-10", "clicks-123", "x--7"]
    assert _partition_numbers(names).to_pylist() == [10, 0, 10, 123, 7]
    assert _partition_numbers(pa.array(names)).to_pylist() == [10, 0, 10, 123, 7]
    assert _partition_numbers([]).to_pylist() == []
