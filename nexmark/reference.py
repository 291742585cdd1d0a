"""Independent references for the Nexmark queries: SQL in DuckDB over the arrival log.

No operator-library code runs here: windows, lateness and the end of the log are written out
as set-based SQL, so a bug in the operators (or in the queries built on them) shows up as a
difference. The platform's rules the SQL spells out:

* A record is **late** for a window when ``window_start + size - 1 <= watermark_ms`` (its
  window's ``max_timestamp`` with allowed lateness 0); it is then not counted in that window.
* A window has a result only if some record of the log carries a watermark at or past its
  ``max_timestamp``: ``window_start + size - 1 <= max(watermark_ms)`` over the whole log.
* Q12 uses ``ingest_time_ms`` as time and ``ingest_time_ms - 1`` as watermark (nothing late).
* Q11 (sessions): in general the operator's sessions depend on arrival order when records are
  late, which SQL cannot express simply; the reference is exact when every bid arrives
  ahead of its watermark by more than 1 ms (``watermark_ms < event_time_ms - 1``), and raises
  otherwise. :func:`q11_in_arrival_order` covers the general case with a few lines of plain
  Python that follow Flink's session rules record by record (still no operator code).

The SQL is also meant as the definition a Spark SQL implementation can follow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import pandas as pd

COLUMNS = ("arrival_seq", "type", "key", "event_time_ms", "ingest_time_ms", "watermark_ms",
           "id", "name", "seller", "reserve", "auction", "bidder", "price")


def _frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    data = {name: [r.get(name) for r in records] for name in COLUMNS}
    frame = pd.DataFrame(data)
    for name in ("arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms"):
        frame[name] = frame[name].astype("int64")
    for name in ("id", "seller", "reserve", "auction", "bidder", "price"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _query(records: Sequence[Mapping[str, Any]], sql: str) -> list[dict[str, Any]]:
    con = duckdb.connect()
    try:
        con.register("log", _frame(records))
        frame = con.execute(sql).fetchdf()
    finally:
        con.close()
    return [{k: (int(v) if k != "name" else v) for k, v in row.items()}
            for row in frame.to_dict("records")]


def _window_start(column: str, size: int) -> str:
    """Floor-modulo window start (DuckDB's ``%`` truncates like C)."""
    return f"({column} - ((({column}) % {size}) + {size}) % {size})"


END = "(SELECT max(watermark_ms) FROM log)"


def q7(records: Sequence[Mapping[str, Any]], window_size_ms: int = 10_000) -> list[dict]:
    size = window_size_ms
    return _query(records, f"""
        WITH bids AS (
            SELECT *, {_window_start('event_time_ms', size)} AS window_start
            FROM log WHERE type = 'bid'),
        kept AS (SELECT * FROM bids WHERE window_start + {size} - 1 > watermark_ms),
        best AS (SELECT window_start, max(price) AS price FROM kept GROUP BY window_start)
        SELECT k.window_start, k.window_start + {size} AS window_end, k.auction, k.bidder,
               k.price, k.event_time_ms AS date_time
        FROM kept k JOIN best b ON k.window_start = b.window_start AND k.price = b.price
        WHERE k.window_start + {size} - 1 <= {END}
        ORDER BY window_start, window_end, auction, bidder, price, date_time""")


def _sliding_bids(size: int, slide: int) -> str:
    windows = -(-size // slide)
    return f"""
        bids AS (
            SELECT arrival_seq, auction, event_time_ms, watermark_ms,
                   {_window_start('event_time_ms', slide)} AS last_start
            FROM log WHERE type = 'bid'),
        assigned AS (
            SELECT b.*, b.last_start - r.k * {slide} AS window_start
            FROM bids b, range(0, {windows}) r(k)
            WHERE b.last_start - r.k * {slide} > b.event_time_ms - {size})"""


def q5(records: Sequence[Mapping[str, Any]], window_size_ms: int = 10_000,
       window_slide_ms: int = 5_000) -> list[dict]:
    size, slide = window_size_ms, window_slide_ms
    return _query(records, f"""
        WITH {_sliding_bids(size, slide)},
        kept AS (SELECT * FROM assigned WHERE window_start + {size} - 1 > watermark_ms),
        counts AS (SELECT window_start, auction, count(*) AS bid_count
                   FROM kept GROUP BY window_start, auction),
        ranked AS (SELECT *, max(bid_count) OVER (PARTITION BY window_start) AS best
                   FROM counts)
        SELECT window_start, window_start + {size} AS window_end, auction, bid_count
        FROM ranked
        WHERE bid_count = best AND window_start + {size} - 1 <= {END}
        ORDER BY window_start, auction""")


def q8(records: Sequence[Mapping[str, Any]], window_size_ms: int = 10_000) -> list[dict]:
    size = window_size_ms
    return _query(records, f"""
        WITH people AS (
            SELECT id AS person_id, name, watermark_ms,
                   {_window_start('event_time_ms', size)} AS window_start
            FROM log WHERE type = 'person'),
        auctions AS (
            SELECT seller, watermark_ms, {_window_start('event_time_ms', size)} AS window_start
            FROM log WHERE type = 'auction'),
        opened AS (
            SELECT seller, window_start, count(*) AS auctions FROM auctions
            WHERE window_start + {size} - 1 > watermark_ms GROUP BY seller, window_start)
        SELECT p.window_start, p.window_start + {size} AS window_end, p.person_id, p.name,
               o.auctions
        FROM people p JOIN opened o ON p.person_id = o.seller AND p.window_start = o.window_start
        WHERE p.window_start + {size} - 1 > p.watermark_ms
          AND p.window_start + {size} - 1 <= {END}
        ORDER BY window_start, person_id""")


def q11(records: Sequence[Mapping[str, Any]], session_gap_ms: int = 10_000) -> list[dict]:
    gap = session_gap_ms
    behind = [r["arrival_seq"] for r in records
              if r.get("type") == "bid" and r["watermark_ms"] >= r["event_time_ms"] - 1]
    if behind:
        raise ValueError(f"q11 reference needs every bid ahead of its watermark; "
                         f"{len(behind)} are not (first arrival_seq {behind[0]})")
    return _query(records, f"""
        WITH bids AS (SELECT bidder, event_time_ms AS t FROM log WHERE type = 'bid'),
        marked AS (
            SELECT bidder, t,
                   CASE WHEN lag(t) OVER w IS NULL OR t > lag(t) OVER w + {gap}
                        THEN 1 ELSE 0 END AS starts
            FROM bids WINDOW w AS (PARTITION BY bidder ORDER BY t)),
        numbered AS (
            SELECT bidder, t, sum(starts) OVER (PARTITION BY bidder ORDER BY t
                ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS session
            FROM marked),
        sessions AS (
            SELECT bidder, min(t) AS session_start, max(t) + {gap} AS session_end,
                   count(*) AS bid_count
            FROM numbered GROUP BY bidder, session)
        SELECT bidder, session_start, session_end, bid_count FROM sessions
        WHERE session_end - 1 <= {END}
        ORDER BY bidder, session_start""")


def q11_in_arrival_order(records: Sequence[Mapping[str, Any]],
                         session_gap_ms: int = 10_000) -> list[dict]:
    """Q11 with late bids, in arrival order: per bidder, open sessions ``[start, end)`` close
    when the log's watermark reaches ``end - 1``; a bid opens ``[t, t + gap)``, which merges
    with every open session it overlaps or touches; a bid that merges with none and whose own
    session is already closed by the watermark (``t + gap - 1 <= watermark``) is dropped."""
    gap = session_gap_ms
    open_sessions: dict[int, list[list[int]]] = {}  # bidder -> [[start, end, count], ...]
    closed: list[dict] = []
    watermark = None

    def close(bidder: int, up_to: int) -> None:
        still_open = []
        for start, end, count in open_sessions.get(bidder, []):
            if end - 1 <= up_to:
                closed.append({"bidder": bidder, "session_start": start,
                               "session_end": end, "bid_count": count})
            else:
                still_open.append([start, end, count])
        open_sessions[bidder] = still_open

    for record in records:
        watermark = record["watermark_ms"] if watermark is None \
            else max(watermark, record["watermark_ms"])
        if record.get("type") != "bid":
            continue
        bidder, t = int(record["bidder"]), int(record["event_time_ms"])
        close(bidder, watermark)
        start, end, count = t, t + gap, 1
        keep = []
        for session in open_sessions[bidder]:
            if session[0] <= end and session[1] >= start:  # overlaps or touches
                start, end, count = min(start, session[0]), max(end, session[1]), \
                    count + session[2]
            else:
                keep.append(session)
        if count == 1 and end - 1 <= watermark:
            continue  # late: its own session is already closed
        open_sessions[bidder] = [*keep, [start, end, count]]
    if watermark is not None:
        for bidder in list(open_sessions):
            close(bidder, watermark)
    return sorted(closed, key=lambda r: (r["bidder"], r["session_start"]))


def q12(records: Sequence[Mapping[str, Any]], window_size_ms: int = 10_000) -> list[dict]:
    size = window_size_ms
    return _query(records, f"""
        WITH bids AS (
            SELECT bidder, {_window_start('ingest_time_ms', size)} AS window_start
            FROM log WHERE type = 'bid')
        SELECT window_start, window_start + {size} AS window_end, bidder,
               count(*) AS bid_count
        FROM bids
        WHERE window_start + {size} - 1 <= (SELECT max(ingest_time_ms) - 1 FROM log)
        GROUP BY window_start, bidder
        ORDER BY window_start, window_end, bidder""")


def late_windows(records: Sequence[Mapping[str, Any]], query: str,
                 **parameters: int) -> list[tuple[int, int, int]]:
    """``(arrival_seq, window_start, window_end)`` of every (record, window) the query drops
    as late, for Q5, Q7 and Q8."""
    if query == "q5":
        size = parameters.get("window_size_ms", 10_000)
        slide = parameters.get("window_slide_ms", 5_000)
        sql = f"""WITH {_sliding_bids(size, slide)}
            SELECT arrival_seq, window_start, window_start + {size} AS window_end
            FROM assigned WHERE window_start + {size} - 1 <= watermark_ms"""
    elif query in ("q7", "q8"):
        size = parameters.get("window_size_ms", 10_000)
        types = "('bid')" if query == "q7" else "('person', 'auction')"
        sql = f"""WITH assigned AS (
                SELECT arrival_seq, watermark_ms,
                       {_window_start('event_time_ms', size)} AS window_start
                FROM log WHERE type IN {types})
            SELECT arrival_seq, window_start, window_start + {size} AS window_end
            FROM assigned WHERE window_start + {size} - 1 <= watermark_ms"""
    else:
        raise ValueError(f"no late reference for {query}")
    rows = _query(records, sql + " ORDER BY arrival_seq, window_start")
    return [(r["arrival_seq"], r["window_start"], r["window_end"]) for r in rows]


REFERENCES = {"q5": q5, "q7": q7, "q8": q8, "q11": q11, "q12": q12}
