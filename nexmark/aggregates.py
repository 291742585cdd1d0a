"""The one aggregate the Nexmark queries need beyond the library's built-ins.

Q7 wants the highest bid(s) of a window, not only the highest price: an incremental
``AggregateFunction`` keeps the maximum price and every bid that reached it, so a window holds
O(ties) state instead of all its bids, and session-style merging (``merge``) works too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BID_FIELDS = ("auction", "bidder", "price", "date_time")


class MaxBids:
    """Accumulator ``[max_price, [[auction, bidder, price, date_time], ...]]`` (JSON-able);
    the result is the list of highest bids as dicts, in ``(auction, bidder, date_time)``
    order, so ties come out the same whatever the arrival order."""

    def create_accumulator(self) -> list[Any]:
        return [None, []]

    def add(self, element: Mapping[str, Any] | None, accumulator: list[Any]) -> list[Any]:
        if element is None or element.get("price") is None:
            return accumulator
        price = element["price"]
        bid = [element[name] for name in BID_FIELDS]
        if accumulator[0] is None or price > accumulator[0]:
            return [price, [bid]]
        if price == accumulator[0]:
            accumulator[1].append(bid)
        return accumulator

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        if a[0] is None or (b[0] is not None and b[0] > a[0]):
            return [b[0], list(b[1])]
        if b[0] is None or b[0] < a[0]:
            return [a[0], list(a[1])]
        return [a[0], a[1] + b[1]]

    def get_result(self, accumulator: list[Any]) -> list[dict[str, Any]]:
        bids = sorted(accumulator[1], key=lambda bid: (bid[0], bid[1], bid[3]))
        return [dict(zip(BID_FIELDS, bid, strict=True)) for bid in bids]
