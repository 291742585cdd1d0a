"""Where each pipeline stands, read from its tables' Delta metadata and small files: no Spark.

``python -m jobs pipelines`` prints it: every pipeline with its stream, file, and versions:
the one readers see (its tables, the last live micro-batch written to it, how far into the
stream's arrival log that reached and the watermark there, how many records the log holds
beyond), the pending one while a changed description rolls out (how far its computation has
come), and the retired ones whose tables are still kept (jobs.lifecycle.versions).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pyarrow.compute as pc

from jobs import tables
from jobs.config.registry import Pipeline, Platform
from jobs.lifecycle import versions
from jobs.store import fast_writes
from jobs.store.table_stats import max_column_value
from operators.time import MIN_WATERMARK, human_duration, ms_to_datetime


@dataclass
class LivePosition:
    """How far live micro-batches have computed a version."""

    last_batch: int | None = None
    """The last live micro-batch written to its tables (``None``: never run live)."""
    through_arrival_seq: int | None = None
    """The last arrival position a micro-batch read."""
    watermark_ms: int | None = None
    """The watermark recorded with that record."""


@dataclass
class VersionLine:
    version: str
    state: str
    since_ms: int | None
    has_tables: bool
    rows: int | None
    live: LivePosition = field(default_factory=LivePosition)


@dataclass
class PipelineState:
    pipeline: str
    stream: str
    version: str
    """The file's version."""
    description: str
    file: str
    tables: dict[str, str]
    """Table -> location, of the version readers see (the file's when none yet)."""
    serving_version: str | None
    """The version readers see (``None``: nothing computed yet)."""
    versions: list[VersionLine]
    """Every recorded version, newest first."""
    log_last_arrival_seq: int | None
    """The stream's last arrival position (``None``: nothing ingested)."""

    def _line(self, version: str | None) -> VersionLine | None:
        return next((v for v in self.versions if v.version == version), None)

    @property
    def serving(self) -> VersionLine | None:
        return self._line(self.serving_version)

    @property
    def pending(self) -> VersionLine | None:
        return next((v for v in self.versions if v.state == versions.PENDING), None)

    @property
    def lag(self) -> int | None:
        """Records of the log the live stream has not written to the serving version yet."""
        if self.log_last_arrival_seq is None:
            return None
        line = self.serving
        through = line.live.through_arrival_seq if line else None
        return self.log_last_arrival_seq - (-1 if through is None else through)

    def describe_state(self) -> str:
        if self.log_last_arrival_seq is None:
            return f"nothing ingested into stream {self.stream} yet"
        line = self.serving
        if line is None or not line.has_tables:
            return "not run yet (a backfill or the live job computes it from the log)"
        if line.live.last_batch is None or line.live.through_arrival_seq is None:
            return "backfilled; not run live yet"
        watermark = "-" if line.live.watermark_ms in (None, MIN_WATERMARK) else \
            ms_to_datetime(line.live.watermark_ms).strftime("%Y-%m-%d %H:%M:%S") + "Z"
        return (f"live batch {line.live.last_batch} through arrival_seq "
                f"{line.live.through_arrival_seq:,}, watermark {watermark}; {self.lag:,} "
                "records behind the log")

    def describe_rollout(self) -> str | None:
        """The pending version's progress (``None``: nothing rolls out)."""
        line = self.pending
        if line is None:
            return None
        total = 0 if self.log_last_arrival_seq is None else self.log_last_arrival_seq + 1
        through = line.live.through_arrival_seq
        done = 0 if through is None else through + 1
        share = f" ({done / total:.0%})" if total else ""
        how = (f"computed live through {done:,} of {total:,} records{share}"
               if line.live.last_batch is not None else
               "backfilled days only; `python -m jobs rollout` or the live job computes it "
               "through the log" if line.has_tables else "not computed yet")
        first = "its first version" if self.serving_version is None else \
            f"replaces {self.serving_version}"
        return (f"version {line.version} pending ({first}): {how}; readers switch to it once "
                "it has caught up")

    def as_dict(self) -> dict:
        return {**asdict(self), "lag": self.lag, "state": self.describe_state(),
                "rollout": self.describe_rollout()}


def live_position(pipeline: Pipeline, log: str) -> LivePosition:
    """How far live micro-batches have computed this version of the pipeline."""
    batches = pipeline.table_path(tables.BATCH_METRICS)
    position = LivePosition()
    if not fast_writes.table_exists(batches):
        return position
    rows = fast_writes.read_columns(batches, ["batch_id", "last_arrival_seq"])
    if not rows.num_rows:
        return position
    position.last_batch = pc.max(rows.column("batch_id")).as_py()
    position.through_arrival_seq = pc.max(rows.column("last_arrival_seq")).as_py()
    if position.through_arrival_seq is not None:
        found = fast_writes.read_columns(log, ["watermark_ms"],
                                         pc.field("arrival_seq") == position.through_arrival_seq)
        position.watermark_ms = found.column("watermark_ms")[0].as_py() if found.num_rows \
            else None
    return position


def pipeline_state(pipeline: Pipeline) -> PipelineState:
    log = pipeline.stream.arrival_log
    last_seq = max_column_value(log, "arrival_seq") if fast_writes.table_exists(log) else None
    current = versions.serving(pipeline)
    lines = []
    for state in versions.version_states(pipeline):
        line = VersionLine(state.version, state.state, state.since_ms, state.has_tables,
                           state.rows)
        if state.has_tables and state.state in (versions.SERVING, versions.PENDING):
            line.live = live_position(versions.version_pipeline(pipeline, state.version),
                                       log)
        lines.append(line)
    readers = versions.serving_pipeline(pipeline)
    return PipelineState(
        pipeline.name, pipeline.stream.name, pipeline.version, pipeline.spec.description or "",
        pipeline.path, {name: readers.table_path(name) for name in readers.tables()},
        current.version if current else None, lines,
        None if last_seq is None else int(last_seq))


def platform_states(platform: Platform) -> list[PipelineState]:
    return [pipeline_state(p) for p in platform.pipelines.values()]


def render(states: list[PipelineState], warehouse: str, now_ms: int | None = None,
           retention_ms: int | None = None) -> str:
    """The listing a person reads: one block per pipeline."""
    import time

    now = int(time.time() * 1000) if now_ms is None else now_ms
    lines = []
    for state in states:
        serving = state.serving_version or "none yet"
        lines.append(f"{state.pipeline}  (stream {state.stream}, file {state.file}, version "
                     f"{state.version})")
        if state.description:
            lines.append(f"  {state.description}")
        lines.append(f"  serving: {serving}")
        folder = next(iter(state.tables.values())).rsplit("/", 1)[0]
        lines.append(f"  tables:  {folder}/{{{','.join(state.tables)}}}")
        lines.append(f"  state:   {state.describe_state()}")
        rollout = state.describe_rollout()
        if rollout:
            lines.append(f"  rollout: {rollout}")
        for line in state.versions:
            if line.state not in (versions.RETIRED, versions.SUPERSEDED) or not line.has_tables:
                continue
            kept = ""
            if retention_ms is not None and line.since_ms is not None:
                left = line.since_ms + retention_ms - now
                kept = f", tables kept {human_duration(max(left, 0))} more"
            rows = f", {line.rows:,} result rows" if line.rows is not None else ""
            lines.append(f"  {line.state}: {line.version}{rows}{kept}")
    return "\n".join(lines)
