"""How a Nexmark query consumes the arrival log: the per-record loop every query shares.

Every record of the log advances the query's clocks, also records the query does not use
(Q7 reads only bids, but a person's watermark still closes Q7's windows), because the
watermark belongs to the log, not to an event type. So a window's result exists exactly when
some record of the log carries a watermark at or past its ``max_timestamp``, and a backfill of
the same log gives the same rows.

A single-window query is described by a :class:`WindowQuery` (key selector, element, window
operator, pane-to-rows); the loop here keeps the **latest pane per key and window**
(docs/semantics.md, "Outputs") and turns it into result rows. A Spark runtime uses the very same
pieces per key: ``key_of``/``timestamp_of``/``watermark_of``/``element_of`` on each record,
``WindowDriver.restore_key``/``process``/``snapshot_key`` with ``window_operator()``, and
``rows_of`` on the latest pane.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from operators.pipeline import WindowSpec
from operators.window_operator import LateRecord, Pane, WindowDriver, WindowOperator

Row = dict[str, Any]


@dataclass
class QueryResult:
    """Result rows (sorted by the query's ``sort_key``) and the late rows, one per record and
    window it missed (the platform's late-records output)."""

    rows: list[Row]
    late: list[Row] = field(default_factory=list)


def late_row(late: LateRecord) -> Row:
    return asdict(late)


class WindowQuery:
    """One window operator over the records a query accepts. Subclasses set the parameters
    and override the hooks; the defaults are event time and the log's watermark."""

    name = ""
    time_domain = "event_time"
    """``event_time`` (the record's ``event_time_ms``) or ``ingest_time`` (Q12)."""
    allowed_lateness_ms = 0
    columns: tuple[str, ...] = ()

    def window_spec(self) -> WindowSpec:
        """The window in the platform's pipeline vocabulary (for a Spark implementation)."""
        raise NotImplementedError

    def accepts(self, record: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def key_of(self, record: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def timestamp_of(self, record: Mapping[str, Any]) -> int:
        return int(record["event_time_ms"])

    def watermark_of(self, record: Mapping[str, Any]) -> int:
        return int(record["watermark_ms"])

    def element_of(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """What the window keeps of a record (``None`` when counting is all it does)."""
        return None

    def window_operator(self) -> WindowOperator:
        raise NotImplementedError

    def rows_of(self, pane: Pane) -> list[Row]:
        raise NotImplementedError

    def sort_key(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[name] for name in self.columns)

    def parameters(self) -> dict[str, Any]:
        """Everything a second implementation needs besides the code: window, time domain,
        lateness and output columns."""
        return {"name": self.name, "window": asdict(self.window_spec()),
                "time_domain": self.time_domain, "allowed_lateness_ms": self.allowed_lateness_ms,
                "columns": list(self.columns)}

    def run(self, records: Iterable[Mapping[str, Any]]) -> QueryResult:
        """Run over an arrival-ordered stream of records."""
        driver = WindowDriver(self.window_operator())
        latest: dict[tuple[str, int, int], Pane] = {}
        late: list[Row] = []
        for record in records:
            watermark = self.watermark_of(record)
            now = int(record["ingest_time_ms"])
            if self.accepts(record):
                driver.process(self.key_of(record), self.timestamp_of(record),
                               self.element_of(record), arrival_seq=int(record["arrival_seq"]),
                               watermark=watermark, ingest_time=now)
            else:
                driver.advance(watermark, now)
            panes, missed = driver.take_output()
            for pane in panes:
                latest[(pane.key, pane.window_start, pane.window_end)] = pane
            late.extend(late_row(item) for item in missed)
        rows = [row for pane in latest.values() for row in self.rows_of(pane)]
        rows.sort(key=self.sort_key)
        return QueryResult(rows, late)
