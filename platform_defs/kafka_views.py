"""What a person watching a Kafka stream reads in Dagster: per partition, the offsets ingest
has committed, the broker's latest, the lag between them, and the partition's watermark and
idleness (the partition holding the stream's watermark back is the one to look at).

A broker that does not answer is said in the metadata instead of failing the run that
already ingested.
"""

from __future__ import annotations

from dagster import MetadataValue

from jobs.config.streams import Stream
from platform_defs.late_data_views import watermark_text


def kafka_metadata(stream: Stream) -> dict:
    """The stream's per-partition status as metadata (empty for a landing stream)."""
    from jobs.streams.kafka.admin import BrokerUnreachable
    from jobs.streams.kafka.status import partition_status

    if stream.spec.kind != "kafka":
        return {}
    try:
        found = partition_status(stream)
    except BrokerUnreachable as error:
        return {"kafka_broker": str(error)}
    rows = ["| partition | committed offset | latest offset | lag | watermark | idle |",
            "| --- | ---: | ---: | ---: | --- | --- |"]
    rows += [f"| {s.partition} | {s.committed:,} | {s.latest:,} | {s.lag:,} | "
             f"{watermark_text(s.watermark_ms)} | "
             f"{'idle' if s.idle else 'active'} |" for s in found]
    return {
        "kafka_partitions": MetadataValue.md("\n".join(rows)),
        "kafka_lag_records": sum(s.lag for s in found),
        "kafka_idle_partitions": sum(s.idle for s in found),
        **{f"kafka_lag_{s.partition}": s.lag for s in found},
    }
