"""Where each pipeline stands, read from its tables' Delta metadata and small files: no Spark.

``python -m jobs pipelines`` prints it: every pipeline with its stream, version, tables, and
its state: the last live micro-batch written to it, how far into the stream's arrival log
that reached (and the watermark there), how many records the log holds beyond, and whether its
tables were written by this version of it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pyarrow.compute as pc

from jobs import fast_writes, storage, tables
from jobs.checks import PIPELINE_MARK
from jobs.registry import Pipeline, Platform
from jobs.table_stats import max_column_value
from operators.time import MIN_WATERMARK, ms_to_datetime


@dataclass
class PipelineState:
    pipeline: str
    stream: str
    version: str
    description: str
    file: str
    tables: dict[str, str]
    """Table -> location."""
    written_version: str | None
    """The version its tables were written with (``None``: nothing written yet)."""
    last_batch: int | None
    """The last live micro-batch written to its tables (``None``: never run live)."""
    through_arrival_seq: int | None
    """The last arrival position that micro-batch read."""
    watermark_ms: int | None
    """The watermark recorded with that record."""
    log_last_arrival_seq: int | None
    """The stream's last arrival position (``None``: nothing ingested)."""

    @property
    def lag(self) -> int | None:
        """Records of the log the live stream has not written to this pipeline yet."""
        if self.log_last_arrival_seq is None:
            return None
        return self.log_last_arrival_seq - (-1 if self.through_arrival_seq is None
                                            else self.through_arrival_seq)

    def describe_state(self) -> str:
        if self.log_last_arrival_seq is None:
            return f"nothing ingested into stream {self.stream} yet"
        if self.written_version is None:
            return "not run yet (a backfill or the live job computes it from the log)"
        if self.written_version != self.version:
            return (f"its tables hold version {self.written_version}; the file now describes "
                    f"{self.version}")
        if self.last_batch is None or self.through_arrival_seq is None:
            return "backfilled; not run live yet"
        watermark = "-" if self.watermark_ms in (None, MIN_WATERMARK) else \
            ms_to_datetime(self.watermark_ms).strftime("%Y-%m-%d %H:%M:%S") + "Z"
        return (f"live batch {self.last_batch} through arrival_seq "
                f"{self.through_arrival_seq:,}, watermark {watermark}; {self.lag:,} records "
                "behind the log")

    def as_dict(self) -> dict:
        return {**asdict(self), "lag": self.lag, "state": self.describe_state()}


def pipeline_state(pipeline: Pipeline) -> PipelineState:
    log = pipeline.stream.arrival_log
    last_seq = max_column_value(log, "arrival_seq") if fast_writes.table_exists(log) else None
    batches = pipeline.table_path(tables.BATCH_METRICS)
    last_batch = through = watermark = None
    if fast_writes.table_exists(batches):
        rows = fast_writes.read_columns(batches, ["batch_id", "last_arrival_seq"])
        if rows.num_rows:
            last_batch = pc.max(rows.column("batch_id")).as_py()
            through = pc.max(rows.column("last_arrival_seq")).as_py()  # timer-only: null
    if through is not None:
        found = fast_writes.read_columns(log, ["watermark_ms"],
                                         pc.field("arrival_seq") == through)
        watermark = found.column("watermark_ms")[0].as_py() if found.num_rows else None
    written = storage.read_small_text(storage.join(pipeline.folder, *PIPELINE_MARK))
    return PipelineState(
        pipeline.name, pipeline.stream.name, pipeline.version, pipeline.spec.description or "",
        pipeline.path, {name: pipeline.table_path(name) for name in pipeline.tables()},
        json.loads(written).get("version") if written else None, last_batch, through,
        watermark, None if last_seq is None else int(last_seq))


def platform_states(platform: Platform) -> list[PipelineState]:
    return [pipeline_state(p) for p in platform.pipelines.values()]


def render(states: list[PipelineState], warehouse: str) -> str:
    """The listing a person reads: one block per pipeline."""
    lines = []
    for state in states:
        folder = storage.join(warehouse, "pipelines", state.pipeline)
        lines.append(f"{state.pipeline}  (stream {state.stream}, version {state.version}, "
                     f"{state.file})")
        if state.description:
            lines.append(f"  {state.description}")
        lines.append(f"  tables: {folder}/{{{','.join(state.tables)}}}")
        lines.append(f"  state:  {state.describe_state()}")
    return "\n".join(lines)
