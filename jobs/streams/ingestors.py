"""The ingestor of a stream's kind, chosen in one place.

The landing and Kafka ingestors import what they share (:mod:`jobs.streams.report`,
:mod:`jobs.streams.log_rows`, :mod:`jobs.streams.checks`), never this module, as a connector
imports its framework's inputs and not the reverse: adding a kind of stream adds an ingestor and
a branch here, and nothing below changes.
"""

from __future__ import annotations

from jobs.config.streams import Stream


def ingestor(spark, stream: Stream, progress=print, patient: bool = False):
    """The ingestor of a stream's kind: a landing folder's (jobs.streams.landing) or a Kafka
    topic's (jobs.streams.kafka); both give :class:`~jobs.streams.report.IngestReport`s.
    ``patient`` (the long-running job's): a Kafka broker that stops answering is waited for."""
    if stream.spec.kind == "kafka":
        from jobs.streams.kafka.ingest import KafkaIngestor

        return KafkaIngestor(spark, stream, progress, patient=patient)
    from jobs.streams.landing.ingestor import Ingestor

    return Ingestor(spark, stream, progress)


def ingest(spark, stream: Stream, progress=print, check_stop=None):
    """What is new in the stream since the last ingest: as many batches as it takes to catch
    up (a landing folder's of at most ``max_bytes_per_batch`` each, a Kafka topic's of
    ``max_records_per_batch``), their report as one. ``check_stop`` runs between batches and
    raises to stop there (the command line's, once a signal has cancelled Spark's jobs)."""
    return ingestor(spark, stream, progress).run_until_caught_up(check_stop)
