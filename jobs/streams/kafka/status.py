"""Where a Kafka stream's ingest stands, per partition: the offsets committed to the arrival
log, the broker's latest, the lag between them, and the partition's watermark and idleness
after the last committed batch.

Dagster shows it in the stream's metadata and its sensor starts a run when the lag is not
zero, as the landing sensor does for new files. Reading it writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.config.streams import Stream
from jobs.store.storage import Files
from jobs.streams.kafka.admin import partition_offsets
from operators.time import MIN_WATERMARK
from operators.watermarks import ArrivalWatermarks


@dataclass(frozen=True)
class PartitionStatus:
    partition: str
    """``<topic>-<number>``, as in the arrival log's watermark partitions."""
    committed: int
    """The offset the next batch starts at: everything below it is in the log or quarantine."""
    latest: int
    """The offset the broker gives the next record produced."""
    watermark_ms: int | None
    """The partition's own watermark after the last committed batch (None: no record yet)."""
    idle: bool

    @property
    def lag(self) -> int:
        return max(0, self.latest - self.committed)


def partition_status(stream: Stream, files: Files | None = None) -> list[PartitionStatus]:
    """Every partition of the stream's topics, in name order (asks the broker: a
    :class:`~jobs.streams.kafka.admin.BrokerUnreachable` when it does not answer)."""
    from jobs.streams.kafka.ingest import KafkaIngestLog

    kafka = stream.spec.kafka
    log = KafkaIngestLog(files or Files(), stream.folder)
    committed = sorted(log.batch_ids(log.commits_folder))
    positions: dict[str, int] = {}
    for batch_id in committed:
        plan = log.plan(batch_id)
        for name, (_, until) in {**plan.gaps, **plan.ranges}.items():
            positions[name] = max(positions.get(name, until), until)
    state = log.commit(committed[-1]).end_state if committed else {}
    watermarks = ArrivalWatermarks.restore(stream.watermark, state.get("watermarks"))
    own = watermarks.partitions(int(state.get("last_ingest_ms", MIN_WATERMARK)))
    found = []
    for part in partition_offsets(kafka.servers(), kafka.client_settings(), kafka.topics):
        watermark, idle = own.get(part.name, (MIN_WATERMARK, False))
        found.append(PartitionStatus(
            part.name, positions.get(part.name, part.low), part.high,
            None if watermark <= MIN_WATERMARK else watermark, idle))
    return sorted(found, key=lambda status: status.partition)
