"""Window functions: incremental aggregates and full-window process functions.

Two shapes, as in Flink:

* An :class:`AggregateFunction` (``create_accumulator``/``add``/``merge``/``get_result``) folds
  each element into a small accumulator as it arrives, so a window keeps O(1) state. ``merge``
  is what session windows need when they merge. Accumulators must be JSON-able (numbers, lists,
  ``None``) so per-key state can be checkpointed.
* A :class:`ProcessWindowFunction` sees all the window's elements when it fires, plus
  per-window and per-key state (Flink's ``ProcessWindowFunction.Context.windowState()`` /
  ``globalState()``). It needs the elements buffered.

Built-ins follow SQL (and so Spark's vectorised backfill): ``count`` without a field counts
elements, with a field counts non-null values; ``sum``/``min``/``max``/``mean`` ignore missing,
null and non-numeric values and give ``None`` when there are none. ``sum``/``min``/``max`` are
exact decimals and ``mean`` is a float computed from the exact sum (:mod:`operators.numbers`), so no
result depends on the order in which elements were added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, Protocol

from operators.evictors import Element
from operators.numbers import add_exact, to_double, to_exact
from operators.pipeline import AggregateSpec
from operators.user_functions import load_user_aggregate
from operators.windows import TimeWindow

__all__ = [
    "AggregateFunction",
    "BUILTIN_AGGREGATES",
    "Count",
    "Max",
    "Mean",
    "Min",
    "NamedAggregates",
    "ProcessContext",
    "ProcessWindowFunction",
    "Reduce",
    "Sum",
]


class AggregateFunction(Protocol):
    """An incremental aggregate over elements (payload mappings)."""

    def create_accumulator(self) -> Any: ...

    def add(self, element: Mapping[str, Any] | None, accumulator: Any) -> Any: ...

    def merge(self, a: Any, b: Any) -> Any: ...

    def get_result(self, accumulator: Any) -> Any: ...


class Count:
    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def create_accumulator(self) -> int:
        return 0

    def add(self, element: Mapping[str, Any] | None, accumulator: int) -> int:
        if self.field is None:
            return accumulator + 1
        if element is not None and element.get(self.field) is not None:
            return accumulator + 1
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return a + b

    def get_result(self, accumulator: int) -> int:
        return accumulator


def _value(element: Mapping[str, Any] | None, field: str) -> Decimal | None:
    return None if element is None else to_exact(element.get(field))


class Sum:
    """Exact: the accumulator is a decimal string (JSON-able), see :mod:`operators.numbers`."""

    def __init__(self, field: str) -> None:
        self.field = field

    def create_accumulator(self) -> Any:
        return None

    def add(self, element: Mapping[str, Any] | None, accumulator: Any) -> Any:
        value = _value(element, self.field)
        if value is None:
            return accumulator
        return str(value if accumulator is None else add_exact(Decimal(accumulator), value))

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        return a if b is None else str(add_exact(Decimal(a), Decimal(b)))

    def get_result(self, accumulator: Any) -> Decimal | None:
        return None if accumulator is None else Decimal(accumulator)


class Min:
    def __init__(self, field: str) -> None:
        self.field = field

    def create_accumulator(self) -> Any:
        return None

    def _better(self, candidate: Decimal, current: Decimal) -> bool:
        return candidate < current

    def add(self, element: Mapping[str, Any] | None, accumulator: Any) -> Any:
        value = _value(element, self.field)
        if value is None:
            return accumulator
        if accumulator is None or self._better(value, Decimal(accumulator)):
            return str(value)
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return b if self._better(Decimal(b), Decimal(a)) else a

    def get_result(self, accumulator: Any) -> Decimal | None:
        return None if accumulator is None else Decimal(accumulator)


class Max(Min):
    def _better(self, candidate: Decimal, current: Decimal) -> bool:
        return candidate > current


class Mean:
    """Accumulator ``[exact sum as a string, count]``; the result is
    ``double(sum) / count``, the same division in every engine."""

    def __init__(self, field: str) -> None:
        self.field = field

    def create_accumulator(self) -> list[Any]:
        return ["0", 0]

    def add(self, element: Mapping[str, Any] | None, accumulator: list[Any]) -> list[Any]:
        value = _value(element, self.field)
        if value is None:
            return accumulator
        return [str(add_exact(Decimal(accumulator[0]), value)), accumulator[1] + 1]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return [str(add_exact(Decimal(a[0]), Decimal(b[0]))), a[1] + b[1]]

    def get_result(self, accumulator: list[Any]) -> float | None:
        if accumulator[1] == 0:
            return None
        return to_double(Decimal(accumulator[0])) / accumulator[1]


class Reduce:
    """Flink's ``ReduceFunction`` as an incremental aggregate: ``combine(a, b)`` folds two
    values of the same type into one, so the accumulator is simply the value reduced so far.

    ``field`` reduces that payload field (missing and null values are skipped, as SQL does);
    without it whole elements (payload mappings, copied) are reduced, e.g. "the element with
    the highest price". ``combine`` must be associative (session windows merge accumulators in
    any grouping) and return JSON-able values (per-key state is checkpointed).
    """

    def __init__(self, combine: Callable[[Any, Any], Any], field: str | None = None) -> None:
        self.combine = combine
        self.field = field

    def create_accumulator(self) -> Any:
        return None

    def add(self, element: Mapping[str, Any] | None, accumulator: Any) -> Any:
        if self.field is None:
            value = None if element is None else dict(element)
        else:
            value = None if element is None else element.get(self.field)
        if value is None:
            return accumulator
        return value if accumulator is None else self.combine(accumulator, value)

    def merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        return a if b is None else self.combine(a, b)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator


BUILTIN_AGGREGATES = {"count": Count, "sum": Sum, "min": Min, "max": Max, "mean": Mean}


class NamedAggregates:
    """Several named aggregate functions computed together; the accumulator is a list.

    This is the window operator's incremental function: the pane's values are
    ``{name: result}`` in the order the aggregates were declared.
    """

    def __init__(self, functions: Iterable[tuple[str, AggregateFunction]]) -> None:
        self.functions = list(functions)
        if not self.functions:
            raise ValueError("at least one aggregate is needed")
        self.names = [name for name, _ in self.functions]
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate aggregate names: {self.names}")
        self._fns = [fn for _, fn in self.functions]

    @classmethod
    def from_specs(cls, specs: Iterable[AggregateSpec]) -> NamedAggregates:
        functions: list[tuple[str, AggregateFunction]] = []
        for spec in specs:
            factory = (load_user_aggregate(spec.fn) if spec.is_user_defined
                       else BUILTIN_AGGREGATES[spec.fn])
            functions.append((spec.name, factory(spec.field)))  # type: ignore[arg-type]
        return cls(functions)

    @property
    def fields(self) -> set[str]:
        """Payload fields the aggregates read (the replay command validates them)."""
        return {fn.field for fn in self._fns if getattr(fn, "field", None)}

    def create_accumulator(self) -> list[Any]:
        return [fn.create_accumulator() for fn in self._fns]

    def add(self, element: Mapping[str, Any] | None, accumulator: list[Any]) -> list[Any]:
        for i, fn in enumerate(self._fns):
            accumulator[i] = fn.add(element, accumulator[i])
        return accumulator

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return [fn.merge(x, y) for fn, x, y in zip(self._fns, a, b, strict=True)]

    def get_result(self, accumulator: list[Any]) -> dict[str, Any]:
        return {name: fn.get_result(acc)
                for name, fn, acc in zip(self.names, self._fns, accumulator, strict=True)}

    def over(self, elements: Iterable[Element]) -> dict[str, Any]:
        """The result over buffered elements (used when an evictor forces buffering)."""
        accumulator = self.create_accumulator()
        for item in elements:
            accumulator = self.add(item[1], accumulator)
        return self.get_result(accumulator)


class ProcessContext(Protocol):
    """What a :class:`ProcessWindowFunction` sees besides the elements."""

    @property
    def window(self) -> TimeWindow: ...

    @property
    def current_watermark(self) -> int: ...

    @property
    def current_processing_time(self) -> int: ...

    @property
    def window_state(self) -> dict[str, Any]:
        """State of this key and window; JSON-able values; dropped when the window is."""
        ...

    @property
    def global_state(self) -> dict[str, Any]:
        """State of this key across all its windows; JSON-able values."""
        ...


class ProcessWindowFunction:
    """A full-window function: override :meth:`process` (and :meth:`clear` if you keep
    per-window state that needs tidying). ``elements`` are ``(event_time, payload, arrival_seq)``
    tuples in arrival order; the returned mapping becomes the pane's values."""

    def process(self, key: str, context: ProcessContext,
                elements: list[Element]) -> Mapping[str, Any]:
        raise NotImplementedError

    def clear(self, key: str, context: ProcessContext) -> None:
        """Called when the window is cleaned up; ``window_state`` is dropped afterwards."""
        return None
