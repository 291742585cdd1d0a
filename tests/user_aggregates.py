"""A user-defined aggregate, named in pipelines as ``tests.user_aggregates:Spread``: the tests
run it through every runtime (the replay, the keyed backfill, the live stream)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Spread:
    """Largest minus smallest value of ``field`` in the window (``None`` while it has none).
    The accumulator is ``[smallest, largest]`` as floats: JSON as it is."""

    result_type = "double"

    def __init__(self, field: str | None) -> None:
        self.field = field or "value"

    def create_accumulator(self) -> list[float] | None:
        return None

    def add(self, element: Mapping[str, Any] | None, accumulator: list[float] | None
            ) -> list[float] | None:
        raw = None if element is None else element.get(self.field)
        if raw is None:
            return accumulator
        value = float(raw)
        if accumulator is None:
            return [value, value]
        return [min(accumulator[0], value), max(accumulator[1], value)]

    def merge(self, a: list[float] | None, b: list[float] | None) -> list[float] | None:
        if a is None or b is None:
            return a if b is None else b
        return [min(a[0], b[0]), max(a[1], b[1])]

    def get_result(self, accumulator: list[float] | None) -> float | None:
        return None if accumulator is None else accumulator[1] - accumulator[0]


class NoResultType:
    def create_accumulator(self): ...
    def add(self, element, accumulator): ...
    def merge(self, a, b): ...
    def get_result(self, accumulator): ...
