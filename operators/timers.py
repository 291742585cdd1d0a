"""A keyed timer service: event-time and processing-time timers, as in Flink.

Why it looks like this:

* One timer per ``(key, namespace, timestamp)`` (contract section 3): registering twice keeps
  one, deleting an absent timer is a no-op. A window operator uses the window ``(start, end)``
  as the namespace; other operators use :data:`VOID_NAMESPACE`.
* Timers fire in a total, documented order (docs/semantics.md, "Timers"): ascending
  ``(timestamp, key, namespace)`` within a kind, event time before processing time. A heap
  ordered by exactly that tuple gives the order for free, so a timer registered by a callback
  that is already due simply pops next in the same pass.
* Millions of timers must stay cheap: like Flink's ``HeapPriorityQueueSet`` there is a heap for
  order and a hash index for membership (here a heap of distinct timestamps, each with a small
  heap of its timers, since window timers cluster on window ends). Many registrations between
  two firings (a restore, a bulk load, a batch of records) are instead sorted at once with
  numpy into a sorted run that firing walks through: per timer that is a fraction of a heap
  push and pop in Python. Deletes are lazy (the entry becomes stale and is skipped when
  popped); everything is rebuilt when stale entries outnumber live ones, so memory stays
  bounded. The membership index is kept per key, which also gives
  the per-key export/import a Spark runtime needs to keep one key's timers in that key's state.
* Serialisation is plain: timers become flat lists of ints, JSON-able, per key (what a
  per-key runtime keeps in that key's state) or for the whole service.
* A caller that registers and fires timers by the thousand (a micro-batch's worth) can use the
  batch path instead: :meth:`TimerService.register_event_time_timers` takes columns and
  :meth:`TimerService.pop_due_event_time_timers` returns every due timer as columns, in the
  same order. Per timer, any Python call costs more than the whole batch path does (see
  benchmarks/history.md, "The operator library alone"), so those timers stay numpy columns,
  sorted and deduplicated at once, until a per-timer call needs them as entries.

Timestamps and namespace bounds are Python ints; anything in Flink's ``long`` range serialises.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DueTimers",
    "EVENT_TIME",
    "Namespace",
    "PROCESSING_TIME",
    "TimerService",
    "VOID_NAMESPACE",
]


EVENT_TIME = 0
PROCESSING_TIME = 1

Namespace = tuple[int, int]
"""A timer namespace: a window's ``(start, end)``; compared as that tuple."""

VOID_NAMESPACE: Namespace = (0, 0)
"""The namespace of operators that are not windowed (Flink's ``VoidNamespace``)."""

# An entry: (timestamp, key, namespace_start, namespace_end). Flat tuples compare in the
# documented order and hash cheaply; the same tuple object lives in a heap and in the index.
_Entry = tuple[int, str, int, int]


_BULK = 512
"""Registrations piling up between two firings are sorted as one batch (a *run*) from this
many on; fewer go one by one into the timestamp heap."""

_INT64 = (-(2**63), 2**63 - 1)


def _sorted_run(entries: list[_Entry]) -> list[_Entry] | None:
    """``sorted(entries)`` by a numpy argsort of the timestamps, ties (rare) sorted as tuples
    in place; ``None`` when many timers share timestamps (window ends of many keys) or an int
    does not fit in 64 bits: the per-timestamp buckets order those more cheaply."""
    n = len(entries)
    sample = entries[:256]
    if len({e[0] for e in sample}) < len(sample) - len(sample) // 16:
        return None  # clustered timestamps: not worth sorting to find out
    import numpy as np

    try:
        stamps = np.fromiter((e[0] for e in entries), np.int64, n)
    except OverflowError:
        return None
    order = np.argsort(stamps, kind="stable")
    ordered = stamps[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1]).tolist() if n > 1 else []
    if len(tied) > n // 16:
        return None
    result = list(map(entries.__getitem__, order.tolist()))
    first = 0
    while first < len(tied):  # each group of equal timestamps, by (key, namespace)
        last = first
        while last + 1 < len(tied) and tied[last + 1] == tied[last] + 1:
            last += 1
        lo, hi = tied[first], tied[last] + 2
        result[lo:hi] = sorted(result[lo:hi])
        first = last + 1
    return result


