"""Session windows with the event-time trigger and built-in aggregates, without the general
operator's machinery.

The window operator (:mod:`operators.window_operator`) runs any trigger, evictor and aggregate
through a timer service, a trigger context and decimal-string accumulators; for the most common
session pipeline that generality costs about 40 µs of Python per record. Here the same decisions
are taken directly, with the same results:

- a record's window ``[t, t + gap)`` merges with every live window it overlaps or touches
  (Flink's ``MergingWindowSet``); a merged window is a new window, its panes numbered from 0;
- a record is late when its window, merged, has ``max_timestamp + allowed_lateness <=
  watermark``; otherwise it is added and, if the window's end is already behind the watermark,
  fires a LATE pane at once (``EventTimeTrigger.onElement``);
- the on-time timer at ``max_timestamp`` is pending exactly when the trigger registered it (a
  record or a merge found the window's end ahead of the watermark) and no merge or cleanup
  deleted it;
- at ``max_timestamp + allowed_lateness`` the window is cleaned up, with a closing pane if that
  timer fired none.

A window's timers are two flags on the window, not entries in a timer queue, and accumulators
are integers of nanounits (``DECIMAL(38, 9)`` values times ``10**9``), exact as the operator's
decimals are. The snapshot of a key is the operator's own format, so a key's state passes
between this driver and :class:`~operators.window_operator.WindowDriver` unchanged in meaning.
:mod:`tests.operators.test_standard_sessions` holds every pane, late record and assignment to
the operator's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from operators.numbers import _CONTEXT, SCALE, to_exact
from operators.pipeline import PipelineSpec
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.timers import EVENT_TIME
from operators.window_operator import (
    DROPPED,
    LATE,
    LATE_WITHIN,
    ON_TIME,
    ON_TIME_CLASS,
    Assignment,
    LateRecord,
    Pane,
)

__all__ = [
    "OpenSession",
    "SessionDriver",
    "is_standard_session",
]


def is_standard_session(spec: PipelineSpec) -> bool:
    """Session windows of a fixed gap, the default event-time trigger, no evictor and built-in
    aggregates: what :class:`SessionDriver` runs."""
    window = spec.window
    if spec.is_process or window is None or window.type != "session" or window.gap_ms is None:
        return False
    default_trigger = spec.trigger is None or (spec.trigger.type == "event_time"
                                               and not spec.trigger.purging)
    return default_trigger and spec.evictor is None and not any(
        a.is_user_defined for a in spec.aggregates)


def _units(value: object) -> int | None:
    """An element's field as an integer of nanounits, or ``None`` (as ``to_exact`` says)."""
    exact = to_exact(value)
    return None if exact is None else int(exact.scaleb(SCALE, _CONTEXT))


def _decimal(units: int) -> Decimal:
    return Decimal(units).scaleb(-SCALE, _CONTEXT)


