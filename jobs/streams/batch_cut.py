"""Where a capped ingest batch ends: at one place in the arrival order for every partition, so
that a backlog ingested in many batches gives the arrival log that one batch of it gives.

Arrival order is by ``(ingest clock, part, line)`` over every source partition
(jobs.streams.landing.batch). A batch whose cap (``kafka.max_records_per_batch``) left records
of some partition for the next one does not know those records' clocks; it knows only that
they come after what it read of that partition, because a partition's clocks never fall in its
own order (a Kafka partition's are kept non-decreasing by offset). Cut by a count alone, a
batch of a partition that lags in ingest clock ends earlier on the clock than the others'
share: within the batch the lagging partition then goes a whole ``idle_timeout`` without a
record although its next ones are already in the topic, is counted idle, and the watermark
jumps over its records, which the next batch makes late (and whose clocks it raises to the
batch's last). Flink never counts idle a split that still has unread records.

So a batch keeps exactly the lines that sort before the first place any capped partition's
unread records could take (:class:`Unread`), and leaves the rest of each part to the next
batch, which starts where the kept lines end. Every batch is then a prefix of the backlog's
arrival order: the same records in the same order with the same ingest times, and the same
watermarks, since a watermark is computed from the records before it alone. The cut is a
function of the lines read and the plan, so a batch run again after a crash keeps the same
lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from jobs.streams.landing.batch import PartRead

__all__ = ["Unread", "kept_lines", "unread_after"]


@dataclass(frozen=True, order=True)
class Unread:
    """The earliest place in the arrival order a capped partition's unread lines can take:
    at its last read line's clock or later, in its part after that line."""

    clock: int
    part: str
    number: int
    """The first line (a Kafka offset) that may still be unread."""


def unread_after(read: PartRead) -> Unread | None:
    """Where the lines after ``read`` (a capped partition's part, in its order) can start;
    ``None`` for a part that read nothing, or one whose clocks say nothing of what follows
    (not every line had its own stamp)."""
    if not len(read) or not read.stamped:
        return None
    return Unread(int(read.clocks.max()), read.name, int(read.numbers[-1]) + 1)


def kept_lines(reads: Sequence[PartRead], unread: Iterable[Unread | None]) -> list[int]:
    """How many of each read's lines, from its first, the batch keeps: those that sort before
    the earliest of ``unread`` (all of them when nothing is unread). A part's lines come in
    its order, their clocks rising, so what it keeps is where its first line beyond the cut
    is."""
    bounds = [bound for bound in unread if bound is not None]
    if not bounds:
        return [len(read) for read in reads]
    cut = min(bounds)
    kept = []
    for read in reads:
        clocks = read.clocks
        before = clocks < cut.clock
        if read.name < cut.part:
            before |= clocks == cut.clock
        elif read.name == cut.part:
            before |= (clocks == cut.clock) & (read.numbers < cut.number)
        beyond = np.flatnonzero(~before)
        kept.append(int(beyond[0]) if len(beyond) else len(read))
    return kept
