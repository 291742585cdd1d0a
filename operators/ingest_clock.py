"""When the ingest clock reached a time, in the watermark's terms: what lets runtimes that run
keys apart fire processing-time timers in the very order a single pass over the log would.

Both clocks of the arrival log grow with the arrival position: each record carries the
watermark in force when it arrived and its ingest time (contract sections 1 and 2). A
processing-time timer at ``t`` becomes due at the first record whose ingest time reaches
``t``; an event-time timer at ``ts`` at the first record whose watermark reaches ``ts``. A
per-key runtime sees only its key's records, so it cannot tell which of the two came first from
positions. It can from watermarks: with ``g(t)``, the watermark in force at the first record
whose ingest time reaches ``t`` (:meth:`IngestClock.due_watermark`), the event-time timer is
due no later than the processing-time one exactly when ``ts <= g(t)`` (docs/semantics.md,
"Processing-time timers"). ``g`` is a small step function: one step per distinct ingest time
(per ingest batch when ingest stamps wall-clock time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import numpy as np

__all__ = [
    "Fetch",
    "IngestClock",
]


Fetch = Callable[[int], tuple[Iterable[int], Iterable[int], Iterable[int]] | None]
"""``fetch(after_seq)``: the arrival log's ``(arrival_seq, ingest_time_ms, watermark_ms)``
columns of the records after ``after_seq`` (any order; ``None`` or empty: none yet)."""


class IngestClock:
    """``g(t)`` over an arrival log read so far, extended on demand through ``fetch``."""

    def __init__(self, fetch: Fetch | None = None) -> None:
        self._fetch = fetch
        self._ingest = np.empty(0, np.int64)
        """Step ingest times, strictly increasing."""
        self._watermark = np.empty(0, np.int64)
        """The watermark at each step's first record."""
        self._last_seq = -1
        """The last arrival position read."""
        self.fresh_after = 0.0
        """A lookup that finds nothing reads on only if the last read started before this
        (epoch seconds): a runtime sets it when a call begins, so a call reads the log at
        most once, and what it reads holds every record committed before it began."""
        self._read_at = float("-inf")

    @classmethod
    def of(cls, seqs: Iterable[int], ingests: Iterable[int],
           watermarks: Iterable[int]) -> IngestClock:
        """The clock of a whole log, given as its three columns."""
        clock = cls()
        clock.extend(seqs, ingests, watermarks)
        return clock

    def extend(self, seqs: Iterable[int], ingests: Iterable[int],
               watermarks: Iterable[int]) -> None:
        """Take in records after those read so far (earlier ones are ignored)."""
        seq = np.asarray(list(seqs) if not isinstance(seqs, np.ndarray) else seqs, np.int64)
        if not len(seq):
            return
        ingest = np.asarray(ingests, np.int64)
        watermark = np.asarray(watermarks, np.int64)
        order = np.argsort(seq, kind="stable")
        seq, ingest, watermark = seq[order], ingest[order], watermark[order]
        fresh = seq > self._last_seq
        seq, ingest, watermark = seq[fresh], ingest[fresh], watermark[fresh]
        if not len(seq):
            return
        # the ingest clock never goes back along the log; its running maximum is the clock
        reached = np.maximum.accumulate(ingest)
        before = np.empty_like(reached)
        before[1:] = reached[:-1]
        if len(self._ingest):
            before[0] = self._ingest[-1]
        steps = np.flatnonzero(reached > before) if len(self._ingest) else \
            np.r_[0, np.flatnonzero(reached[1:] > reached[:-1]) + 1]
        self._ingest = np.concatenate([self._ingest, reached[steps]])
        self._watermark = np.concatenate([self._watermark, watermark[steps]])
        self._last_seq = int(seq[-1])

    @property
    def reached(self) -> int | None:
        """The ingest clock at the last record read (``None``: none read)."""
        return int(self._ingest[-1]) if len(self._ingest) else None

    def due_watermark(self, t: int, *, must: bool = False) -> int | None:
        """``g(t)``: the watermark in force at the first record whose ingest time reaches
        ``t``; ``None`` while no record read has (see :attr:`fresh_after`). When ``must``, a
        record is known to have reached it (a key's own record did), so the log is read on
        until it is found."""
        if (self.reached is None or t > self.reached) and (must or
                                                           self._read_at <= self.fresh_after):
            self._read_more()
        if self.reached is None or t > self.reached:
            if must:
                raise LookupError(f"the arrival log holds no record with ingest time >= {t} "
                                  "though a record that reached it was processed")
            return None
        return int(self._watermark[np.searchsorted(self._ingest, t, side="left")])

    def _read_more(self) -> None:
        if self._fetch is None:
            return
        self._read_at = time.time()
        found = self._fetch(self._last_seq)
        if found is not None:
            self.extend(*found)
