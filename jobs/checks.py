"""Checks of a command against the state on disk, before Spark starts.

:mod:`jobs.settings` checks each setting on its own; the checks here look at what a command is
about to do with them: a day range that is reversed, a landing folder that is not there, a
warehouse with nothing ingested yet, a warehouse or live checkpoint written for another
pipeline, a misspelt ``PLATFORM_*`` variable. Each raises :class:`~jobs.settings.SettingsError`
with one line naming the argument or setting, so the command line (status 2) and the Dagster
assets fail the same way, in a second, before any data is touched. No Spark here: everything is
read with plain Python (remote locations are left to the job that reaches them).
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import json
from collections.abc import Mapping

from deltalake.exceptions import DeltaError

from jobs import fast_writes, storage
from jobs.settings import PlatformSettings, SettingsError
from operators.pipeline import PipelineSpec

DAY_MS = 86_400_000
PIPELINE_MARK = ("_platform", "pipeline.json")
"""Where a warehouse remembers the pipeline its tables were written with."""


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


def nothing_to_backfill(settings: PlatformSettings, first_day: str | None,
                        last_day: str | None) -> bool:
    """True only when a backfill of ``[first_day, last_day]`` would certainly write nothing
    and erase nothing, judged from Delta's file statistics alone: no arrival can have a window
    ending in the range (a day of margin, as :func:`jobs.days.could_reach`), no quarantined
    line was ingested on those days, and no output table holds a row in them. Then the
    command can say so at once instead of after Spark's start-up and a pass over the log
    (``--from 2030-01-01``: the issue's three minutes for nothing). Unknown means False."""
    from jobs.table_stats import file_bounds, partition_values

    window = settings.pipeline.window
    if not first_day or not last_day or window.gap_field:
        return False
    first, last = dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day)
    epoch = dt.date(1970, 1, 1)
    reach = window.size_ms or window.gap_ms or 0
    low = (first - epoch).days * DAY_MS - DAY_MS - reach
    high = (last - epoch).days * DAY_MS + 2 * DAY_MS
    arrivals = file_bounds(settings.table_path("arrival_log"), "event_time_ms")
    if arrivals is None or any(lo <= high and hi >= low for lo, hi in arrivals):
        return False
    margin = dt.timedelta(days=1)
    quarantined = file_bounds(settings.table_path("quarantine"), "ingest_date")
    if quarantined is None or any(lo <= last + margin and hi >= first - margin
                                  for lo, hi in quarantined):
        return False
    for name in ("window_results", "late_records", "late_data_metrics", "window_assignments"):
        days = partition_values(settings.table_path(name), "window_end_date")
        if days is None or any(first <= dt.date.fromisoformat(str(day)) <= last
                               for day in days):
            return False
    return True


def fingerprint(spec: PipelineSpec) -> str:
    """A short digest of a pipeline description: equal descriptions, equal digests."""
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:16]


def check_landing(settings: PlatformSettings) -> None:
    """Ingest reads the landing folder: a missing one is almost always a wrong
    ``PLATFORM_LANDING``, not "nothing landed yet", so say so instead of ingesting nothing."""
    from jobs.ingest.landing import LandingFolder

    landing = LandingFolder(settings.landing)
    try:
        exists = landing.exists()
    except OSError as error:  # an object store's credentials, endpoint or network
        raise SettingsError(f"PLATFORM_LANDING ({landing}) cannot be read: "
                            f"{storage.describe_error(error)}") from None
    if not exists:
        raise SettingsError(f"PLATFORM_LANDING ({landing}) does not exist: point it at the "
                            "folder your collectors write <source_partition>/*.jsonl files to")


