"""A pipeline's versions: which one readers see, which one is rolling out, which are kept.

Every version of a pipeline (a digest of its description and of the user code it names,
jobs.config.registry) writes tables of its own, so no table ever holds two versions' rows, and one
small file says which version readers see::

    <warehouse>/pipelines/<name>/
      _platform/serving.json        the version readers see, and every switch so far
      _platform/versions/<v>.json   each version's description as it was first run
      versions/<v>/<table>          each version's tables

A switch rewrites ``serving.json`` whole (a rename on local disk, one put on an object store),
so readers go from one version's tables to the other's at once, never through a mix. What
each file holds is typed here (pydantic), and nothing here needs Spark.

The life of a version (docs/streams-and-pipelines.md, "Versions"):

- the first version of a pipeline serves as soon as anything computes it;
- a changed description is *pending*: it is computed from the arrival log beside the serving
  version (the live job's catch-up, or ``python -m jobs rollout``) and *switched* to once it
  has caught up; the version it replaces is *retired*;
- restoring the file of a retired version whose tables are still kept switches back at once
  (its tables cover the log up to where it stopped, and its computation goes on from there);
- a retired or superseded version's tables are deleted ``PLATFORM_VERSIONS_RETENTION`` after
  it stopped serving.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline, pipeline_from_text, platform_of
from jobs.store import fast_writes, storage

SERVING = "serving"
PENDING = "pending"
RETIRED = "retired"
SUPERSEDED = "superseded"
State = Literal["serving", "pending", "retired", "superseded"]


class VersionRecord(BaseModel):
    """One version as it was first run: enough to run it again whatever the file says now."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    version: str
    pipeline: str
    source: str
    """The stream it reads (a pipeline's versions all read one stream)."""
    file: str
    text: str
    """The description file's text."""
    code: dict[str, str] = {}
    """Module -> digest of its source, for the user code it names."""
    recorded_ms: int


