"""A standard-window pipeline's per-day late-data metrics, kept up to date one flush at a time.

A ``late_data_metrics`` row is a function of every record in the arrival log whose window ends
that day and every line quarantined that day. Recomputed from the log at each flush, a day
cost a read of all its records: 3.4 s a minute an hour into a day at 80,000 events/s, and
growing with the day until a flush took longer than the minute it covers. But each record's
contribution depends on that record alone (its event time and recorded watermark), so a day's
counts and lateness distributions are sums: the live sink keeps, per day, the fate counts and
the histograms (distinct value, how many) of lateness and watermark lag, and at each flush
adds the records appended to the log since the last one. Exact percentiles come out of the
histograms as they came out of the raw values (jobs.lateness.metrics, ``exact_percentiles``).

A day the sink does not hold yet (the first flush after a start, a day long past that a late
record touched) is read from the log once, up to the very position the additions start from,
so no record counts twice or never. Days further back than ``keep_days`` before the newest
one held are let go and read again if a record ever touches them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.lateness.metrics import (
    COLUMNS,
    DROPPED_CODE,
    LATE_WITHIN_CODE,
    ON_TIME_CODE,
    assignments,
    distribution,
    histogram,
)
from jobs.store.fast_writes import read_columns, table_exists
from jobs.tables.days import DAY_MS, day_end_ms, day_start_utc_ms, days_between, reach_bounds
from operators.pipeline import PipelineSpec
from operators.time import MIN_WATERMARK

_EMPTY = np.empty(0, dtype=np.int64)


@dataclass
class DayTally:
    """What one day's metrics row is computed from."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(3, dtype=np.int64))
    """Assignments on time, late within the allowed lateness, dropped."""
    quarantined: int = 0
    late_values: np.ndarray = field(default_factory=lambda: _EMPTY)
    late_counts: np.ndarray = field(default_factory=lambda: _EMPTY)
    lag_values: np.ndarray = field(default_factory=lambda: _EMPTY)
    lag_counts: np.ndarray = field(default_factory=lambda: _EMPTY)

    def plus(self, other: DayTally) -> DayTally:
        return DayTally(self.counts + other.counts, self.quarantined + other.quarantined,
                        *_merged(self.late_values, self.late_counts, other.late_values,
                                 other.late_counts),
                        *_merged(self.lag_values, self.lag_counts, other.lag_values,
                                 other.lag_counts))

    @property
    def empty(self) -> bool:
        return not self.counts.any() and not self.quarantined

    def row(self, day: dt.date) -> dict[str, Any]:
        """The day's ``late_data_metrics`` row (the backfill's columns and rounding)."""
        return {"window_end_date": day, "on_time": int(self.counts[0]),
                "late_within_lateness": int(self.counts[1]),
                "dropped_late": int(self.counts[2]), "quarantined": int(self.quarantined),
                **distribution(self.late_values, self.late_counts, self.lag_values,
                               self.lag_counts)}


