"""A Kafka record's value parsed in the JVM, where Spark's Kafka source reads it.

Most records of a healthy topic are plain good events: a JSON object with a string key, an
integer event time and a number that ``DECIMAL(38, 9)`` holds as written. Spark's own JSON
parser (``try_parse_json``, to a variant) recognises those next to the Kafka source, so their
key, event time and value reach the driver as typed columns and no Python code reads their
JSON. Every other record (not JSON, a tombstone, a bad key, an ISO event time, a value to
round, anything unusual) is marked for the landing rules in Python, which give it the
reason and detail a landing line would get; so the JVM decides only what it can decide
exactly as ``parse_line`` would (tests/kafka/test_jvm_values.py throws the same fuzz at both).

What keeps the two exactly equal, condition by condition:

- the value's bytes are printable ASCII (no control characters, no escapes of invalid UTF-8
  to interpret) and within ``max_line_bytes``;
- it is one flat JSON object and nothing else, checked by a regular expression of JSON's
  grammar (Spark's parser, like many, reads the first value of a text and ignores what
  follows, where Python's refuses the text), and Spark parses it too (it refuses duplicate
  names, which go to Python, and NaN, which Python refuses); objects with nested objects or
  arrays, and texts over ``_REGEX_BYTES``, go to Python;
- the key is a string of printable ASCII with a character other than a space, at most
  ``MAX_KEY_LENGTH`` long (so ``str.strip`` leaves something and it encodes as UTF-8);
- the event time is an integer inside ``(-2**62, 2**62)``;
- the value is absent, null, or an integer or decimal with at most 9 digits after the point
  and 29 before it (exact in ``DECIMAL(38, 9)``; Python would not round it either).
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.streams.landing.batch import INVALID_UTF8, IngestRules
from jobs.streams.landing.parsing import (
    MAX_KEY_LENGTH,
    ParsedEvent,
    Rejection,
    decode_record,
    parse_line,
    parse_record,
)

NULL_VALUE = "null_value"

_BOUND = 2**62
_PRINTABLE = r"^[ -~]*$"
_REGEX_BYTES = 2_000
"""Longer values go to Python: Java's regular expressions recurse per repetition."""
_STRING = r'"(?:[^"\\]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'
_NUMBER = r"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?"
_SCALAR = rf"(?:{_STRING}|{_NUMBER}|true|false|null)"
_MEMBER = rf"{_STRING} *+: *+{_SCALAR}"
FLAT_OBJECT = rf"^ *+\{{ *+(?:{_MEMBER} *+(?:, *+{_MEMBER} *+)*+)?\}} *+$"
"""One JSON object of scalars, spaces allowed between tokens (the other whitespace is not
printable, so such texts never get here)."""


def jvm_event_columns(value: Column, record_key: Column, stamp: Column, max_bytes: int,
                      key_from_record: bool, time_from_record: bool) -> dict[str, Column]:
    """Columns to select beside the Kafka source's: ``jvm_event`` (the record is a plain good
    event, parsed here), and for those ``jvm_key``, ``jvm_time_ms``, ``jvm_value`` and
    ``jvm_text`` (the value as text, the arrival log's payload)."""
    text = value.cast("string")
    readable = (value.isNotNull() & (F.octet_length(value) <= min(max_bytes, _REGEX_BYTES))
                & text.rlike(_PRINTABLE) & text.rlike(FLAT_OBJECT))
    variant = F.try_parse_json(F.when(readable, text))
    is_object = variant.isNotNull()
    if key_from_record:
        key = record_key.cast("string")
        key_ok = record_key.isNotNull()
    else:
        key = F.try_variant_get(variant, "$.key", "string")
        key_ok = F.schema_of_variant(F.variant_get(variant, "$.key", "variant")) == "STRING"
    key_ok = key_ok & key.rlike(_PRINTABLE) & key.rlike(r"[!-~]") & (F.length(key) <= MAX_KEY_LENGTH)
    if time_from_record:
        event_time = stamp
        time_ok = stamp.isNotNull()
    else:
        event_time = F.try_variant_get(variant, "$.event_time", "bigint")
        time_ok = F.schema_of_variant(F.variant_get(variant, "$.event_time", "variant")) == "BIGINT"
    time_ok = time_ok & (event_time > -_BOUND) & (event_time < _BOUND)
    value_field = F.variant_get(variant, "$.value", "variant")
    value_shape = F.schema_of_variant(value_field)
    digits = F.regexp_extract(value_shape, r"^DECIMAL\((\d+),(\d+)\)$", 1)
    scale = F.regexp_extract(value_shape, r"^DECIMAL\((\d+),(\d+)\)$", 2)
    exact_decimal = (digits != "") & (scale.cast("int") <= 9) & \
        (digits.cast("int") - scale.cast("int") <= 29)
    # absent (SQL NULL), JSON null (VOID), an integer, or an exact decimal
    value_ok = value_field.isNull() | value_shape.isin("VOID", "BIGINT") | exact_decimal
    event = F.coalesce(is_object & key_ok & time_ok & value_ok, F.lit(False))
    return {
        "jvm_event": event,
        "jvm_key": F.when(event, key),
        "jvm_time_ms": F.when(event, event_time),
        "jvm_value": F.when(event, F.try_variant_get(variant, "$.value", "decimal(38,9)")),
        "jvm_text": F.when(event, text),
    }


def python_verdicts(values: list[bytes | None], keys: list[bytes | None], stamps: list[int],
                    rules: IngestRules, key_from: Literal["field", "record_key"] = "field",
                    time_from: Literal["field", "record_timestamp"] = "field",
                    ) -> list[tuple[str, ParsedEvent | Rejection]]:
    """Each value's text and verdict by the landing rules: a tombstone or bytes that are not
    UTF-8 are quarantined as such, the rest parsed as landing lines; with ``record_key`` or
    ``record_timestamp`` the record's own key or timestamp stands in for the value's field."""
    texts: list[str] = []
    verdicts: list[ParsedEvent | Rejection | None] = []
    for value in values:
        if value is None:
            texts.append("")
            verdicts.append(Rejection(NULL_VALUE, "the record has no value (a tombstone)"))
            continue
        try:
            texts.append(value.decode("utf-8"))
            verdicts.append(None)  # parsed below
        except UnicodeDecodeError as error:
            texts.append(value.decode("utf-8", errors="replace"))
            verdicts.append(Rejection(INVALID_UTF8, str(error)[:200]))
    parsable = [i for i, verdict in enumerate(verdicts) if verdict is None]
    lines = [texts[i] for i in parsable]
    if key_from == "field" and time_from == "field":
        parsed = rules.parser.parse_many(lines)
    else:
        parsed = [_with_record_fields(line, keys[i], stamps[i], rules.max_line_bytes,
                                      key_from, time_from)
                  for line, i in zip(lines, parsable, strict=True)]
    for i, verdict in zip(parsable, parsed, strict=True):
        verdicts[i] = verdict
    return list(zip(texts, verdicts, strict=True))  # type: ignore[arg-type]


def _with_record_fields(text: str, key: bytes | None, stamp: int, limit: int,
                        key_from: str, time_from: str) -> ParsedEvent | Rejection:
    try:
        record = decode_record(text)
    except (ValueError, RecursionError):
        record = None
    if not isinstance(record, dict) or len(text.encode("utf-8", "surrogatepass")) > limit:
        return parse_line(text, limit)  # its rejection, as for a landing line
    if key_from == "record_key":
        record["key"] = None if key is None else key.decode("utf-8", errors="replace")
    if time_from == "record_timestamp":
        record["event_time"] = stamp
    return parse_record(record)