@dataclass(frozen=True, slots=True)
class DueTimers:
    """Timers as columns, in firing order: ascending ``(timestamp, key, start, end)``."""

    timestamps: np.ndarray
    keys: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.timestamps)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.timestamps, self.keys, self.starts, self.ends

    def take(self, rows: np.ndarray | slice) -> DueTimers:
        """The same rows of every column (an index, a mask or a slice)."""
        return DueTimers(*(column[rows] for column in self.columns()))

    def entries(self) -> list[_Entry]:
        """As the per-timer path's entries (Python ints and strings)."""
        return list(zip(*(column.tolist() for column in self.columns()), strict=True))


def _int64_column(values: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    """Integers as int64, exactly: numpy would truncate floats and wrap big unsigned values
    silently, so both are refused, as the per-timer path's Python ints never lose anything."""
    column = np.asarray(values)
    if column.size == 0:
        return column.astype(np.int64)
    if column.dtype.kind == "O" and all(isinstance(v, int) for v in column.tolist()):
        raise ValueError(f"timer {name} must fit in 64 bits (Flink's long)")
    if column.dtype.kind not in "iu":
        raise TypeError(f"timer {name} must be integers, got {column.dtype}")
    if column.dtype.kind == "u" and column.max() > np.iinfo(np.int64).max:
        raise ValueError(f"timer {name} must fit in 64 bits (Flink's long)")
    return column.astype(np.int64, copy=False)


def _key_column(keys: Sequence[str] | np.ndarray) -> np.ndarray:
    """Keys as a numpy string column, which sorts in C in the order Python compares ``str``
    (by code point); as Python objects when numpy's strings cannot hold them exactly (they drop
    trailing NULs): such keys take the per-timer path."""
    if isinstance(keys, np.ndarray) and keys.dtype.kind == "U":
        return keys
    values = keys.tolist() if isinstance(keys, np.ndarray) else list(keys)
    try:
        joined = "".join(values)  # checks every key is a str, in C
    except TypeError as error:
        raise TypeError(f"timer keys must be strings ({error})") from error
    if "\0" in joined and any(key.endswith("\0") for key in values):
        return np.array(values, dtype=object)
    return np.array(values, dtype=str)


def _ordered(columns: DueTimers) -> DueTimers:
    """Sorted by ``(timestamp, key, start, end)``, duplicates dropped."""
    ordered = columns.take(np.lexsort((columns.ends, columns.starts, columns.keys,
                                       columns.timestamps)))
    if len(ordered) > 1:
        repeated = np.ones(len(ordered), dtype=bool)
        for column in ordered.columns():
            repeated[1:] &= column[1:] == column[:-1]
        repeated[0] = False
        if repeated.any():
            ordered = ordered.take(~repeated)
    return ordered


def _concatenate(parts: list[DueTimers]) -> DueTimers:
    return DueTimers(*(np.concatenate(columns) for columns in
                       zip(*(part.columns() for part in parts), strict=True)))


class _TimerQueue:
    """One kind of timers: a sorted run for bulk registrations, a heap of distinct timestamps
    with per timestamp a heap of entries for the others, and a per-key set index for
    membership.

    Timers of windowed operators cluster on few timestamps (every key's window ends at the
    same instant), and even when they do not, ordering plain ints is much cheaper than ordering
    tuples; ties are then ordered by ``(key, namespace)`` within the timestamp's own heap.
    Registrations are first *staged*; at the next firing (or look at the head) they are
    settled: a large batch is sorted at once into the run (numpy, see :func:`_sort_entries`),
    merged with what is left of the previous run; a few go into the heaps one by one. Firing
    takes the smaller head of the run and the heaps, so the order is the same either way.
    Invariant: a timestamp is in ``_times`` exactly when it has a bucket (maybe empty or
    holding only deleted entries, which are skipped lazily); ``_run[_pos:]`` is sorted.
    """

    __slots__ = ("_times", "_buckets", "_by_key", "_size", "_stored", "_staged", "_run",
                 "_pos", "_column_parts", "_columns_ordered")

    def __init__(self) -> None:
        self._times: list[int] = []
        self._buckets: dict[int, list[_Entry]] = {}
        self._by_key: dict[str, set[_Entry]] = {}
        self._size = 0
        self._stored = 0  # entries staged, in the run or in buckets, live or deleted
        self._staged: list[_Entry] = []
        self._run: list[_Entry] = []
        self._pos = 0
        # the batch path: registrations kept as columns (sorted and deduplicated into one part
        # when read), only while nothing else is stored; any per-timer call turns them into
        # entries first (one list's truth is all the per-timer path pays for it)
        self._column_parts: list[DueTimers] = []
        self._columns_ordered = False

    def __len__(self) -> int:
        if self._column_parts:
            return len(self._settled_columns())
        return self._size

    # -- the batch path -----------------------------------------------------------------------

    def add_columns(self, columns: DueTimers) -> None:
        """Register many timers; kept as columns while the queue holds nothing else."""
        if not len(columns):
            return
        if self._size or columns.keys.dtype.kind != "U":
            self._to_entries()
            for entry in columns.entries():
                self.add(entry[1], entry[2], entry[3], entry[0])
            return
        self._column_parts.append(columns)
        self._columns_ordered = False

    def _settled_columns(self) -> DueTimers:
        parts = self._column_parts
        if not self._columns_ordered:
            parts[:] = [_ordered(parts[0] if len(parts) == 1 else _concatenate(parts))]
            self._columns_ordered = True
        return parts[0]

    def pop_due_columns(self, limit: int) -> DueTimers:
        """Every timer with ``timestamp <= limit``, removed, in firing order."""
        if not self._column_parts:
            due = []
            while (entry := self.pop_due(limit)) is not None:
                due.append(entry)
            if not due:
                return _EMPTY
            stamps, keys, starts, ends = zip(*due, strict=True)
            return DueTimers(np.array(stamps, dtype=np.int64), np.array(keys, dtype=object),
                             np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
        columns = self._settled_columns()
        cut = int(np.searchsorted(columns.timestamps, limit, side="right"))
        if cut == len(columns):
            self._column_parts = []
            return columns
        self._column_parts = [columns.take(slice(cut, None))]
        return columns.take(slice(None, cut))

    def _to_entries(self) -> None:
        """The columns become entries, for the per-timer path (a per-timer call, or a batch
        registration into a queue that holds entries)."""
        if not self._column_parts:
            return
        entries = self._settled_columns().entries()
        self._column_parts = []
        for entry in entries:
            self._by_key.setdefault(entry[1], set()).add(entry)
        self._size += len(entries)
        self._stored += len(entries)
        self._staged.extend(entries)

    # -- the per-timer path ---------------------------------------------------------------------

    def add(self, key: str, start: int, end: int, timestamp: int) -> bool:
        if self._column_parts:
            self._to_entries()
        entry = (timestamp, key, start, end)
        members = self._by_key.get(key)
        if members is None:
            members = self._by_key[key] = set()
        elif entry in members:
            return False
        members.add(entry)
        self._staged.append(entry)
        self._size += 1
        self._stored += 1
        return True

    def remove(self, key: str, start: int, end: int, timestamp: int) -> bool:
        if self._column_parts:
            self._to_entries()
        members = self._by_key.get(key)
        if not members:
            return False
        entry = (timestamp, key, start, end)
        if entry not in members:
            return False
        members.remove(entry)
        if not members:
            del self._by_key[key]
        self._size -= 1
        # Lazy delete: the stored copy is skipped when popped. Rebuild when mostly stale.
        if self._stored > 1024 and self._stored > 2 * self._size:
            self._rebuild()
        return True

    def contains(self, key: str, start: int, end: int, timestamp: int) -> bool:
        if self._column_parts:
            self._to_entries()
        members = self._by_key.get(key)
        return members is not None and (timestamp, key, start, end) in members

    def _settle(self) -> None:
        """Order the staged registrations (see the class docs)."""
        staged = self._staged
        self._staged = []
        rest = len(self._run) - self._pos
        if len(staged) >= _BULK and 4 * len(staged) >= rest:
            run = _sorted_run(staged + self._run[self._pos:] if rest else staged)
            if run is not None:
                self._run = run
                self._pos = 0
                return
        self._to_buckets(staged)

    def _to_buckets(self, staged: list[_Entry]) -> None:
        buckets = self._buckets
        times = self._times
        for entry in staged:
            bucket = buckets.get(entry[0])
            if bucket is None:
                buckets[entry[0]] = [entry]
                heapq.heappush(times, entry[0])
            else:
                heapq.heappush(bucket, entry)

    def _rebuild(self) -> None:
        """Everything live afresh (one sorted run, or the buckets); stale copies go."""
        live = [entry for members in self._by_key.values() for entry in members]
        self._run = []
        self._pos = 0
        self._staged = []
        self._buckets = {}
        self._times = []
        self._stored = self._size
        run = _sorted_run(live) if len(live) >= _BULK else None
        if run is not None:
            self._run = run
            return
        buckets: dict[int, list[_Entry]] = {}
        for entry in live:
            bucket = buckets.get(entry[0])
            if bucket is None:
                buckets[entry[0]] = [entry]
            else:
                bucket.append(entry)
        for bucket in buckets.values():
            heapq.heapify(bucket)
        self._buckets = buckets
        self._times = list(buckets)
        heapq.heapify(self._times)

    def _head(self, limit: int | None) -> _Entry | None:
        """The smallest live timer; with a ``limit``, removed from the queue and returned only
        if its timestamp is at most ``limit``. Deleted entries on the way are dropped."""
        if self._column_parts:
            self._to_entries()
        if self._staged:
            self._settle()
        by_key = self._by_key
        run = self._run
        pos = self._pos
        end = len(run)
        while pos < end:  # skip deleted entries at the head of the run
            entry = run[pos]
            members = by_key.get(entry[1])
            if members is not None and entry in members:
                break
            pos += 1
            self._stored -= 1
        if pos == end and end:
            self._run = run = []
            pos = end = 0
        self._pos = pos
        times = self._times
        buckets = self._buckets
        while times:  # the heaps' smallest live entry
            bucket = buckets[times[0]]
            while bucket:
                entry = bucket[0]
                members = by_key.get(entry[1])
                if members is not None and entry in members:
                    break
                heapq.heappop(bucket)
                self._stored -= 1
            if bucket:
                break
            del buckets[heapq.heappop(times)]
        from_run = not times or (pos < end and run[pos] < buckets[times[0]][0])
        if from_run and pos == end:
            return None
        entry = run[pos] if from_run else buckets[times[0]][0]
        if limit is None:
            return entry
        if entry[0] > limit:
            return None
        if from_run:
            self._pos = pos + 1
        else:
            heapq.heappop(buckets[times[0]])
        self._stored -= 1
        members = by_key[entry[1]]
        members.remove(entry)
        if not members:
            del by_key[entry[1]]
        self._size -= 1
        return entry

    def pop_due(self, limit: int) -> _Entry | None:
        """Remove and return the smallest live timer with ``timestamp <= limit``."""
        if self._column_parts:
            self._to_entries()
        if self._staged:
            self._settle()
        by_key = self._by_key
        if self._pos < len(self._run):
            if self._times:
                return self._head(limit)
            run = self._run  # only a sorted run (a bulk registration being fired)
            pos = self._pos
            while pos < len(run):
                entry = run[pos]
                if entry[0] > limit:
                    self._pos = pos
                    return None
                pos += 1
                self._stored -= 1
                members = by_key.get(entry[1])
                if members is not None and entry in members:
                    self._pos = pos
                    members.remove(entry)
                    if not members:
                        del by_key[entry[1]]
                    self._size -= 1
                    return entry
            self._run = []
            self._pos = 0
            return None
        times = self._times  # only the timestamp heap
        buckets = self._buckets
        while times and times[0] <= limit:
            timestamp = times[0]
            bucket = buckets[timestamp]
            while bucket:
                entry = heapq.heappop(bucket)
                self._stored -= 1
                members = by_key.get(entry[1])
                if members is not None and entry in members:
                    members.remove(entry)
                    if not members:
                        del by_key[entry[1]]
                    self._size -= 1
                    return entry
            heapq.heappop(times)
            del buckets[timestamp]
        return None

    def peek(self) -> _Entry | None:
        """The smallest live timer, dropping deleted entries on the way."""
        return self._head(None)

    def first_time(self) -> int | None:
        """A cheap lower bound of the smallest timestamp (maybe of a deleted timer)."""
        if self._column_parts:
            self._to_entries()
        if self._staged:
            self._settle()
        first = self._times[0] if self._times else None
        if self._pos < len(self._run):
            head = self._run[self._pos][0]
            if first is None or head < first:
                first = head
        return first

    def entries(self) -> list[_Entry]:
        if self._column_parts:
            self._to_entries()
        return sorted(entry for members in self._by_key.values() for entry in members)

    def key_entries(self, key: str) -> list[_Entry]:
        if self._column_parts:
            self._to_entries()
        return sorted(self._by_key.get(key, ()))

    def remove_key(self, key: str) -> None:
        if self._column_parts:
            self._to_entries()
        members = self._by_key.pop(key, None)
        if members:
            self._size -= len(members)
            if self._stored > 1024 and self._stored > 2 * self._size:
                self._rebuild()

    def has_key(self, key: str) -> bool:
        if self._column_parts:
            self._to_entries()
        return key in self._by_key

    def load(self, entries: list[_Entry]) -> None:
        """Bulk-load entries into an empty queue (restore)."""
        for entry in entries:
            self._by_key.setdefault(entry[1], set()).add(entry)
        self._size = sum(len(m) for m in self._by_key.values())
        self._rebuild()


_EMPTY = DueTimers(np.empty(0, dtype=np.int64), np.empty(0, dtype=str),
                   np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))


class TimerService:
    """Event-time and processing-time timers for many keys.

    The service only stores and orders timers; the caller decides what a firing means. The
    usual loop (what :class:`operators.window_operator.WindowDriver` does before each record)::

        while True:
            timer = service.pop_due_event_time(watermark)
            if timer is None:
                timer = service.pop_due_processing_time(ingest_time)
                if timer is None:
                    break
            ... run the callback, which may register or delete timers ...

    Checking event time again after every processing-time timer keeps "event time first" true
    even for event-time timers registered by a processing-time callback.
    """

    __slots__ = ("_event", "_processing")

    def __init__(self) -> None:
        self._event = _TimerQueue()
        self._processing = _TimerQueue()

    def __len__(self) -> int:
        return len(self._event) + len(self._processing)

    # -- registration -------------------------------------------------------------------------

    def register_event_time_timer(self, key: str, namespace: Namespace, timestamp: int) -> None:
        """Register an event-time timer; a second registration of the same timer is a no-op."""
        self._event.add(key, namespace[0], namespace[1], timestamp)

    def delete_event_time_timer(self, key: str, namespace: Namespace, timestamp: int) -> None:
        """Delete an event-time timer; deleting one that does not exist is a no-op."""
        self._event.remove(key, namespace[0], namespace[1], timestamp)

    def register_processing_time_timer(self, key: str, namespace: Namespace,
                                       timestamp: int) -> None:
        """Register a processing-time (ingest clock) timer; idempotent."""
        self._processing.add(key, namespace[0], namespace[1], timestamp)

    def delete_processing_time_timer(self, key: str, namespace: Namespace,
                                     timestamp: int) -> None:
        """Delete a processing-time timer; a no-op when absent."""
        self._processing.remove(key, namespace[0], namespace[1], timestamp)

    def has_timers(self, key: str) -> bool:
        """Does ``key`` have any pending timer (of either kind)?"""
        return self._event.has_key(key) or self._processing.has_key(key)

    def has_event_time_timer(self, key: str, namespace: Namespace, timestamp: int) -> bool:
        return self._event.contains(key, namespace[0], namespace[1], timestamp)

    def has_processing_time_timer(self, key: str, namespace: Namespace, timestamp: int) -> bool:
        return self._processing.contains(key, namespace[0], namespace[1], timestamp)

    def register_event_time_timers(self, keys: Sequence[str] | np.ndarray,
                                   starts: Sequence[int] | np.ndarray,
                                   ends: Sequence[int] | np.ndarray,
                                   timestamps: Sequence[int] | np.ndarray) -> None:
        """Register many event-time timers at once: timer ``i`` is ``(keys[i], (starts[i],
        ends[i]), timestamps[i])``. The same as registering them one by one (duplicates keep
        one), at a fraction of the cost when a caller has them as columns."""
        self._event.add_columns(_columns(keys, starts, ends, timestamps))

    # -- firing -------------------------------------------------------------------------------

    def pop_due_event_time_timers(self, watermark: int) -> DueTimers:
        """Remove and return every event-time timer due at ``watermark`` as columns, in the
        order :meth:`pop_due_event_time` would return them one by one. Timers a caller
        registers while handling them are not in this batch: call it again to get those that
        are due, as the one-by-one loop would have reached them in the same pass."""
        return self._event.pop_due_columns(watermark)

    def pop_due_event_time(self, watermark: int) -> tuple[int, str, Namespace] | None:
        """Remove and return the next event-time timer due at ``watermark`` (``ts <= W``)."""
        entry = self._event.pop_due(watermark)
        if entry is None:
            return None
        return entry[0], entry[1], (entry[2], entry[3])

    def pop_due_processing_time(self, now: int) -> tuple[int, str, Namespace] | None:
        """Remove and return the next processing-time timer due at ingest time ``now``."""
        entry = self._processing.pop_due(now)
        if entry is None:
            return None
        return entry[0], entry[1], (entry[2], entry[3])

    def has_due(self, watermark: int, now: int) -> bool:
        """Cheap check before a firing loop: may a timer be due? (Stale heads only ever
        make it say yes; the pops then find nothing.)"""
        first = self._event.first_time()
        if first is not None and first <= watermark:
            return True
        first = self._processing.first_time()
        return first is not None and first <= now

    def next_event_time(self) -> int | None:
        """Timestamp of the earliest pending event-time timer (for a runtime's scheduling)."""
        entry = self._event.peek()
        return None if entry is None else entry[0]

    def next_processing_time(self) -> int | None:
        entry = self._processing.peek()
        return None if entry is None else entry[0]

    def iter_due(self, watermark: int, now: int) -> Iterator[tuple[int, int, str, Namespace]]:
        """Yield ``(kind, timestamp, key, namespace)`` for every due timer, in firing order.

        Timers registered while iterating are seen if they are due.
        """
        while True:
            timer = self.pop_due_event_time(watermark)
            if timer is not None:
                yield EVENT_TIME, timer[0], timer[1], timer[2]
                continue
            timer = self.pop_due_processing_time(now)
            if timer is None:
                return
            yield PROCESSING_TIME, timer[0], timer[1], timer[2]

    # -- inspection and per-key export ----------------------------------------------------------

    def timers(self) -> list[tuple[int, int, str, Namespace]]:
        """Every pending timer as ``(kind, timestamp, key, namespace)``, in firing order."""
        out = [(EVENT_TIME, e[0], e[1], (e[2], e[3])) for e in self._event.entries()]
        out += [(PROCESSING_TIME, e[0], e[1], (e[2], e[3])) for e in self._processing.entries()]
        return out

    def export_key(self, key: str, *, remove: bool = False) -> list[int]:
        """One key's timers as a flat int list ``[kind, ts, start, end, ...]`` (sorted).

        This is what a Spark runtime keeps in the key's own state; ``remove`` also drops them
        from this service (the runtime is done with the key for this batch).
        """
        flat: list[int] = []
        for kind, queue in ((EVENT_TIME, self._event), (PROCESSING_TIME, self._processing)):
            for ts, _key, start, end in queue.key_entries(key):
                flat += (kind, ts, start, end)
            if remove:
                queue.remove_key(key)
        return flat

    def import_key(self, key: str, flat: list[int]) -> None:
        """Add timers exported by :meth:`export_key` (idempotent, like registration)."""
        if len(flat) % 4:
            raise ValueError("a key's timer list must hold groups of 4 ints")
        for i in range(0, len(flat), 4):
            kind, ts, start, end = flat[i], flat[i + 1], flat[i + 2], flat[i + 3]
            queue = self._event if kind == EVENT_TIME else self._processing
            queue.add(key, start, end, ts)

    # -- whole-service snapshots ------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able snapshot: distinct keys once, timers as flat int lists."""
        keys: dict[str, int] = {}
        columns: dict[str, list[int]] = {}
        for name, queue in (("event", self._event), ("processing", self._processing)):
            flat: list[int] = []
            for ts, key, start, end in queue.entries():
                index = keys.get(key)
                if index is None:
                    index = keys[key] = len(keys)
                flat += (ts, index, start, end)
            columns[name] = flat
        return {"v": 1, "keys": list(keys), **columns}

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> TimerService:
        if snapshot.get("v") != 1:
            raise ValueError(f"unsupported timer snapshot version {snapshot.get('v')!r}")
        service = cls()
        keys = snapshot["keys"]
        for name, queue in (("event", service._event), ("processing", service._processing)):
            flat = snapshot[name]
            queue.load([(flat[i], keys[flat[i + 1]], flat[i + 2], flat[i + 3])
                        for i in range(0, len(flat), 4)])
        return service


def _columns(keys: Sequence[str] | np.ndarray, starts: Sequence[int] | np.ndarray,
             ends: Sequence[int] | np.ndarray,
             timestamps: Sequence[int] | np.ndarray) -> DueTimers:
    stamps = _int64_column(timestamps, "timestamps")
    start_column = _int64_column(starts, "namespace starts")
    end_column = _int64_column(ends, "namespace ends")
    key_column = _key_column(keys)
    lengths = {len(stamps), len(start_column), len(end_column), len(key_column)}
    if len(lengths) != 1:
        raise ValueError("register_event_time_timers needs keys, starts, ends and timestamps "
                         f"of one length, got {sorted(lengths)}")
    return DueTimers(stamps, key_column, start_column, end_column)
