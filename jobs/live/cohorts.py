"""Which streaming queries a stream's live job runs: cohorts of pipeline versions.

A *cohort* is one streaming query over a stream's arrival log, with a checkpoint of its own,
running every pipeline version it started with (jobs.live.fanout: one read of each
micro-batch for all of them). Its state was built from the beginning of the log for exactly
those versions, so:

- a cohort never takes in a version it did not start with: that version's state would begin
  in the middle of the log;
- a version no cohort runs (a new pipeline, a changed pipeline's pending version, a version
  restored after its cohort dropped it) starts a new cohort at the beginning of the log, beside
  the running ones, which go on untouched;
- a version that is no longer live (retired by a switch, or its pipeline removed) is dropped
  from its cohort at the cohort's next start, for good; a cohort left with none is over.

A stream normally has one cohort; each change adds one for the changed pipeline. Each cohort's
record sits in its checkpoint (``<checkpoint>/platform/stream.json``)::

    {"stream": "events", "buckets": 16, "created_ms": ...,
     "members": [["per_minute", "6242652144ceae35"], ...], "dropped": [...],
     "source": "arrival_positions", "fires_due_from_batch": 0}

``source`` is how the query reads the log, fixed for the checkpoint's life (its offsets are
the source's own): ``delta``, Spark's Delta source (every cohort created before the other
existed, and those whose engines read payload fields Spark parses), or
``arrival_positions`` (jobs.live.log_source).

Nothing here needs Spark: the records are small files (jobs.store.storage).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline
from jobs.config.streams import Stream
from jobs.runtime import owed_batch
from jobs.store import storage

RECORD = ("platform", "stream.json")
Member = tuple[str, str]
"""(pipeline name, version)."""


def member_of(pipeline: Pipeline) -> Member:
    return pipeline.name, pipeline.version


def member_key(member: Member) -> str:
    """How a member names its state and its output rows inside the cohort's query."""
    return f"{member[0]}@{member[1]}"


class CohortRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    stream: str
    buckets: int
    created_ms: int
    members: tuple[Member, ...]
    dropped: tuple[Member, ...] = ()
    source: Literal["delta", "arrival_positions"] = "delta"
    fires_due_from_batch: int | None = None
    """The first micro-batch that fired everything its watermark made due, in every bucket
    (jobs.runtime.packing's ticks): 0 for a cohort started so; for one started before, the
    first batch run since. A batch before it may owe its timers a batch without data
    (jobs.runtime.owed_batch); ``None`` in a record not yet read by this platform."""


@dataclass(frozen=True)
class Cohort:
    checkpoint: str
    record: CohortRecord

    @property
    def members(self) -> tuple[Member, ...]:
        return self.record.members


@dataclass
class CohortRun:
    """One query to start: a cohort (new or existing) and the versions it runs."""

    checkpoint: str
    pipelines: list[Pipeline]
    new: bool
    drop: list[Member] = field(default_factory=list)
    """Members of an existing cohort that are no longer live: dropped at this start."""

    def members(self) -> list[Member]:
        return [member_of(p) for p in self.pipelines]


def record_path(checkpoint: str) -> str:
    return storage.join(checkpoint, *RECORD)


def read_record(checkpoint: str) -> CohortRecord | None:
    """A checkpoint's cohort record (``None``: a new checkpoint)."""
    try:
        text = storage.read_small_text(record_path(checkpoint))
    except OSError as error:
        raise SettingsError(f"--checkpoint ({checkpoint}) cannot be read: "
                            f"{storage.describe_error(error)}") from None
    if text is None:
        if storage.is_local(checkpoint) and storage.local_path(
                storage.join(checkpoint, "offsets")).exists():
            raise SettingsError(f"{checkpoint} is a checkpoint of an earlier version of the "
                                "live stream (no cohort record); give a new --checkpoint")
        return None
    try:
        return CohortRecord.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        raise SettingsError(f"{record_path(checkpoint)}: not a live checkpoint record of this "
                            "platform; give a new --checkpoint") from None


def cohorts_of(stream: Stream) -> list[Cohort]:
    """Every cohort of the stream, oldest first (those with members left)."""
    found = []
    for name in storage.list_folders(stream.checkpoints):
        checkpoint = storage.join(stream.checkpoints, name)
        entry = read_record(checkpoint)
        if entry is not None and entry.members:
            found.append(Cohort(checkpoint, entry))
    return sorted(found, key=lambda c: (c.record.created_ms, c.checkpoint))


