"""Rolling out a changed pipeline: compute the new version beside the serving one, switch
readers to it once it has caught up, keep the old one for a while.

The live job does this by itself (jobs.live.catch_up, jobs.live.long_running): a pending
version runs in a cohort of its own from the beginning of the arrival log, and readers switch
when it has caught up (at the end of an ``available now`` run, or inside the long-running job
once it is within one poll of the live position). ``python -m jobs rollout NAME`` does the
same without a long-running job: it computes the pending version through the whole log,
switches, and stops; the next live run goes on from its checkpoint.

A switch is one whole-file write (jobs.lifecycle.versions), so a crash leaves readers on one version
or the other, and the next run finishes what was left: a pending version's cohort goes on from
its checkpoint, and switches once it has caught up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from jobs.config.registry import Pipeline
from jobs.lifecycle import effective_from, versions
from jobs.store import fast_writes
from operators.time import human_duration


@dataclass(frozen=True)
class Switched:
    """Readers of a pipeline switched from one version to another."""

    pipeline: str
    from_version: str | None
    to_version: str
    at_ms: int
    why: str
    rollout_ms: int | None = None
    """From the new version's record to the switch (``None``: unknown)."""

    def said(self) -> str:
        took = f" after {human_duration(self.rollout_ms)}" if self.rollout_ms else ""
        if self.from_version is None:
            return (f"{self.pipeline}: readers see version {self.to_version}, its first, "
                    f"computed{took} ({self.why})")
        return (f"{self.pipeline}: readers switched from version {self.from_version} to "
                f"{self.to_version}{took} ({self.why})")

    def as_metadata(self) -> dict:
        return {"pipeline": self.pipeline, "from_version": self.from_version or "",
                "to_version": self.to_version, "why": self.why,
                "rollout_ms": self.rollout_ms or 0,
                "rollout": human_duration(self.rollout_ms) if self.rollout_ms else "-"}


@dataclass(frozen=True)
class Waiting:
    """A pending version caught up but may not serve yet (its ``effective_from`` days are
    not final in the version it replaces: jobs.lifecycle.effective_from)."""

    pipeline: str
    version: str
    reason: str

    def said(self) -> str:
        return f"{self.pipeline}: version {self.version} has caught up; {self.reason}"


def switch_if_pending(pipeline: Pipeline, why: str) -> Switched | Waiting | None:
    """Switch readers to ``pipeline`` if it is its file's pending version (it just caught
    up); with ``effective_from``, once the replaced version's earlier days are final, and
    with their rows carried into the new version's tables first."""
    if pipeline.recorded or not versions.pending(pipeline):
        return None
    before = versions.serving(pipeline)
    if before is not None and effective_from.effective_day(pipeline) is not None:
        replaced = versions.version_pipeline(pipeline, before.version)
        reason = effective_from.waits_for(effective_from.effective_day(pipeline), replaced,
                                          _watermark_of(replaced))
        if reason is not None:
            return Waiting(pipeline.name, pipeline.version, reason)
        effective_from.carry(pipeline, replaced)
    entry = versions.record_of(pipeline, pipeline.version)
    after = versions.switch(pipeline, pipeline.version, why)
    took = after.since_ms - entry.recorded_ms if entry is not None else None
    return Switched(pipeline.name, before.version if before else None, pipeline.version,
                    after.since_ms, why, took)


def _watermark_of(pipeline: Pipeline) -> int | None:
    """The watermark a version's computation has reached: its last live micro-batch's, else
    (computed by backfills) the arrival log's last."""
    from jobs.lifecycle.status import live_position
    from jobs.store.table_stats import max_column_value

    log = pipeline.stream.arrival_log
    found = live_position(pipeline, log).watermark_ms
    if found is None and fast_writes.table_exists(log):
        found = max_column_value(log, "watermark_ms")
    return None if found is None else int(found)


def prune(pipeline: Pipeline, progress: Callable[[str], None] = print) -> list[str]:
    """Delete the tables of the pipeline's versions kept past ``PLATFORM_VERSIONS_RETENTION``;
    says which."""
    if pipeline.recorded:
        return []
    gone = versions.prune(pipeline)
    for version in gone:
        progress(f"{pipeline.name}: deleted the tables of version {version} (retired more than "
                 f"{human_duration(pipeline.settings.versions_retention_ms)} ago)")
    return gone


@dataclass
class CatchUp:
    """A pending version being computed inside the long-running job: caught up once one of
    its micro-batches has read everything the arrival log held at the previous check (so it
    is within one poll of the live position)."""

    pipeline: Pipeline
    through_seq: Callable[[], int | None]
    """The last arrival position its cohort's query has written."""
    seen_end: int | None = None
    """The arrival log's end (next position) at the previous check."""
    waiting: str | None = None
    """Why it waits to serve though caught up (said once per reason)."""
    started: float = 0.0

    def __post_init__(self) -> None:
        self.started = time.monotonic()

    def progress_text(self, log_end: int) -> str:
        through = self.through_seq()
        done = 0 if through is None else through + 1
        share = done / log_end if log_end else 1.0
        return (f"{self.pipeline.name}: version {self.pipeline.version} catching up: "
                f"{done:,} of {log_end:,} records ({share:.0%})")

    def check(self, log_end: int) -> bool:
        """Whether it has caught up; remembers ``log_end`` for the next check."""
        through = self.through_seq()
        caught_up = self.seen_end is not None and (
            self.seen_end == 0 or (through is not None and through >= self.seen_end - 1))
        self.seen_end = log_end
        return caught_up
