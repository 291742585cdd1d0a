"""Flink's ``WindowOperator`` in Python: windows, triggers, evictors, lateness, panes.

Three layers, so that a Spark runtime can run the very same decisions one key at a time:

* :class:`KeyState` holds everything one key owns (its windows' contents, trigger state and
  pane bookkeeping) and snapshots to a JSON-able dict, together with that key's timers.
* :class:`WindowOperator` is the logic (Flink's ``processElement``/``onEventTime``/
  ``onProcessingTime``) applied to one key's state; it is configured once and keeps no per-key
  data of its own.
* :class:`WindowDriver` runs a whole arrival-ordered stream of many keys: before each record it
  raises the watermark and the ingest clock to the record's, fires every due timer in the
  documented order (event time first, then processing time, ascending ``(timestamp, key,
  window)``), then processes the record. Per key it does exactly what a driver holding only that
  key does, which is what lets a runtime restore one key's snapshot, feed it that key's records
  and the watermarks in force, and get the same panes.

Semantics (docs/semantics.md): a record is late for a window when ``max_timestamp +
allowed_lateness <= watermark``; it then goes to the late output, one row per missed window.
Cleanup happens at ``max_timestamp + allowed_lateness``: the cleanup timer's pane is the last
one (``is_last``), and if that timer fired no pane while the window still has contents, it
emits them once more as the *closing pane*. Panes accumulate unless the trigger purges; each
carries ``pane_index``, ``timing`` (Beam's rule, judged on the key's own clock, see
:class:`KeyState`) and ``is_last``.

Timers fire only in :meth:`WindowDriver.advance` (which :meth:`WindowDriver.process` calls
before each record): a timer that became due while the last record was processed fires before
the next record, or when a runtime advances at a batch end (docs/operators.md, "End of the
log").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.aggregates import AggregateFunction, NamedAggregates, ProcessWindowFunction
from operators.evictors import Element, Evictor
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.timers import EVENT_TIME, PROCESSING_TIME, TimerService
from operators.triggers import Trigger, TriggerResult
from operators.windows import SessionWindows, TimeWindow, WindowAssigner

__all__ = [
    "Assignment",
    "BY_INGEST_TIME",
    "BY_RECORD",
    "BY_WATERMARK",
    "DROPPED",
    "EARLY",
    "Firing",
    "KeyState",
    "LATE",
    "LATE_WITHIN",
    "LateRecord",
    "ON_TIME",
    "ON_TIME_CLASS",
    "Pane",
    "WindowDriver",
    "WindowOperator",
    "WindowState",
]


EARLY = "EARLY"
ON_TIME = "ON_TIME"
LATE = "LATE"

# How a record fared in one of its windows: the metrics' names, and the ``class`` of an
# :data:`Assignment`.
ON_TIME_CLASS = "on_time"
LATE_WITHIN = "late_within_lateness"
DROPPED = "dropped_late"

Assignment = tuple[int, int, int, str]
"""``(arrival_seq, window_start, window_end, class)``: one record's fate in one window."""

# What fired a pane: a record (by its arrival position), or a timer (by its own timestamp; with
# the per-key clocks that is exactly "the watermark (ingest clock) reaching that time").
BY_RECORD = "arrival_seq"
BY_WATERMARK = "watermark"
BY_INGEST_TIME = "ingest_time"

Firing = tuple[str, int]
"""``(BY_RECORD, arrival_seq)``, ``(BY_WATERMARK, timer)`` or ``(BY_INGEST_TIME, timer)``.

Deterministic (a timer's timestamp, never the watermark that happened to fire it), but not a
field of :class:`Pane`: the tables store panes, and the replay command shows this beside them
(:meth:`WindowDriver.record_firings`)."""


@dataclass(slots=True)
class Pane:
    """One emission of a window: its values and where it stands among the window's panes.

    There is deliberately no "watermark at firing": when a key's timer fires depends on how a
    runtime slices the stream, and no pane field may (docs/semantics.md, "Windows and panes").
    """

    key: str
    window_start: int
    window_end: int
    pane_index: int
    timing: str
    is_last: bool
    values: dict[str, Any]


@dataclass(slots=True)
class LateRecord:
    """A record that missed a window (one row per record and missed window)."""

    key: str
    event_time_ms: int
    arrival_seq: int
    watermark_ms: int
    window_start: int
    window_end: int


