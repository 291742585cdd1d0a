"""The landing sensor: notice finished landing files of each stream and launch that stream's
incremental run (ingest, then every pipeline that reads it).

Per stream, the cursor remembers the newest modification time seen and the files (name and
modification time) seen within a grace period before it (collectors write ``.tmp`` then rename,
and two collectors can finish in either order). A file counts as new when it is inside that
window and not remembered as it is now; the run key is derived from the stream and the new
files, so the same files never launch two runs. A file that looks half-written (ingest's rule:
no final newline, changed within ``PLATFORM_LANDING_SETTLE``) is not looked at until it is
finished or settled, so no run is spent on a file ingest would leave, and the file still
launches one later.

Ingest itself takes every file not yet in the arrival log, so a run also picks up anything
older: a file copied in with an old modification time (``cp -p``, ``rsync -a``) older than the
grace window launches no run of its own, and is ingested by the next run.

A Kafka stream's topics launch a run when their latest offsets are ahead of what the arrival
log holds, keyed by those offsets.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dagster import RunRequest, SensorEvaluationContext, SensorResult, SkipReason, sensor

from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.streams.landing.folder import LandingFolder, landing_files
from platform_defs.live_job import live_job
from platform_defs.resources import PlatformResource

GRACE_NS = int(PlatformSettings.from_env(check=False).landing_grace_seconds * 1e9)


@dataclass(frozen=True)
class LandingCursor:
    newest_ns: int
    recent: frozenset[str]
    """``name@mtime_ns`` of the files seen within the grace window: a file rewritten in place
    (a later modification time) counts as new again."""

    @classmethod
    def parse(cls, text: str | None) -> "LandingCursor":
        if not text:
            return cls(-1, frozenset())
        data = json.loads(text)
        return cls(int(data["newest_ns"]), frozenset(data["recent"]))

    def serialise(self) -> str:
        return json.dumps({"newest_ns": self.newest_ns, "recent": sorted(self.recent)})


def finished_files(landing: LandingFolder | Path, settle_ms: int) -> dict[str, int]:
    """``<partition>/<name>.jsonl`` -> modification time (ns) of the files ingest would take
    now (``.tmp`` files and half-written ones are in flight)."""
    return landing_files(landing, settle_ms)[0]


def _seen(name: str, mtime_ns: int) -> str:
    return f"{name}@{mtime_ns}"


def scan(files: dict[str, int], cursor: LandingCursor, grace_ns: int = GRACE_NS
         ) -> tuple[list[str], LandingCursor]:
    """New files (sorted) and the cursor after them."""
    horizon = cursor.newest_ns - grace_ns
    new = sorted(name for name, mtime in files.items()
                 if mtime >= horizon and _seen(name, mtime) not in cursor.recent)
    newest = max([cursor.newest_ns, *files.values()])
    recent = frozenset(_seen(name, mtime) for name, mtime in files.items()
                       if mtime >= newest - grace_ns)
    return new, LandingCursor(newest, recent)


def run_key(new_files: list[str]) -> str:
    digest = hashlib.sha256("\n".join(new_files).encode()).hexdigest()[:16]
    return f"landing-{len(new_files)}-{digest}"


def parse_cursors(text: str | None) -> dict[str, LandingCursor]:
    """Each stream's cursor (a cursor of an earlier single-stream version starts afresh:
    ingest takes every file not yet ingested anyway)."""
    if not text:
        return {}
    data = json.loads(text)
    if "streams" not in data:
        return {}
    return {name: LandingCursor.parse(cursor) for name, cursor in data["streams"].items()}


def serialise_cursors(cursors: dict[str, LandingCursor]) -> str:
    return json.dumps({"streams": {name: c.serialise() for name, c in sorted(cursors.items())}})


def kafka_request(stream: Stream, log: Callable[[str], None]) -> RunRequest | None:
    """A run when the topics' latest offsets are ahead of what the arrival log holds, keyed by
    those offsets (so one run per set of new records); None when nothing is new or the broker
    does not answer (said in the log)."""
    from jobs.streams.kafka.admin import BrokerUnreachable
    from jobs.streams.kafka.status import partition_status

    try:
        found = partition_status(stream)
    except BrokerUnreachable as error:
        log(f"{stream.name}: {error}")
        return None
    lag = sum(status.lag for status in found)
    if not lag:
        return None
    latest = ",".join(f"{status.partition}:{status.latest}" for status in found)
    log(f"{stream.name}: {lag} new records in {stream.origin}")
    return RunRequest(
        run_key=f"{stream.name}-kafka-{hashlib.sha256(latest.encode()).hexdigest()[:16]}",
        run_config={"ops": {"live_increment": {"config": {"stream": stream.name}}}},
        tags={"platform/stream": stream.name, "platform/new_records": str(lag)})


@sensor(job=live_job, minimum_interval_seconds=30,
        description="Launches a stream's incremental run (ingest, then every pipeline reading "
                    "it) when finished files appear in its landing folder, or its Kafka topics "
                    "hold records not ingested yet; one run per stream and set of new files "
                    "or offsets.")
def landing_sensor(context: SensorEvaluationContext, platform: PlatformResource):
    settings = platform.settings()
    cursors = parse_cursors(context.cursor)
    requests, quiet = [], []
    for name, stream in platform_of(settings).streams.items():
        if stream.spec.kind == "kafka":
            request = kafka_request(stream, context.log.info)
            if request is None:
                quiet.append(stream.origin)
            else:
                requests.append(request)
            continue
        landing = LandingFolder(stream.landing)
        cursor = cursors.get(name) or LandingCursor.parse(None)
        new, cursors[name] = scan(finished_files(landing, settings.landing_settle_ms), cursor)
        if not new:
            quiet.append(str(landing))
            continue
        context.log.info(f"{name}: {len(new)} new landing files, first {new[0]}")
        requests.append(RunRequest(
            run_key=f"{name}-{run_key(new)}",
            run_config={"ops": {"live_increment": {"config": {"stream": name}}}},
            tags={"platform/stream": name, "platform/new_files": str(len(new))}))
    if not requests:
        context.update_cursor(serialise_cursors(cursors))
        return SkipReason(f"nothing new in {', '.join(quiet)}")
    return SensorResult(run_requests=requests, cursor=serialise_cursors(cursors))
