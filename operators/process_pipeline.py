"""A user's process function as a pipeline: one key's records and timers at a time, the same
way in the replay command, the backfill and the live stream.

A process pipeline names its class (``process: mypackage.alerts:SpendSpike``, a subclass of
:class:`~operators.process_function.KeyedProcessFunction`), its output columns and the one
whose day partitions the output::

    source: events
    process: examples.process.spend_spike:SpendSpike
    parameters: {small: 1, large: 500, within: 60000}   # the class's keyword arguments
    output: {user: string, small_at_ms: long, large_at_ms: long, amount: double}
    day_column: large_at_ms
    state_ttl: 1d                                        # optional

:class:`ProcessRunner` runs it per key: each record reaches ``process_element`` in arrival
order, after the key's event-time timers its watermark makes due (the watermark recorded with
the record in the arrival log), and ``ctx.is_late`` says whether the record's event time is at
or behind that watermark (Flink hands late records to the function, which decides; they are
also written to the late-records table). The key's remaining timers fire when the watermark
reaches them: at the end of a backfill, at the log's last watermark; live, when Spark's
watermark wakes the key's bucket. A key's rows therefore depend only on its own records, their
watermarks and the log's clocks, not on how a runtime cuts the log into batches.

Every output row is checked against the declared columns (each present, of its type; ``None``
allowed) and numbered per key (``emission``): ``(key, emission)`` is the row's identity, so a
micro-batch run again writes nothing twice. An exception in the user's code stops the run with
:class:`ProcessFunctionError`, naming the key, the record's arrival position and the code's
traceback.

Processing-time timers fire on the ingest clock in the order a single pass over the log would
fire them: a key orders its due timers of both kinds by comparing event times with ``g(t)``,
the watermark in force when the ingest clock reached ``t`` (:mod:`operators.ingest_clock`), and
one that no record of the key made due fires once the watermark has passed ``g(t)``
(docs/semantics.md, "Processing-time timers").
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.ingest_clock import IngestClock
from operators.process_function import KeyedProcessDriver, KeyedProcessFunction
from operators.time import MAX_TIMESTAMP, MIN_WATERMARK
from operators.timers import EVENT_TIME, PROCESSING_TIME
from operators.user_functions import is_user_function

__all__ = [
    "Emitted",
    "ProcessFunctionError",
    "ProcessRunner",
    "Record",
    "late_records",
    "load_process_function",
    "run_keys",
    "user_error_in",
]


_PYTHON_TYPES = {"long": (int,), "double": (int, float), "string": (str,), "boolean": (bool,)}


class ProcessFunctionError(RuntimeError):
    """The user's process function failed, or emitted a row that does not fit ``output``;
    the message names the key, the record and (for an exception) its traceback."""


def load_process_function(path: str) -> type[KeyedProcessFunction]:
    """The class ``module:Class`` names; ``ValueError`` saying what is wrong with it."""
    import importlib

    if not is_user_function(path):
        raise ValueError(f"expected module:Class, got {path!r}")
    module_name, _, class_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import {module_name!r} ({error})") from None
    found = getattr(module, class_name, None)
    if found is None:
        raise ValueError(f"{module_name!r} has no {class_name!r}")
    if not isinstance(found, type) or not issubclass(found, KeyedProcessFunction):
        raise ValueError(f"{path} is not a KeyedProcessFunction subclass (from "
                         "operators.process_function)")
    return found


@dataclass(frozen=True, slots=True)
class Record:
    """One arrival-log record as a process function sees it."""

    arrival_seq: int
    event_time_ms: int
    watermark_ms: int
    ingest_time_ms: int
    fields: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Emitted:
    key: str
    emission: int
    row: dict[str, Any]


class ProcessRunner:
    """A process pipeline's function, run one key at a time (restore, process or fire, then
    snapshot), with output checks, emission numbers and state TTL."""

    def __init__(self, spec: Any, name: str = "pipeline",
                 ingest_clock: IngestClock | None = None) -> None:
        cls = load_process_function(spec.process)
        try:
            self.function = cls(**dict(spec.parameters or {}))
        except Exception as error:
            raise ProcessFunctionError(
                f"{name}: process: {spec.process}(**parameters) failed: "
                f"{type(error).__name__}: {error}") from error
        self.name = name
        self.columns = [(c.name, c.type) for c in spec.output]
        self.day_column = spec.day_column
        self.ttl_ms = spec.state_ttl_ms
        self.driver = KeyedProcessDriver(self.function)
        self.clock = ingest_clock
        """``g`` of the stream's arrival log, for processing-time timers (module docs);
        ``None``: a function that registers one is stopped."""
        self.emitted: dict[str, int] = {}
        self.last_event: dict[str, int] = {}

    # -- a key in and out ----------------------------------------------------------------------

    def restore(self, key: str, snapshot: Mapping[str, Any] | None) -> None:
        self.driver.watermark = MIN_WATERMARK  # the key's own clocks only (module docs)
        self.driver.processing_time = MIN_WATERMARK
        if snapshot is None:
            return
        self.driver.restore_key(key, snapshot.get("driver"))
        self.emitted[key] = int(snapshot.get("emitted", 0))
        if snapshot.get("last") is not None:
            self.last_event[key] = int(snapshot["last"])
        clock = (snapshot.get("driver") or {}).get("clock")
        if clock:
            self.driver.watermark = int(clock[0])

    def snapshot(self, key: str) -> dict[str, Any] | None:
        """The key's state, timers, emission count and last event time, removed from the
        runner (``None``: nothing left to keep)."""
        driver = self.driver.snapshot_key(key, evict=True)
        emitted = self.emitted.pop(key, 0)
        last = self.last_event.pop(key, None)
        if driver is None and not emitted:
            return None
        return {"driver": driver, "emitted": emitted, "last": last}

    @staticmethod
    def deadline(snapshot: Mapping[str, Any] | None, ttl_ms: int | None,
                 clock: IngestClock | None = None, watermark: int = MIN_WATERMARK
                 ) -> int | None:
        """The earliest watermark at which the key may have something to do: its first
        event-time timer, its state's expiry, or a processing-time timer's: just past
        ``g(t)`` once the ingest clock has reached ``t``, else the next watermark after
        ``watermark`` (the key is looked at again when the watermark moves)."""
        if snapshot is None:
            return None
        flat = (snapshot.get("driver") or {}).get("timers") or []
        due = [flat[i + 1] for i in range(0, len(flat), 4) if flat[i] == EVENT_TIME]
        processing = [flat[i + 1] for i in range(0, len(flat), 4) if flat[i] != EVENT_TIME]
        if processing:
            reached = None if clock is None else clock.due_watermark(min(processing))
            due.append(watermark + 1 if reached is None else reached + 1)
        if ttl_ms is not None and snapshot.get("last") is not None and \
                (snapshot.get("driver") or {}).get("state"):
            due.append(int(snapshot["last"]) + ttl_ms)
        due = [t for t in due if t < MAX_TIMESTAMP]
        return min(due) if due else None

    # -- running ---------------------------------------------------------------------------------

    def process(self, key: str, records: Sequence[Record]) -> list[Emitted]:
        """The key's records, in arrival order, each after the timers due at it."""
        emitted: list[Emitted] = []
        for record in records:
            emitted += self._advance(key, record.watermark_ms, record.arrival_seq,
                                     record.ingest_time_ms)
            try:
                self.driver.process(key, record.event_time_ms, record.fields,
                                    watermark=record.watermark_ms,
                                    ingest_time=record.ingest_time_ms,
                                    arrival_seq=record.arrival_seq)
            except ProcessFunctionError:
                raise
            except Exception as error:
                raise self._failed(key, record.arrival_seq, "process_element", error) \
                    from error
            self.last_event[key] = max(self.last_event.get(key, MIN_WATERMARK),
                                       record.event_time_ms)
            emitted += self._collect(key, record.arrival_seq)
        return emitted

    def fire(self, key: str, watermark: int) -> list[Emitted]:
        """The key's timers (and state expiry) due once the log's watermark is ``watermark``
        (one a record carried): event-time timers at or before it, processing-time timers
        whose ``g(t)`` it has passed."""
        return self._advance(key, watermark, None, None)

    def _advance(self, key: str, watermark: int, arrival_seq: int | None,
                 ingest: int | None) -> list[Emitted]:
        """Fire what is due at a record of the key (``ingest`` its ingest time) or at a wake
        (``ingest`` ``None``), in the log's order; the state expires on the way."""
        emitted: list[Emitted] = []
        expiry = self._expiry(key)
        if expiry is not None and watermark >= expiry:  # a point of the log before this one
            emitted += self._fire_due(key, arrival_seq, expiry - 1,
                                      lambda g: g is not None and g < expiry)
            self.driver.states.pop(key, None)  # the state expires; timers stay (Flink's TTL)
        if ingest is None:
            emitted += self._fire_due(key, arrival_seq, watermark,
                                      lambda g: g is not None and g < watermark)
        else:
            emitted += self._fire_due(key, arrival_seq, watermark, None, ingest)
        return emitted

    def _expiry(self, key: str) -> int | None:
        if self.ttl_ms is None or key not in self.last_event or not self.driver.states.get(key):
            return None
        return self.last_event[key] + self.ttl_ms

    def _fire_due(self, key: str, arrival_seq: int | None, watermark: int,
                  reached: Callable[[int | None], bool] | None,
                  ingest: int | None = None) -> list[Emitted]:
        """Fire the key's timers due at one point of the log, one at a time in the order
        they became due: event-time timers at or before ``watermark``; processing-time timers
        at or before ``ingest`` (a record of the key), or else those whose ``g(t)`` satisfies
        ``reached``. Of two due timers of different kinds, the event-time one fires first when
        ``ts <= g(t)`` (it was due no later). Timers that callbacks register and that are due
        fire in the same pass."""
        timers = self.driver.timers
        emitted: list[Emitted] = []
        while True:
            event = timers.next_event_time()
            event_due = event is not None and event <= watermark
            processing = timers.next_processing_time()
            processing_due = False
            reached_at = None
            if processing is not None:
                if ingest is not None:
                    processing_due = processing <= ingest
                    if processing_due and event_due:
                        reached_at = self._g(key, processing, arrival_seq, must=True)
                else:
                    reached_at = self._g(key, processing, arrival_seq, must=False)
                    processing_due = reached(reached_at)
            if not (event_due or processing_due):
                return emitted
            kind = EVENT_TIME if event_due and (not processing_due or event <= reached_at) \
                else PROCESSING_TIME
            try:
                self.driver.fire_next(kind)
            except ProcessFunctionError:
                raise
            except Exception as error:
                raise self._failed(key, arrival_seq, "on_timer", error) from error
            emitted += self._collect(key, arrival_seq)

    def _g(self, key: str, t: int, arrival_seq: int | None, *, must: bool) -> int | None:
        if self.clock is None:
            raise ProcessFunctionError(
                f"{self.name}: key {key!r}{_at(arrival_seq)}: the process function registered "
                "a processing-time timer, and this runtime has no ingest clock for it")
        return self.clock.due_watermark(t, must=must)

    def _collect(self, key: str, arrival_seq: int | None) -> list[Emitted]:
        """The rows the last call emitted, checked and numbered."""
        if self.clock is None and self.driver.timers.next_processing_time() is not None:
            self._g(key, 0, arrival_seq, must=False)  # says why it cannot run
        rows = self.driver.take_output()
        emitted = []
        for row in rows:
            checked = self._checked(row, key, arrival_seq)
            number = self.emitted.get(key, 0)
            self.emitted[key] = number + 1
            emitted.append(Emitted(key, number, checked))
        return emitted

    def _checked(self, row: Any, key: str, arrival_seq: int | None) -> dict[str, Any]:
        where = f"{self.name}: key {key!r}{_at(arrival_seq)}: output row {row!r}"
        if not isinstance(row, Mapping):
            raise ProcessFunctionError(f"{where} is a {type(row).__name__}, not a mapping of "
                                       f"the output columns ({', '.join(self._names())})")
        extra = [name for name in row if name not in self._names()]
        if extra:
            raise ProcessFunctionError(f"{where}: column {extra[0]!r} is not in output "
                                       f"({', '.join(self._names())})")
        checked = {}
        for name, kind in self.columns:
            if name not in row:
                raise ProcessFunctionError(f"{where}: column {name!r} is missing (use None "
                                           "for no value)")
            value = row[name]
            wrong_bool = isinstance(value, bool) and kind != "boolean"
            if value is not None and (wrong_bool or not isinstance(value, _PYTHON_TYPES[kind])):
                raise ProcessFunctionError(f"{where}: column {name!r} must be {kind}, got "
                                           f"{type(value).__name__} {value!r}")
            checked[name] = float(value) if kind == "double" and value is not None else value
        if self.day_column is not None and checked.get(self.day_column) is None:
            raise ProcessFunctionError(f"{where}: column {self.day_column!r} (day_column, "
                                       "whose day partitions the output) must have a value")
        return checked

    def _names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def _failed(self, key: str, arrival_seq: int | None, method: str,
                error: BaseException) -> ProcessFunctionError:
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return ProcessFunctionError(f"{self.name}: the process function's {method} failed for "
                                    f"key {key!r}{_at(arrival_seq)}:\n{trace}")