def check_ingested(settings: PlatformSettings) -> None:
    """A backfill or a live run over a warehouse that has no arrival log yet has nothing to
    compute from: usually ingest has not run, or ``PLATFORM_WAREHOUSE`` names another
    folder."""
    try:
        ingested = fast_writes.table_exists(settings.table_path("arrival_log"))
    except (OSError, DeltaError) as error:  # credentials, endpoint, network: say which
        raise SettingsError(f"PLATFORM_WAREHOUSE ({settings.warehouse}) cannot be read: "
                            f"{storage.describe_error(error)}") from None
    if not ingested:
        raise SettingsError(f"PLATFORM_WAREHOUSE ({settings.warehouse}) has no arrival log "
                            "yet: run `python -m jobs ingest` first, or point "
                            "PLATFORM_WAREHOUSE at the warehouse you ingested into")


def check_pipeline_mark(settings: PlatformSettings, *, remember: bool) -> None:
    """One warehouse, one pipeline: the arrival log's watermarks and every windowed table
    are computed with one description, and a second one would mix two pipelines' rows in
    the same tables (a range backfill replaces only its own days). The first command that
    runs against a warehouse records its pipeline (``remember``); a later command with
    another one is refused."""
    mark = storage.join(settings.warehouse, *PIPELINE_MARK)
    wanted = {"fingerprint": fingerprint(settings.pipeline),
              "pipeline": str(settings.pipeline_path)}
    try:
        text = storage.read_small_text(mark)
    except OSError as error:
        if not storage.is_local(mark):  # credentials, endpoint, network: say which
            raise SettingsError(f"PLATFORM_WAREHOUSE ({settings.warehouse}): cannot read "
                                f"{mark}: {storage.describe_error(error)}") from None
        text = ""  # unreadable here: not a record this pipeline wrote
    if text is not None:
        try:
            found = json.loads(text)
        except ValueError:
            found = {}
        if found.get("fingerprint") != wanted["fingerprint"]:
            raise SettingsError(
                f"PLATFORM_PIPELINE ({settings.pipeline_path}) is not the pipeline the "
                f"warehouse {settings.warehouse} was written with ({found.get('pipeline')}, "
                f"fingerprint {found.get('fingerprint')}): its tables would mix two "
                "pipelines' rows. Point PLATFORM_WAREHOUSE at a new folder, or restore that "
                f"pipeline (to adopt this one on purpose: delete {mark}, then run a full "
                "backfill)")
        return
    if remember:
        storage.write_small_text(mark, json.dumps(wanted))


def check_checkpoint(checkpoint: str, spec: PipelineSpec, buckets: int) -> None:
    """A live checkpoint holds state in one pipeline's shape (``<checkpoint>/platform/
    stream.json``, written by the live stream): refuse another pipeline's before Spark reads
    it. The stream checks again itself (remote checkpoints, Dagster runs)."""
    try:
        text = storage.read_small_text(storage.join(checkpoint, "platform", "stream.json"))
    except OSError as error:
        raise SettingsError(f"--checkpoint ({checkpoint}) cannot be read: "
                            f"{storage.describe_error(error)}") from None
    if text is None:
        return
    found = json.loads(text)
    wanted = {"pipeline": fingerprint(spec), "buckets": buckets}
    if found != wanted:
        raise SettingsError(
            f"--checkpoint ({checkpoint}) was written for another pipeline or bucket count "
            f"({found}; this run: {wanted}); give a new --checkpoint (the tables are kept; a "
            "backfill recomputes them) or restore the pipeline it was written for")


def check_variable_names(env: Mapping[str, str]) -> None:
    """A misspelt variable (``PLATFORM_WAREHOUS``) is otherwise ignored without a word, and
    the job runs against the default location; refuse names one letter or so away from a
    setting."""
    known = sorted(f"PLATFORM_{name}" for name in PlatformSettings.variable_names())
    for variable in sorted(env):
        if not variable.startswith("PLATFORM_") or variable in known:
            continue
        close = difflib.get_close_matches(variable, known, n=1, cutoff=0.85)
        if close:
            raise SettingsError(f"{variable} is not a setting; did you mean {close[0]}? "
                                "(README, Configuration)")