class WindowState:
    """One key's window: contents, trigger state and pane bookkeeping.

    ``contents`` is the accumulator or, when elements are buffered, the list of elements;
    ``None`` (or an empty list) means empty. A window exists from its first element until
    cleanup; purging empties its contents but keeps the window (and its pane numbering).
    """

    __slots__ = ("contents", "trigger_state", "pane_index", "on_time_done", "closed",
                 "window_state")

    def __init__(self, contents: Any = None) -> None:
        self.contents = contents
        self.trigger_state: dict[str, Any] | None = None
        self.pane_index = 0
        self.on_time_done = False
        """A non-EARLY pane (ON_TIME or LATE) was emitted: no pane can be ON_TIME any more."""
        self.closed = False
        """The trigger finished (a composable trigger, Beam's closed window): the window emits
        nothing more and its later records are late; it stays only to say so until cleanup."""
        self.window_state: dict[str, Any] | None = None

    def to_list(self, window: TimeWindow) -> list[Any]:
        return [window.start, window.end, self.contents, self.trigger_state, self.pane_index,
                int(self.on_time_done) | (2 if self.closed else 0), self.window_state]

    @classmethod
    def from_list(cls, row: list[Any], buffered: bool) -> tuple[TimeWindow, WindowState]:
        start, end, contents, trigger_state, pane_index, flags, window_state = row
        if buffered and contents is not None:  # a purged or evicted-empty buffer is None
            contents = [tuple(e) for e in contents]
        state = cls(contents)
        state.trigger_state = trigger_state
        state.pane_index = pane_index
        state.on_time_done = bool(flags & 1)
        state.closed = bool(flags & 2)
        state.window_state = window_state
        return TimeWindow(start, end), state


class KeyState:
    """Everything one key owns except its timers (which live in a :class:`TimerService`).

    ``watermark`` and ``processing_time`` are the key's own clocks: the largest watermark
    (ingest time) among the key's records and the timestamps of its fired event-time
    (processing-time) timers. Everything the operator decides for the key — lateness, pane
    timing, what a trigger sees as the current watermark — uses these, never the global clock
    at the moment a timer happens to be fired. So the key's output depends only on its own
    records and timers, and a runtime may fire a due timer at any point before the key's next
    record (at a micro-batch boundary, say) and still produce the same panes.
    """

    __slots__ = ("windows", "global_state", "watermark", "processing_time")

    def __init__(self) -> None:
        self.windows: dict[TimeWindow, WindowState] = {}
        self.global_state: dict[str, Any] = {}
        self.watermark = MIN_WATERMARK
        self.processing_time = MIN_WATERMARK

    def is_empty(self) -> bool:
        return not self.windows and not self.global_state

    def snapshot(self, timers: list[int], *, deep: bool = True) -> dict[str, Any]:
        """JSON-able state of the key; ``timers`` is the key's ``TimerService.export_key``."""
        snap = {"v": 1, "windows": [ws.to_list(w) for w, ws in self.windows.items()],
                "global": self.global_state, "clock": [self.watermark, self.processing_time],
                "timers": timers}
        return copy.deepcopy(snap) if deep else snap

    @classmethod
    def restore(cls, snap: Mapping[str, Any], buffered: bool) -> tuple[KeyState, list[int]]:
        if snap.get("v") != 1:
            raise ValueError(f"unsupported key-state snapshot version {snap.get('v')!r}")
        state = cls()
        for row in snap["windows"]:
            window, ws = WindowState.from_list(list(row), buffered)
            state.windows[window] = ws
        state.global_state = dict(snap.get("global") or {})
        state.watermark, state.processing_time = snap.get("clock") or (MIN_WATERMARK,
                                                                        MIN_WATERMARK)
        return state, list(snap.get("timers") or [])


