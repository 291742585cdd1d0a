"""Records reach the stateful stage packed: one Arrow blob per bucket and input partition.

PySpark's ``transformWithStateInPandas`` hands a grouping key's rows to Python one at a time:
its serializer converts each Arrow batch to pandas, walks it row by row (``itertuples``) to
find where a key's rows end, and builds a new frame from the row tuples. Profiled at 80,000
events/s (benchmarks/history.md), that walk took about two thirds of the Python workers' time
and the engines themselves a fifth. So before the shuffle a stateless ``mapInArrow`` packs each
input partition's records by bucket into Arrow IPC bytes, one row per bucket: the stateful
stage gets tens of rows per micro-batch instead of hundreds of thousands, and the processor
unpacks them as columns (:func:`unpack`).

The stateful stage's output is packed the same way (:func:`pack_output`), a few rows per
call: Spark's JVM reads each output row from the Python worker's Arrow into a row and, when
the micro-batch is collected, writes it into Arrow again. Live sessions output a row per record
(its window assignment), and a profile of their JVM at 40,000 events/s put a fifth of its
samples in that collect (benchmarks/history.md). Packed, the rows cross the JVM as a few
byte strings and the driver reads them as they were written (:func:`unpack_output`).

Nothing a pipeline computes changes: an engine gets its bucket's records of the micro-batch,
in any order, as before. A packed row carries the largest recorded watermark of its records as
its event time, and Spark's watermark is the largest over the rows, so it is the same as over
the records.

Each input partition's packs end with a **tick** for every bucket (:func:`with_ticks`): a row
without records carrying the partition's largest recorded watermark. So every bucket is called
in every micro-batch with data, learns the micro-batch's watermark, and fires what it makes due
in that micro-batch (jobs.runtime.buckets), not in the batch without data Spark runs after it:
a crash between the two leaves no table short of those panes (docs/contract.md, section 8).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from jobs.runtime.worker_gc import spare_live_objects

PACKED_COLUMN = "packed_records"
"""Arrow IPC stream bytes of a bucket's records. (No leading underscore: PySpark's serializer
passes rows through named tuples, which rename such fields.)"""
PACKED_WATERMARK = "packed_watermark_ms"
"""The largest recorded watermark of a packed row's records."""
PACKED_OUTPUT = "packed_output"
"""Arrow IPC stream bytes of one call's output rows."""
PACKED_OUTPUT_SCHEMA = f"{PACKED_OUTPUT} binary"
"""The stateful stage's Spark output schema when its output is packed."""
PACK_BYTES = 256 * 1024
"""About the most bytes of output rows in one pack. G1, the JVM's garbage collector, takes an
object of half a heap region or more (1 MiB in the driver's 4 GiB heap) as humongous; with a
pack per call (megabytes of a bucket's session assignments) its threads took 0.3-0.9 s of CPU
per 400,000-record micro-batch against 0.1 s in packs of this size (a catch-up of 6.4 M
records, benchmarks/history.md)."""
OUTPUT_COMPRESSION = pa.ipc.IpcWriteOptions(compression="lz4")
"""Output packs are LZ4-compressed Arrow IPC. The output schema has a column for every kind of
row and pipeline, most of them null in any one row: a session's assignment row is 192 bytes
as Arrow and 45 compressed (+45 ns a row to write, +47 to read). Uncompressed, a session
pipeline's micro-batch of 1-3 million records left the stateful stage as hundreds of
megabytes, which the sink's collect wrote into one Arrow buffer (Spark cuts those batches by
rows only for a narrow stream, :func:`rows_only_arrow_batches`) until the JVM ran out of heap
(benchmarks/history.md)."""
MAX_ROWS_PER_PACK = 1_000_000
"""Records gathered before a partition's packs are cut (bounds the Python worker's memory)."""


BATCH_BYTES_SETTING = "spark.sql.execution.arrow.maxBytesPerBatch"
UNSIZED = str(2**31 - 1)
"""The one value of :data:`BATCH_BYTES_SETTING` at which Spark cuts the Arrow batches it sends
to Python by rows alone. At any other (the default is 64 MiB) it measures the batch's vectors
after every row it writes: 11 % of the executors' JVM time at 80,000 events/s (a Java Flight
Recorder profile, benchmarks/history.md)."""


