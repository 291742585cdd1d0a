"""The landing sensor: notice finished landing files and launch the incremental run.

The cursor remembers the newest modification time seen and the names of the files seen within
a grace period before it (collectors write ``.tmp`` then rename, and two collectors can finish
in either order). A file counts as new when it is inside that window and not remembered; the run
key is derived from the new files' names, so the same files never launch two runs. Ingest
itself takes every file not yet in the arrival log, so a run also picks up anything older.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from dagster import RunRequest, SensorEvaluationContext, SensorResult, SkipReason, sensor

from platform_defs.env_settings import env_number
from platform_defs.live_job import live_job
from platform_defs.resources import PlatformResource

GRACE_NS = int(env_number("PLATFORM_LANDING_GRACE_SECONDS", 300) * 1e9)


@dataclass(frozen=True)
class LandingCursor:
    newest_ns: int
    recent: frozenset[str]

    @classmethod
    def parse(cls, text: str | None) -> "LandingCursor":
        if not text:
            return cls(-1, frozenset())
        data = json.loads(text)
        return cls(int(data["newest_ns"]), frozenset(data["recent"]))

    def serialise(self) -> str:
        return json.dumps({"newest_ns": self.newest_ns, "recent": sorted(self.recent)})


def finished_files(landing: Path) -> dict[str, int]:
    """``<partition>/<name>.jsonl`` -> modification time (ns); ``.tmp`` files are in flight."""
    if not landing.is_dir():
        return {}
    found = {}
    for path in landing.glob("*/*.jsonl"):
        try:
            found[str(path.relative_to(landing))] = path.stat().st_mtime_ns
        except FileNotFoundError:  # renamed or removed while we looked
            continue
    return found


def scan(files: dict[str, int], cursor: LandingCursor, grace_ns: int = GRACE_NS
         ) -> tuple[list[str], LandingCursor]:
    """New files (sorted) and the cursor after them."""
    horizon = cursor.newest_ns - grace_ns
    new = sorted(name for name, mtime in files.items()
                 if mtime >= horizon and name not in cursor.recent)
    newest = max([cursor.newest_ns, *files.values()])
    recent = frozenset(name for name, mtime in files.items() if mtime >= newest - grace_ns)
    return new, LandingCursor(newest, recent)


def run_key(new_files: list[str]) -> str:
    digest = hashlib.sha256("\n".join(new_files).encode()).hexdigest()[:16]
    return f"landing-{len(new_files)}-{digest}"


@sensor(job=live_job, minimum_interval_seconds=30,
        description="Launches the incremental run when finished files appear in the landing "
                    "folder; one run per set of new files.")
def landing_sensor(context: SensorEvaluationContext, platform: PlatformResource):
    landing = platform.settings().landing
    cursor = LandingCursor.parse(context.cursor)
    new, after = scan(finished_files(landing), cursor)
    if not new:
        if after != cursor:
            context.update_cursor(after.serialise())
        return SkipReason(f"no new files in {landing}")
    context.log.info(f"{len(new)} new landing files, first {new[0]}")
    return SensorResult(
        run_requests=[RunRequest(run_key=run_key(new),
                                 tags={"platform/new_files": str(len(new))})],
        cursor=after.serialise(),
    )
