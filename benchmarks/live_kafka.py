"""``bench_live.py --source kafka``: the same measurement with an Apache Kafka topic as the
source (the project's own broker, started once for the benchmark).

A producer process produces JSON values into a fresh topic per run at the offered rate (every
``--file-seconds`` a tick of events spread over ``--partitions`` partitions, flushed, and its
completion time and last offset per partition recorded). The platform reads the topic as a
Kafka stream (``jobs.live.run_stream``: ingest with Spark's Kafka source, then the windowed
tables); plain Spark reads it with ``readStream.format("kafka")``, ``from_json``,
``withWatermark`` and ``groupBy(window, key)`` into Delta. A tick's latency is from its
completion to the commit of the micro-batch that processed its last record of every
partition (the platform: through the arrival log's ``kafka_partition``/``kafka_offset``; plain
Spark: its progress reports' end offsets).
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from benchmarks.live_common import (
    EVENT_SCHEMA,
    Run,
    machine_cpu_seconds,
    pipelines_for,
    start_plain_query,
)

Tick = tuple[float, int, dict[str, int]]
"""(completed at, events, partition -> last offset)."""


def produce(servers: str, topic: str, rate: int, keys: int, partitions: int,
            tick_seconds: float, seconds: float, seed: int, manifest: str) -> None:
    """Produce at ``rate`` events/s for ``seconds``; record each tick (its own process)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5,
                         "queue.buffering.max.messages": 2_000_000, "log_level": "0"})
    rng = np.random.default_rng(seed)
    per_tick = max(partitions, int(rate * tick_seconds))
    ticks: list[Tick] = []
    start = time.time()
    tick = 0
    while True:
        due = start + tick * tick_seconds
        if due > time.time():
            time.sleep(due - time.time())
        if time.time() - start >= seconds:
            break
        now_ms = int(time.time() * 1000)
        delay = rng.exponential(500, per_tick)
        delay += (rng.random(per_tick) < 0.05) * rng.uniform(0, 60_000, per_tick)
        delay += (rng.random(per_tick) < 0.01) * rng.uniform(600_000, 1_800_000, per_tick)
        event = now_ms - delay.astype(np.int64)
        key = rng.integers(0, keys, per_tick)
        value = np.round(rng.gamma(2.0, 10.0, per_tick), 2)
        bad = rng.random(per_tick) < 0.005
        last: dict[str, int] = {}

        def delivered(error, message, last=last) -> None:
            if error is None:
                part = str(message.partition())
                last[part] = max(last.get(part, -1), message.offset())

        for i in range(per_tick):
            value_text = '{"key": "user-bad", "event_time": "sometime"' if bad[i] else (
                f'{{"key":"user-{key[i]:06d}","event_time":{event[i]},'
                f'"value":{value[i]},"received_at":{now_ms}}}')
            producer.produce(topic, value=value_text.encode(), partition=i % partitions,
                             timestamp=now_ms, on_delivery=delivered)
            if i % 10_000 == 9_999:
                producer.poll(0)
        producer.flush(60)
        ticks.append((time.time(), per_tick, last))
        tick += 1
    Path(manifest).write_text(json.dumps(ticks), encoding="utf-8")


def _producer(broker, topic: str, args, rate: int, keys: int, seconds: float, folder: Path
              ) -> tuple[multiprocessing.Process, Path]:
    manifest = folder / f"produced-{time.time_ns()}.json"
    process = multiprocessing.get_context("spawn").Process(
        target=produce, args=(broker.bootstrap_servers, topic, rate, keys, args.partitions,
                              args.file_seconds, seconds, 7, str(manifest)))
    process.start()
    return process, manifest


def _topic(broker, name: str, partitions: int) -> str:
    from jobs.streams.kafka.broker import create_topics

    create_topics(broker.bootstrap_servers, {name: partitions})
    return name


def _warm_up(broker, topic: str, args, folder: Path) -> None:
    process, _ = _producer(broker, topic, args, 2_000, 100, 0.5, folder)
    process.join()


def _landed(ticks: list[Tick]) -> list[tuple[float, int]]:
    landed, total = [], 0
    for completed, count, _ in ticks:
        total += count
        landed.append((completed, total))
    return landed