@contextmanager
def rows_only_arrow_batches(spark: SparkSession, narrow: bool) -> Iterator[None]:
    """While a streaming query starts (it keeps a copy of the session's settings): its Arrow
    batches to Python cut by rows only (``maxRecordsPerBatch``, 10,000), when its records are
    ``narrow`` (no payload: a key of at most 1,024 characters and numbers, so a batch stays
    within tens of megabytes). A stream that ships payloads, lines of up to
    ``max_line_bytes`` each, keeps Spark's byte limit."""
    if not narrow:
        yield
        return
    before = spark.conf.get(BATCH_BYTES_SETTING, None)
    spark.conf.set(BATCH_BYTES_SETTING, UNSIZED)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(BATCH_BYTES_SETTING)
        else:
            spark.conf.set(BATCH_BYTES_SETTING, before)


def pack_by_bucket(frame: DataFrame, bucket: str, buckets: int, watermark: str = "watermark_ms"
                   ) -> DataFrame:
    """``frame``'s records as one row per ``bucket`` and input partition:
    ``(bucket, packed_watermark_ms, packed_records)``, then a tick for each of the ``buckets``
    (:func:`with_ticks`)."""
    schema = f"{bucket} int, {PACKED_WATERMARK} bigint, {PACKED_COLUMN} binary"

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spare_live_objects()  # a task's start in the worker
        yield from with_ticks(packs(batches), bucket, buckets)

    def packs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch in batches:
            if batch.num_rows:
                pending.append(batch)
                rows += batch.num_rows
            if rows >= MAX_ROWS_PER_PACK:
                yield packed(pending, bucket, watermark)
                pending, rows = [], 0
        if pending:
            yield packed(pending, bucket, watermark)

    return frame.mapInArrow(pack, schema)


def with_ticks(packs: Iterable[pa.RecordBatch], bucket: str, buckets: int
               ) -> Iterator[pa.RecordBatch]:
    """An input partition's ``packs``, then a tick for each of the ``buckets``: a row with no
    records (empty bytes) carrying the packs' largest recorded watermark; no ticks after no
    packs. A bucket's largest watermark over the micro-batch's rows is then the micro-batch's
    own, whichever partitions its records came from."""
    reached: int | None = None
    for batch in packs:
        yield batch
        if batch.num_rows:
            top = pc.max(batch.column(PACKED_WATERMARK)).as_py()
            reached = top if reached is None else max(reached, top)
    if reached is not None:
        yield pa.record_batch({
            bucket: pa.array(np.arange(buckets, dtype=np.int32)),
            PACKED_WATERMARK: pa.array(np.full(buckets, reached, dtype=np.int64)),
            PACKED_COLUMN: pa.array([b""] * buckets, pa.binary())})


def is_tick(blob: bytes) -> bool:
    """Whether a packed row is a tick (:func:`with_ticks`), not records."""
    return not blob


def packed(batches: Sequence[pa.RecordBatch], bucket: str, watermark: str) -> pa.RecordBatch:
    """One row per bucket of ``batches``: the bucket, its records' largest ``watermark`` and
    the records (without the bucket) as Arrow IPC bytes."""
    table = pa.Table.from_batches(batches).combine_chunks()
    buckets = table.column(bucket).to_numpy()
    order = np.argsort(buckets, kind="stable")
    sorted_buckets = buckets[order]
    starts = np.flatnonzero(np.r_[True, sorted_buckets[1:] != sorted_buckets[:-1]])
    ends = np.r_[starts[1:], len(order)]
    records = table.drop_columns([bucket]).take(pa.array(order))
    watermarks = np.maximum.reduceat(records.column(watermark).to_numpy(), starts)
    sink = pa.BufferOutputStream()  # the packs end to end, one binary array over them
    offsets = [0]
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        with pa.ipc.new_stream(sink, records.schema) as writer:
            writer.write_table(records.slice(start, end - start))
        offsets.append(sink.tell())
    blobs = pa.Array.from_buffers(pa.large_binary(), len(starts),
                                  [None, pa.py_buffer(np.array(offsets, dtype=np.int64)),
                                   sink.getvalue()]).cast(pa.binary())
    return pa.record_batch({bucket: pa.array(sorted_buckets[starts], pa.int32()),
                            PACKED_WATERMARK: pa.array(watermarks, pa.int64()),
                            PACKED_COLUMN: blobs})


def unpack(frame: pd.DataFrame, decimals_as_units: bool = False) -> pd.DataFrame:
    """The records of a bucket's packed rows (ticks left out), as one frame. With
    ``decimals_as_units``, a ``DECIMAL(38, 9)`` column whose values all fit 64 bits comes as
    exact integers of nanounits (``Int64``: the decimal's own unscaled integer, read from
    Arrow's buffer), not one Python ``Decimal`` per value (jobs.live.standard folds them with
    numpy)."""
    tables = [pa.ipc.open_stream(blob).read_all() for blob in frame[PACKED_COLUMN]
              if not is_tick(blob)]
    table = pa.concat_tables(tables)
    units = {}
    if decimals_as_units:
        for index, field in enumerate(table.schema):
            if pa.types.is_decimal128(field.type) and field.type.scale == SCALE:
                found = nanounits(table.column(index))
                if found is not None:
                    units[field.name] = found
    data = table.drop_columns(list(units)).to_pandas() if units else table.to_pandas()
    for name, column in units.items():
        data[name] = column
    return data[table.column_names] if units else data


def pack_output(parts: Sequence[pd.DataFrame | pa.Table], schema: pa.Schema) -> list[bytes]:
    """One call's output (frames with columns by name as in ``schema``, or tables of
    ``schema``) as Arrow IPC bytes (:data:`OUTPUT_COMPRESSION`), cut into packs of about
    :data:`PACK_BYTES` before compression. A frame is
    converted as PySpark converts one (:func:`output_table`), so the driver reads the same
    values as from Spark's own rows."""
    tables = [part if isinstance(part, pa.Table) else output_table(part, schema)
              for part in parts if len(part)]
    if not tables:
        return []
    table = pa.concat_tables(tables)
    rows = max(1, table.num_rows * PACK_BYTES // max(1, table.nbytes))
    packs = []
    for start in range(0, table.num_rows, rows):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema, options=OUTPUT_COMPRESSION) as writer:
            writer.write_table(table.slice(start, rows))
        packs.append(sink.getvalue().to_pybytes())
    return packs


def output_table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """An output frame in ``schema`` as PySpark converts one (``pa.Array.from_pandas`` to each
    column's type, unchecked, its default)."""
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False, safe=False)


def unpack_output(packs: pa.Table, schema: pa.Schema) -> pa.Table:
    """The output rows of a micro-batch's packed rows (:func:`pack_output`), in ``schema``."""
    tables = [pa.ipc.open_stream(blob.as_buffer()).read_all()
              for chunk in packs.column(PACKED_OUTPUT).chunks for blob in chunk]
    return pa.concat_tables(tables) if tables else schema.empty_table()


SCALE = 9
"""The scale of the platform's exact decimals (``DECIMAL(38, 9)``)."""


def nanounits(column: pa.ChunkedArray | pa.Array) -> pd.arrays.IntegerArray | None:
    """A ``DECIMAL(38, 9)`` column's unscaled integers (the value times 10**9, exactly), or
    ``None`` when some value needs more than 64 bits."""
    low, missing, fits = unscaled_words(column)
    if not fits.all():
        return None
    return pd.arrays.IntegerArray(np.where(missing, 0, low), missing)


DECIMAL_TYPE = pa.decimal128(38, SCALE)
"""The Arrow type of the platform's exact decimals."""


def decimals_of_units(units: np.ndarray, present: np.ndarray) -> pa.Array:
    """int64 nanounits as ``DECIMAL(38, 9)`` (the inverse of :func:`nanounits`), built from the
    words without a Python ``Decimal`` per value: each the low word of its 128-bit integer,
    its sign the high word; missing where not ``present``."""
    words = np.empty((len(units), 2), dtype=np.int64)
    words[:, 0], words[:, 1] = units, units >> 63
    decimals = pa.Array.from_buffers(DECIMAL_TYPE, len(units), [None, pa.py_buffer(words)])
    return pc.if_else(pa.array(present, pa.bool_()), decimals, pa.scalar(None, DECIMAL_TYPE))


def unscaled_words(column: pa.ChunkedArray | pa.Array
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A decimal column's low words (its unscaled integers where they fit 64 bits), which
    values are missing, and which fit (a missing one does). An Arrow decimal is a 128-bit two's
    complement integer, low word first; it fits 64 bits when its high word is the low word's
    sign."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(array, pa.ChunkedArray):  # no chunks at all
        array = pa.array([], array.type)
    count = len(array)
    data = array.buffers()[1]
    words = np.frombuffer(data, dtype="<i8") if data is not None else np.empty(0, "<i8")
    words = words[2 * array.offset:2 * (array.offset + count)].reshape(count, 2)
    low, high = words[:, 0].astype(np.int64), words[:, 1]
    missing = array.is_null().to_numpy(zero_copy_only=False)
    return low, missing, (high == (low >> 63)) | missing
