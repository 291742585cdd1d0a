"""Checks of a stream against the state on disk, before Spark starts and before ingest writes.

A landing folder that is not there, a broker that does not answer or a topic that does not
exist, a stream with nothing ingested yet, a stream whose watermark strategy changed after its
first ingest: each is one :class:`~jobs.config.errors.SettingsError` naming the setting, so the
command line (status 2) and the Dagster assets fail the same way, in a second, before any data
is touched. No Spark here: everything is read with plain Python (remote locations are left to
the job that reaches them). Both ingestors call :func:`check_stream_mark` before their first
batch.
"""

from __future__ import annotations

import hashlib
import json

from deltalake.exceptions import DeltaError

from jobs.config.errors import SettingsError
from jobs.config.streams import Stream
from jobs.store import fast_writes, storage


def _landing_setting(stream: Stream) -> str:
    return f"{stream.path}: landing" if stream.spec.landing else \
        f"the landing folder of stream {stream.name} (PLATFORM_LANDING/{stream.name})"


def check_landing(stream: Stream) -> None:
    """Ingest reads the stream's landing folder: a missing one is almost always a wrong
    setting, not "nothing landed yet", so say so instead of ingesting nothing. A Kafka
    stream's broker must answer and its topics exist (:func:`check_kafka`)."""
    from jobs.streams.landing.folder import LandingFolder

    if stream.spec.kind == "kafka":
        check_kafka(stream)
        return
    landing = LandingFolder(stream.landing)
    settings = stream.settings
    if stream.landing == settings.warehouse or storage.is_inside(stream.landing,
                                                                 settings.warehouse):
        raise SettingsError(f"{_landing_setting(stream)} ({stream.landing}) must not be inside "
                            f"PLATFORM_WAREHOUSE ({settings.warehouse}): ingest would read the "
                            "tables' own files as landing files")
    try:
        exists = landing.exists()
    except OSError as error:  # an object store's credentials, endpoint or network
        raise SettingsError(f"{_landing_setting(stream)} ({landing}) cannot be read: "
                            f"{storage.describe_error(error)}") from None
    if not exists:
        raise SettingsError(f"{_landing_setting(stream)} ({landing}) does not exist: create "
                            "it, or point the stream at the folder your collectors write "
                            "<source_partition>/*.jsonl files to")


def check_kafka(stream: Stream) -> None:
    """A Kafka stream's broker answers (within 10 s) and every topic exists, named if not."""
    from jobs.streams.kafka.admin import BrokerUnreachable, topic_partitions

    kafka = stream.spec.kafka
    servers = kafka.servers()
    try:
        topic_partitions(servers, kafka.client_settings(), kafka.topics,
                         where=f"{stream.path}: kafka.topics")
    except BrokerUnreachable as error:
        raise SettingsError(f"{stream.path}: kafka.bootstrap_servers: {error}") from None


def check_ingested(stream: Stream) -> None:
    """A backfill or a live run over a stream that has no arrival log yet has nothing to
    compute from: usually ingest has not run, or ``PLATFORM_WAREHOUSE`` names another
    folder."""
    settings = stream.settings
    try:
        ingested = fast_writes.table_exists(stream.arrival_log)
    except (OSError, DeltaError) as error:  # credentials, endpoint, network: say which
        raise SettingsError(f"PLATFORM_WAREHOUSE ({settings.warehouse}) cannot be read: "
                            f"{storage.describe_error(error)}") from None
    if not ingested:
        raise SettingsError(f"stream {stream.name} has no arrival log in PLATFORM_WAREHOUSE "
                            f"({settings.warehouse}) yet: run `python -m jobs ingest` first, "
                            "or point PLATFORM_WAREHOUSE at the warehouse you ingested into")


def _recorded(mark: str, warehouse: str) -> dict | None:
    """The record a check keeps beside the tables (``None``: none yet; ``{}``: one that cannot
    be read here, which no matching run wrote). An object store that cannot be read is said,
    naming the warehouse."""
    try:
        text = storage.read_small_text(mark)
    except OSError as error:
        if not storage.is_local(mark):  # credentials, endpoint, network: say which
            raise SettingsError(f"PLATFORM_WAREHOUSE ({warehouse}): cannot read {mark}: "
                                f"{storage.describe_error(error)}") from None
        return {}
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {}


def check_stream_mark(stream: Stream, *, remember: bool) -> None:
    """The arrival log records each record's watermark as the stream's strategy computed it,
    and ingest carries the strategy's state from batch to batch: a stream whose watermark
    strategy changed after its first ingest is refused (a new stream, a new name, starts
    afresh)."""
    mark = storage.join(stream.folder, "_platform", "stream.json")
    strategy = hashlib.sha256(repr(stream.watermark).encode()).hexdigest()[:16]
    found = _recorded(mark, stream.settings.warehouse)
    if found is None:
        if remember:
            storage.write_small_text(mark, json.dumps({"watermark": strategy,
                                                       "stream": stream.path}))
        return
    if found.get("watermark") != strategy:
        raise SettingsError(
            f"{stream.path}: watermark: the stream's watermark strategy changed since its "
            "first ingest; its arrival log holds the watermarks the earlier strategy computed, "
            "and ingest carries that strategy's state. Restore the watermark section, or "
            "describe a new stream (a new file) with this one")