class _Aggregate:
    """One built-in aggregate over nanounits; its accumulator is what the operator's would be,
    in integers: ``count`` an int, ``sum``/``min``/``max`` an int or ``None``, ``mean`` a
    ``[sum, count]`` list."""

    __slots__ = ("fn", "field")

    def __init__(self, fn: str, field: str | None) -> None:
        self.fn = fn
        self.field = field

    def empty(self) -> Any:
        if self.fn == "count":
            return 0
        return [0, 0] if self.fn == "mean" else None

    def add(self, element: Mapping[str, Any] | None, acc: Any) -> Any:
        fn, field = self.fn, self.field
        if fn == "count":
            if field is None:
                return acc + 1
            return acc + 1 if element is not None and element.get(field) is not None else acc
        units = None if element is None else _units(element.get(field))
        if units is None:
            return acc
        if fn == "mean":
            return [acc[0] + units, acc[1] + 1]
        if acc is None:
            return units
        if fn == "sum":
            return acc + units
        return min(acc, units) if fn == "min" else max(acc, units)

    def merge(self, a: Any, b: Any) -> Any:
        fn = self.fn
        if fn == "count":
            return a + b
        if fn == "mean":
            return [a[0] + b[0], a[1] + b[1]]
        if a is None:
            return b
        if b is None:
            return a
        if fn == "sum":
            return a + b
        # ties keep the first, as the operator's Min/Max do (equal values, one result)
        return b if (b < a if fn == "min" else b > a) else a

    def result(self, acc: Any) -> Any:
        if self.fn == "count":
            return acc
        if self.fn == "mean":
            return None if acc[1] == 0 else float(_decimal(acc[0])) / acc[1]
        return None if acc is None else _decimal(acc)

    def to_operator(self, acc: Any) -> Any:
        """The operator's accumulator (decimal strings) for a snapshot."""
        if self.fn == "count":
            return acc
        if self.fn == "mean":
            return [str(_decimal(acc[0])), acc[1]]
        return None if acc is None else str(_decimal(acc))

    def from_operator(self, acc: Any) -> Any:
        if self.fn == "count":
            return acc
        if self.fn == "mean":
            return [_units(Decimal(acc[0])), acc[1]]
        return None if acc is None else _units(Decimal(acc))


class _Window:
    """A live session: bounds, accumulators, pane bookkeeping and its on-time timer."""

    __slots__ = ("start", "end", "accs", "pane_index", "on_time_done", "timer")

    def __init__(self, start: int, end: int, accs: list[Any]) -> None:
        self.start = start
        self.end = end
        self.accs = accs
        self.pane_index = 0
        self.on_time_done = False
        self.timer = False
        """The trigger's timer at ``max_timestamp`` is pending."""


class _Key:
    __slots__ = ("windows", "watermark", "processing_time")

    def __init__(self) -> None:
        self.windows: list[_Window] = []  # by start; no two overlap or touch
        self.watermark = MIN_WATERMARK
        self.processing_time = MIN_WATERMARK


@dataclass(frozen=True)
class OpenSession:
    """A key's whole state when it is one session that has fired no pane and whose on-time
    timer is pending: what records that only grow the session change in closed form
    (:mod:`jobs.live.session_growth`). ``accs`` are the driver's accumulators (nanounits)."""

    start: int
    end: int
    accs: list[Any]
    watermark: int
    processing_time: int


