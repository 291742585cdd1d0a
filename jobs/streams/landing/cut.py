"""A capped landing batch cut at one place in the arrival order (jobs.streams.batch_cut).

A landing batch takes the files that landed first, within ``max_bytes_per_batch``; a source
partition whose files it did not all take is *capped*. Its files come in name order and a
collector stamps lines as it writes them, so what the batch left of the partition has stamps no
earlier than the latest it read there: the batch keeps the lines that sort before that place
and leaves the rest of each file (a suffix) to the next batch, which takes it as it takes a
file that grew (an ``appended`` part from where the kept lines end). The kept extent of each
cut file is written in the batch's commit (``consumed``: its size, lines and the SHA-256 of
that prefix), so the next batch, or a restart, starts there.

The result is the arrival log one batch of the whole backlog gives whenever each partition's
stamps do not fall from one line to the next in its files' order (how collectors write them).
A file quarantined whole (changed after ingest) or delivered twice is never cut.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from jobs.streams.batch_cut import Unread, kept_lines
from jobs.streams.landing.batch import PartRead, clock_from_text
from jobs.streams.landing.folder import LandingFolder
from jobs.streams.landing.log import APPENDED, NEW, REST, FilePart, Plan

__all__ = ["READ_KINDS", "apply_consumed", "cut_batch", "first_stamp", "unread_of"]

READ_KINDS = (NEW, APPENDED, REST)
"""The parts whose lines are records to read (not a changed file's or a duplicate's)."""


def unread_of(plan: Plan, reads: Sequence[PartRead]) -> list[Unread]:
    """Where each capped partition's unread lines can begin: the first line the batch left
    (its stamp, read when the batch was planned), or, if sooner, the latest stamp the batch
    read of it, after its last line read; without either, after its last ingested line (by
    the start state)."""
    kinds = {part.name: part.kind for part in plan.files}
    bounds = []
    for partition in plan.capped:
        mine = [read for read in reads
                if read.partition == partition and kinds.get(read.name) in READ_KINDS
                and len(read)]
        if any(not read.stamped for read in mine):
            continue  # lines without stamps of their own: their clocks bound nothing
        candidates = []
        if partition in plan.unread:
            stamp, name, line = plan.unread[partition]
            candidates.append(Unread(int(stamp), str(name), int(line)))
        if mine:
            last = max(mine, key=lambda read: read.name)
            candidates.append(Unread(max(int(read.clocks.max()) for read in mine), last.name,
                                     int(last.numbers[-1]) + 1))
        if candidates:
            bounds.append(min(candidates))
            continue
        known = plan.start_state.get("watermarks", {}).get("partitions", {}).get(partition)
        if known is not None:
            bounds.append(Unread(int(known[1]), "", 0))
    return bounds


def first_stamp(landing: LandingFolder, name: str, offset: int, clock_field: str,
                max_line_bytes: int, latest_ms: int) -> int | None:
    """The collector's stamp on a file's line at ``offset`` (its first new line), if that
    line has a usable one (no later than ``latest_ms``, beyond which it would be
    quarantined): no more than a line is read."""
    with landing.open(name) as handle:
        handle.seek(offset)
        head = handle.read(max_line_bytes + 1)
    end = head.find(b"\n")
    line = head if end < 0 else head[:end]
    try:
        stamp = clock_from_text(line.decode("utf-8"), clock_field)
    except UnicodeDecodeError:
        return None
    return stamp if stamp is not None and stamp <= latest_ms else None


def cut_batch(landing: LandingFolder, plan: Plan, reads: list[PartRead]
              ) -> tuple[list[PartRead], dict[str, dict]]:
    """The reads the batch keeps, and for each file it cut, the prefix it consumed
    (``{"size", "lines", "sha256"}``)."""
    if not plan.capped:
        return reads, {}
    parts = {part.name: part for part in plan.files}
    cuttable = [i for i, read in enumerate(reads) if parts[read.name].kind in READ_KINDS]
    kept = kept_lines([reads[i] for i in cuttable], unread_of(plan, reads))
    if not any(kept):  # a bound no line comes before (lines without stamps): no cut
        return reads, {}
    result = list(reads)
    consumed: dict[str, dict] = {}
    for i, count in zip(cuttable, kept, strict=True):
        read = reads[i]
        if count < len(read):
            result[i] = read.head(count)
            consumed[read.name] = _prefix(landing, parts[read.name], int(read.numbers[count]))
    return result, consumed


def _prefix(landing: LandingFolder, part: FilePart, first_left: int) -> dict:
    """The file's bytes before line ``first_left``: their size, line count and SHA-256 (the
    line ends found by numpy, not a line at a time)."""
    lines = first_left - 1
    with landing.open(part.name) as handle:
        data = handle.read(part.size)
    ends = np.flatnonzero(np.frombuffer(data, np.uint8, offset=part.offset) == ord("\n"))
    kept = lines - (part.first_line - 1)  # lines of this part the batch kept
    at = part.offset + (int(ends[kept - 1]) + 1 if kept else 0)
    return {"size": at, "lines": lines, "sha256": hashlib.sha256(data[:at]).hexdigest()}


def apply_consumed(known: dict[str, FilePart], cut: set[str], plan: Plan,
                   consumed: Mapping[str, Mapping]) -> None:
    """A cut file as the batch left it: known up to what it consumed (and named in ``cut``),
    so the next batch takes the rest (a ``rest`` part, from where the kept lines end)."""
    for part in plan.files:
        extent = consumed.get(part.name)
        if extent is not None and known.get(part.name) == part:
            known[part.name] = replace(part, size=int(extent["size"]),
                                       sha256=str(extent["sha256"]),
                                       lines=int(extent["lines"]), complete=True)
            cut.add(part.name)