class _Context:
    """The trigger and process-function context, reused across calls (as Flink reuses its
    ``triggerContext``): set ``key``, ``window`` and ``state`` before each call."""

    __slots__ = ("op", "key", "window", "state", "merged", "key_state")

    def __init__(self, op: WindowOperator) -> None:
        self.op = op
        self.key = ""
        self.window = TimeWindow(0, 0)
        self.state = WindowState()
        self.merged: list[WindowState] = []
        self.key_state: KeyState | None = None

    # trigger context ------------------------------------------------------------------------
    @property
    def current_watermark(self) -> int:
        return self.op.watermark

    @property
    def current_processing_time(self) -> int:
        return self.op.processing_time

    def register_event_time_timer(self, timestamp: int) -> None:
        self.op.timers.register_event_time_timer(self.key, self.window, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self.op.timers.delete_event_time_timer(self.key, self.window, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self.op.timers.register_processing_time_timer(self.key, self.window, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self.op.timers.delete_processing_time_timer(self.key, self.window, timestamp)

    def get_state(self, name: str, default: Any = None) -> Any:
        ts = self.state.trigger_state
        if ts is None:
            return default
        return ts.get(name, default)

    def set_state(self, name: str, value: Any) -> None:
        if self.state.trigger_state is None:
            self.state.trigger_state = {}
        self.state.trigger_state[name] = value

    def clear_state(self, name: str) -> None:
        ts = self.state.trigger_state
        if ts is not None:
            ts.pop(name, None)
            if not ts:
                self.state.trigger_state = None

    def state_names(self) -> list[str]:
        names = set(self.state.trigger_state or ())
        for merged in self.merged:
            names.update(merged.trigger_state or ())
        return sorted(names)

    def merge_state(self, name: str, reduce: Callable[[Any, Any], Any]) -> Any:
        values = [s.trigger_state[name] for s in [self.state, *self.merged]
                  if s.trigger_state is not None and s.trigger_state.get(name) is not None]
        if not values:
            return None
        result = values[0]
        for value in values[1:]:
            result = reduce(result, value)
        self.set_state(name, result)
        return result

    # process-function context -------------------------------------------------------------------
    @property
    def window_state(self) -> dict[str, Any]:
        if self.state.window_state is None:
            self.state.window_state = {}
        return self.state.window_state

    @property
    def global_state(self) -> dict[str, Any]:
        assert self.key_state is not None
        return self.key_state.global_state


class WindowOperator:
    """The window logic for one key at a time. See the module docstring.

    Exactly one of ``aggregate`` (incremental) or ``process_function`` (full window) is used; an
    ``evictor`` makes the operator buffer elements even with an aggregate. The driver sets
    :attr:`timers`, and :attr:`watermark`/:attr:`processing_time` to the clocks of the key being
    handled (:class:`KeyState`), and collects :attr:`panes`, :attr:`late` and :attr:`metrics`.
    """

    def __init__(self, assigner: WindowAssigner, trigger: Trigger | None = None, *,
                 aggregate: AggregateFunction | NamedAggregates | None = None,
                 process_function: ProcessWindowFunction | None = None,
                 evictor: Evictor | None = None, allowed_lateness: int = 0) -> None:
        if (aggregate is None) == (process_function is None):
            raise ValueError("give exactly one of aggregate or process_function")
        if allowed_lateness < 0:
            raise ValueError("allowed lateness must be >= 0")
        self.assigner = assigner
        self.trigger = trigger if trigger is not None else assigner.default_trigger()
        if assigner.is_merging and not self.trigger.can_merge():
            raise ValueError(f"{type(self.trigger).__name__} cannot be used with merging "
                             f"(session) windows")
        # Always a NamedAggregates: its accumulator is a non-empty list, so "no contents" is
        # simply ``None`` whatever the user's accumulator looks like.
        self.aggregate: NamedAggregates = (
            aggregate if isinstance(aggregate, NamedAggregates) or aggregate is None
            else NamedAggregates([("result", aggregate)])
        )  # type: ignore[assignment]
        self.process_function = process_function
        self.evictor = evictor
        self.allowed_lateness = allowed_lateness
        self.buffered = process_function is not None or evictor is not None
        self.merging = assigner.is_merging
        # environment, set by the driver
        self.timers = TimerService()
        self.watermark = MIN_WATERMARK
        self.processing_time = MIN_WATERMARK
        self.panes: list[Pane] = []
        self.late: list[LateRecord] = []
        self.metrics = {"on_time": 0, "late_within_lateness": 0, "dropped_late": 0}
        self.assignments: list[Assignment] | None = None
        """When a list, every (record, window) decision is appended to it: what a runtime needs
        to compute late-data metrics for windows it cannot assign by itself (sessions merge)."""
        self.firings: list[Firing] | None = None
        """When a list, what fired each pane, in step with :attr:`panes`."""
        self._ctx = _Context(self)

    # -- helpers ------------------------------------------------------------------------------

    def cleanup_time(self, window: TimeWindow) -> int:
        """``max_timestamp + allowed_lateness``; the end of time (never) if it overflows."""
        max_ts = window.max_timestamp
        cleanup = max_ts + self.allowed_lateness
        return cleanup if cleanup < MAX_TIMESTAMP else MAX_TIMESTAMP

    def _bind(self, key: str, window: TimeWindow, state: WindowState,
              key_state: KeyState | None = None) -> _Context:
        ctx = self._ctx
        ctx.key = key
        ctx.window = window
        ctx.state = state
        ctx.key_state = key_state
        return ctx

    def _add(self, state: WindowState, timestamp: int, element: Mapping[str, Any] | None,
             arrival_seq: int) -> None:
        if self.buffered:
            if state.contents is None:
                state.contents = []
            state.contents.append((timestamp, element, arrival_seq))
        else:
            acc = state.contents
            if acc is None:
                acc = self.aggregate.create_accumulator()
            state.contents = self.aggregate.add(element, acc)

    def _emit(self, key: str, window: TimeWindow, state: WindowState, key_state: KeyState,
              fired_by: Firing, *, final: bool = False) -> bool:
        """Emit a pane with the window's current contents; ``final`` for the cleanup timer's
        pane. Returns False (and emits nothing) when the window is empty.

        Timing is Beam's PaneInfo rule (``apache_beam.transforms.trigger``'s ``_output``):
        EARLY while the key's clock is before the window's max timestamp; after that, ON_TIME
        only for the first non-early pane and only if the watermark fired it by reaching the
        window's end (its timer at ``max_timestamp``); every other pane is LATE, in particular
        one fired by a late record, even when it is the window's first (a window opened or
        merged by a record within allowed lateness)."""
        contents = state.contents
        if self.buffered:
            if not contents:
                return False
            elements: list[Element] = contents
            if self.evictor is not None:
                elements = self.evictor.evict_before(elements, window)
            if self.process_function is not None:
                ctx = self._bind(key, window, state, key_state)
                values = dict(self.process_function.process(key, ctx, list(elements)))
            else:
                values = self.aggregate.over(elements)
            if self.evictor is not None:
                elements = self.evictor.evict_after_fn(elements, window)
                state.contents = elements if elements else None
        else:
            if contents is None:
                return False
            values = self.aggregate.get_result(contents)
        max_ts = window.max_timestamp
        if self.watermark < max_ts:
            timing = EARLY
        else:
            if (state.on_time_done or fired_by[0] != BY_WATERMARK
                    or fired_by[1] != max_ts):
                timing = LATE
            else:
                timing = ON_TIME
            state.on_time_done = True
        self.panes.append(Pane(key, window.start, window.end, state.pane_index, timing, final,
                               values))
        if self.firings is not None:
            self.firings.append(fired_by)
        state.pane_index += 1
        return True

    def _clear_all(self, key: str, window: TimeWindow, state: WindowState,
                   key_state: KeyState) -> None:
        ctx = self._bind(key, window, state, key_state)
        self.trigger.clear(window, ctx)
        if self.process_function is not None:
            self.process_function.clear(key, ctx)
        key_state.windows.pop(window, None)

    def _late(self, key: str, timestamp: int, arrival_seq: int, window: TimeWindow) -> None:
        self.late.append(LateRecord(key, timestamp, arrival_seq, self.watermark, window.start,
                                    window.end))
        self.metrics["dropped_late"] += 1
        if self.assignments is not None:
            self.assignments.append((arrival_seq, window.start, window.end, DROPPED))

    def _count(self, arrival_seq: int, window: TimeWindow, max_ts: int) -> None:
        """Count a record added to a window: late within lateness once the window's on-time
        firing is due (``max_timestamp <= watermark``), on time before."""
        kind = LATE_WITHIN if max_ts <= self.watermark else ON_TIME_CLASS
        self.metrics[kind] += 1
        if self.assignments is not None:
            self.assignments.append((arrival_seq, window.start, window.end, kind))

    # -- Flink's processElement -----------------------------------------------------------------

    def process_element(self, key: str, key_state: KeyState, timestamp: int,
                        element: Mapping[str, Any] | None, arrival_seq: int) -> None:
        """Add one record (whose watermark is already in force) to its windows."""
        windows = self.assigner.assign(timestamp, element)
        if self.merging:
            for window in windows:
                self._process_merging(key, key_state, window, timestamp, element, arrival_seq)
            return
        watermark = self.watermark
        all_windows = key_state.windows
        trigger = self.trigger
        for window in windows:
            cleanup = self.cleanup_time(window)
            if cleanup <= watermark:
                self._late(key, timestamp, arrival_seq, window)
                continue
            state = all_windows.get(window)
            if state is None:
                state = all_windows[window] = WindowState()
            elif state.closed:
                self._late(key, timestamp, arrival_seq, window)
                continue
            self._count(arrival_seq, window, window.max_timestamp)
            self._add(state, timestamp, element, arrival_seq)
            result = trigger.on_element(element, timestamp, window,
                                        self._bind(key, window, state, key_state))
            if result:
                self._apply(result, key, window, state, key_state, (BY_RECORD, arrival_seq))
            if cleanup != MAX_TIMESTAMP:
                self.timers.register_event_time_timer(key, window, cleanup)

    def _process_merging(self, key: str, key_state: KeyState, proto: TimeWindow,
                         timestamp: int, element: Mapping[str, Any] | None,
                         arrival_seq: int) -> None:
        """Flink's ``MergingWindowSet.addWindow`` followed by the usual element handling.

        The new window merges with every existing window it overlaps or touches; lateness is
        then judged on the merged window, so a record late for its own session can still join
        (and bridge) sessions that are within allowed lateness, as in Flink.
        """
        windows = key_state.windows
        actual = proto
        groups = SessionWindows.merge_windows([*windows, proto])
        for cover, members in groups:
            if proto in members:
                members.remove(proto)
                actual = cover
            if len(members) == 1 and members[0] == cover:
                continue  # the new window lies inside an existing one: nothing merges
            self._merge(key, key_state, cover, members)
        cleanup = self.cleanup_time(actual)
        watermark = self.watermark
        if cleanup <= watermark:
            # Only a window that merged with nothing can be late: existing windows are alive.
            self._late(key, timestamp, arrival_seq, actual)
            return
        state = windows.get(actual)
        if state is None:
            state = windows[actual] = WindowState()
        elif state.closed:  # inside a window whose trigger finished; nothing merged
            self._late(key, timestamp, arrival_seq, actual)
            return
        self._count(arrival_seq, actual, actual.max_timestamp)
        self._add(state, timestamp, element, arrival_seq)
        result = self.trigger.on_element(element, timestamp, actual,
                                         self._bind(key, actual, state, key_state))
        if result:
            self._apply(result, key, actual, state, key_state, (BY_RECORD, arrival_seq))
        if cleanup != MAX_TIMESTAMP:
            self.timers.register_event_time_timer(key, actual, cleanup)

    def _merge(self, key: str, key_state: KeyState, cover: TimeWindow,
               members: list[TimeWindow]) -> None:
        """Merge existing windows into ``cover`` (Flink's merge function in WindowOperator).

        The merged window is a new window: its pane numbering starts at 0 (docs/operators.md).
        """
        windows = key_state.windows
        merged_states = [windows.pop(m) for m in members]
        target = WindowState()
        parts = [s.contents for s in merged_states if s.contents]
        if self.buffered:
            buffer = [e for part in parts for e in part]
            buffer.sort(key=lambda e: e[2])  # arrival order
            target.contents = buffer or None
        elif parts:
            acc = parts[0]
            for other in parts[1:]:
                acc = self.aggregate.merge(acc, other)
            target.contents = acc
        if self.process_function is not None:
            merged_ws: dict[str, Any] = {}
            for s in merged_states:
                merged_ws.update(s.window_state or {})
            target.window_state = merged_ws or None
        ctx = self._bind(key, cover, target, key_state)
        ctx.merged = merged_states
        self.trigger.on_merge(cover, ctx)
        ctx.merged = []
        for member, state in zip(members, merged_states, strict=True):
            self.trigger.clear(member, self._bind(key, member, state, key_state))
            cleanup = self.cleanup_time(member)
            if cleanup != MAX_TIMESTAMP:
                self.timers.delete_event_time_timer(key, member, cleanup)
        windows[cover] = target

    # -- Flink's onEventTime / onProcessingTime --------------------------------------------------

    def _apply(self, result: TriggerResult, key: str, window: TimeWindow, state: WindowState,
               key_state: KeyState, fired_by: Firing, *, cleanup: bool = False) -> bool:
        """Carry out a trigger's FIRE/PURGE (the context is bound to this window); returns
        whether a pane was emitted. A trigger that says it is finished after firing closes
        the window: its pane is the last, and the window keeps nothing but the fact."""
        emitted = False
        if result.is_fire:
            finished = self.trigger.is_finished(window, self._ctx)
            # the cleanup timer's own pane is the last one (with allowed lateness 0 the
            # end-of-window timer is the cleanup timer)
            emitted = self._emit(key, window, state, key_state, fired_by,
                                 final=cleanup or finished)
            if finished:
                self.trigger.clear(window, self._bind(key, window, state, key_state))
                state.closed = True
                state.contents = None
                state.trigger_state = None
        if result.is_purge:
            state.contents = None
        return emitted

    def on_event_time(self, key: str, key_state: KeyState, window: TimeWindow,
                      timestamp: int) -> None:
        state = key_state.windows.get(window)
        if state is None:
            return  # the window was merged away or cleaned up; a stale trigger timer
        cleanup = timestamp == self.cleanup_time(window)
        emitted = False
        if not state.closed:
            result = self.trigger.on_event_time(timestamp, window,
                                                self._bind(key, window, state, key_state))
            if result:
                emitted = self._apply(result, key, window, state, key_state,
                                      (BY_WATERMARK, timestamp), cleanup=cleanup)
        if cleanup:
            if state.contents and not emitted:  # the closing pane
                self._emit(key, window, state, key_state, (BY_WATERMARK, timestamp), final=True)
            self._clear_all(key, window, state, key_state)

    def on_processing_time(self, key: str, key_state: KeyState, window: TimeWindow,
                           timestamp: int) -> None:
        state = key_state.windows.get(window)
        if state is None or state.closed:
            return
        result = self.trigger.on_processing_time(timestamp, window,
                                                 self._bind(key, window, state, key_state))
        if result:
            self._apply(result, key, window, state, key_state, (BY_INGEST_TIME, timestamp))


class WindowDriver:
    """Runs a window operator over an arrival-ordered stream of many keys.

    Use :meth:`process` per record (with the watermark in force for it and its ingest time);
    collect output with :meth:`take_output`. For a runtime that keeps state per key,
    :meth:`snapshot_key`/:meth:`restore_key` move one key (state and timers) in and out.
    """

    def __init__(self, operator: WindowOperator) -> None:
        self.operator = operator
        self.timers = operator.timers
        self.states: dict[str, KeyState] = {}
        self.watermark = MIN_WATERMARK
        """The global watermark: the largest in force for any record so far."""
        self.processing_time = MIN_WATERMARK
        """The global ingest clock."""

    def _release(self, key: str, state: KeyState) -> None:
        """Forget a key that has nothing left. (Its clocks go too, harmlessly: the key's next
        record carries a watermark at least as large as anything they held.)"""
        if state.is_empty() and not self.timers.has_timers(key):
            del self.states[key]

    def advance(self, watermark: int, ingest_time: int) -> None:
        """Raise the watermark and ingest clock (they never go back) and fire due timers:
        event-time first, then processing-time; event time is re-checked after each
        processing-time timer so timers registered by callbacks fire in the same pass."""
        if watermark > self.watermark:
            self.watermark = watermark
        if ingest_time > self.processing_time:
            self.processing_time = ingest_time
        timers = self.timers
        watermark = self.watermark
        now = self.processing_time
        if not timers.has_due(watermark, now):
            return
        op = self.operator
        states = self.states
        while True:
            timer = timers.pop_due_event_time(watermark)
            kind = EVENT_TIME
            if timer is None:
                timer = timers.pop_due_processing_time(now)
                if timer is None:
                    return
                kind = PROCESSING_TIME
            timestamp, key, namespace = timer
            state = states.get(key)
            if state is None:
                continue
            window = TimeWindow(*namespace)
            if kind == EVENT_TIME:
                if timestamp > state.watermark:
                    state.watermark = timestamp
                op.watermark, op.processing_time = state.watermark, state.processing_time
                op.on_event_time(key, state, window, timestamp)
            else:
                if timestamp > state.processing_time:
                    state.processing_time = timestamp
                op.watermark, op.processing_time = state.watermark, state.processing_time
                op.on_processing_time(key, state, window, timestamp)
            self._release(key, state)

    def process(self, key: str, event_time: int, element: Mapping[str, Any] | None, *,
                arrival_seq: int, watermark: int, ingest_time: int) -> None:
        """One record: fire what its watermark and ingest time make due, then process it."""
        self.advance(watermark, ingest_time)
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = KeyState()
        # the key's clocks reach the record's watermark and ingest time (never going back)
        if self.watermark > state.watermark:
            state.watermark = self.watermark
        if self.processing_time > state.processing_time:
            state.processing_time = self.processing_time
        op = self.operator
        op.watermark, op.processing_time = state.watermark, state.processing_time
        op.process_element(key, state, event_time, element, arrival_seq)
        self._release(key, state)

    def take_output(self) -> tuple[list[Pane], list[LateRecord]]:
        """The panes and late records emitted since the last call."""
        op = self.operator
        panes, late = op.panes, op.late
        op.panes, op.late = [], []
        return panes, late

    def record_firings(self) -> None:
        """From now on, keep what fired each pane for :meth:`take_firings` (the replay
        command's ``fired_by``)."""
        if self.operator.firings is None:
            self.operator.firings = []

    def take_firings(self) -> list[Firing]:
        """What fired each pane since the last call, in step with :meth:`take_output`'s panes
        (call both at the same points)."""
        op = self.operator
        taken = op.firings or []
        if op.firings is not None:
            op.firings = []
        return taken

    def record_assignments(self) -> None:
        """From now on, keep every (record, window) decision for :meth:`take_assignments`."""
        if self.operator.assignments is None:
            self.operator.assignments = []

    def take_assignments(self) -> list[Assignment]:
        """The (record, window) decisions since the last call (after
        :meth:`record_assignments`), in the order they were made."""
        op = self.operator
        taken = op.assignments or []
        if op.assignments is not None:
            op.assignments = []
        return taken

    # -- per-key state for runtimes that keep state per key ---------------------------------------

    def pending_timers(self, key: str) -> list[tuple[int, int, TimeWindow]]:
        """The key's pending timers as ``(kind, timestamp, window)`` in firing order."""
        flat = self.timers.export_key(key)
        return [(flat[i], flat[i + 1], TimeWindow(flat[i + 2], flat[i + 3]))
                for i in range(0, len(flat), 4)]

    def snapshot_key(self, key: str, *, evict: bool = False) -> dict[str, Any] | None:
        """The key's state and timers as a JSON-able dict (``None`` if the key has none).

        ``evict`` also drops the key from this driver, as a per-key runtime does when it is
        done with a key for the batch.
        """
        state = self.states.get(key)
        timers = self.timers.export_key(key, remove=evict)
        if state is None and not timers:
            return None
        snap = (state or KeyState()).snapshot(timers, deep=not evict)
        if evict:
            self.states.pop(key, None)
        return snap

    def restore_key(self, key: str, snap: Mapping[str, Any] | None) -> None:
        """Load a key's state and timers saved by :meth:`snapshot_key`."""
        if snap is None:
            return
        state, timers = KeyState.restore(snap, self.operator.buffered)
        self.timers.import_key(key, timers)
        if not state.is_empty() or timers:
            self.states[key] = state

    def snapshot(self) -> dict[str, Any]:
        """Everything: watermark, ingest clock, metrics and every key (JSON-able)."""
        op = self.operator
        keys = sorted(set(self.states) | {t[2] for t in self.timers.timers()})
        return {"v": 1, "watermark": self.watermark, "processing_time": self.processing_time,
                "metrics": dict(op.metrics),
                "keys": {k: self.snapshot_key(k) for k in keys}}

    def restore(self, snap: Mapping[str, Any]) -> None:
        op = self.operator
        self.watermark = snap["watermark"]
        self.processing_time = snap["processing_time"]
        op.metrics.update(snap["metrics"])
        for key, key_snap in snap["keys"].items():
            self.restore_key(key, key_snap)