def run_platform_kafka(spark, root: Path, args, window: str, rate: int, keys: int, broker
                       ) -> Run:

    from jobs.config.registry import platform_of
    from jobs.config.settings import PlatformSettings
    from jobs.live import run_stream

    home = root / f"kafka-platform-{window}-{rate}-{keys}"
    topic = _topic(broker, f"platform-{window}-{rate}-{keys}", args.partitions)
    streams, pipelines = home / "streams", home / "pipelines"
    streams.mkdir(parents=True)
    pipelines.mkdir()
    (streams / "events.yaml").write_text(json.dumps({
        "kind": "kafka", "kafka": {"bootstrap_servers": broker.bootstrap_servers,
                                   "topics": [topic]},
        "watermark": {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s",
                      "idle_timeout": "1m", "tick": "every_record"}}))
    for name, text in pipelines_for(window, 1).items():
        (pipelines / f"{name}.yaml").write_text(text, encoding="utf-8")
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home),
                                          "PLATFORM_STREAMS": str(streams),
                                          "PLATFORM_PIPELINES": str(pipelines)})
    stream = platform_of(settings).streams["events"]
    _warm_up(broker, topic, args, home)
    committed: list[tuple[int, float, float, int]] = []
    stop = threading.Event()

    def on_batch(summary: dict) -> None:
        if summary.get("last_arrival_seq") is not None:
            committed.append((summary["last_arrival_seq"], summary["written_at"],
                              summary["seconds"], summary["records"]))

    report: dict = {}

    def live_job() -> None:
        try:
            report["live"] = run_stream(spark, stream, trigger=args.trigger, poll_s=0.25,
                                        metrics_interval_s=args.metrics_interval, stop=stop,
                                        on_batch=on_batch, progress=lambda _: None,
                                        registry_poll_s=1.0)
        except Exception as error:
            report["error"] = str(error)[:2000]
            print(f"platform stream failed: {report['error']}", flush=True)

    thread = threading.Thread(target=live_job, daemon=True)
    thread.start()
    while not committed and thread.is_alive():
        time.sleep(0.2)
    warm = len(committed)
    warm_records = committed[-1][0] + 1 if committed else 0
    started = time.time()
    cpu_before = machine_cpu_seconds()
    producer, manifest = _producer(broker, topic, args, rate, keys, args.seconds, home)
    producer.join()
    offered_until = time.time()
    cpu = machine_cpu_seconds() - cpu_before
    time.sleep(args.drain)
    stop.set()
    thread.join()
    ticks: list[Tick] = json.loads(manifest.read_text())
    log = spark.read.format("delta").load(stream.arrival_log)
    position = {(int(p), int(o)): int(s) for p, o, s in
                log.select("kafka_partition", "kafka_offset", "arrival_seq").collect()}
    run = Run("platform", sum(t[1] for t in ticks), offered_until - started)
    processed_at_stop = max((c[0] + 1 for c in committed if c[1] <= offered_until), default=0)
    run.processed_in_time = max(0, processed_at_stop - warm_records)
    run.cpu_seconds = cpu
    run.backlog_s = max(0.0, 0.995 * run.offered - run.processed_in_time) / rate
    batches = sorted((c[0], c[1]) for c in committed)
    seqs = [b[0] for b in batches]
    for completed, _, last in ticks:
        # the tick's last good record of each partition (a bad one goes to quarantine)
        reached = [position.get((int(p), o)) for p, o in last.items()]
        reached = [s for s in reached if s is not None]
        if not reached:
            continue
        index = int(np.searchsorted(seqs, max(reached)))
        if index < len(batches):
            run.latencies.append(batches[index][1] - completed)
    run.batch_seconds = [c[2] for c in committed[warm:]]
    run.small_batch_seconds = [c[2] for c in committed[warm:] if c[3] <= rate * 0.2]
    run.steady([(t, 0.995 * n) for t, n in _landed(ticks)],
               [(c[1], c[0] + 1 - warm_records) for c in committed[warm:]], started,
               offered_until)
    return run


def run_plain_kafka(spark, root: Path, args, window: str, rate: int, keys: int, broker) -> Run:
    from pyspark.sql import functions as F

    folder = root / f"kafka-plain-{window}-{rate}-{keys}"
    folder.mkdir(parents=True)
    topic = _topic(broker, f"plain-{window}-{rate}-{keys}", args.partitions)
    _warm_up(broker, topic, args, folder)
    events = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest").load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*"))
    query = start_plain_query(events, window, args, folder / "checkpoint", folder / "table")
    started = time.time()
    cpu_before = machine_cpu_seconds()
    producer, manifest = _producer(broker, topic, args, rate, keys, args.seconds, folder)
    producer.join()
    offered_until = time.time()
    cpu = machine_cpu_seconds() - cpu_before
    time.sleep(args.drain)
    query.stop()
    ticks: list[Tick] = json.loads(manifest.read_text())
    ends = []  # (end time, records read through it, partition -> next offset)
    for p in query.recentProgress:
        if p.get("numInputRows") is None or not p.get("sources"):
            continue
        start = datetime.fromisoformat(p["timestamp"]).timestamp()
        took = p["durationMs"].get("triggerExecution", 0) / 1000
        offsets = p["sources"][0].get("endOffset") or {}
        if isinstance(offsets, str):
            offsets = json.loads(offsets)
        ends.append((start + took, took, p["numInputRows"], offsets.get(topic, {})))
    ends.sort(key=lambda e: e[0])
    run = Run("plain Spark", sum(t[1] for t in ticks), offered_until - started)
    for completed, _, last in ticks:
        for end, _, _, offsets in ends:
            if all(int(offsets.get(p, -1)) > o for p, o in last.items()):
                run.latencies.append(end - completed)
                break
    processed, total = [], 0
    for end, _, count, _ in ends:
        total += count
        processed.append((end, total))
    # the warm-up's records were read by the first batch: not part of the offered period
    warm = ends[0][2] if ends else 0
    processed = [(t, n - warm) for t, n in processed[1:]]
    run.processed_in_time = max((n for t, n in processed if t <= offered_until), default=0)
    run.cpu_seconds = cpu
    run.backlog_s = max(0, run.offered - run.processed_in_time) / rate
    run.batch_seconds = [e[1] for e in ends if e[2]]
    run.small_batch_seconds = [e[1] for e in ends if 0 < e[2] <= rate * 0.2]
    run.steady(_landed(ticks), processed, started, offered_until)
    return run
