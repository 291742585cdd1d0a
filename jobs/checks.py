"""Checks of a command against the state on disk, before Spark starts.

:mod:`jobs.settings` checks each setting on its own and :mod:`jobs.registry` the pipeline and
stream descriptions; the checks here look at what a command is about to do with them: a day
range that is reversed, a landing folder that is not there, a stream with nothing ingested
yet, a pipeline description that names another stream than its tables were computed from,
a live checkpoint that does not hold the versions to run, a misspelt ``PLATFORM_*``
variable. Each raises :class:`~jobs.errors.SettingsError`
with one line naming the argument or setting, so the command line (status 2) and the Dagster
assets fail the same way, in a second, before any data is touched. No Spark here: everything is
read with plain Python (remote locations are left to the job that reaches them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping

from deltalake.exceptions import DeltaError

from jobs import fast_writes, storage
from jobs.registry import Pipeline
from jobs.settings import SettingsError
from jobs.streams import Stream

DAY_MS = 86_400_000


def check_day_range(first_day: str | None, last_day: str | None,
                    what: str = "--from/--to") -> None:
    """A range whose first day is after its last is empty: refuse it rather than run a
    backfill that writes nothing and looks like a success. The command line and a Dagster
    partition range share the message; ``what`` names the argument."""
    if first_day and last_day and dt.date.fromisoformat(first_day) > \
            dt.date.fromisoformat(last_day):
        raise SettingsError(f"{what}: {first_day} is after {last_day}: the range is empty "
                            "(give the earlier day first)")


def check_partition_range(start: str, end: str, first_partition: str) -> tuple[str, str]:
    """The first and last day of a Dagster run's partition range, or a :class:`SettingsError`
    for a reversed one (``--partition-range 2026-01-05...2026-01-02``, which Dagster runs as
    a range of no partitions) or one that starts before the first daily partition."""
    check_day_range(start, end, "partition range")
    if dt.date.fromisoformat(start) < dt.date.fromisoformat(first_partition):
        raise SettingsError(f"partition range: {start} is before the first daily partition "
                            f"{first_partition} (PLATFORM_PARTITIONS_START)")
    return start, end


def nothing_to_backfill(pipeline: Pipeline, first_day: str | None,
                        last_day: str | None) -> bool:
    """True only when a backfill of ``[first_day, last_day]`` would certainly write nothing
    and erase nothing, judged from Delta's file statistics alone: no arrival can have a window
    ending in the range (a day of margin, as :func:`jobs.days.could_reach`), no quarantined
    line was ingested on those days, and no output table holds a row in them. Then the
    command can say so at once instead of after Spark's start-up and a pass over the log
    (``--from 2030-01-01``: the issue's three minutes for nothing). Unknown means False."""
    from jobs.table_stats import file_bounds, partition_values

    window = pipeline.spec.window
    if window is None or not first_day or not last_day or window.gap_field:
        return False
    first, last = dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day)
    epoch = dt.date(1970, 1, 1)
    reach = window.size_ms or window.gap_ms or 0
    low = (first - epoch).days * DAY_MS - DAY_MS - reach
    high = (last - epoch).days * DAY_MS + 2 * DAY_MS
    arrivals = file_bounds(pipeline.table_path("arrival_log"), "event_time_ms")
    if arrivals is None or any(lo <= high and hi >= low for lo, hi in arrivals):
        return False
    margin = dt.timedelta(days=1)
    quarantined = file_bounds(pipeline.table_path("quarantine"), "ingest_date")
    if quarantined is None or any(lo <= last + margin and hi >= first - margin
                                  for lo, hi in quarantined):
        return False
    for name in ("window_results", "late_records", "late_data_metrics", "window_assignments"):
        days = partition_values(pipeline.table_path(name), "window_end_date")
        if days is None or any(first <= dt.date.fromisoformat(str(day)) <= last
                               for day in days):
            return False
    return True


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


def check_variable_names(env: Mapping[str, str]) -> list[str]:
    """A misspelt variable (``PLATFORM_WAREHOUS``) would otherwise be ignored without a word,
    and the job run against the default location: refuse one close to a setting, and return
    a warning for every other ``PLATFORM_*`` variable that no setting reads."""
    from jobs.settings_reference import stray_variables

    warnings = []
    for stray in stray_variables(env):
        if stray.fatal:
            raise SettingsError(stray.message())
        warnings.append(f"warning: {stray.message()}")
    return warnings

