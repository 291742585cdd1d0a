"""``./platform demo --source kafka``: the demo's events in an Apache Kafka topic instead of
landing files, read by the same asset graph.

The project's own broker (jobs.streams.kafka.broker) runs in ``<home>/kafka`` for the
demo's duration; the stream ``events`` is described as a Kafka stream in ``<home>/streams``
(its topic ``events``, one partition per generator producer, as the landing folders have one
per producer), and the generator's lines are produced into it in each producer's order, the
event's ``received_at`` as the record's timestamp (a broken line's: the previous line's). A
topic that already exists is not produced into again: a re-run reads what the first one
produced, and ingest takes each offset once.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jobs.generator import GeneratorConfig, generate
from jobs.streams.kafka.broker import KafkaBroker, running_broker

TOPIC = "events"
STREAM_FILE = "events.yaml"


@contextmanager
def kafka_stream(home: Path, progress=print) -> Iterator[KafkaBroker]:
    """The demo's broker, running, with ``<home>/streams/events.yaml`` describing the stream
    on it (rewritten each time: the broker's port is chosen afresh)."""
    with running_broker(home / "kafka", progress=progress) as broker:
        streams = home / "streams"
        streams.mkdir(parents=True, exist_ok=True)
        (streams / STREAM_FILE).write_text(json.dumps({
            "kind": "kafka",
            "description": "The demo's per-user events, produced into a Kafka topic with one "
                           "partition per collector.",
            "kafka": {"bootstrap_servers": broker.bootstrap_servers, "topics": [TOPIC]},
            "watermark": {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s",
                          "idle_timeout": "1m", "tick": "every_record"}}, indent=1),
            encoding="utf-8")
        yield broker


def produce_events(broker: KafkaBroker, config: GeneratorConfig, topic: str = TOPIC
                   ) -> int | None:
    """Produce the generator's lines into ``topic`` (created with a partition per producer);
    ``None`` when the topic already existed (nothing produced)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    from jobs.streams.kafka.broker import create_topics

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": "0"})
    if topic in admin.list_topics(timeout=30).topics:
        return None
    create_topics(broker.bootstrap_servers, {topic: config.producers})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                         "log_level": "0"})
    produced = 0
    with tempfile.TemporaryDirectory(prefix="demo-kafka-") as folder:
        generate(config, folder)
        for partition, directory in enumerate(sorted(Path(folder).iterdir())):
            stamp = config.start_ms
            for file in sorted(directory.glob("*.jsonl"), key=_file_order):
                for line in file.read_text(encoding="utf-8").splitlines():
                    # a line too broken to say when it was received: when the one before was
                    stamp = _received_at(line) or stamp
                    producer.produce(topic, value=line.encode(), partition=partition,
                                     timestamp=stamp)
                    produced += 1
                    producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"Kafka did not acknowledge every record within 60 s "
                           f"({broker.bootstrap_servers})")
    return produced


def _file_order(file: Path) -> tuple[int, str]:
    """``received-<bucket>-<tag>.jsonl``: by the time bucket its lines were received in."""
    parts = file.name.split("-")
    return (int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else 0, file.name)


def _received_at(line: str) -> int:
    """When the collector received the event (0: a line too broken to say). It is the
    record's timestamp, which a Kafka stream's ingest takes for its ingest clock; a record
    without one would get the broker's clock, months after the demo's events."""
    try:
        found = json.loads(line).get("received_at")
    except (ValueError, AttributeError):
        return 0
    return found if isinstance(found, int) and found > 0 else 0