def _merged(values: np.ndarray, counts: np.ndarray, more: np.ndarray, more_counts: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    if not len(more):
        return values, counts
    if not len(values):
        return more, more_counts
    return histogram(np.concatenate([values, more]), np.concatenate([counts, more_counts]))


class DayCalendar:
    """The days ``[first, last]`` in ``time_zone``, and which of them an instant falls on."""

    def __init__(self, first: dt.date, last: dt.date, time_zone: str) -> None:
        self.days = days_between(first, last)
        # the starts of the days (first's, then each next day's) in the zone, as epoch ms
        self._bounds = np.array([day_end_ms(first - dt.timedelta(days=1), time_zone)]
                                + [day_end_ms(day, time_zone) for day in self.days],
                                dtype=np.int64)

    def index(self, ms: np.ndarray) -> np.ndarray:
        """The index in ``days`` of each instant's day; -1 or ``len(days)`` outside."""
        return np.searchsorted(self._bounds, ms, side="right") - 1


def tallies(event: np.ndarray, ingest: np.ndarray, watermark: np.ndarray,
            quarantined_ingest_ms: np.ndarray, spec: PipelineSpec, time_zone: str,
            days: Sequence[dt.date]) -> dict[dt.date, DayTally]:
    """Each of ``days``' tally from these records' (record, window) assignments whose window
    ends that day (``window_end_date`` in ``time_zone``) and the quarantined lines ingested
    that day; every day of ``days`` gets one, empty or not."""
    if not days:
        return {}
    calendar = DayCalendar(min(days), max(days), time_zone)
    counting = _Counting(len(calendar.days))
    for valid, max_ts, dropped, on_time in assignments(event, watermark, spec):
        fate = np.where(on_time, ON_TIME_CODE, np.where(dropped, DROPPED_CODE, LATE_WITHIN_CODE))
        counting.add(np.where(valid, calendar.index(max_ts), -1), fate, event, ingest,
                     watermark)
    counting.quarantine(calendar.index(np.asarray(quarantined_ingest_ms, dtype=np.int64)))
    return counting.tallies(calendar.days, days)


def fate_tallies(fate: np.ndarray, end_day: np.ndarray, event: np.ndarray, ingest: np.ndarray,
                 watermark: np.ndarray, quarantined_ingest_ms: np.ndarray, time_zone: str,
                 days: Sequence[dt.date]) -> dict[dt.date, DayTally]:
    """:func:`tallies` of (record, window) assignments whose fate the operator decided (the
    ``window_assignments`` table: ``fate`` as :data:`~jobs.lateness.metrics.ON_TIME_CODE` ..
    :data:`~jobs.lateness.metrics.DROPPED_CODE`,
    ``end_day`` its ``window_end_date`` as a ``datetime64[D]``)."""
    if not days:
        return {}
    calendar = DayCalendar(min(days), max(days), time_zone)
    counting = _Counting(len(calendar.days))
    first = np.datetime64(calendar.days[0], "D")
    counting.add((end_day.astype("datetime64[D]") - first).astype(np.int64), fate, event,
                 ingest, watermark)
    counting.quarantine(calendar.index(np.asarray(quarantined_ingest_ms, dtype=np.int64)))
    return counting.tallies(calendar.days, days)


class _Counting:
    """Fate counts and lateness and lag values per day index, assignment by assignment."""

    def __init__(self, days: int) -> None:
        self.days = days
        self.counts = np.zeros((3, days), dtype=np.int64)
        self.quarantined = np.zeros(days, dtype=np.int64)
        self.late: list[tuple[np.ndarray, np.ndarray]] = []
        self.lags: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, index: np.ndarray, fate: np.ndarray, event: np.ndarray, ingest: np.ndarray,
            watermark: np.ndarray) -> None:
        """Assignments ending on day ``index`` (outside ``[0, days)``: not counted)."""
        inside = (index >= 0) & (index < self.days)
        for row in (ON_TIME_CODE, LATE_WITHIN_CODE, DROPPED_CODE):
            self.counts[row] += np.bincount(index[inside & (fate == row)], minlength=self.days)
        known = inside & (watermark != MIN_WATERMARK)
        late = known & (fate != ON_TIME_CODE)
        self.late.append((index[late], np.maximum(0, watermark[late] - event[late])))
        self.lags.append((index[known], ingest[known] - watermark[known]))

    def quarantine(self, index: np.ndarray) -> None:
        self.quarantined += np.bincount(index[(index >= 0) & (index < self.days)],
                                        minlength=self.days)

    def tallies(self, every: list[dt.date], days: Sequence[dt.date]
                ) -> dict[dt.date, DayTally]:
        late_day, late_value = _joined(self.late)
        lag_day, lag_value = _joined(self.lags)
        wanted = set(days)
        return {day: DayTally(self.counts[:, i].copy(), int(self.quarantined[i]),
                              *histogram(late_value[late_day == i]),
                              *histogram(lag_value[lag_day == i]))
                for i, day in enumerate(every) if day in wanted}


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not parts:
        return _EMPTY, _EMPTY
    return (np.concatenate([day for day, _ in parts]),
            np.concatenate([value for _, value in parts]))


