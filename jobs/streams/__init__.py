"""Ingest: each stream's records into its arrival log and quarantine, once.

A stream's description is read by :mod:`jobs.config.streams`; here is what ingests it:
:mod:`jobs.streams.ingestors` chooses the ingestor of a stream's kind (a landing folder's,
:mod:`jobs.streams.landing`, or a Kafka topic's, :mod:`jobs.streams.kafka`); both report
with :class:`jobs.streams.report.IngestReport`, write rows shaped by
:mod:`jobs.streams.log_rows` and are checked by :mod:`jobs.streams.checks`. The ingestors
import those shared modules, never the module that chooses between them.
"""
