"""A pipeline's versions as the Dagster UI shows them (jobs.lifecycle.versions).

Every materialisation of a pipeline's tables names the version that wrote it, the version
readers see and, while a changed description rolls out, its progress; the results asset's
metadata carries the table of versions (serving, pending, retired, with their row counts);
a switch is recorded as an observation of each windowed asset naming the old and new
versions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from dagster import AssetObservation, MetadataValue

from jobs import tables
from jobs.config.registry import Pipeline, platform_of
from jobs.config.settings import PlatformSettings
from jobs.lifecycle import versions
from jobs.lifecycle.rollout import Switched
from jobs.lifecycle.status import pipeline_state
from operators.time import human_duration
from platform_defs.table_specs import pipeline_key

WINDOWED = (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)


def versions_table(pipeline: Pipeline, now_ms: int | None = None) -> str:
    """Markdown: every recorded version, newest first, with its state, since when, and the
    rows of its results table."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    lines = ["| version | state | since | result rows | tables |",
             "| --- | --- | --- | ---: | --- |"]
    for state in versions.version_states(pipeline):
        since = f"{human_duration(now - state.since_ms)} ago" if state.since_ms else "-"
        rows = f"{state.rows:,}" if state.rows is not None else "-"
        kept = "kept" if state.has_tables else "deleted"
        lines.append(f"| {state.version} | {state.state} | {since} | {rows} | {kept} |")
    return "\n".join(lines)


def version_metadata(pipeline: Pipeline) -> dict:
    """What a materialisation of ``pipeline``'s tables says about versions: the version that
    wrote it, the one readers see, its state, and a pending version's progress."""
    current = versions.serving(pipeline)
    serving = current.version if current else ""
    state = versions.SERVING if serving == pipeline.version else versions.PENDING
    metadata = {"pipeline_version": pipeline.version, "serving_version": serving or "-",
                "version_state": state}
    if state == versions.PENDING:
        rollout = pipeline_state(pipeline).describe_rollout()
        if rollout:
            metadata["rollout"] = rollout
    return metadata


def results_versions_metadata(pipeline: Pipeline) -> dict:
    """The results asset's table of versions."""
    return {"versions": MetadataValue.md(versions_table(pipeline))}


def version_of(settings: PlatformSettings, name: str, version: str | None) -> Pipeline:
    """The pipeline version a live process reported (its file's when ``version`` is None)."""
    pipeline = platform_of(settings).pipelines[name]
    return pipeline if version is None else versions.version_pipeline(pipeline, version)


def switch_observations(settings: PlatformSettings, switched: dict) -> Iterator[AssetObservation]:
    """A switch (``Switched.as_metadata()``), as one observation of each windowed asset."""
    pipeline = platform_of(settings).pipelines.get(switched["pipeline"])
    for table in WINDOWED:
        metadata = {**switched, "switched": f"{switched['from_version'] or '-'} -> "
                                            f"{switched['to_version']}"}
        if pipeline is not None and table == tables.WINDOW_RESULTS:
            metadata.update(results_versions_metadata(pipeline))
        yield AssetObservation(asset_key=pipeline_key(switched["pipeline"], table),
                               metadata=metadata,
                               description=f"readers switched to version "
                                           f"{switched['to_version']}")


def switched_events(settings: PlatformSettings, done: list[Switched]
                    ) -> Iterator[AssetObservation]:
    for each in done:
        yield from switch_observations(settings, each.as_metadata())