def new_checkpoint(stream: Stream, members: Iterable[Member], buckets: int,
                   now_ms: int) -> str:
    """A new cohort's checkpoint folder, named after what it runs and when it started."""
    identity = json.dumps([stream.name, sorted(members), buckets, now_ms])
    return storage.join(stream.checkpoints,
                        "live-" + hashlib.sha256(identity.encode()).hexdigest()[:12])


def plan(stream: Stream, live: Sequence[Pipeline], buckets: int,
         selected: set[str] | None = None, now_ms: int | None = None) -> list[CohortRun]:
    """The queries that run ``live`` (every live version of the stream's pipelines, from
    jobs.lifecycle.versions): each existing cohort holding a live version runs with its live members
    (those no longer live are dropped), and the live versions no cohort holds start one new
    cohort together. ``selected`` (pipeline names) limits it to the cohorts holding a
    selected pipeline's version: they run whole, since a cohort's members advance together."""
    wanted = {member_of(p): p for p in live}
    runs: list[CohortRun] = []
    taken: set[Member] = set()
    for cohort in cohorts_of(stream):
        if cohort.record.buckets != buckets:
            continue
        members = [m for m in cohort.members if m in wanted and m not in taken]
        if not members:
            continue
        if selected is not None and not any(name in selected for name, _ in members):
            taken.update(members)
            continue
        taken.update(members)
        runs.append(CohortRun(cohort.checkpoint, [wanted[m] for m in members], False,
                              [m for m in cohort.members if m not in members]))
    rest = [p for m, p in wanted.items() if m not in taken
            and (selected is None or p.name in selected)]
    if rest:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        runs.append(CohortRun(new_checkpoint(stream, map(member_of, rest), buckets, now), rest,
                              True))
    return runs


def claim(checkpoint: str, stream: Stream, pipelines: Sequence[Pipeline], buckets: int,
          still_live: Iterable[Member] = (), now_ms: int | None = None,
          source: Literal["delta", "arrival_positions"] = "delta") -> CohortRecord:
    """Before a cohort's query starts: create its record (a new checkpoint, read through
    ``source``), or check that the checkpoint's cohort holds every version to run, recording
    the members it drops for good.
    A checkpoint of another stream, another bucketing, without one of the versions, or that
    would leave a member in ``still_live`` behind is refused, saying what to do."""
    members = [member_of(p) for p in pipelines]
    found = check_claim(checkpoint, stream, pipelines, buckets, still_live)
    if found is None:
        entry = CohortRecord(stream=stream.name, buckets=buckets,
                             created_ms=int(time.time() * 1000) if now_ms is None else now_ms,
                             members=tuple(members), source=source, fires_due_from_batch=0)
        storage.write_small_text(record_path(checkpoint), entry.model_dump_json())
        return entry
    dropped = [m for m in found.members if m not in members]
    if not dropped and found.fires_due_from_batch is not None:
        return found
    update: dict = {"members": tuple(members), "dropped": (*found.dropped, *dropped)}
    if found.fires_due_from_batch is None:
        update["fires_due_from_batch"] = owed_batch.next_batch_id(checkpoint)
    entry = found.model_copy(update=update)
    storage.write_small_text(record_path(checkpoint), entry.model_dump_json())
    return entry


def check_claim(checkpoint: str, stream: Stream, pipelines: Sequence[Pipeline], buckets: int,
                still_live: Iterable[Member] = ()) -> CohortRecord | None:
    """:func:`claim`'s checks alone, writing nothing (the command line's, before Spark)."""
    members = [member_of(p) for p in pipelines]
    found = read_record(checkpoint)
    if found is None:
        return None
    missing = [m for m in members if m not in found.members]
    if found.stream != stream.name or found.buckets != buckets or missing:
        why = (f"it belongs to stream {found.stream}" if found.stream != stream.name else
               f"it has {found.buckets} buckets, this run {buckets}"
               if found.buckets != buckets else
               f"its state was not built for {', '.join(map(member_key, missing))} (it runs "
               f"{', '.join(map(member_key, found.members)) or 'nothing any more'})")
        raise SettingsError(
            f"--checkpoint ({checkpoint}): {why}; give a new --checkpoint (a new one computes "
            "its versions from the beginning of the arrival log) or run what it was started "
            "with")
    dropped = [m for m in found.members if m not in members]
    behind = [m for m in dropped if m in set(still_live)]
    if behind:
        raise SettingsError(
            f"--checkpoint ({checkpoint}) also runs {', '.join(map(member_key, behind))}, "
            "which this run would leave behind for good (a cohort's members advance together); "
            "run them together (without --pipeline) or give a new --checkpoint")
    return found