def user_error_in(text: str) -> ProcessFunctionError | None:
    """The :class:`ProcessFunctionError` a Spark failure's text carries (a Python worker's
    traceback inside the JVM's), without the JVM's frames; ``None`` when it carries none."""
    marker = "ProcessFunctionError: "
    start = text.rfind(marker)
    if start < 0:
        return None
    lines = []
    for line in text[start + len(marker):].splitlines():
        if line.startswith(("\tat ", "\tat\u00a0")) or line.strip().startswith("at org.") \
                or line.startswith("JVM stacktrace") or line.startswith("=="):
            break
        lines.append(line)
    return ProcessFunctionError("\n".join(lines).rstrip())


def _at(arrival_seq: int | None) -> str:
    return "" if arrival_seq is None else f" at record arrival_seq {arrival_seq}"


def run_keys(spec: Any, histories: Mapping[str, Sequence[Record]], last_watermark: int,
             name: str = "pipeline") -> list[Emitted]:
    """Every key's whole history, then its timers at ``last_watermark`` (the log's last
    watermark): what a backfill and the replay compute."""
    every = [r for history in histories.values() for r in history]
    clock = IngestClock.of([r.arrival_seq for r in every], [r.ingest_time_ms for r in every],
                           [r.watermark_ms for r in every])
    runner = ProcessRunner(spec, name, clock)
    emitted: list[Emitted] = []
    for key in sorted(histories):
        runner.restore(key, None)
        emitted += runner.process(key, histories[key])
        emitted += runner.fire(key, last_watermark)
        runner.snapshot(key)
    return emitted


def late_records(key: str, records: Sequence[Record]) -> list[Record]:
    """The key's records at or behind the watermark in force when they arrived."""
    return [r for r in records if r.event_time_ms <= r.watermark_ms]
