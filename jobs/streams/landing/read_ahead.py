"""The next batch's files parsed while this batch is appended.

Under a backlog ingest runs batch after batch, each one plan, parse, order and append in
turn, and at 800,000 events/s on 2 cores that chain was what the live stream waited on: the
ordering and the Parquet write run on one thread, and while they did the parse workers and
often the live stage sat idle (benchmarks/history.md). Parsing a file part needs only the
part and the plan's time, not the batch before it, so once a batch is ordered the next one
is chosen and its parts parsed in the background while this one's rows are written.

The next plan is only held in memory until this batch has committed; then it is written to
the ingest log as any plan is, before its rows are ordered. A crash before that leaves no
trace of it (its files are planned again, as if never looked at), and a crash after it
re-runs a planned batch as ever: the log's protocol, a plan at a time, is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from jobs.streams.landing.batch import PartRead
from jobs.streams.landing.log import Plan


@dataclass
class ParsedAhead:
    """A batch chosen and parsed before the one before it committed."""

    plan: Plan
    """Not yet in the ingest log."""
    deferred: int
    """Landing files its listing left for later (not yet settled)."""
    capped: bool
    """Whether it left landing bytes for the batch after it."""
    reads: Future[list[PartRead]]


class ReadAhead:
    """At most one batch parsed ahead, on a thread of its own."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._ahead: ParsedAhead | None = None

    def start(self, plan: Plan, deferred: int, capped: bool,
              read: Callable[[Plan], list[PartRead]]) -> None:
        """Parse ``plan``'s parts with ``read`` in the background (one batch at a time)."""
        self.drop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="ingest-read-ahead")
        self._ahead = ParsedAhead(plan, deferred, capped, self._executor.submit(read, plan))

    def take(self) -> ParsedAhead | None:
        """The batch parsed ahead, if any, now the caller's."""
        ahead, self._ahead = self._ahead, None
        return ahead

    def drop(self) -> None:
        """Forget the batch parsed ahead (its parse finishes unread)."""
        if self._ahead is not None:
            self._ahead.reads.cancel()
            self._ahead = None
