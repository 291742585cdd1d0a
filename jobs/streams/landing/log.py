"""The ingest log: which landing bytes each ingest batch took, written before and after it.

Like Structured Streaming's offset and commit logs, it is two folders of small JSON files next to
the tables (``<warehouse>/_ingest/plans``, ``.../commits``). A batch's *plan* (its files, the
byte range of each, their hashes, the first arrival position, the planning time and the
watermark state it starts from) is created before anything is appended, exclusively: of two
ingests planning the same batch, the second one fails and leaves it to the first. Its *commit*
(counts, the watermark state after it) is written after the arrival log and the quarantine
took its rows. A plan without a commit is a crashed batch: the next ingest runs exactly that
plan again, and the appends, which carry Delta transaction ids, are not doubled.

Files are cheaper than a Delta table here: a plan and a commit are two small writes, where a
manifest table cost two Delta commits (each a Spark job) per batch.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from jobs.store import storage
from jobs.store.storage import Files

NEW = "new"
APPENDED = "appended"
"""A known file that grew, its earlier content unchanged: the new bytes are ingested."""
DUPLICATE = "duplicate"
"""The same content as a file ingested before: a collector delivered it twice."""
REST = "rest"
"""The rest of a file a batch before took only the first lines of (a capped batch's cut,
jobs.streams.landing.cut): read as a file that grew, but not one."""
CHANGED = "changed"
"""A known file whose earlier content changed: landing files are immutable, so its lines are
quarantined (``file_changed_after_ingest``) rather than ingested twice or silently skipped."""


@dataclass(frozen=True)
class FilePart:
    """The bytes ``[offset, size)`` of one landing file, as a batch takes them."""

    name: str
    size: int
    mtime_ns: int
    sha256: str
    """Of the file's first ``size`` bytes."""
    kind: str = NEW
    offset: int = 0
    first_line: int = 1
    """The line number of the first line read (appended parts continue the numbering)."""
    lines: int = 0
    """Lines in the file's first ``size`` bytes, for a later appended part."""
    complete: bool = True
    """The first ``size`` bytes end with a newline (or are empty): bytes appended later start
    a new line."""
    same_as: str | None = None
    """``duplicate``: the file with the same content; ``changed``: what changed."""

    @property
    def partition(self) -> str:
        return self.name.split("/", 1)[0]


@dataclass(frozen=True)
class Plan:
    batch_id: int
    files: tuple[FilePart, ...]
    first_seq: int
    planned_at_ms: int
    start_state: dict[str, Any] = field(default_factory=dict)
    """The watermark state and the last ingest time before this batch."""
    capped: tuple[str, ...] = ()
    """The source partitions with landed bytes the batch left for the next one: it ends where
    their unread lines could begin (jobs.streams.landing.cut)."""
    unread: dict[str, list[Any]] = field(default_factory=dict)
    """A capped partition's first line the batch did not take, as ``[stamp, file, line]``,
    read when the batch was planned (a partition whose stamps rise: none of its lines left
    for later comes before it in the arrival order)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        data["files"] = tuple(FilePart(**f) for f in data["files"])
        data["capped"] = tuple(data.get("capped", ()))
        return cls(**data)


@dataclass(frozen=True)
class Commit:
    batch_id: int
    records: int
    quarantined: int
    end_state: dict[str, Any]
    reasons: dict[str, int] = field(default_factory=dict)
    watermark_ms: int = 0
    consumed: dict[str, Any] = field(default_factory=dict)
    """Where the batch stopped in each source whose planned range its cut left unfinished
    (jobs.streams.batch_cut): a Kafka partition's next offset; a landing file's kept prefix
    (``{"size", "lines", "sha256"}``). The next batch starts there, not at the plan's end."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Commit:
        return cls(**json.loads(text))


def _name(batch_id: int) -> str:
    return f"{batch_id:020d}.json"


class IngestLog:
    """The plans and commits under ``<warehouse>/_ingest``."""

    def __init__(self, files: Files, warehouse: str) -> None:
        self.files = files
        self.folder = storage.join(warehouse, "_ingest")
        self.plans_folder = storage.join(self.folder, "plans")
        self.commits_folder = storage.join(self.folder, "commits")

    def batch_ids(self, folder: str) -> list[int]:
        return [int(name[:-5]) for name in self.files.names(folder, ".json")
                if name[:-5].isdigit()]

    def plan(self, batch_id: int) -> Plan:
        return Plan.from_json(self.files.read_text(storage.join(self.plans_folder,
                                                                _name(batch_id))))

    def commit(self, batch_id: int) -> Commit:
        return Commit.from_json(self.files.read_text(storage.join(self.commits_folder,
                                                                  _name(batch_id))))

    def create_plan(self, plan: Plan) -> None:
        """``FileExistsError`` when another ingest planned this batch first."""
        self.files.create(storage.join(self.plans_folder, _name(plan.batch_id)), plan.to_json())

    def write_commit(self, commit: Commit) -> None:
        # a repeated run of the same batch writes the same commit: the first one stays
        with contextlib.suppress(FileExistsError):
            self.files.create(storage.join(self.commits_folder, _name(commit.batch_id)),
                              commit.to_json())
