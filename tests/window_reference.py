"""An obviously correct reference for event-time windows: simulate the stream record by record.

It follows Flink's WindowOperator literally (timers fire before each record, EventTimeTrigger,
cleanup timers) plus the pane rules of docs/semantics.md, with no cleverness: a set of timers
scanned in full, lists of records per window. Slow, small and independent of the vectorised
closed form it checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal


@dataclass(frozen=True)
class Arrival:
    arrival_seq: int
    key: str
    event_time_ms: int
    watermark_ms: int
    value: Decimal


@dataclass
class _Window:
    records: list[Arrival] = field(default_factory=list)
    panes: int = 0
    non_early_emitted: bool = False
    last_was_final: bool = False


def windows_of(t: int, size: int, slide: int, offset: int) -> list[tuple[int, int]]:
    """Every window [start, start + size) on the slide grid that contains t, by enumeration."""
    result = []
    start = offset + ((t - offset) // slide) * slide
    while start > t - size:
        result.append((start, start + size))
        start -= slide
    return result


def simulate(arrivals: list[Arrival], size: int, slide: int, offset: int, lateness: int):
    """Return (latest pane per (key, start, end), late rows, per-assignment classes)."""
    windows: dict[tuple[str, int, int], _Window] = {}
    timers: set[tuple[int, int, str, int, int]] = set()  # (ts, 0 fire / 1 cleanup, key, s, e)
    latest: dict[tuple[str, int, int], dict] = {}
    late: list[tuple] = []
    classes: list[tuple[str, int, int, str]] = []

    def emit(name: tuple[str, int, int], watermark: int, *, cleanup: bool,
             on_time_timer: bool = False) -> None:
        """Beam's pane timing: ON_TIME only for the pane the watermark fires at the window's
        end (the on-time timer), and only if no non-early pane came before; a pane a record
        fires after the end is LATE, even the window's first."""
        state = windows[name]
        max_ts = name[2] - 1
        if watermark < max_ts:
            timing = "EARLY"
        elif on_time_timer and not state.non_early_emitted:
            timing = "ON_TIME"
        else:
            timing = "LATE"
        state.non_early_emitted |= timing != "EARLY"
        state.last_was_final = cleanup
        latest[name] = {
            "pane_index": state.panes, "timing": timing, "is_last": cleanup,
            "events": len(state.records),
            "value_sum": sum((r.value for r in state.records), Decimal(0)),
        }
        state.panes += 1

    for record in sorted(arrivals, key=lambda r: r.arrival_seq):
        w = record.watermark_ms
        while True:
            due = sorted(t for t in timers if t[0] <= w)
            if not due:
                break
            timer = due[0]
            timers.discard(timer)
            ts, kind, key, start, end = timer
            name = (key, start, end)
            if name not in windows:
                continue
            if kind == 0:  # the on-time timer; with lateness 0 it is also the cleanup timer
                emit(name, w, cleanup=lateness == 0, on_time_timer=True)
            else:  # cleanup: the closing pane, unless the last pane was already final
                if not windows[name].last_was_final:
                    emit(name, w, cleanup=True)
                del windows[name]
        for start, end in windows_of(record.event_time_ms, size, slide, offset):
            max_ts = end - 1
            name = (record.key, start, end)
            if max_ts + lateness <= w:
                late.append((record.key, record.arrival_seq, start, end))
                classes.append((record.key, start, end, "dropped"))
                continue
            state = windows.setdefault(name, _Window())
            state.records.append(record)
            if max_ts <= w:
                classes.append((record.key, start, end, "late_within"))
                emit(name, w, cleanup=False)  # EventTimeTrigger.onElement: FIRE when past
            else:
                classes.append((record.key, start, end, "on_time"))
                timers.add((max_ts, 0, record.key, start, end))
            timers.add((max_ts + lateness, 1, record.key, start, end))
    return latest, late, classes