class SessionDriver:
    """The :class:`~operators.window_operator.WindowDriver` interface the Spark runtimes use
    (records per key in arrival order, timers fired at a watermark, output taken, keys
    snapshotted and restored), for :func:`is_standard_session` pipelines."""

    def __init__(self, spec: PipelineSpec) -> None:
        if not is_standard_session(spec):
            raise ValueError("SessionDriver runs session windows of a fixed gap with the "
                             "event-time trigger and built-in aggregates only")
        assert spec.window is not None and spec.window.gap_ms is not None
        self.gap = spec.window.gap_ms
        self.lateness = spec.allowed_lateness_ms
        self.names = [a.name for a in spec.aggregates]
        self.aggregates = [_Aggregate(a.fn, a.field) for a in spec.aggregates]
        self.states: dict[str, _Key] = {}
        self.watermark = MIN_WATERMARK
        self.processing_time = MIN_WATERMARK
        self.panes: list[Pane] = []
        self.late: list[LateRecord] = []
        self.assignments: list[Assignment] | None = None
        self._earliest = _NEVER
        """No pending timer is earlier (a bound, exact after each firing): most records raise
        the watermark past no timer, and need not look at any window."""

    # -- the operator's predicates --------------------------------------------------------------

    def cleanup_time(self, end: int) -> int:
        cleanup = end - 1 + self.lateness
        return cleanup if cleanup < MAX_TIMESTAMP else MAX_TIMESTAMP

    def _first_timer(self, window: _Window) -> int:
        if window.timer:
            return window.end - 1
        cleanup = self.cleanup_time(window.end)
        return _NEVER if cleanup == MAX_TIMESTAMP else cleanup

    # -- records and timers ---------------------------------------------------------------------

    def process(self, key: str, event_time: int, element: Mapping[str, Any] | None, *,
                arrival_seq: int, watermark: int, ingest_time: int) -> None:
        self.advance(watermark, ingest_time)
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = _Key()
        if self.watermark > state.watermark:
            state.watermark = self.watermark
        if self.processing_time > state.processing_time:
            state.processing_time = self.processing_time
        clock = state.watermark
        start, end = event_time, event_time + self.gap
        windows = state.windows
        touching = [w for w in windows if w.start <= end and w.end >= start]
        if not touching:
            window = None
            actual = (start, end)
        elif len(touching) == 1 and touching[0].start <= start and touching[0].end >= end:
            window = touching[0]  # inside a live window: nothing merges
            actual = (window.start, window.end)
        else:
            window = self._merge(state, touching, min(start, touching[0].start),
                                 max(end, touching[-1].end))
            actual = (window.start, window.end)
        cleanup = self.cleanup_time(actual[1])
        if cleanup <= clock:  # only a window that merged with nothing
            self.late.append(LateRecord(key, event_time, arrival_seq, clock, *actual))
            if self.assignments is not None:
                self.assignments.append((arrival_seq, *actual, DROPPED))
            self._release(key, state)
            return
        if window is None:
            window = _Window(start, end, [a.empty() for a in self.aggregates])
            _insert(windows, window)
        max_ts = window.end - 1
        if self.assignments is not None:
            self.assignments.append((arrival_seq, window.start, window.end,
                                     LATE_WITHIN if max_ts <= clock else ON_TIME_CLASS))
        accs = window.accs
        for i, aggregate in enumerate(self.aggregates):
            accs[i] = aggregate.add(element, accs[i])
        if max_ts <= clock:
            self._emit(key, window, fired_by_timer=None, final=False)
        else:
            window.timer = True
        first = self._first_timer(window)
        if first < self._earliest:
            self._earliest = first

    def _merge(self, state: _Key, members: list[_Window], start: int, end: int) -> _Window:
        """The members become one new window (its panes numbered from 0); their timers go."""
        accs = members[0].accs
        for other in members[1:]:
            accs = [a.merge(x, y) for a, x, y in zip(self.aggregates, accs, other.accs,
                                                      strict=True)]
        merged = _Window(start, end, list(accs))
        merged.timer = end - 1 > state.watermark  # EventTimeTrigger.onMerge
        gone = {id(m) for m in members}
        state.windows[:] = [w for w in state.windows if id(w) not in gone]
        _insert(state.windows, merged)
        return merged

    def advance(self, watermark: int, ingest_time: int) -> None:
        """Raise the clocks and fire every due timer, in the operator's order: ascending
        ``(timestamp, key, window)``."""
        if watermark > self.watermark:
            self.watermark = watermark
        if ingest_time > self.processing_time:
            self.processing_time = ingest_time
        watermark = self.watermark
        if watermark < self._earliest:
            return
        due: list[tuple[int, str, int, int, _Window]] = []
        for key, state in self.states.items():
            for window in state.windows:
                max_ts = window.end - 1
                if window.timer and max_ts <= watermark:
                    due.append((max_ts, key, window.start, window.end, window))
                cleanup = self.cleanup_time(window.end)
                if cleanup <= watermark and cleanup != MAX_TIMESTAMP and not (
                        window.timer and cleanup == max_ts):
                    due.append((cleanup, key, window.start, window.end, window))
        if due:
            due.sort(key=lambda timer: timer[:4])
            self._fire(due)
        self._earliest = min((self._first_timer(w) for state in self.states.values()
                              for w in state.windows), default=_NEVER)

    def _fire(self, due: list[tuple[int, str, int, int, _Window]]) -> None:
        for timestamp, key, _, _, window in due:
            state = self.states[key]
            if timestamp > state.watermark:
                state.watermark = timestamp
            max_ts = window.end - 1
            emitted = False
            is_cleanup = timestamp == self.cleanup_time(window.end)
            if timestamp == max_ts:  # EventTimeTrigger.onEventTime fires
                window.timer = False
                self._emit(key, window, fired_by_timer=timestamp, final=is_cleanup)
                emitted = True
            if is_cleanup:
                if not emitted:  # the closing pane
                    self._emit(key, window, fired_by_timer=timestamp, final=True)
                state.windows.remove(window)
                self._release(key, state)

    def _emit(self, key: str, window: _Window, *, fired_by_timer: int | None,
              final: bool) -> None:
        """Beam's pane timing, as the operator's ``_emit``: never EARLY here (a pane fires
        only once the window's end is behind the key's clock); ON_TIME for the first pane,
        if the watermark fired it by reaching the window's end."""
        on_time = not window.on_time_done and fired_by_timer == window.end - 1
        timing = ON_TIME if on_time else LATE
        window.on_time_done = True
        values = {name: aggregate.result(acc) for name, aggregate, acc in
                  zip(self.names, self.aggregates, window.accs, strict=True)}
        self.panes.append(Pane(key, window.start, window.end, window.pane_index, timing, final,
                               values))
        window.pane_index += 1

    def _release(self, key: str, state: _Key) -> None:
        if not state.windows:
            del self.states[key]

    # -- output ---------------------------------------------------------------------------------

    def take_output(self) -> tuple[list[Pane], list[LateRecord]]:
        panes, late = self.panes, self.late
        self.panes, self.late = [], []
        return panes, late

    def record_assignments(self) -> None:
        if self.assignments is None:
            self.assignments = []

    def take_assignments(self) -> list[Assignment]:
        taken = self.assignments or []
        if self.assignments is not None:
            self.assignments = []
        return taken

    # -- per-key state, in the operator's snapshot format -----------------------------------------

    def pending_timers(self, key: str) -> list[tuple[int, int, tuple[int, int]]]:
        """``(kind, timestamp, window)`` in firing order, as the operator lists them."""
        state = self.states.get(key)
        return [] if state is None else self._timers(state)

    def _timers(self, state: _Key) -> list[tuple[int, int, tuple[int, int]]]:
        timers = set()
        for window in state.windows:
            if window.timer:
                timers.add((window.end - 1, window.start, window.end))
            cleanup = self.cleanup_time(window.end)
            if cleanup != MAX_TIMESTAMP:
                timers.add((cleanup, window.start, window.end))
        return [(EVENT_TIME, ts, (start, end)) for ts, start, end in sorted(timers)]

    def snapshot_key(self, key: str, *, evict: bool = False) -> dict[str, Any] | None:
        state = self.states.get(key)
        if state is None:
            return None
        if evict:
            del self.states[key]
        return self._snapshot(state, self._timers(state))

    def _snapshot(self, state: _Key, timers: list[tuple[int, int, tuple[int, int]]]
                  ) -> dict[str, Any]:
        flat: list[int] = []
        for kind, ts, (start, end) in timers:
            flat += (kind, ts, start, end)
        windows = [[w.start, w.end,
                    [a.to_operator(acc) for a, acc in zip(self.aggregates, w.accs, strict=True)],
                    None, w.pane_index, int(w.on_time_done), None] for w in state.windows]
        return {"v": 1, "windows": windows, "global": {},
                "clock": [state.watermark, state.processing_time], "timers": flat}

    def restore_key(self, key: str, snap: Mapping[str, Any] | None) -> None:
        if snap is None:
            return
        if snap.get("v") != 1:
            raise ValueError(f"unsupported key-state snapshot version {snap.get('v')!r}")
        state = _Key()
        state.watermark, state.processing_time = snap.get("clock") or (MIN_WATERMARK,
                                                                        MIN_WATERMARK)
        timers = snap.get("timers") or []
        on_time = {(timers[i + 2], timers[i + 3]) for i in range(0, len(timers), 4)
                   if timers[i] == EVENT_TIME and timers[i + 1] == timers[i + 3] - 1}
        for start, end, contents, _trigger, pane_index, flags, _window_state in snap["windows"]:
            accs = [a.from_operator(acc) for a, acc in zip(self.aggregates, contents,
                                                           strict=True)]
            window = _Window(start, end, accs)
            window.pane_index = pane_index
            window.on_time_done = bool(flags & 1)
            window.timer = (start, end) in on_time
            _insert(state.windows, window)
            self._earliest = min(self._earliest, self._first_timer(window))
        if state.windows:
            self.states[key] = state


    # -- a session that only grows (jobs.live.session_growth) ------------------------------

    def open_session(self, snap: Mapping[str, Any] | None) -> OpenSession | None:
        """``snap`` (a key's snapshot) as an :class:`OpenSession`, or ``None`` when it holds
        anything else: no window, several, a fired pane, or an end the key's clock passed."""
        if snap is None or snap.get("v") != 1 or len(snap["windows"]) != 1:
            return None
        start, end, contents, _trigger, pane_index, flags, _window_state = snap["windows"][0]
        watermark, processing_time = snap.get("clock") or (MIN_WATERMARK, MIN_WATERMARK)
        timers = snap.get("timers") or []
        on_time = [EVENT_TIME, end - 1, start, end]
        pending = any(timers[i:i + 4] == on_time for i in range(0, len(timers), 4))
        if pane_index != 0 or flags & 1 or not pending or end - 1 <= watermark:
            return None
        return OpenSession(start, end, [a.from_operator(acc) for a, acc in
                                        zip(self.aggregates, contents, strict=True)],
                           watermark, processing_time)

    def accumulators(self, records: int, present: int, total: int, low: int, high: int
                     ) -> list[Any]:
        """The accumulators of a window over ``records`` records, of which ``present`` carry
        a value: their sum ``total``, least ``low`` and greatest ``high`` (nanounits)."""
        accs: list[Any] = []
        for aggregate in self.aggregates:
            fn = aggregate.fn
            if fn == "count":
                accs.append(records if aggregate.field is None else present)
            elif fn == "mean":
                accs.append([total, present])
            elif not present:
                accs.append(None)
            else:
                accs.append({"sum": total, "min": low, "max": high}[fn])
        return accs

    def merged(self, a: list[Any], b: list[Any]) -> list[Any]:
        """Two windows' accumulators as one (``a`` the earlier window's)."""
        return [aggregate.merge(x, y) for aggregate, x, y in
                zip(self.aggregates, a, b, strict=True)]

    def session_snapshot(self, session: OpenSession) -> tuple[dict[str, Any], list[int]]:
        """The snapshot (:meth:`snapshot_key`) and event-time timers of a key whose whole
        state is ``session``, its on-time timer pending, as the records that grew it would
        have left it; built without the key's objects, as most keys of a live micro-batch only
        grow their session."""
        state = _open_state(session)
        timers = self._timers(state)
        return self._snapshot(state, timers), [ts for kind, ts, _ in timers
                                              if kind == EVENT_TIME]


def _open_state(session: OpenSession) -> _Key:
    """A key's state that is ``session`` alone, its on-time timer pending."""
    window = _Window(session.start, session.end, list(session.accs))
    window.timer = True
    state = _Key()
    state.windows.append(window)
    state.watermark, state.processing_time = session.watermark, session.processing_time
    return state


_NEVER = MAX_TIMESTAMP + 1


def _insert(windows: list[_Window], window: _Window) -> None:
    index = len(windows)
    while index and windows[index - 1].start > window.start:
        index -= 1
    windows.insert(index, window)
