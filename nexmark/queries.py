"""The windowed Nexmark queries on the operator library: Q5, Q7, Q8, Q11, Q12.

Each query is a frozen dataclass whose fields are its parameters (defaults: Beam's and Flink's
Nexmark, 10 s windows, 5 s slide) and whose :meth:`run` consumes an arrival-ordered stream of
records (:mod:`nexmark.arrival`) and returns a :class:`~nexmark.runner.QueryResult`. All use
event-time triggers with allowed lateness 0, so every window emits exactly one pane (ON_TIME,
last) and late records are dropped into ``late``; Q12 runs the same machinery on the ingest
clock. Definitions, parameters and output columns are in docs/nexmark.md;
:mod:`nexmark.reference` computes the same rows in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from nexmark.aggregates import MaxBids
from nexmark.join import LEFT, RIGHT, TumblingWindowJoin
from nexmark.model import AUCTION, BID, PERSON
from nexmark.runner import QueryResult, Row, WindowQuery, late_row
from operators.aggregates import Count, NamedAggregates
from operators.pipeline import WindowSpec
from operators.process_function import KeyedProcessDriver, KeyedProcessFunction, ProcessContext
from operators.time import MIN_WATERMARK
from operators.triggers import EventTimeTrigger
from operators.window_operator import Pane, WindowDriver, WindowOperator
from operators.windows import SessionWindows, SlidingWindows, TumblingWindows

GLOBAL_KEY = "*"
"""Q7's single key: the maximum is over all bids of a window (Beam spreads it over a fanout
of keys first for parallelism; the result is the same)."""


def is_bid(record: Mapping[str, Any]) -> bool:
    return record.get("type") == BID


def _count_operator(assigner: Any) -> WindowOperator:
    return WindowOperator(assigner, EventTimeTrigger(),
                          aggregate=NamedAggregates([("bid_count", Count())]),
                          allowed_lateness=0)


# -- Q7: highest bid ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Q7(WindowQuery):
    """Highest bid per tumbling window: every bid whose price is the window's maximum."""

    window_size_ms: int = 10_000
    name = "q7"
    columns = ("window_start", "window_end", "auction", "bidder", "price", "date_time")

    def window_spec(self) -> WindowSpec:
        return WindowSpec(type="tumbling", size_ms=self.window_size_ms)

    def accepts(self, record: Mapping[str, Any]) -> bool:
        return is_bid(record)

    def key_of(self, record: Mapping[str, Any]) -> str:
        return GLOBAL_KEY

    def element_of(self, record: Mapping[str, Any]) -> dict[str, Any]:
        return {"auction": record["auction"], "bidder": record["bidder"],
                "price": record["price"], "date_time": record["event_time_ms"]}

    def window_operator(self) -> WindowOperator:
        return WindowOperator(TumblingWindows(self.window_size_ms), EventTimeTrigger(),
                              aggregate=NamedAggregates([("bids", MaxBids())]),
                              allowed_lateness=0)

    def rows_of(self, pane: Pane) -> list[Row]:
        return [{"window_start": pane.window_start, "window_end": pane.window_end, **bid}
                for bid in pane.values["bids"]]


# -- Q11: user sessions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Q11(WindowQuery):
    """Bids per bidder session: session windows per bidder with a gap of inactivity."""

    session_gap_ms: int = 10_000
    name = "q11"
    columns = ("bidder", "session_start", "session_end", "bid_count")

    def window_spec(self) -> WindowSpec:
        return WindowSpec(type="session", gap_ms=self.session_gap_ms)

    def accepts(self, record: Mapping[str, Any]) -> bool:
        return is_bid(record)

    def key_of(self, record: Mapping[str, Any]) -> str:
        return str(record["bidder"])

    def window_operator(self) -> WindowOperator:
        return _count_operator(SessionWindows(self.session_gap_ms))

    def rows_of(self, pane: Pane) -> list[Row]:
        return [{"bidder": int(pane.key), "session_start": pane.window_start,
                 "session_end": pane.window_end, "bid_count": pane.values["bid_count"]}]


# -- Q12: processing-time windows ----------------------------------------------------------------