class Switch(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    version: str
    at_ms: int
    previous: str | None = None
    why: str = ""


class Serving(BaseModel):
    """``serving.json``: the version readers see, and every switch so far (oldest first)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    version: str
    since_ms: int
    switches: tuple[Switch, ...] = ()

    def stopped_serving_ms(self, version: str) -> int | None:
        """When ``version`` last stopped serving (``None``: never served, or serves now)."""
        if version == self.version:
            return None
        ends = [s.at_ms for s in self.switches if s.previous == version]
        return max(ends) if ends else None

    def has_served(self, version: str) -> bool:
        return any(s.version == version for s in self.switches)


def _platform_file(pipeline: Pipeline, *parts: str) -> str:
    return storage.join(pipeline.root, "_platform", *parts)


def _read_model(location: str, model: type[BaseModel], what: str):
    try:
        text = storage.read_small_text(location)
    except OSError as error:
        raise SettingsError(f"cannot read {what} {location}: "
                            f"{storage.describe_error(error)}") from None
    if text is None:
        return None
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        raise SettingsError(f"{location}: not a {what} this platform wrote "
                            f"({error.errors()[0]['msg']}); restore it from a backup or "
                            "delete the pipeline's folder to start it afresh") from None


def serving(pipeline: Pipeline) -> Serving | None:
    """What readers of the pipeline see now (``None``: nothing computed it yet)."""
    return _read_model(_platform_file(pipeline, "serving.json"), Serving, "serving record")


def record_of(pipeline: Pipeline, version: str) -> VersionRecord | None:
    return _read_model(_platform_file(pipeline, "versions", f"{version}.json"), VersionRecord,
                       "version record")


def recorded_versions(pipeline: Pipeline) -> list[VersionRecord]:
    """Every version recorded for the pipeline, oldest first."""
    folder = _platform_file(pipeline, "versions")
    records = []
    for name in _names(folder, ".json"):
        record = record_of(pipeline, name.removesuffix(".json"))
        if record is not None:
            records.append(record)
    return sorted(records, key=lambda r: (r.recorded_ms, r.version))


def _names(folder: str, suffix: str) -> list[str]:
    if storage.is_local(folder):
        path = storage.local_path(folder)
        return sorted(p.name for p in path.glob(f"*{suffix}")) if path.is_dir() else []
    from pyarrow import fs

    filesystem, path = storage.arrow_filesystem(folder)
    infos = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
    return sorted(i.base_name for i in infos if i.base_name.endswith(suffix))


def record(pipeline: Pipeline, now_ms: int | None = None) -> VersionRecord:
    """Record the version (once: its description's text as it is now), before anything of it
    is written; the record is how it runs again after its file changed."""
    found = record_of(pipeline, pipeline.version)
    if found is not None:
        return found
    try:
        text = storage.read_small_text(pipeline.path) or ""
    except OSError as error:
        raise SettingsError(f"cannot read {pipeline.path}: {error}") from None
    entry = VersionRecord(version=pipeline.version, pipeline=pipeline.name,
                          source=pipeline.stream.name, file=pipeline.path, text=text,
                          code=pipeline.code, recorded_ms=_now(now_ms))
    storage.write_small_text(_platform_file(pipeline, "versions", f"{pipeline.version}.json"),
                             entry.model_dump_json(indent=1))
    return entry


def switch(pipeline: Pipeline, to_version: str, why: str, now_ms: int | None = None) -> Serving:
    """Readers see ``to_version`` from now on: one whole-file write."""
    current = serving(pipeline)
    at = _now(now_ms)
    previous = current.version if current else None
    if previous == to_version:
        return current
    entry = Switch(version=to_version, at_ms=at, previous=previous, why=why)
    updated = Serving(version=to_version, since_ms=at,
                      switches=(*(current.switches if current else ()), entry))
    storage.write_small_text(_platform_file(pipeline, "serving.json"),
                             updated.model_dump_json(indent=1))
    return updated


@dataclass(frozen=True)
class Reconciled:
    """What :func:`reconcile` found and did for a pipeline's file version."""

    state: State
    serving: str
    """The version readers see after it."""
    switched_from: str | None = None
    """Set when it switched: the version readers saw before."""

    def said(self, pipeline: Pipeline) -> str | None:
        """What to tell the user (``None``: nothing changed)."""
        if self.state == PENDING and not self.serving:
            return (f"{pipeline.name}: version {pipeline.version} is computed from the "
                    "arrival log; readers see it once it has caught up (its first version)")
        if self.state == PENDING:
            return (f"{pipeline.name}: version {pipeline.version} is pending (readers see "
                    f"{self.serving} until it has caught up with the arrival log)")
        if self.switched_from is None:
            return None
        if not self.switched_from:
            return f"{pipeline.name}: version {pipeline.version} serves (its first)"
        return (f"{pipeline.name}: version {pipeline.version} serves again (was "
                f"{self.switched_from}; its tables are kept and catch up from where they "
                "stopped)")


def reconcile(pipeline: Pipeline, now_ms: int | None = None, *,
              first_serves_at_once: bool = True) -> Reconciled:
    """Before a step computes the file's version of a pipeline: record it and decide what
    readers see. The first version serves at once when a backfill computes it (its tables
    fill day by day) and once it has caught up when the live job does
    (``first_serves_at_once=False``: a pipeline added beside running ones joins with its
    history computed); a version that served before and whose tables are kept (the file was
    restored) serves again at once; any other is pending. A description whose ``source``
    changed is refused: that is a new pipeline."""
    check_same_source(pipeline)
    record(pipeline, now_ms)
    current = serving(pipeline)
    if current is None and not first_serves_at_once:
        return Reconciled(PENDING, "")
    if current is None:
        switch(pipeline, pipeline.version, "first version", now_ms)
        return Reconciled(SERVING, pipeline.version, switched_from="")
    if current.version == pipeline.version:
        return Reconciled(SERVING, pipeline.version)
    if current.has_served(pipeline.version) and has_tables(pipeline):
        switch(pipeline, pipeline.version, "its description was restored", now_ms)
        return Reconciled(SERVING, pipeline.version, switched_from=current.version)
    return Reconciled(PENDING, current.version)


def check_same_source(pipeline: Pipeline) -> None:
    """A pipeline's versions all read one stream: a description that names another stream is
    a new pipeline, refused with what to do."""
    current = serving(pipeline)
    if current is None:
        return
    first = record_of(pipeline, current.version)
    if first is not None and first.source != pipeline.stream.name:
        raise SettingsError(
            f"{pipeline.path}: source: {pipeline.stream.name!r}, but pipeline "
            f"{pipeline.name}'s tables were computed from stream {first.source!r} (version "
            f"{first.version}); a pipeline reads one stream for all its versions, so another "
            "source is a new pipeline: give it a new file (a new name), and restore this one "
            "or delete it")


def has_tables(pipeline: Pipeline) -> bool:
    """Whether the version's rows (results, or a process pipeline's output) are there (not
    deleted by retention)."""
    return fast_writes.table_exists(pipeline.table_path(pipeline.main_table))


def version_pipeline(pipeline: Pipeline, version: str) -> Pipeline:
    """The pipeline as ``version`` described it (``pipeline`` itself when it is that
    version); its record must exist."""
    if version == pipeline.version:
        return pipeline
    entry = record_of(pipeline, version)
    if entry is None:
        raise SettingsError(f"pipeline {pipeline.name}: version {version} has no record in "
                            f"{_platform_file(pipeline, 'versions')}")
    streams = platform_of(pipeline.settings).streams
    if entry.source not in streams:
        raise SettingsError(f"pipeline {pipeline.name}: version {version} reads stream "
                            f"{entry.source!r}, which PLATFORM_STREAMS no longer describes")
    return pipeline_from_text(pipeline.name, entry.text, entry.file, streams, entry.version,
                              entry.code)


def serving_pipeline(pipeline: Pipeline) -> Pipeline:
    """The version readers see (the file's version when nothing was computed yet)."""
    current = serving(pipeline)
    return pipeline if current is None else version_pipeline(pipeline, current.version)


def live_versions(pipeline: Pipeline) -> list[Pipeline]:
    """The versions of a pipeline the live job computes: the serving one and, while one is
    pending, the file's version too (serving first)."""
    current = serving(pipeline)
    if current is None or current.version == pipeline.version:
        return [pipeline]
    return [version_pipeline(pipeline, current.version), pipeline]


def pending(pipeline: Pipeline) -> bool:
    """Whether the file's version waits to serve (to replace a serving one, or as the
    pipeline's first)."""
    current = serving(pipeline)
    return current is None or current.version != pipeline.version


@dataclass(frozen=True)
class VersionState:
    version: str
    state: State
    recorded_ms: int
    since_ms: int | None
    """Serving: since when; retired or superseded: since when it is no longer needed."""
    folder: str
    has_tables: bool
    rows: int | None
    """Rows of its results table, from Delta's file statistics (``None``: no table)."""


def version_states(pipeline: Pipeline) -> list[VersionState]:
    """Every recorded version of the pipeline with its state, newest first."""
    current = serving(pipeline)
    records = recorded_versions(pipeline)
    states = []
    for index, entry in enumerate(records):
        version = entry.version
        if current is not None and version == current.version:
            state, since = SERVING, current.since_ms
        elif version == pipeline.version:
            state, since = PENDING, entry.recorded_ms
        elif current is not None and current.has_served(version):
            state, since = RETIRED, current.stopped_serving_ms(version)
        else:
            later = [r.recorded_ms for r in records[index + 1:]]
            state, since = SUPERSEDED, min(later) if later else entry.recorded_ms
        folder = storage.join(pipeline.root, "versions", version)
        results = storage.join(folder, pipeline.main_table)
        exists = fast_writes.table_exists(results)
        states.append(VersionState(version, state, entry.recorded_ms, since, folder, exists,
                                   _rows(results) if exists else None))
    if pipeline.version not in {r.version for r in records} and (
            current is None or current.version != pipeline.version):
        # the file changed and nothing has run it yet: pending all the same
        states.append(VersionState(pipeline.version, PENDING, _now(None), None,
                                   storage.join(pipeline.root, "versions", pipeline.version),
                                   False, None))
    return states[::-1]


def _rows(table: str) -> int | None:
    from jobs.store.table_stats import row_count

    return row_count(table)


def prune(pipeline: Pipeline, now_ms: int | None = None) -> list[str]:
    """Delete the tables of retired and superseded versions kept longer than
    ``PLATFORM_VERSIONS_RETENTION`` since they stopped being needed; the versions whose
    tables went. Their records stay (small): the history of what served when."""
    keep_ms = pipeline.settings.versions_retention_ms
    now = _now(now_ms)
    gone = []
    for state in version_states(pipeline):
        if state.state in (SERVING, PENDING) or not state.has_tables or state.since_ms is None:
            continue
        if now - state.since_ms >= keep_ms:
            storage.delete_tree(state.folder)
            gone.append(state.version)
    return gone


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms
