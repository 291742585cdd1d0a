"""The live query's source: the arrival log read by arrival position, packed in Python.

Spark's Delta source hands the live query the log's records as rows: the JVM decodes each
Parquet value (a ``BigInteger`` per ``DECIMAL(38, 9)`` value), builds a row, and writes it
into Arrow again for the Python worker that packs the records by bucket
(jobs.runtime.packing). Offline, over the same 4 M records, that path cost 3.1 to 4.3 µs of
CPU a record; Python workers reading the Parquet files with Arrow's C++ reader and packing
them cost 0.9 to 1.0 (benchmarks/history.md). So a cohort created since then reads its log
through this source (a PySpark Python data source), and the JVM sees only the packs: a few
rows per bucket and micro-batch.

**What a micro-batch reads.** Offsets are arrival positions: ``{"next_arrival_seq": n}``. A
micro-batch from ``start`` to ``end`` is every record of the log with ``start <= arrival_seq
< end``. Ingest appends each record once, in the order of its position, so this is exactly
what the Delta source would read from the commits that appended them, and it stays so if
the log's files are ever rewritten. The last offset of each micro-batch is in the query's
checkpoint, as the Delta source's is: a restarted query reads from there.

**How much a micro-batch takes.** At most :data:`MAX_FILES` files (the Delta source's default
``maxFilesPerTrigger``), or what the live job's own ``max_files_per_trigger`` and
``max_bytes_per_trigger`` say; an available-now run stops at the end it saw when it started.

The packs are those of :func:`jobs.runtime.packing.pack_by_bucket`, with the same buckets
(:func:`bucket_of_keys`, Spark's ``pmod(xxhash64(key), buckets)``), so the stateful stage
and its engines cannot tell the sources apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from jobs.runtime.buckets import BUCKET_COLUMN
from jobs.runtime.log_files import LogFiles, LogFilesReader, read_log_file
from jobs.runtime.packing import (
    MAX_ROWS_PER_PACK,
    PACKED_COLUMN,
    PACKED_WATERMARK,
    packed,
    with_ticks,
)
from jobs.runtime.worker_gc import spare_live_objects

SOURCE_NAME = "eventtime_arrival_log"
"""The format name of :class:`ArrivalLogSource` (``spark.readStream.format``)."""
OFFSET = "next_arrival_seq"
MAX_FILES = 1000
"""Files a micro-batch takes at most when nothing else is said (Delta's default)."""
SPARK_HASH_SEED = 42
"""The seed of Spark's ``xxhash64``."""


def bucket_of_keys(keys: pa.ChunkedArray | pa.Array, buckets: int) -> np.ndarray:
    """Each key's bucket as Spark computes it, ``pmod(xxhash64(key), buckets)``: XXH64 of the
    key's UTF-8 bytes with seed 42, as a signed 64-bit integer, modulo ``buckets`` (numpy's
    ``%`` takes the sign of the divisor, as ``pmod`` does). Each distinct key is hashed once."""
    import xxhash

    encoded = pc.dictionary_encode(keys)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    unsigned = np.fromiter((xxhash.xxh64_intdigest(key.encode(), SPARK_HASH_SEED)
                            for key in encoded.dictionary.to_pylist()),
                           dtype=np.uint64, count=len(encoded.dictionary))
    per_key = (unsigned.view(np.int64) % buckets).astype(np.int32)
    return per_key[encoded.indices.to_numpy(zero_copy_only=False)]


class LogPart(InputPartition):
    """One task's share of a micro-batch: some of its files and the positions to keep."""

    def __init__(self, paths: list[str], start: int, end: int) -> None:
        self.paths, self.start, self.end = paths, start, end


class ArrivalLogReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches by arrival position (in the driver's Python planner) and reads
    them packed (in Spark's Python workers)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.location = options["path"]
        self.columns = json.loads(options["columns"])
        self.buckets = int(options["buckets"])
        self.tasks = max(1, int(options.get("tasks", "2")))
        self.max_files_given = bool(options.get("max_files_per_trigger"))
        self.max_files = int(options.get("max_files_per_trigger") or MAX_FILES)
        self.max_bytes = int(options.get("max_bytes_per_trigger") or 0)
        self._files = LogFilesReader(self.location)
        self._available_now_end: int | None = None

    def initialOffset(self) -> dict:
        return {OFFSET: 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_bytes and not self.max_files_given:
            return ReadMaxBytes(self.max_bytes)
        return ReadMaxFiles(self.max_files)

    def prepareForTriggerAvailableNow(self) -> None:
        files = self._files.current()
        self._available_now_end = int(files.last.max()) + 1 if len(files.paths) else 0

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        files = self._files.current()
        begin = int(start[OFFSET])
        pending = np.flatnonzero(files.last >= begin)
        if self._available_now_end is not None:
            pending = pending[files.first[pending] < self._available_now_end]
        if not len(pending):
            return {OFFSET: begin}
        if isinstance(limit, ReadMaxFiles):
            pending = pending[:max(1, limit.max_files)]
        elif isinstance(limit, ReadMaxBytes):
            pending = _within_bytes(files, pending, limit.max_bytes)
        elif not isinstance(limit, ReadAllAvailable):
            raise ValueError(f"the arrival log source takes no {type(limit).__name__}")
        if self.max_bytes and not isinstance(limit, ReadAllAvailable):
            # a file limit and a byte limit: whichever is reached first (Spark hands a Python
            # source one limit, its default, which is the file limit when there is one)
            pending = _within_bytes(files, pending, self.max_bytes)
        end = int(files.last[pending].max()) + 1
        if self._available_now_end is not None:
            end = min(end, self._available_now_end)
        return {OFFSET: max(begin, end)}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = int(start[OFFSET]), int(end[OFFSET])
        if stop <= begin:
            return []
        files = self._files.current()
        chosen = files.overlapping(begin, stop)
        if not len(chosen):
            return []
        # about equal bytes per task, each task's files contiguous in position
        sizes = np.cumsum(files.sizes[chosen])
        cuts = np.searchsorted(sizes, sizes[-1] * np.arange(1, self.tasks) / self.tasks)
        groups = [g for g in np.split(chosen, np.unique(cuts)) if len(g)]
        return [LogPart([files.paths[i] for i in group], begin, stop) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LogPart)
        spare_live_objects()  # a task's start in the worker
        yield from with_ticks(read_packed(self.location, partition.paths, partition.start,
                                          partition.end, self.columns, self.buckets),
                              BUCKET_COLUMN, self.buckets)


def _within_bytes(files: LogFiles, pending: np.ndarray, max_bytes: int) -> np.ndarray:
    """The first of ``pending`` files that hold at most ``max_bytes`` together, at least one."""
    return pending[:files_within_bytes(files.sizes[pending], max_bytes)]


def files_within_bytes(sizes: np.ndarray, max_bytes: int) -> int:
    """How many of the files of ``sizes``, first first, hold at most ``max_bytes`` together:
    at least one, if there is one."""
    return max(min(1, len(sizes)), int((np.cumsum(sizes) <= max_bytes).sum()))


def read_packed(location: str, paths: Sequence[str], start: int, end: int,
                columns: Sequence[str], buckets: int) -> Iterator[pa.RecordBatch]:
    """The records of ``paths`` at positions ``[start, end)``, ``columns`` of them, packed by
    bucket as :func:`jobs.runtime.packing.pack_by_bucket` packs them."""
    pending: list[pa.Table] = []
    rows = 0
    for path in paths:
        table = read_log_file(location, path, columns)
        positions = table.column("arrival_seq")
        keep = pc.and_(pc.greater_equal(positions, start), pc.less(positions, end))
        table = table.filter(keep)
        if not table.num_rows:
            continue
        pending.append(table)
        rows += table.num_rows
        if rows >= MAX_ROWS_PER_PACK:
            yield _packed(pending, buckets)
            pending, rows = [], 0
    if pending:
        yield _packed(pending, buckets)


def _packed(tables: list[pa.Table], buckets: int) -> pa.RecordBatch:
    table = pa.concat_tables(tables)  # packed() combines the chunks
    table = table.append_column(BUCKET_COLUMN, pa.array(bucket_of_keys(table.column("key"),
                                                                       buckets)))
    return packed(table.to_batches(), BUCKET_COLUMN, "watermark_ms")


class ArrivalLogSource(DataSource):
    """``spark.readStream.format("eventtime_arrival_log")``; options: ``path`` (the log),
    ``columns`` (a JSON list), ``buckets``, ``tasks``, ``max_files_per_trigger``,
    ``max_bytes_per_trigger``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return f"{BUCKET_COLUMN} int, {PACKED_WATERMARK} bigint, {PACKED_COLUMN} binary"

    def streamReader(self, schema) -> DataSourceStreamReader:
        return ArrivalLogReader(self.options)


def packed_arrivals(spark: SparkSession, location: str, columns: Sequence[str], buckets: int,
                    *, max_files_per_trigger: int | None = None,
                    max_bytes_per_trigger: str | int | None = None) -> DataFrame:
    """The log's records as a stream of packs (one row per bucket and task).
    ``max_bytes_per_trigger`` is a count of bytes or, as Spark's Delta source takes it, a
    size such as ``512m`` (binary units)."""
    spark.dataSource.register(ArrivalLogSource)
    reader = (spark.readStream.format(SOURCE_NAME).option("path", location)
              .option("columns", json.dumps(list(columns))).option("buckets", str(buckets))
              .option("tasks", str(spark.sparkContext.defaultParallelism)))
    if max_files_per_trigger:
        reader = reader.option("max_files_per_trigger", str(max_files_per_trigger))
    if max_bytes_per_trigger:
        reader = reader.option("max_bytes_per_trigger", str(byte_count(max_bytes_per_trigger)))
    return reader.load()


_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30,
          "gb": 2**30, "t": 2**40, "tb": 2**40}


def byte_count(size: str | int) -> int:
    """A size as Spark writes one (``1048576``, ``512k``, ``1g``) in bytes."""
    text = str(size).strip().lower()
    digits = text.rstrip("kmgtb")
    unit = text[len(digits):]
    if not digits.isdigit() or unit not in _UNITS:
        raise ValueError(f"max_bytes_per_trigger: {size!r} is not a size (a count of bytes, "
                         "or a number with k, m, g or t)")
    return int(digits) * _UNITS[unit]