@dataclass(frozen=True)
class Q12(WindowQuery):
    """Bids per bidder per tumbling window of the ingest clock (Flink's Q12 uses processing
    time; ours is the ingest clock, so a backfill gives the same rows).

    The ingest clock is non-decreasing along the log, so a record's ingest time minus 1 ms is
    an exact watermark for it: window ``[s, e)`` holds the bids with ``s <= ingest_time < e``
    and is emitted by the first record whose ingest time is ``>= e``. No record is ever late.
    """

    window_size_ms: int = 10_000
    name = "q12"
    time_domain = "ingest_time"
    columns = ("window_start", "window_end", "bidder", "bid_count")

    def window_spec(self) -> WindowSpec:
        return WindowSpec(type="tumbling", size_ms=self.window_size_ms)

    def accepts(self, record: Mapping[str, Any]) -> bool:
        return is_bid(record)

    def key_of(self, record: Mapping[str, Any]) -> str:
        return str(record["bidder"])

    def timestamp_of(self, record: Mapping[str, Any]) -> int:
        return int(record["ingest_time_ms"])

    def watermark_of(self, record: Mapping[str, Any]) -> int:
        return int(record["ingest_time_ms"]) - 1

    def window_operator(self) -> WindowOperator:
        return _count_operator(TumblingWindows(self.window_size_ms))

    def rows_of(self, pane: Pane) -> list[Row]:
        return [{"window_start": pane.window_start, "window_end": pane.window_end,
                 "bidder": int(pane.key), "bid_count": pane.values["bid_count"]}]


# -- Q5: hot items ---------------------------------------------------------------------------------


class HotItems(KeyedProcessFunction):
    """Q5's second stage, keyed by window: collect each auction's count for the window, and
    when the watermark passes the window's end emit the auction(s) with the highest count.

    Elements are stage 1's panes ``{"window_start", "window_end", "auction", "bid_count"}``
    with the window's ``max_timestamp`` as their timestamp (Flink's window output time).
    """

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        assert element is not None
        ctx.map_state("counts").put(str(element["auction"]), element["bid_count"])
        ctx.value_state("window").update([element["window_start"], element["window_end"]])
        ctx.register_event_time_timer(ctx.timestamp)

    def on_timer(self, timestamp: int, ctx: ProcessContext, out: list[Any]) -> None:
        counts = ctx.map_state("counts")
        start, end = ctx.value_state("window").value()
        best = max(count for _, count in counts.items())
        for auction, count in counts.items():
            if count == best:
                out.append({"window_start": start, "window_end": end, "auction": int(auction),
                            "bid_count": count})
        counts.clear()
        ctx.value_state("window").clear()


@dataclass(frozen=True)
class Q5(WindowQuery):
    """Hot items: per sliding window, the auction(s) with the most bids.

    Stage 1 (this class's window hooks) counts bids per auction and sliding window; stage 2
    (:class:`HotItems`, keyed by window) picks the maximum. Between the stages a pane travels
    as Flink's would: emitted when the watermark passes the window, it reaches stage 2 before
    that watermark does, so stage 2 has every auction's count when its timer fires.
    """

    window_size_ms: int = 10_000
    window_slide_ms: int = 5_000
    name = "q5"
    columns = ("window_start", "window_end", "auction", "bid_count")

    def window_spec(self) -> WindowSpec:
        return WindowSpec(type="sliding", size_ms=self.window_size_ms,
                          slide_ms=self.window_slide_ms)

    def accepts(self, record: Mapping[str, Any]) -> bool:
        return is_bid(record)

    def key_of(self, record: Mapping[str, Any]) -> str:
        return str(record["auction"])

    def window_operator(self) -> WindowOperator:
        return _count_operator(SlidingWindows(self.window_size_ms, self.window_slide_ms))

    def rows_of(self, pane: Pane) -> list[Row]:
        """Stage 1's rows: one per auction and window (stage 2's input)."""
        return [{"window_start": pane.window_start, "window_end": pane.window_end,
                 "auction": int(pane.key), "bid_count": pane.values["bid_count"]}]

    @staticmethod
    def stage2_key_of(row: Row) -> str:
        return f"{row['window_start']}:{row['window_end']}"

    @staticmethod
    def stage2_function() -> HotItems:
        return HotItems()

    def run(self, records: Iterable[Mapping[str, Any]]) -> QueryResult:
        stage1 = WindowDriver(self.window_operator())
        stage2 = KeyedProcessDriver(self.stage2_function())
        late: list[Row] = []
        previous = MIN_WATERMARK  # the watermark stage 2 has seen
        for record in records:
            watermark = int(record["watermark_ms"])
            now = int(record["ingest_time_ms"])
            if self.accepts(record):
                stage1.process(self.key_of(record), self.timestamp_of(record), None,
                               arrival_seq=int(record["arrival_seq"]), watermark=watermark,
                               ingest_time=now)
            else:
                stage1.advance(watermark, now)
            panes, missed = stage1.take_output()
            late.extend(late_row(item) for item in missed)
            for pane in panes:  # lateness 0: one final pane per auction and window
                for row in self.rows_of(pane):
                    stage2.process(self.stage2_key_of(row), row["window_end"] - 1, row,
                                   watermark=previous, ingest_time=now)
            stage2.advance(watermark, now)
            previous = max(previous, watermark)
        rows = stage2.take_output()
        rows.sort(key=self.sort_key)
        return QueryResult(rows, late)


