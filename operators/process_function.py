"""Flink's ``KeyedProcessFunction``: per-key state and timers for logic that is not a window.

Windows cover most needs; for the rest (deduplication, timeouts, custom sessionisation, state
machines) a process function sees each record with its key's state, and may set event-time and
processing-time (ingest clock) timers. The function keeps no data on ``self``: all per-key data
lives in named states that snapshot to JSON, and timers live in the shared
:class:`~operators.timers.TimerService`, so a live stream, a restart and a backfill compute the
same thing. The firing order is that of docs/semantics.md, like the window operator's.

Example::

    class Timeout(KeyedProcessFunction):
        '''Emit a key when it has been silent for 10 s of event time.'''

        def process_element(self, element, ctx, out):
            last = ctx.value_state("last")
            if last.value() is not None:
                ctx.delete_event_time_timer(last.value() + 10_000)
            last.update(ctx.timestamp)
            ctx.register_event_time_timer(ctx.timestamp + 10_000)

        def on_timer(self, timestamp, ctx, out):
            out.append({"key": ctx.key, "silent_since": timestamp - 10_000})
            ctx.value_state("last").clear()
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.timers import EVENT_TIME, PROCESSING_TIME, VOID_NAMESPACE, TimerService

__all__ = [
    "KeyedProcessDriver",
    "KeyedProcessFunction",
    "ListState",
    "MapState",
    "ProcessContext",
    "ValueState",
]


class ValueState:
    """One value per key (``None`` when unset)."""

    __slots__ = ("_store", "_name")

    def __init__(self, store: dict[str, Any], name: str) -> None:
        self._store = store
        self._name = name

    def value(self) -> Any:
        return self._store.get(self._name)

    def update(self, value: Any) -> None:
        if value is None:
            self._store.pop(self._name, None)
        else:
            self._store[self._name] = value

    def clear(self) -> None:
        self._store.pop(self._name, None)


class ListState:
    """A list per key, appended to in arrival order."""

    __slots__ = ("_store", "_name")

    def __init__(self, store: dict[str, Any], name: str) -> None:
        self._store = store
        self._name = name

    def get(self) -> list[Any]:
        return list(self._store.get(self._name, ()))

    def add(self, value: Any) -> None:
        self._store.setdefault(self._name, []).append(value)

    def add_all(self, values: list[Any]) -> None:
        if values:
            self._store.setdefault(self._name, []).extend(values)

    def update(self, values: list[Any]) -> None:
        if values:
            self._store[self._name] = list(values)
        else:
            self._store.pop(self._name, None)

    def clear(self) -> None:
        self._store.pop(self._name, None)


class MapState:
    """A string-keyed map per key (string keys keep the snapshot JSON-able)."""

    __slots__ = ("_store", "_name")

    def __init__(self, store: dict[str, Any], name: str) -> None:
        self._store = store
        self._name = name

    def _map(self) -> dict[str, Any]:
        return self._store.get(self._name, {})

    def get(self, key: str, default: Any = None) -> Any:
        return self._map().get(key, default)

    def put(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError("map state keys must be strings")
        self._store.setdefault(self._name, {})[key] = value

    def contains(self, key: str) -> bool:
        return key in self._map()

    def remove(self, key: str) -> None:
        mapping = self._store.get(self._name)
        if mapping is not None:
            mapping.pop(key, None)
            if not mapping:
                del self._store[self._name]

    def keys(self) -> Iterator[str]:
        return iter(sorted(self._map()))

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(sorted(self._map().items()))

    def is_empty(self) -> bool:
        return not self._map()

    def clear(self) -> None:
        self._store.pop(self._name, None)


class ProcessContext:
    """The context of one call: the key, the current time and state, and the timer service.

    ``timestamp`` is the element's event time in ``process_element`` and the timer's
    timestamp in ``on_timer``; ``time_domain`` says which kind of timer fired. The current
    watermark and processing time are the *key's* clocks (as in the window operator's
    ``KeyState``): the largest among its records and fired timers, so that what the function
    sees does not depend on when a runtime happens to fire a due timer.
    """

    __slots__ = ("_driver", "key", "timestamp", "time_domain", "_store", "_clock", "is_late",
                 "arrival_seq")

    def __init__(self, driver: KeyedProcessDriver) -> None:
        self._driver = driver
        self.key = ""
        self.timestamp = MIN_WATERMARK
        self.time_domain: int | None = None
        self._store: dict[str, Any] = {}
        self._clock = [MIN_WATERMARK, MIN_WATERMARK]
        self.is_late = False
        """In ``process_element``: the element's event time is at or behind the watermark in
        force when it arrived (Flink hands late elements to the function too; it decides)."""
        self.arrival_seq: int | None = None
        """In ``process_element``: the element's arrival position (``None`` elsewhere)."""

    @property
    def current_watermark(self) -> int:
        return self._clock[0]

    @property
    def current_processing_time(self) -> int:
        return self._clock[1]

    def register_event_time_timer(self, timestamp: int) -> None:
        self._driver.timers.register_event_time_timer(self.key, VOID_NAMESPACE, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._driver.timers.delete_event_time_timer(self.key, VOID_NAMESPACE, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._driver.timers.register_processing_time_timer(self.key, VOID_NAMESPACE, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._driver.timers.delete_processing_time_timer(self.key, VOID_NAMESPACE, timestamp)

    def value_state(self, name: str) -> ValueState:
        return ValueState(self._store, "v:" + name)

    def list_state(self, name: str) -> ListState:
        return ListState(self._store, "l:" + name)

    def map_state(self, name: str) -> MapState:
        return MapState(self._store, "m:" + name)


class KeyedProcessFunction:
    """Override :meth:`process_element` and, if you set timers, :meth:`on_timer`.

    ``out`` is a list: append whatever the function emits (JSON-able values are best).
    """

    def process_element(self, element: Mapping[str, Any] | None, ctx: ProcessContext,
                        out: list[Any]) -> None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: ProcessContext, out: list[Any]) -> None:
        return None


class KeyedProcessDriver:
    """Runs a :class:`KeyedProcessFunction` over an arrival-ordered stream of many keys, with
    the same timer discipline as :class:`~operators.window_operator.WindowDriver`."""

    def __init__(self, function: KeyedProcessFunction) -> None:
        self.function = function
        self.timers = TimerService()
        self.states: dict[str, dict[str, Any]] = {}
        self.clocks: dict[str, list[int]] = {}
        """Per key ``[watermark, processing_time]`` (see :class:`ProcessContext`)."""
        self.watermark = MIN_WATERMARK
        self.processing_time = MIN_WATERMARK
        self.output: list[Any] = []
        self._ctx = ProcessContext(self)

    def _bind(self, key: str, timestamp: int, domain: int | None, watermark: int,
              now: int) -> ProcessContext:
        ctx = self._ctx
        ctx.key = key
        ctx.timestamp = timestamp
        ctx.time_domain = domain
        ctx.is_late = False
        ctx.arrival_seq = None
        store = self.states.get(key)
        if store is None:
            store = self.states[key] = {}
        ctx._store = store
        clock = self.clocks.get(key)
        if clock is None:
            clock = self.clocks[key] = [MIN_WATERMARK, MIN_WATERMARK]
        clock[0] = max(clock[0], watermark)
        clock[1] = max(clock[1], now)
        ctx._clock = clock
        return ctx

    def _release(self, key: str) -> None:
        if not self.states.get(key, True):
            del self.states[key]
            if not self.timers.has_timers(key):
                self.clocks.pop(key, None)

    def advance(self, watermark: int, ingest_time: int) -> None:
        """Raise watermark and ingest clock; fire due timers (event time first)."""
        self.watermark = max(self.watermark, watermark)
        self.processing_time = max(self.processing_time, ingest_time)
        for kind, timestamp, key, _ in self.timers.iter_due(self.watermark,
                                                              self.processing_time):
            self._on_timer(kind, timestamp, key)

    def fire_next(self, kind: int) -> None:
        """Fire the next timer of one kind (``EVENT_TIME`` or ``PROCESSING_TIME``), whatever
        the clocks: for runtimes that decide the order across kinds themselves
        (:mod:`operators.process_pipeline`)."""
        if kind == EVENT_TIME:
            timer = self.timers.pop_due_event_time(MAX_TIMESTAMP)
        else:
            timer = self.timers.pop_due_processing_time(MAX_TIMESTAMP)
        if timer is not None:
            self._on_timer(kind, timer[0], timer[1])

    def _on_timer(self, kind: int, timestamp: int, key: str) -> None:
        """The function's ``on_timer`` for one popped timer, the key's clock raised to it."""
        if kind == EVENT_TIME:
            ctx = self._bind(key, timestamp, EVENT_TIME, timestamp, MIN_WATERMARK)
        else:
            ctx = self._bind(key, timestamp, PROCESSING_TIME, MIN_WATERMARK, timestamp)
        self.function.on_timer(timestamp, ctx, self.output)
        self._release(key)

    def process(self, key: str, event_time: int, element: Mapping[str, Any] | None, *,
                watermark: int, ingest_time: int, arrival_seq: int | None = None) -> None:
        self.advance(watermark, ingest_time)
        ctx = self._bind(key, event_time, None, self.watermark, self.processing_time)
        ctx.is_late = event_time <= watermark
        ctx.arrival_seq = arrival_seq
        self.function.process_element(element, ctx, self.output)
        self._release(key)

    def take_output(self) -> list[Any]:
        output, self.output = self.output, []
        return output

    def snapshot_key(self, key: str, *, evict: bool = False) -> dict[str, Any] | None:
        """The key's state and timers (JSON-able); ``None`` when it has neither."""
        timers = self.timers.export_key(key, remove=evict)
        store = self.states.pop(key, None) if evict else self.states.get(key)
        clock = self.clocks.pop(key, None) if evict else self.clocks.get(key)
        if not store and not timers:
            return None
        return {"v": 1, "state": store if evict else copy.deepcopy(store or {}),
                "clock": list(clock or [MIN_WATERMARK, MIN_WATERMARK]), "timers": timers}

    def restore_key(self, key: str, snap: Mapping[str, Any] | None) -> None:
        if snap is None:
            return
        if snap.get("state"):
            self.states[key] = dict(snap["state"])
        if snap.get("clock"):
            self.clocks[key] = list(snap["clock"])
        self.timers.import_key(key, list(snap.get("timers") or []))