class DayTallies:
    """The per-day tallies of one pipeline over the whole arrival log, as of each flush."""

    def __init__(self, spec: PipelineSpec, time_zone: str, log_path: str,
                 quarantine_path: str, keep_days: int = 14) -> None:
        self.spec = spec
        self.time_zone = time_zone
        self.log_path = log_path
        self.quarantine_path = quarantine_path
        self.keep_days = keep_days
        self.held: dict[dt.date, DayTally] = {}
        self.through_seq: int | None = None
        """The held days count every record up to this arrival position..."""
        self.through_batch: int | None = None
        """... and every quarantined line up to this ingest batch."""

    def rows(self, first_day: str, last_day: str) -> list[dict[str, Any]]:
        """The rows of the days ``[first_day, last_day]`` that have records or quarantined
        lines, over the whole log as it is now."""
        log, log_end = _snapshot(self.log_path, "arrival_seq")
        quarantine, batch_end = _snapshot(self.quarantine_path, "ingest_batch")
        if self.held:
            self._add_new(log, log_end, quarantine, batch_end)
        else:  # nothing held: the days are read whole, up to these positions
            self.through_seq, self.through_batch = log_end, batch_end
        days = days_between(dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day))
        missing = [day for day in days if day not in self.held]
        if missing:
            self.held.update(self._read_days(log, quarantine, missing))
        rows = [self.held[day].row(day) for day in days if not self.held[day].empty]
        self._let_go()
        return rows

    def _add_new(self, log: Any, log_end: int | None, quarantine: Any,
                 batch_end: int | None) -> None:
        """Fold the records and lines appended since the last flush into the held days."""
        held = sorted(self.held)
        after = -1 if self.through_seq is None else self.through_seq
        if log_end is not None and log_end > after:
            records = log.to_table(columns=list(_TIMES),
                                   filter=(pc.field("arrival_seq") > after)
                                   & (pc.field("arrival_seq") <= log_end))
            self.fold(tallies(*_times(records), _EMPTY, self.spec, self.time_zone, held))
            self.through_seq = log_end
        after = -1 if self.through_batch is None else self.through_batch
        if batch_end is not None and batch_end > after:
            lines = quarantine.to_table(columns=["ingest_time_ms"],
                                        filter=(pc.field("ingest_batch") > after)
                                        & (pc.field("ingest_batch") <= batch_end))
            ingested = lines.column("ingest_time_ms").to_numpy().astype(np.int64, copy=False)
            self.fold(tallies(_EMPTY, _EMPTY, _EMPTY, ingested, self.spec, self.time_zone,
                               held))
            self.through_batch = batch_end

    def fold(self, found: Mapping[dt.date, DayTally]) -> None:
        for day, tally in found.items():
            if not tally.empty:
                self.held[day] = self.held[day].plus(tally)

    def _read_days(self, log: Any, quarantine: Any, days: list[dt.date]
                   ) -> dict[dt.date, DayTally]:
        """Whole days from the log, up to the positions the held days count through."""
        first, last = str(min(days)), str(max(days))
        event = ingest = watermark = _EMPTY
        if self.through_seq is not None:
            low, high = reach_bounds(first, last, self.spec.window)
            event, ingest, watermark = _times(log.to_table(
                columns=list(_TIMES), filter=(pc.field("event_time_ms") >= low)
                & (pc.field("event_time_ms") <= high)
                & (pc.field("arrival_seq") <= self.through_seq)))
        ingested = _EMPTY
        if self.through_batch is not None:
            # the lines ingested on these days (a day of margin for any time zone)
            start, end = day_start_utc_ms(first), day_start_utc_ms(last)
            ingested = quarantine.to_table(
                columns=["ingest_time_ms"],
                filter=(pc.field("ingest_time_ms") >= start - DAY_MS)
                & (pc.field("ingest_time_ms") < end + 2 * DAY_MS)
                & (pc.field("ingest_batch") <= self.through_batch)
            ).column("ingest_time_ms").to_numpy().astype(np.int64, copy=False)
        return tallies(event, ingest, watermark, ingested, self.spec, self.time_zone, days)

    def _let_go(self) -> None:
        if self.held:
            newest = max(self.held)
            for day in [d for d in self.held if (newest - d).days > self.keep_days]:
                del self.held[day]