# -- Q8: new users -------------------------------------------------------------------------------


def _new_users(key: str, start: int, end: int, people: list[dict[str, Any]],
               auctions: list[dict[str, Any]]) -> list[Row]:
    if not auctions:
        return []
    return [{"window_start": start, "window_end": end, "person_id": person["id"],
             "name": person["name"], "auctions": len(auctions)} for person in people]


@dataclass(frozen=True)
class Q8:
    """New users: people who opened an auction in the same tumbling window in which they
    registered (a window join of people and auctions on ``person.id = auction.seller``)."""

    window_size_ms: int = 10_000
    name = "q8"
    time_domain = "event_time"
    allowed_lateness_ms = 0
    columns = ("window_start", "window_end", "person_id", "name", "auctions")

    def window_spec(self) -> WindowSpec:
        return WindowSpec(type="tumbling", size_ms=self.window_size_ms)

    def parameters(self) -> dict[str, Any]:
        return {"name": self.name, "window": asdict(self.window_spec()),
                "time_domain": self.time_domain, "allowed_lateness_ms": 0,
                "columns": list(self.columns)}

    @staticmethod
    def accepts(record: Mapping[str, Any]) -> bool:
        return record.get("type") in (PERSON, AUCTION)

    @staticmethod
    def key_of(record: Mapping[str, Any]) -> str:
        """The join key: a person's id, an auction's seller."""
        return str(record["id"] if record["type"] == PERSON else record["seller"])

    @staticmethod
    def element_of(record: Mapping[str, Any]) -> dict[str, Any]:
        if record["type"] == PERSON:
            row = {"id": record["id"], "name": record["name"]}
            return {"side": LEFT, "row": row, "arrival_seq": record["arrival_seq"]}
        row = {"id": record["id"], "reserve": record["reserve"]}
        return {"side": RIGHT, "row": row, "arrival_seq": record["arrival_seq"]}

    def process_function(self) -> TumblingWindowJoin:
        return TumblingWindowJoin(self.window_size_ms, _new_users)

    def sort_key(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[name] for name in self.columns)

    def run(self, records: Iterable[Mapping[str, Any]]) -> QueryResult:
        driver = KeyedProcessDriver(self.process_function())
        for record in records:
            watermark = int(record["watermark_ms"])
            now = int(record["ingest_time_ms"])
            if self.accepts(record):
                driver.process(self.key_of(record), int(record["event_time_ms"]),
                               self.element_of(record), watermark=watermark, ingest_time=now)
            else:
                driver.advance(watermark, now)
        rows: list[Row] = []
        late: list[Row] = []
        for item in driver.take_output():
            if item["kind"] == "joined":
                rows.append(item["row"])
            else:
                late.append({k: v for k, v in item.items() if k != "kind"})
        rows.sort(key=self.sort_key)
        return QueryResult(rows, late)


QUERIES: dict[str, type] = {"q5": Q5, "q7": Q7, "q8": Q8, "q11": Q11, "q12": Q12}
"""Query name -> definition class; ``QUERIES[name](**parameters).run(records)``."""


def make_query(name: str, parameters: Mapping[str, int] | None = None):
    """Query ``name`` with ``parameters``: a ``ValueError`` naming what is wrong (an unknown
    query, an unknown parameter, a duration that is not positive) before anything runs."""
    if name not in QUERIES:
        raise ValueError(f"unknown Nexmark query {name!r}; choose one of {', '.join(QUERIES)}")
    try:
        query = QUERIES[name](**(parameters or {}))
    except TypeError as error:
        known = ", ".join(f.name for f in fields(QUERIES[name]))
        raise ValueError(f"{error}; {name} takes {known}") from None
    for field in fields(query):
        value = getattr(query, field.name)
        if field.name.endswith("_ms") and value <= 0:
            raise ValueError(f"{name} {field.name} must be positive, got {value}")
    return query


def run_query(name: str, records: Iterable[Mapping[str, Any]], **parameters: int) -> QueryResult:
    """Run one query by name with optional parameters (e.g. ``window_size_ms=2_000``)."""
    return QUERIES[name](**parameters).run(records)
