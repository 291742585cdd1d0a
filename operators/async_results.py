"""What async enrichment produces: outcomes, the recordings a backfill replays, and metrics.

Kept apart from the operator because these are the types the Spark job reads and writes (one row
per outcome, one row per recording), and because the replay guarantee is a property of their
serialisation: a recording is canonical JSON, and an outcome built from a recording is equal,
field for field, to the outcome the live run emitted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "DEAD_LETTER",
    "EnrichmentMetrics",
    "MISSING_RECORDING",
    "OK",
    "Outcome",
    "REJECTED_RESULT",
    "Recording",
    "Source",
    "Status",
    "canonical_json",
    "recordings_by_seq",
]


Status = Literal["ok", "dead_letter"]
Source = Literal["call", "recording"]

OK: Status = "ok"
DEAD_LETTER: Status = "dead_letter"
MISSING_RECORDING = "MissingRecording"
"""``error_type`` of a replayed record that has no recording: replay never calls the service."""
REJECTED_RESULT = "RejectedResult"
"""``error_type`` when the retry policy's result predicate rejected the last attempt's result."""


def canonical_json(value: Any) -> str:
    """Serialise a response so equal values always give the same text (sorted keys, compact).

    Raises ``TypeError``/``ValueError`` for values JSON cannot represent (NaN included), so a
    response that could not be replayed exactly is never recorded.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _null_to_none(value: Any) -> Any:
    """pandas turns NULL strings into NaN (or ``pd.NA``); a recording means ``None``."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if type(value).__name__ == "NAType":
        return None
    return value


@dataclass(frozen=True)
class Outcome:
    """The result for one input record: its response, or a dead letter with the error.

    ``attempts`` counts the calls made for the record (0 when nothing was called).
    ``source`` says whether the outcome came from calls or from a recording; it is excluded from
    equality so a replayed outcome compares equal to the live one.
    """

    arrival_seq: int
    watermark_ms: int
    record: Mapping[str, Any]
    status: Status
    response: Any = None
    error_type: str | None = None
    error_message: str | None = None
    attempts: int = 0
    source: Source = field(default="call", compare=False)
    response_json: str | None = field(default=None, compare=False, repr=False)
    """The response's canonical JSON when the operator already made it (recording on): the
    recording reuses it instead of serialising the response a second time."""

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def is_dead_letter(self) -> bool:
        return self.status == DEAD_LETTER

    def to_row(self) -> dict[str, Any]:
        """The outcome without its record, as flat columns (join back on ``arrival_seq``).

        ``response_json`` is canonical JSON, the same text the recording holds.
        """
        return {
            "arrival_seq": self.arrival_seq,
            "watermark_ms": self.watermark_ms,
            "status": self.status,
            "response_json": canonical_json(self.response) if self.ok else None,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "attempts": self.attempts,
        }


@dataclass(frozen=True)
class Recording:
    """What a live run remembers for one record so a backfill can reproduce its outcome.

    Keyed by ``arrival_seq`` (unique in the arrival log, never reused). Dead letters are recorded
    too: a backfill reproduces the live run, failures included. ``response_json`` is canonical
    JSON text so the row can be stored as a string column and compared byte for byte.
    """

    arrival_seq: int
    status: Status
    response_json: str | None
    error_type: str | None
    error_message: str | None
    attempts: int

    @classmethod
    def from_outcome(cls, outcome: Outcome) -> Recording:
        return cls(
            arrival_seq=outcome.arrival_seq,
            status=outcome.status,
            response_json=(outcome.response_json or canonical_json(outcome.response))
            if outcome.ok else None,
            error_type=outcome.error_type,
            error_message=outcome.error_message,
            attempts=outcome.attempts,
        )

    def to_outcome(self, record: Mapping[str, Any], watermark_ms: int) -> Outcome:
        response = json.loads(self.response_json) if self.response_json is not None else None
        return Outcome(
            arrival_seq=self.arrival_seq,
            watermark_ms=watermark_ms,
            record=record,
            status=self.status,
            response=response,
            error_type=self.error_type,
            error_message=self.error_message,
            attempts=self.attempts,
            source="recording",
        )

    def to_row(self) -> dict[str, Any]:
        """A flat dict (arrival_seq BIGINT, status/response_json/error_* STRING, attempts INT)."""
        return asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Recording:
        """Accepts dicts from JSON, Spark ``Row.asDict()`` or pandas (NaN/NA read as null)."""
        return cls(
            arrival_seq=int(row["arrival_seq"]),
            status=row["status"],
            response_json=_null_to_none(row.get("response_json")),
            error_type=_null_to_none(row.get("error_type")),
            error_message=_null_to_none(row.get("error_message")),
            attempts=int(row["attempts"]),
        )

    def to_json(self) -> str:
        return canonical_json(self.to_row())

    @classmethod
    def from_json(cls, text: str) -> Recording:
        return cls.from_row(json.loads(text))


def recordings_by_seq(recordings: Any) -> dict[int, Recording]:
    """Index recordings (``Recording`` objects or row dicts) by ``arrival_seq``.

    A later recording of the same record wins: a refresh supersedes what was recorded before.
    """
    index: dict[int, Recording] = {}
    for item in recordings:
        recording = item if isinstance(item, Recording) else Recording.from_row(item)
        index[recording.arrival_seq] = recording
    return index


@dataclass
class EnrichmentMetrics:
    """Counters for one run (a partition, a batch); ``merge`` adds partitions together.

    ``calls`` counts attempts actually sent; ``retries`` those after the first; ``timeouts`` and
    ``errors`` (exceptions other than timeouts) and ``rejected_results`` count failed attempts.
    ``max_in_flight`` is the highest number of calls running at once, never above capacity.
    """

    records: int = 0
    calls: int = 0
    retries: int = 0
    timeouts: int = 0
    errors: int = 0
    rejected_results: int = 0
    succeeded: int = 0
    dead_letters: int = 0
    replayed: int = 0
    missing_recordings: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    call_ms: list[float] = field(default_factory=list, repr=False)
    """Duration of every attempt (ms), for :meth:`latency_percentiles`."""

    def call_started(self) -> float:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return time.perf_counter()

    def call_finished(self, started: float) -> None:
        self.in_flight -= 1
        self.call_ms.append((time.perf_counter() - started) * 1000)

    def latency_percentiles(self) -> dict[str, float]:
        """p50/p95/p99/max of the attempts' durations (ms); empty without calls."""
        if not self.call_ms:
            return {}
        ordered = sorted(self.call_ms)

        def at(share: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 2)

        return {"call_p50_ms": at(0.50), "call_p95_ms": at(0.95), "call_p99_ms": at(0.99),
                "call_max_ms": round(ordered[-1], 2)}

    def counters(self) -> dict[str, int]:
        """The counts alone (no durations, no momentary in-flight value)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("call_ms", "in_flight")}

    def merge(self, other: EnrichmentMetrics) -> EnrichmentMetrics:
        merged = EnrichmentMetrics()
        for f in fields(self):
            if f.name == "max_in_flight":
                value = max(self.max_in_flight, other.max_in_flight)
            else:
                value = getattr(self, f.name) + getattr(other, f.name)
            setattr(merged, f.name, value)
        return merged

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
