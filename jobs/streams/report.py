"""What one ingest run says it did, and the loop that runs batches until a stream caught up.

Shared by the landing and the Kafka ingestors: the command line, the live job and the Dagster
assets read one report whatever the stream's kind, and a catch-up over many batches is reported
as one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from jobs.streams.landing.batch import (
    FILE_CHANGED,
)
from operators.time import MIN_WATERMARK


@dataclass
class IngestReport:
    batch_id: int | None
    files: int = 0
    records: int = 0
    quarantined: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    resumed: bool = False
    watermark_ms: int = MIN_WATERMARK
    deferred: int = 0
    """Files that may still be being written (no final newline, recently changed)."""
    appended: int = 0
    """Known files that grew: their new lines were ingested."""
    changed: int = 0
    """Known files whose earlier content changed: quarantined whole."""
    first_seq: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent planning, parsing and appending."""
    on_executors: bool = False
    """Read and parsed by Spark's executors (PLATFORM_INGEST_READER), not by this process."""
    stream: str = ""
    first_batch_id: int | None = None
    """The first of the batches a catch-up's report covers, ``batch_id`` the last (``None``:
    the report is of ``batch_id`` alone)."""

    @property
    def batch_ids(self) -> tuple[int, int] | None:
        """The first and last batch the report covers (``None``: no batch)."""
        if self.batch_id is None:
            return None
        return (self.batch_id if self.first_batch_id is None else self.first_batch_id,
                self.batch_id)

    def summary(self) -> str:
        said = f"ingest {self.stream}:" if self.stream else "ingest:"
        if self.batch_id is None:
            waiting = f" ({self.deferred} still being written)" if self.deferred else ""
            return f"{said} no new landing files{waiting}"
        verb = "re-ran planned" if self.resumed else "ingested"
        waiting = f"; {self.deferred} files still being written" if self.deferred else ""
        extra = ""
        if self.appended:
            extra += f"; {self.appended} files grew (new lines ingested)"
        if self.changed:
            extra += (f"; WARNING {self.changed} files changed after ingest (lines "
                      f"quarantined as {FILE_CHANGED})")
        took = " (" + ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items()) + ")" \
            if self.timings else ""
        where = " (read by Spark's executors)" if self.on_executors else ""
        return (f"{said} {verb} batch {self.batch_id}{where}: {self.files} files, "
                f"{self.records} records, {self.quarantined} quarantined {self.reasons}"
                f"{extra}{waiting}{took}")


class BatchIngestor(Protocol):
    """What a catch-up drives: a landing folder's or a Kafka topic's ingestor."""

    capped: bool
    """Whether the last planned batch left something for the next one."""

    def run_once(self) -> IngestReport: ...


def until_caught_up(ingestor: BatchIngestor, files: Callable[[list[int]], int],
                    check_stop: Callable[[], None] | None = None) -> IngestReport:
    """``ingestor.run_once()`` until a batch leaves nothing for the next (its ``capped``), the
    batches' reports as one: the counts added, the last watermark; ``files`` combines their
    counts of files (a landing batch's are new each time, a Kafka batch's are partitions).
    ``check_stop`` runs before every batch: a command asked to stop (SIGTERM while Spark runs,
    jobs.console.interrupts) raises there, with every batch before committed, rather than going on
    to the end of a backlog."""
    reports = []
    while True:
        if check_stop is not None:
            check_stop()
        report = ingestor.run_once()
        if report.batch_id is None:
            break
        reports.append(report)
        if not ingestor.capped:
            break
    if not reports:
        return report
    reasons: dict[str, int] = {}
    timings: dict[str, float] = {}
    for each in reports:
        for reason, count in each.reasons.items():
            reasons[reason] = reasons.get(reason, 0) + count
        for name, seconds in each.timings.items():
            timings[name] = timings.get(name, 0.0) + seconds
    return replace(reports[-1], files=files([r.files for r in reports]),
                   records=sum(r.records for r in reports),
                   quarantined=sum(r.quarantined for r in reports), reasons=reasons,
                   resumed=any(r.resumed for r in reports), first_seq=reports[0].first_seq,
                   seconds=sum(r.seconds for r in reports), timings=timings,
                   appended=sum(r.appended for r in reports),
                   changed=sum(r.changed for r in reports),
                   on_executors=any(r.on_executors for r in reports),
                   first_batch_id=reports[0].batch_id)
