"""Parse one landing line into an event, or say exactly why it is rejected.

A pure function of the line, so the fuzz tests can throw anything at it and so a re-run of
ingest rejects the very same lines for the very same reasons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from operators.numbers import SCALE, to_exact
from operators.time import parse_timestamp_ms

# Reasons recorded in the quarantine table.
MALFORMED_JSON = "malformed_json"
NOT_AN_OBJECT = "not_an_object"
LINE_TOO_LONG = "line_too_long"
MISSING_KEY = "missing_key"
BAD_KEY = "bad_key"
MISSING_EVENT_TIME = "missing_event_time"
UNPARSABLE_EVENT_TIME = "unparsable_event_time"
BAD_VALUE = "bad_value"
TOO_FAR_IN_FUTURE = "too_far_in_future"
TOO_FAR_IN_PAST = "too_far_in_past"

MAX_KEY_LENGTH = 1024
EVENT_TIME_BOUND = 2**62
"""Event times are epoch milliseconds strictly within ``±EVENT_TIME_BOUND``."""


@dataclass(frozen=True, slots=True)
class ParsedEvent:
    key: str
    event_time_ms: int
    value: Decimal | None
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    detail: str
    event_time_ms: int | None = None


def parse_line(line: str, max_line_bytes: int = 1_000_000) -> ParsedEvent | Rejection:
    """Parse a JSON-lines record: ``key`` (non-empty string), ``event_time`` (epoch ms or
    ISO-8601), optional numeric ``value`` (kept as an exact ``DECIMAL(38, 9)``, rounded half up
    once, here); every other field is kept as payload."""
    size = len(line) if line.isascii() else len(line.encode("utf-8", errors="surrogatepass"))
    if size > max_line_bytes:
        return Rejection(LINE_TOO_LONG, f"{size} bytes, limit {max_line_bytes}")
    try:
        record = decode_record(line)
    except (ValueError, RecursionError) as error:
        return Rejection(MALFORMED_JSON, str(error)[:200])
    return parse_record(record)


def decode_record(line: str) -> Any:
    """A line's JSON: numbers with a fraction as exact decimals; NaN and Infinity are not
    JSON (``ValueError``)."""
    return _DECODER.decode(line)


def parse_record(record: Any) -> ParsedEvent | Rejection:
    """A decoded line's record, or why it is rejected (:func:`parse_line` after decoding; a
    Kafka stream sets its key or event time from the record's own first)."""
    if not isinstance(record, dict):
        return Rejection(NOT_AN_OBJECT, f"a JSON {type(record).__name__}, not an object")
    key = record.get("key")
    if key is None:
        return Rejection(MISSING_KEY, "no 'key' field, or it is null")
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_LENGTH:
        return Rejection(BAD_KEY, f"'key' must be a non-empty string of at most "
                                  f"{MAX_KEY_LENGTH} characters, got {str(key)[:80]!r}")
    if not _is_utf8(key):  # a lone surrogate escaped in JSON: no table can store it
        return Rejection(BAD_KEY, f"'key' holds a lone UTF-16 surrogate, got {key[:80]!r}")
    raw_time = record.get("event_time")
    if raw_time is None:
        return Rejection(MISSING_EVENT_TIME, "no 'event_time' field, or it is null")
    try:
        event_time_ms = parse_timestamp_ms(raw_time)
    except (ValueError, OverflowError) as error:
        return Rejection(UNPARSABLE_EVENT_TIME, str(error)[:200])
    if not -EVENT_TIME_BOUND < event_time_ms < EVENT_TIME_BOUND:
        return Rejection(UNPARSABLE_EVENT_TIME, f"event time {event_time_ms} out of range")
    value = record.get("value")
    if isinstance(value, OutOfRangeNumber):
        return Rejection(BAD_VALUE, f"'value' does not fit DECIMAL(38, {SCALE})", event_time_ms)
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int | Decimal):
            return Rejection(BAD_VALUE, f"'value' must be a number, got {str(value)[:80]!r}",
                             event_time_ms)
        value = to_exact(value)
        if value is None:
            return Rejection(BAD_VALUE, f"'value' does not fit DECIMAL(38, {SCALE})",
                             event_time_ms)
    return ParsedEvent(key=key, event_time_ms=event_time_ms, value=value, fields=record)


def _is_utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class OutOfRangeNumber:
    """A JSON number ``Decimal`` cannot hold: its exponent is beyond ±10**18
    (``1e1000000000000000000``). Valid JSON, so the line decodes; as a value it does not fit,
    as an event time it is unparsable, elsewhere in the record it is only payload."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return type(other) is OutOfRangeNumber and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return self.text


def json_decimal(text: str) -> Decimal | OutOfRangeNumber:
    """A JSON number with a fraction or an exponent as an exact decimal (the json module and
    msgspec both read them through this): ``Decimal`` refused such exponents, and ingest
    stopped on the line."""
    try:
        return Decimal(text)
    except InvalidOperation:
        return OutOfRangeNumber(text)


_DECODER = json.JSONDecoder(parse_float=json_decimal, parse_constant=_reject_constant)
"""One decoder for every line: ``json.loads`` with options builds a new one per call."""


def check_event_time_bounds(event_time_ms: int, ingest_time_ms: int, max_future_ms: int,
                            max_past_ms: int) -> Rejection | None:
    """Event times absurdly far from the ingest clock never reach operators (docs/contract.md,
    section 1)."""
    if event_time_ms > ingest_time_ms + max_future_ms:
        return Rejection(TOO_FAR_IN_FUTURE,
                         f"event time is {event_time_ms - ingest_time_ms} ms after ingest time; "
                         f"limit {max_future_ms} ms", event_time_ms)
    if event_time_ms < ingest_time_ms - max_past_ms:
        return Rejection(TOO_FAR_IN_PAST,
                         f"event time is {ingest_time_ms - event_time_ms} ms before ingest time; "
                         f"limit {max_past_ms} ms", event_time_ms)
    return None
