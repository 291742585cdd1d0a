"""The arrival log's data files by arrival position, read in Python without Spark.

Ingest appends each record once, in the order of its position, so each data file holds a run
of positions, which the Delta log's statistics name. The live source by arrival position
(jobs.live.log_source) plans its micro-batches from them, and the ingest clock of process
functions (jobs.runtime.ingest_clock) reads the files after a position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.store import storage


def read_log_file(location: str, path: str, columns: Sequence[str]) -> pa.Table:
    """Some columns of one data file (``path`` inside the table at ``location``), local or in
    an object store."""
    full = storage.join(location, path)
    if storage.is_local(full):
        return pq.read_table(str(storage.local_path(full)), columns=list(columns))
    filesystem, inside = storage.arrow_filesystem(full)
    return pq.read_table(inside, columns=list(columns), filesystem=filesystem)


@dataclass(frozen=True)
class LogFiles:
    """The log's data files in the order of their first arrival position, with the range of
    positions each holds."""

    paths: list[str]
    first: np.ndarray
    last: np.ndarray
    sizes: np.ndarray

    def overlapping(self, start: int, end: int) -> np.ndarray:
        """The files holding a position in ``[start, end)``."""
        return np.flatnonzero((self.last >= start) & (self.first < end))


class LogFilesReader:
    """The files of the log as of its latest commit (delta-rs reads the new commits only)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._table = None
        self._read_bounds: dict[str, tuple[int, int]] = {}
        """Positions of the files written without statistics, read from the files once."""
        self._files: tuple[int, LogFiles] | None = None
        """The files as of a version: a micro-batch asks for its end, then for its files."""

    def current(self) -> LogFiles:
        from deltalake import DeltaTable

        if self._table is None:
            self._table = DeltaTable(storage.object_store_uri(self.location))
        else:
            self._table.update_incremental()
        version = self._table.version()
        if self._files is None or self._files[0] != version:
            self._files = version, self._listed()
        return self._files[1]

    def _listed(self) -> LogFiles:
        adds = pa.table(self._table.get_add_actions(flatten=True))
        paths = [unquote(p) for p in adds.column("path").to_pylist()]
        first = _statistic(adds, "min.arrival_seq")
        last = _statistic(adds, "max.arrival_seq")
        for index in np.flatnonzero((first < 0) | (last < 0)).tolist():
            path = paths[index]
            if path not in self._read_bounds:
                self._read_bounds[path] = _positions_in(self.location, path)
            first[index], last[index] = self._read_bounds[path]
        order = np.argsort(first, kind="stable")
        return LogFiles([paths[i] for i in order], first[order], last[order],
                        adds.column("size_bytes").to_numpy()[order])


def _statistic(adds: pa.Table, name: str) -> np.ndarray:
    """A statistic of each file (-1 where the file has none)."""
    if name not in adds.column_names:
        return np.full(adds.num_rows, -1, dtype=np.int64)
    return pc.fill_null(adds.column(name), -1).to_numpy().astype(np.int64)


def _positions_in(location: str, path: str) -> tuple[int, int]:
    """The first and last arrival position a file holds, read from the file."""
    column = read_log_file(location, path, ["arrival_seq"]).column(0)
    return int(pc.min(column).as_py()), int(pc.max(column).as_py())
