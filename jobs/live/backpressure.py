"""When the long-running job's ingest waits for its queries: each of them already has its next
micro-batch full in the arrival log.

Ingest and the cohorts' queries share the machine's cores. Under a backlog, ingest parses the
next batch while the last one is appended (jobs.streams.landing.read_ahead), and nothing
stopped it from filling the log faster than the queries read it. Held above its ceiling, the
live stage then got fewer cores and processed less: 440,000-630,000 events/s on two cores
against 600,000-675,000 without read-ahead (benchmarks/history.md). A record ingested while a
query's next micro-batch is already full cannot be read before the micro-batch after that one,
so ingest waits until some query could take it. This is Flink's backpressure (a source reads
no faster than its operators take records), measured at the log instead of network buffers.

Only when batches are written changes. A batch still takes at most ``max_bytes_per_batch`` of
landing bytes, and each record's position and watermark are fixed when its batch commits, as
before: the live tables and a backfill read the same log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from jobs.live.log_source import MAX_FILES, byte_count, files_within_bytes
from jobs.runtime.log_files import LogFiles, LogFilesReader


@dataclass(frozen=True)
class TriggerLimit:
    """How much of the log one micro-batch of a query reads (jobs.live.log_source)."""

    max_files: int | None
    max_bytes: int

    @classmethod
    def of(cls, max_files: int | None, max_bytes: str | int) -> TriggerLimit:
        return cls(max_files, byte_count(max_bytes))

    def files_taken(self, sizes: np.ndarray) -> int:
        """How many of the files of ``sizes``, first first, one micro-batch takes: up to the
        file limit and the byte limit, at least one (as the source, jobs.live.log_source)."""
        return files_within_bytes(sizes[:self.max_files or MAX_FILES], self.max_bytes)


def next_micro_batch_full(files: LogFiles, written_through: int | None,
                          limit: TriggerLimit) -> bool:
    """Whether a record appended now would be read neither by the micro-batch a query may be
    running (the one after the last position it wrote, as large as its limit lets it be) nor
    by the next one. ``None``: the query has written nothing yet in this process, so where it
    reads is not known, and ingest goes on."""
    if written_through is None:
        return False
    unread = files.sizes[files.last > written_through]
    sizes = np.append(unread, 1)  # and the record appended now, in a file of its own
    read = 0
    for _ in ("running", "next"):
        read += limit.files_taken(sizes[read:])
    return read < len(sizes)


class IngestBackpressure:
    """Asked before each batch of a backlog: whether ingest should wait for the queries."""

    def __init__(self, arrival_log: str) -> None:
        self._files = LogFilesReader(arrival_log)

    def holds(self, queries: Iterable[tuple[int | None, TriggerLimit]]) -> bool:
        """Whether every query, given as the last position it wrote and its limit, has its
        next micro-batch full (a query catching up on a new version far behind holds no
        ingest back while a serving one needs records)."""
        queries = list(queries)
        if not queries:
            return False
        files = self._files.current()
        return all(next_micro_batch_full(files, through, limit) for through, limit in queries)
