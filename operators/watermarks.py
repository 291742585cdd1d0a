"""Watermarks computed from the arrival log, never from the wall clock.

A watermark is a pure function of the arrival log: per source partition a strategy (bounded
out-of-orderness, monotonous, punctuated) turns the events seen so far into a watermark, and the
combined watermark is the minimum over the partitions that are not idle. It only moves at
*ticks* of the ingest clock, so re-reading the same log always gives the same watermarks,
whatever the engine, batch size or machine. See docs/semantics.md, "Watermarks".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from operators.pipeline import WatermarkSpec
from operators.time import MIN_WATERMARK

__all__ = [
    "ArrivalWatermarks",
    "BoundedOutOfOrderness",
    "CodedPartitions",
    "PartitionStrategy",
    "Punctuated",
    "assign_watermarks",
    "initial_snapshot",
    "watermark_column",
]


class PartitionStrategy(Protocol):
    """The watermark of one source partition, from the events it has delivered."""

    def on_event(self, event_time_ms: int, event: Mapping[str, Any] | None) -> None: ...

    def current(self) -> int: ...

    def snapshot(self) -> int: ...


class BoundedOutOfOrderness:
    """Flink's ``BoundedOutOfOrdernessWatermarks``: ``max_event_time - delay - 1``.

    Starting ``max_seen`` at ``MIN_WATERMARK + delay + 1`` (as Flink does) keeps the first
    watermark at ``MIN_WATERMARK`` without a special case.
    """

    __slots__ = ("delay_ms", "max_seen")

    def __init__(self, delay_ms: int, max_seen: int | None = None) -> None:
        if delay_ms < 0:
            raise ValueError(f"max_out_of_orderness must be >= 0, got {delay_ms}")
        self.delay_ms = delay_ms
        self.max_seen = MIN_WATERMARK + delay_ms + 1 if max_seen is None else max_seen

    def on_event(self, event_time_ms: int, event: Mapping[str, Any] | None) -> None:
        if event_time_ms > self.max_seen:
            self.max_seen = event_time_ms

    def current(self) -> int:
        return self.max_seen - self.delay_ms - 1

    def snapshot(self) -> int:
        return self.max_seen


class Punctuated:
    """A watermark raised by marker events (Flink's punctuated generator). The marker is the
    event's ``field``: ``true`` says no event at or before the marker's own event time is still
    to come; an integer is the watermark itself (a source that knows its progress, such as a
    heartbeat carrying "complete up to T"). Anything else is not a marker. Markers never lower
    the watermark."""

    __slots__ = ("field", "watermark")

    def __init__(self, field: str, watermark: int = MIN_WATERMARK) -> None:
        self.field = field
        self.watermark = watermark

    def on_event(self, event_time_ms: int, event: Mapping[str, Any] | None) -> None:
        if event is None:
            return
        marker = event.get(self.field)
        if marker is True:
            proposed = event_time_ms
        elif isinstance(marker, int) and not isinstance(marker, bool):
            proposed = marker
        else:
            return
        if proposed > self.watermark:
            self.watermark = proposed

    def current(self) -> int:
        return self.watermark

    def snapshot(self) -> int:
        return self.watermark


def _new_strategy(spec: WatermarkSpec, saved: int | None = None) -> PartitionStrategy:
    if spec.strategy == "bounded_out_of_orderness":
        return BoundedOutOfOrderness(spec.max_out_of_orderness_ms, saved)
    if spec.strategy == "monotonous":
        return BoundedOutOfOrderness(0, saved)
    if spec.strategy == "punctuated":
        return Punctuated(spec.punctuation_field or "", MIN_WATERMARK if saved is None else saved)
    raise ValueError(f"unknown watermark strategy {spec.strategy!r}")


def initial_snapshot(spec: WatermarkSpec) -> int:
    """The saved state of a partition that has seen no record: how a source partition known
    before it delivers anything enters the watermarks (at its minimum, holding the combined
    watermark back until it goes idle, as in Flink)."""
    return _new_strategy(spec).snapshot()


@dataclass(slots=True)
class _Partition:
    strategy: PartitionStrategy
    last_ingest_ms: int


class ArrivalWatermarks:
    """The combined watermark of all source partitions, advanced at ingest-clock ticks.

    Call :meth:`watermark_for` for a record *before* :meth:`observe` of the same record: the
    watermark a record carries is computed from the records that arrived before it.
    """

    def __init__(self, spec: WatermarkSpec) -> None:
        self.spec = spec
        self._partitions: dict[str, _Partition] = {}
        self._combined = MIN_WATERMARK
        self._last_tick: int | None = None

    @property
    def current(self) -> int:
        """The combined watermark as of the last tick."""
        return self._combined

    def _is_active(self, partition: _Partition, at_ms: int) -> bool:
        timeout = self.spec.idle_timeout_ms
        return timeout is None or at_ms - partition.last_ingest_ms < timeout

    def _evaluate(self, at_ms: int) -> None:
        """Recompute the combined watermark as seen at ingest instant ``at_ms``."""
        active = [p.strategy.current() for p in self._partitions.values()
                  if self._is_active(p, at_ms)]
        if active:  # all idle: hold
            self._combined = max(self._combined, min(active))

    def _last_tick_with_activity(self, after: int | None, up_to: int, interval: int) -> int:
        """The latest tick in ``(after, up_to]`` at which some partition was still active.

        Between two records nothing but idleness changes, and idleness only grows, so the
        minimum over active partitions can only rise until every partition is idle; the last
        tick before that is the one that decides the watermark.
        """
        timeout = self.spec.idle_timeout_ms
        if timeout is None or not self._partitions:
            return up_to
        active_until = max(p.last_ingest_ms for p in self._partitions.values()) + timeout
        if up_to < active_until:
            return up_to
        last_active_tick = ((active_until - 1) // interval) * interval
        if after is not None and last_active_tick <= after:
            return up_to  # nothing active at any new tick: evaluating holds the watermark
        return last_active_tick

    def watermark_for(self, partition: str, ingest_time_ms: int) -> int:
        """The watermark in force for a record of ``partition`` arriving at ``ingest_time_ms``."""
        interval = self.spec.tick_interval_ms
        if interval is None:
            self._evaluate(ingest_time_ms)
            return self._combined
        tick = (ingest_time_ms // interval) * interval
        if self._last_tick is None or tick > self._last_tick:
            self._evaluate(self._last_tick_with_activity(self._last_tick, tick, interval))
            self._last_tick = tick
        return self._combined

    def observe(self, partition: str, event_time_ms: int, ingest_time_ms: int,
                event: Mapping[str, Any] | None = None) -> None:
        """Account for a record that has arrived (after its watermark was taken)."""
        state = self._partitions.get(partition)
        if state is None:
            state = _Partition(_new_strategy(self.spec), ingest_time_ms)
            self._partitions[partition] = state
        state.strategy.on_event(event_time_ms, event)
        state.last_ingest_ms = ingest_time_ms

    def partitions(self, at_ms: int) -> dict[str, tuple[int, bool]]:
        """Each source partition's own watermark and whether it is idle at ingest instant
        ``at_ms``: what a person watching a stream wants to see (the one holding it back)."""
        return {name: (p.strategy.current(), not self._is_active(p, at_ms))
                for name, p in sorted(self._partitions.items())}

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able copy of the state, stored with each ingest batch."""
        return {
            "combined": self._combined,
            "last_tick": self._last_tick,
            "partitions": {
                name: [p.strategy.snapshot(), p.last_ingest_ms]
                for name, p in sorted(self._partitions.items())
            },
        }

    @classmethod
    def restore(cls, spec: WatermarkSpec, snapshot: Mapping[str, Any] | None) -> ArrivalWatermarks:
        watermarks = cls(spec)
        if not snapshot:
            return watermarks
        watermarks._combined = int(snapshot["combined"])
        last_tick = snapshot.get("last_tick")
        watermarks._last_tick = None if last_tick is None else int(last_tick)
        for name, (saved, last_ingest) in snapshot["partitions"].items():
            watermarks._partitions[name] = _Partition(_new_strategy(spec, int(saved)),
                                                      int(last_ingest))
        return watermarks


def assign_watermarks(
    spec: WatermarkSpec,
    records: Iterable[tuple[str, int, int, Mapping[str, Any] | None]],
    start: ArrivalWatermarks | None = None,
) -> list[int]:
    """The watermark in force for each ``(partition, event_time_ms, ingest_time_ms, event)``
    record, in arrival order."""
    watermarks = start or ArrivalWatermarks(spec)
    result = []
    for partition, event_time_ms, ingest_time_ms, event in records:
        result.append(watermarks.watermark_for(partition, ingest_time_ms))
        watermarks.observe(partition, event_time_ms, ingest_time_ms, event)
    return result


@dataclass(frozen=True, eq=False)
class CodedPartitions:
    """Each record's partition as an index into ``names``: how ingest holds them for a
    batch of hundreds of thousands of records, where a Python string per record cost more
    than the watermarks computed from them."""

    names: Sequence[str]
    codes: np.ndarray


def watermark_column(spec: WatermarkSpec, snapshot: Mapping[str, Any] | None,
                     partitions: Sequence[str] | CodedPartitions, event_times: np.ndarray,
                     ingest_times: np.ndarray) -> tuple[np.ndarray, dict[str, Any]] | None:
    """:func:`assign_watermarks` for many records at once, and the state after them (what
    :meth:`ArrivalWatermarks.snapshot` gives), computed with numpy instead of a walk: for
    bounded out-of-orderness and monotonous strategies ticking on every record. ``None`` for
    the others (punctuated, interval ticks), which keep the walk.

    A record's watermark is ``max(previous, min over the partitions active at its ingest time
    of (max event time seen before it - delay - 1))``, held when all are idle: per partition a
    running maximum and a forward fill, shifted by one record, then a minimum across
    partitions and a running maximum (:mod:`tests.test_watermarks` holds it to the walk)."""
    if spec.strategy not in ("bounded_out_of_orderness", "monotonous") or \
            spec.tick_interval_ms is not None:
        return None
    delay = spec.max_out_of_orderness_ms if spec.strategy == "bounded_out_of_orderness" else 0
    timeout = spec.idle_timeout_ms
    events = np.asarray(event_times, dtype=np.int64)
    ingests = np.asarray(ingest_times, dtype=np.int64)
    count = len(events)
    restored = ArrivalWatermarks.restore(spec, snapshot)
    combined = restored._combined
    given = partitions.names if isinstance(partitions, CodedPartitions) else partitions
    names = sorted(set(given) | set(restored._partitions))
    codes = {name: index for index, name in enumerate(names)}
    if isinstance(partitions, CodedPartitions):
        if len(partitions.codes) != count:
            raise ValueError(f"{len(partitions.codes)} partition codes for {count} records")
        recoded = np.array([codes[name] for name in partitions.names], dtype=np.int64)
        partition_codes = recoded[np.asarray(partitions.codes, dtype=np.int64)]
    else:
        partition_codes = np.fromiter(map(codes.__getitem__, partitions), dtype=np.int64,
                                      count=count)
    never = np.iinfo(np.int64).max
    end_partitions: dict[str, list[int]] = {}
    lowest = _lowest_over_partitions(restored, codes, partition_codes, events, ingests, delay,
                                     timeout, end_partitions)
    proposals = np.where(lowest == never, np.iinfo(np.int64).min, lowest)
    watermarks = np.maximum.accumulate(np.maximum(proposals, combined)) if count else \
        np.empty(0, dtype=np.int64)
    if count:
        combined = max(combined, int(watermarks[-1]))
    state = {"combined": combined, "last_tick": restored._last_tick,
             "partitions": {name: end_partitions[name] for name in sorted(end_partitions)}}
    return watermarks, state


def _may_idle(ingests: np.ndarray, mine: np.ndarray, start_ingest: int | None,
              timeout: int) -> bool:
    """Whether a partition can be idle anywhere in a batch whose ingest times never fall: its
    longest wait is the largest step between its own records' ingest times, or from the
    batch's start to its first (``start_ingest``: its last before the batch, ``None`` when it
    is not present before its first record), or from its last to the batch's end. Ingest's
    batches span seconds and idleness takes a minute or more, so the few passes that find
    where a partition is idle are usually spared."""
    own = ingests[mine]
    if int(ingests[-1]) - int(own[-1]) >= timeout:
        return True
    if start_ingest is not None and int(own[0]) - start_ingest >= timeout:
        return True
    return len(own) > 1 and int(np.max(np.diff(own))) >= timeout


def _lowest_over_partitions(restored: ArrivalWatermarks, codes: dict[str, int],
                            partition_codes: np.ndarray, events: np.ndarray,
                            ingests: np.ndarray, delay: int, timeout: int | None,
                            end_partitions: dict[str, list[int]]) -> np.ndarray:
    """Per record, the least of the active partitions' watermarks before it (``int64`` max
    where none is active); ``end_partitions`` gets each partition's state after the batch.

    A partition's running maximum and last record are spread over the batch by scattering
    them one position past its own records and carrying them forward (a running maximum),
    a few passes over the batch a partition (there were fifteen: the ingest thread's
    watermarks took 15 % of it at 800,000 events/s, benchmarks/history.md)."""
    count = len(events)
    never = np.iinfo(np.int64).max
    lowest = np.full(count, never, dtype=np.int64)
    rising = count < 2 or bool(np.all(ingests[1:] >= ingests[:-1]))
    for name, code in codes.items():
        saved = restored._partitions.get(name)
        start_seen = saved.strategy.snapshot() if saved is not None else None
        saved_ingest = saved.last_ingest_ms if saved is not None else None
        start_ingest = saved_ingest if saved_ingest is not None else 0
        floor = MIN_WATERMARK + delay + 1 if start_seen is None else start_seen
        mine = np.flatnonzero(partition_codes == code)  # its records' positions, rising
        if not len(mine):
            if saved is not None:  # as it was at the batch's start, all through the batch
                current = np.full(count, floor - delay - 1, dtype=np.int64)
                if timeout is not None:
                    current[ingests - start_ingest >= timeout] = never
                np.minimum(lowest, current, out=lowest)
                end_partitions[name] = [start_seen, saved_ingest]
            continue
        seen = np.maximum.accumulate(events[mine])
        after = mine + 1  # the first position that has seen each record
        inside = after < count
        current = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
        current[after[inside]] = seen[inside]
        np.maximum.accumulate(current, out=current)  # the most seen before each position
        np.maximum(current, floor, out=current)  # the floor where nothing was seen yet
        current -= delay + 1
        first = int(mine[0])
        if timeout is not None and (not rising or _may_idle(
                ingests, mine, None if start_seen is None else start_ingest, timeout)):
            last = np.full(count, -1, dtype=np.int64)
            last[after[inside]] = mine[inside]
            np.maximum.accumulate(last, out=last)  # its last record before each position
            last_ingest = ingests[np.maximum(last, 0)]
            last_ingest[:first + 1] = start_ingest
            current[ingests - last_ingest >= timeout] = never  # idle
        if start_seen is None:
            current[:first + 1] = never  # not present before its first record
        np.minimum(lowest, current, out=lowest)
        end_partitions[name] = [max(int(seen[-1]), floor), int(ingests[mine[-1]])]
    return lowest