_TIMES = ("event_time_ms", "ingest_time_ms", "watermark_ms")


def _times(records: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    event, ingest, watermark = (records.column(name).to_numpy().astype(np.int64, copy=False)
                                for name in _TIMES)
    return event, ingest, watermark


def _snapshot(path: str, position: str) -> tuple[Any, int | None]:
    """The table's current version as a pyarrow dataset and the largest ``position`` in it
    (``None``, ``None``: no table yet; ``None`` position: no rows); every read of one flush
    goes to this version."""
    from deltalake import DeltaTable

    from jobs.store import fast_writes
    from jobs.store.table_stats import ranges_in

    if not fast_writes.table_exists(path):
        return None, None
    table = DeltaTable(fast_writes.delta_uri(path))
    dataset = table.to_pyarrow_dataset()
    # the same snapshot's file statistics (not a second read of the Delta log)
    ranges = ranges_in(pa.table(table.get_add_actions(flatten=True)), (position,))
    if ranges is not None:
        return dataset, int(ranges[position][1])
    values = dataset.to_table(columns=[position]).column(position)  # no statistics
    found = pc.max(values).as_py() if len(values) else None
    return dataset, None if found is None else int(found)


def day_rows(event: np.ndarray, ingest: np.ndarray, watermark: np.ndarray,
             quarantined_ingest_ms: Iterable[int], spec: PipelineSpec, time_zone: str,
             first_day: str, last_day: str) -> list[dict[str, Any]]:
    """The rows of ``[first_day, last_day]`` from these records and quarantined lines, in
    one go (a day with neither has no row)."""
    days = days_between(dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day))
    found = tallies(event, ingest, watermark, np.fromiter(quarantined_ingest_ms, np.int64),
                    spec, time_zone, days)
    return [found[day].row(day) for day in days if not found[day].empty]


def day_lateness(records: pa.Table, quarantined_ingest_ms: np.ndarray, spec: PipelineSpec,
                 time_zone: str, first_day: str, last_day: str) -> list[dict[str, Any]]:
    """``late_data_metrics`` rows of the days ``[first_day, last_day]`` (``window_end_date``
    in ``time_zone``): the fates and lateness of ``records``' assignments whose window ends
    that day, and the quarantined lines ingested that day; a day with neither has no row.
    The live sink keeps the same as running tallies (:class:`DayTallies`)."""
    event, ingest, watermark = (records.column(name).to_numpy() for name in COLUMNS[1:])
    return day_rows(event, ingest, watermark, quarantined_ingest_ms, spec, time_zone,
                    first_day, last_day)


def fold(held: dict[dt.date, DayTally], found: dict[dt.date, DayTally]) -> None:
    """Add each non-empty tally of ``found`` into ``held``'s tally of its day."""
    for day, tally in found.items():
        if not tally.empty:
            held[day] = held[day].plus(tally)


def quarantined_ingest_ms(quarantine_path: str, first_day: str, last_day: str) -> np.ndarray:
    """Ingest times of the quarantined lines that can fall on the days, in any time zone
    (a day of margin either side)."""
    if not table_exists(quarantine_path):
        return _EMPTY
    start, end = day_start_utc_ms(first_day), day_start_utc_ms(last_day)
    lines = read_columns(quarantine_path, ["ingest_time_ms"],
                         (pc.field("ingest_time_ms") >= start - DAY_MS)
                         & (pc.field("ingest_time_ms") < end + 2 * DAY_MS))
    return lines.column("ingest_time_ms").to_numpy().astype(np.int64, copy=False)
