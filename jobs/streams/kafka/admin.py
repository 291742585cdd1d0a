"""What a Kafka stream's topics hold, asked of the broker with ``confluent-kafka``: their
partitions, and each partition's first and next offsets (its low and high watermarks).

Ingest plans each batch from these (which offsets it takes), before Spark reads anything: a
broker that does not answer, or a topic that is not there, is said in one line naming the
bootstrap servers or the topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.config.errors import SettingsError

TIMEOUT_S = 10.0


class BrokerUnreachable(RuntimeError):
    """No broker answered at the bootstrap servers within the timeout."""


@dataclass(frozen=True)
class PartitionOffsets:
    topic: str
    partition: int
    low: int
    """The first offset the partition still holds (retention may have deleted those before)."""
    high: int
    """The offset the next record will get."""

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def _client_config(servers: str, client: dict[str, str]) -> dict[str, str]:
    # librdkafka's own log lines (connection refused, ...) would go to stderr unasked: the
    # errors it raises say it, once, naming the servers
    return {"bootstrap.servers": servers, "socket.timeout.ms": "5000",
            "client.id": "eventtime-platform", "log_level": "0", **client}


def topic_partitions(servers: str, client: dict[str, str], topics: tuple[str, ...],
                     where: str = "kafka.topics", timeout_s: float = TIMEOUT_S
                     ) -> dict[str, list[int]]:
    """Each topic's partitions; a missing topic is a :class:`SettingsError` naming it, no
    answer a :class:`BrokerUnreachable` naming the servers."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_client_config(servers, client))
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as error:
        raise BrokerUnreachable(f"no Kafka broker answered at {servers} within "
                                f"{timeout_s:g} s ({error.args[0].str() if error.args else error})"
                                ) from None
    found = {}
    for topic in topics:
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            there = ", ".join(sorted(t for t in metadata.topics if not t.startswith("__")))
            raise SettingsError(f"{where}: topic {topic!r} does not exist at {servers} (there "
                                f"are: {there or 'no topics'})")
        found[topic] = sorted(described.partitions)
    return found


def partition_offsets(servers: str, client: dict[str, str], topics: tuple[str, ...],
                      timeout_s: float = TIMEOUT_S) -> list[PartitionOffsets]:
    """Every partition of the topics with its low and high watermarks."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    partitions = topic_partitions(servers, client, topics, timeout_s=timeout_s)
    consumer = Consumer({**_client_config(servers, client), "group.id": "eventtime-offsets",
                         "enable.auto.commit": "false"})
    try:
        found = []
        for topic, numbers in partitions.items():
            for number in numbers:
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, number),
                                                               timeout=timeout_s)
                except KafkaException as error:
                    raise BrokerUnreachable(f"no Kafka broker answered at {servers} for "
                                            f"{topic}-{number}'s offsets ({error})") from None
                found.append(PartitionOffsets(topic, number, low, high))
        return found
    finally:
        consumer.close()
