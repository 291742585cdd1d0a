"""Live sessions: a key's micro-batch in closed form where its session only grows.

A key of a busy stream is nearly always in the middle of one session: each micro-batch brings
it records that fall inside or just beyond the session, the watermark is far behind the
session's end, and nothing fires. For such a key the session driver's decisions, record by
record, are known without running it:

- every record joins the session on time (no pane fires): its assignment row's window spans
  the session as it was with the record in it, ``[earliest, latest + gap)`` of the event times
  so far, the stored session's included;
- or it is a straggler: its own window is past its cleanup time at the key's clock and touches
  nothing (10 minutes late beside a 4-minute gap). The driver drops it, a late row in a window
  of its own, and the session stays as it was;
- the key's state after the batch is the one session, grown to all of them but the
  stragglers, its accumulators the stored ones merged with the batch's, its clocks raised to
  the largest watermark and ingest time its records carried.

That holds for a key's records, in arrival order, up to the first that breaks the rule: the
key's stored state is such a session (or nothing), and each record touches the session so far
(for the first of a new key: makes one) or, once there is a session, is a straggler, while
the key's clock (the largest watermark it has seen) is still before that session's end. A
straggler that touches the session's start would move it, and the closed form stops there.
The backfill's plain groups follow the same rule but for the stragglers, which are groups of
their own there (jobs.runtime.plain_sessions); here it starts from the stored session.
When every record of the key keeps it and the batch's watermark does not reach the grown
session's end, the key is done; otherwise the grown session is stored and the driver goes on
from it with the key's remaining records (a record behind the watermark, a new session beside
the old) and fires at the batch's watermark. A key whose stored state is anything else runs on
the driver from its first record. The rule reads the clocks exactly as the driver keeps them,
so the two paths cannot disagree on which records are late; tests/test_session_growth.py holds
the rows and the stored state to the driver's over random streams cut into micro-batches, with
stragglers among them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from jobs.runtime.buckets import KeySnapshots
from jobs.runtime.key_runner import repeated, shaped
from jobs.runtime.packing import decimals_of_units, unscaled_words
from jobs.runtime.plain_sessions import SAFE_SUM, VALUE_TYPE, computes_plain_groups
from operators.pipeline import PipelineSpec
from operators.standard_sessions import OpenSession, SessionDriver
from operators.time import MIN_WATERMARK
from operators.window_operator import ON_TIME_CLASS

_LATEST = np.iinfo(np.int64).max
_EARLIEST = np.iinfo(np.int64).min
"""Bounds of no session yet: every comparison with them below stays within an int64."""


@dataclass(frozen=True)
class Grown:
    """What a batch's keys came to: the sessions their first records grew (by key), those
    records' late and assignment rows (Arrow, of the runtime's output schema), and the keys
    left to the driver, as ``(index into the batch's key slices, records already grown)``:
    the driver goes on from the grown session with the rest, and fires at the batch's
    watermark."""

    sessions: dict[str, OpenSession]
    rows: pa.RecordBatch | None
    driven: list[tuple[int, int]]


class SessionGrowth:
    """The closed form for one pipeline (:func:`computes_plain_groups`), beside its driver."""

    def __init__(self, spec: PipelineSpec, driver: SessionDriver, schema: pa.Schema) -> None:
        assert computes_plain_groups(spec) and spec.window is not None
        assert spec.window.gap_ms is not None
        self.gap = spec.window.gap_ms
        self.lateness = spec.allowed_lateness_ms
        self.driver = driver
        self.schema = schema

    def grow(self, rows: pd.DataFrame, order: np.ndarray, slices: list[tuple[str, int, int]],
             keys: KeySnapshots, watermark: int) -> Grown:
        """Each key's records of ``rows`` (in ``order``: by key, then arrival; ``slices``
        each key's range of it) that grow its session, and what is left to the driver
        (``watermark``: the batch's)."""
        units = _units(rows["value"], order)
        if units is None:  # a value beyond 64 bits: the driver's integers take it
            return Grown({}, None, [(index, 0) for index in range(len(slices))])
        values, present = units
        gap = self.gap
        t = rows["event_time_ms"].to_numpy(dtype=np.int64)[order]
        marks = rows["watermark_ms"].to_numpy(dtype=np.int64)[order]
        ingest = rows["ingest_time_ms"].to_numpy(dtype=np.int64)[order]
        starts = np.array([start for _, start, _ in slices], dtype=np.int64)
        lengths = np.diff(np.append(starts, len(order)))
        key_of = np.repeat(np.arange(len(slices)), lengths)

        stored = [self.driver.open_session(keys.get(key)) for key, _, _ in slices]
        movable = np.array([session is not None or not keys.holds(key)
                            for session, (key, _, _) in zip(stored, slices, strict=True)])
        has = np.array([session is not None for session in stored])
        low0 = np.array([s.start if s else 0 for s in stored], dtype=np.int64)
        high0 = np.array([s.end - gap if s else 0 for s in stored], dtype=np.int64)
        clock0 = np.array([s.watermark if s else MIN_WATERMARK for s in stored], dtype=np.int64)

        by_key = pd.DataFrame({"t": t, "mark": marks}).groupby(key_of, sort=False)
        clock = np.maximum(by_key["mark"].cummax().to_numpy(), clock0[key_of])
        # behind the watermark: the record's own window is past its cleanup at the key's clock
        behind = t + (gap - 1) + self.lateness <= clock
        # the session with the record in it (a record behind is inside it or dropped: it
        # never moves the session's bounds, or the closed form stops before it)
        grouped = pd.DataFrame({"low": np.where(behind, _LATEST, t),
                                "high": np.where(behind, _EARLIEST, t)}
                               ).groupby(key_of, sort=False)
        low = grouped["low"].cummin().to_numpy()
        high = grouped["high"].cummax().to_numpy()
        low = np.where(has[key_of], np.minimum(low, low0[key_of]), low)
        high = np.where(has[key_of], np.maximum(high, high0[key_of]), high)
        first = np.zeros(len(t), dtype=bool)
        first[starts] = True
        # a session before the record: the stored one, or one an earlier record made
        made = pd.Series((~behind).astype(np.int64)).groupby(key_of, sort=False).cumsum()
        prior = has[key_of] | (made.to_numpy() - (~behind) > 0)
        low_before = np.where(first, np.where(has, low0, _LATEST)[key_of],
                              np.concatenate(([0], low[:-1])))
        high_before = np.where(first, np.where(has, high0, _EARLIEST)[key_of],
                               np.concatenate(([0], high[:-1])))
        open_before = prior & (clock < high_before + (gap - 1))  # its end not yet reached
        dropped = behind & open_before & (t < low_before - gap)  # touches nothing: late
        grows = np.where(behind, open_before & (dropped | (t >= low_before)),
                         np.where(prior,
                                  open_before & (t >= low_before - gap)
                                  & (t <= high_before + gap),
                                  clock < t + (gap - 1)))
        # a running sum of magnitudes: the prefix it bounds sums exactly in an int64
        magnitude = pd.Series(np.where(present, np.abs(values.astype(np.float64)), 0.0)
                              ).groupby(key_of, sort=False).cumsum().to_numpy()
        index = np.arange(len(t))
        keeps = grows & (magnitude < SAFE_SUM) & movable[key_of]
        ends = starts + lengths
        done = np.minimum.reduceat(np.where(keeps, len(t), index), starts)  # the first not
        done = np.minimum(done, ends)
        last = np.maximum(done - 1, starts)  # the last record grown (when one was)
        whole = (done == ends) & (high[last] + (gap - 1) > watermark)
        chosen = index < done[key_of]
        joined = chosen & ~dropped
        sessions = self._sessions(slices, stored, done > starts, starts, chosen, joined, values,
                                  present, low, high, clock, ingest, last)
        late = self._late(rows, order, chosen & dropped, clock, values, present)
        assigned = self._assignments(rows, order, joined, low, high)
        return Grown(sessions, _together([part for part in (late, assigned) if part is not None]),
                     [(i, d) for i, d in zip(np.flatnonzero(~whole).tolist(),
                                              (done - starts)[~whole].tolist(), strict=True)])

    def _sessions(self, slices: list[tuple[str, int, int]], stored: list[OpenSession | None],
                  grown: np.ndarray, starts: np.ndarray, chosen: np.ndarray, joined: np.ndarray,
                  values: np.ndarray, present: np.ndarray, low: np.ndarray, high: np.ndarray,
                  clock: np.ndarray, ingest: np.ndarray, last: np.ndarray
                  ) -> dict[str, OpenSession]:
        """Each key's session after its grown records (``chosen``, of which ``joined`` are
        in the session and the others dropped; ``grown``: the keys with any, ``last`` the
        last of them)."""
        counted_values = present & joined
        counted = np.add.reduceat(counted_values.astype(np.int64), starts)
        total = np.add.reduceat(np.where(counted_values, values, 0), starts)
        least = np.minimum.reduceat(np.where(counted_values, values, np.iinfo(np.int64).max),
                                    starts)
        most = np.maximum.reduceat(np.where(counted_values, values, np.iinfo(np.int64).min),
                                   starts)
        latest_ingest = np.maximum.reduceat(np.where(chosen, ingest, np.iinfo(np.int64).min),
                                            starts)
        records = np.add.reduceat(joined.astype(np.int64), starts)
        driver, gap = self.driver, self.gap
        sessions: dict[str, OpenSession] = {}
        for index in np.flatnonzero(grown).tolist():
            key = slices[index][0]
            accs = driver.accumulators(int(records[index]), int(counted[index]),
                                       int(total[index]), int(least[index]), int(most[index]))
            before = stored[index]
            end = int(last[index])
            processing_time = int(latest_ingest[index])
            if before is not None:
                accs = driver.merged(before.accs, accs)
                processing_time = max(processing_time, before.processing_time)
            sessions[key] = OpenSession(int(low[end]), int(high[end]) + gap, accs,
                                        int(clock[end]), processing_time)
        return sessions

    def _late(self, rows: pd.DataFrame, order: np.ndarray, dropped: np.ndarray,
              clock: np.ndarray, values: np.ndarray, present: np.ndarray
              ) -> pa.RecordBatch | None:
        """The late rows of the records dropped (``dropped``): each in a window of its own,
        which the key's clock (``clock``) had passed with the lateness; ``values`` and
        ``present``: the records' nanounits."""
        count = int(dropped.sum())
        if not count:
            return None
        columns = _record_columns(rows, order[dropped])
        event_time = columns["event_time_ms"]
        columns.update({"kind": repeated("late", count), "window_start_ms": event_time,
                        "window_end_ms": pc.add(event_time, self.gap),
                        "watermark_ms": pa.array(clock[dropped]),
                        "value": decimals_of_units(values[dropped], present[dropped])})
        return shaped(columns, count, self.schema)

    def _assignments(self, rows: pd.DataFrame, order: np.ndarray, chosen: np.ndarray,
                     low: np.ndarray, high: np.ndarray) -> pa.RecordBatch | None:
        count = int(chosen.sum())
        if not count:
            return None
        columns = _record_columns(rows, order[chosen])
        columns.update({"kind": repeated("assign", count),
                        "window_start_ms": pa.array(low[chosen]),
                        "window_end_ms": pa.array(high[chosen] + self.gap),
                        "fate": repeated(ON_TIME_CLASS, count)})
        return shaped(columns, count, self.schema)


def _record_columns(rows: pd.DataFrame, picked: np.ndarray) -> dict[str, pa.Array]:
    """The arrival-log columns of the rows at ``picked`` that late and assignment rows carry."""
    columns = {"key": pa.array(rows["key"].to_numpy(dtype=object)[picked], pa.string())}
    for name in ("arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms"):
        columns[name] = pa.array(rows[name].to_numpy(dtype=np.int64)[picked])
    return columns


def _together(parts: list[pa.RecordBatch]) -> pa.RecordBatch | None:
    """Row batches of one schema as one batch (``None``: none)."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else pa.concat_batches(parts)


def _units(column: pd.Series, order: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The values at ``order`` as int64 nanounits and which are present, or ``None`` when
    one needs more than 64 bits. The column holds nanounits already where the processor
    unpacked them so (jobs.runtime.packing), else ``Decimal`` or ``None``."""
    if isinstance(column.dtype, pd.Int64Dtype):
        return (column.to_numpy(dtype=np.int64, na_value=0)[order],
                column.notna().to_numpy()[order])
    words, missing, fits = unscaled_words(pa.array(column.to_numpy(dtype=object)[order],
                                                   VALUE_TYPE))
    if not fits.all():
        return None
    return words, ~missing
