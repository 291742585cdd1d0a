"""Every pipeline of a stream fed from one read of each micro-batch.

The live job of a stream runs one streaming query: the arrival log is read once per
micro-batch, shuffled once by bucket of keys, and handed to Python once per bucket; there
:class:`PipelineEngines` runs each pipeline's own engine (jobs.live.standard,
jobs.live.keyed) over the same rows. Its state is each pipeline's state side by side, its
timer the earliest of theirs, and its output rows carry the pipeline they belong to
(``pipeline``), each pipeline's aggregates in columns of their own (``agg<i>_<name>``), so one
output schema holds them all; the sink splits them again (:func:`pipeline_rows`) and writes
each pipeline's tables on their own.

Pipelines never see each other: an engine gets the rows and the watermarks of the log, never
another engine's state or output, so a pipeline's rows are the same whatever runs beside it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from jobs.runtime.buckets import BucketEngine
from jobs.runtime.key_runner import ARROW_TYPES, BASE_OUTPUT, repeated, shaped, value_columns
from jobs.runtime.packing import output_table
from operators.pipeline import PipelineSpec

PIPELINE_COLUMN = "pipeline"
_PANDAS_DTYPES = {"long": "Int64", "int": "Int32", "boolean": "boolean", "double": "Float64",
                  "string": "object"}


def make_engine(spec: PipelineSpec, name: str = "pipeline", log: str | None = None
                ) -> Callable[[], BucketEngine]:
    """The bucket engine of one pipeline (built on the executors, from the pickled spec);
    ``log``: the stream's arrival log, whose ingest clock a process function's
    processing-time timers need."""
    if spec.is_process:
        from jobs.live.process import ProcessBucket

        return lambda: ProcessBucket(spec, name, log)
    if spec.is_standard_window:
        from jobs.live.standard import StandardWindows

        return lambda: StandardWindows(spec)
    from jobs.live.keyed import KeyedWindows

    return lambda: KeyedWindows(spec)


def aggregate_column(index: int, name: str) -> str:
    """The stream's output column of pipeline ``index``'s aggregate ``name``."""
    return f"agg{index}_{name}"


def stream_output_columns(specs: Sequence[PipelineSpec]) -> list[tuple[str, str]]:
    """``(name, Spark type)`` of the stream's output rows: the pipeline, the rows every
    engine emits, and each pipeline's aggregates."""
    columns = [(PIPELINE_COLUMN, "string"), *BASE_OUTPUT]
    for index, spec in enumerate(specs):
        columns += [(aggregate_column(index, name), kind)
                    for name, kind in value_columns(spec)]
    return columns


def stream_output_schema(specs: Sequence[PipelineSpec]) -> pa.Schema:
    """The Arrow schema of the stream's output rows (packed by the stateful stage,
    jobs.runtime.packing)."""
    return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in stream_output_columns(specs)])


class PipelineEngines:
    """One bucket of keys for every pipeline of a stream
    (:class:`jobs.runtime.buckets.BucketEngine`)."""

    def __init__(self, names: Sequence[str], specs: Sequence[PipelineSpec],
                 log: str | None = None) -> None:
        self.names = list(names)
        self.engines = [make_engine(spec, name.split("@")[0], log)()
                        for name, spec in zip(self.names, specs, strict=True)]
        self.renames = [{f"agg_{name}": aggregate_column(i, name)
                         for name, _ in value_columns(spec)} for i, spec in enumerate(specs)]
        columns = stream_output_columns(specs)
        self.columns = [name for name, _ in columns]
        self.dtypes = {name: _PANDAS_DTYPES.get(kind, "object") for name, kind in columns}
        self.schema = stream_output_schema(specs)

    def load(self, blob: bytes | None) -> None:
        blobs: dict[str, bytes] = {}
        if blob is not None:
            table = pa.ipc.open_stream(io.BytesIO(blob)).read_all()
            blobs = dict(zip(table.column("pipeline").to_pylist(),
                             table.column("blob").to_pylist(), strict=True))
        for name, engine in zip(self.names, self.engines, strict=True):
            engine.load(blobs.get(name))

    def dump(self) -> bytes | None:
        names, blobs = [], []
        for name, engine in zip(self.names, self.engines, strict=True):
            blob = engine.dump()
            if blob is not None:
                names.append(name)
                blobs.append(blob)
        if not names:
            return None
        table = pa.table({"pipeline": pa.array(names, pa.string()),
                          "blob": pa.array(blobs, pa.binary())})
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue()

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (e.next_deadline() for e in self.engines) if d is not None]
        return min(deadlines) if deadlines else None

    def process(self, rows: pd.DataFrame) -> list[pa.Table]:
        return self._tagged([engine.process(rows) for engine in self.engines])

    def fire(self, watermark: int) -> list[pa.Table]:
        return self._tagged([engine.fire(watermark) for engine in self.engines])

    def _tagged(self, outputs: list[list[pd.DataFrame | pa.Table]]) -> list[pa.Table]:
        """Every engine's output in the stream's schema, as one Arrow table (packed as it is,
        jobs.runtime.packing)."""
        tables = [self._in_stream_schema(part, name, renames)
                  for name, renames, output in zip(self.names, self.renames, outputs,
                                                   strict=True)
                  for part in output if len(part)]
        return [pa.concat_tables(tables)] if tables else []

    def _in_stream_schema(self, part: pd.DataFrame | pa.Table, name: str,
                          renames: dict[str, str]) -> pa.Table:
        """One engine's output with its aggregates renamed, its pipeline named and the other
        pipelines' columns null. A frame through pandas' typed conversion first (``Int64``
        refuses a user aggregate's 2.5 where Arrow would truncate it), then as PySpark
        converts a frame (:func:`~jobs.runtime.packing.output_table`)."""
        if isinstance(part, pd.DataFrame):
            frame = part.rename(columns=renames).assign(**{PIPELINE_COLUMN: name})
            frame = frame.reindex(columns=self.columns).astype(self.dtypes)
            return output_table(frame, self.schema)
        return pa.Table.from_batches(
            [shaped({**{renames.get(column, column): values for column, values
                        in zip(batch.schema.names, batch.columns, strict=True)},
                     PIPELINE_COLUMN: repeated(name, batch.num_rows)},
                    batch.num_rows, self.schema)
             for batch in part.to_batches() if batch.num_rows], schema=self.schema)


def pipeline_rows(rows: pa.Table, index: int, name: str, spec: PipelineSpec) -> pa.Table:
    """One pipeline's rows of the stream's output, in the columns its own engine emits. Arrow
    throughout: a session pipeline emits a row per record, and the same split in pandas
    copied every object column of a 1.4-million-row batch twice, 1 to 3 s of the driver's
    Python (benchmarks/history.md)."""
    owner = pc.fill_null(pc.equal(rows.column(PIPELINE_COLUMN), name), False)
    mine = rows if pc.all(owner, min_count=0).as_py() else rows.filter(owner)
    renames = {aggregate_column(index, column): f"agg_{column}"
               for column, _ in value_columns(spec)}
    columns = [name for name, _ in BASE_OUTPUT] + list(renames)
    return mine.select(columns).rename_columns([renames.get(c, c) for c in columns])
