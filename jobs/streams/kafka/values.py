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

- the value's bytes are printable ASCII (no control characters, no invalid UTF-8) within
  ``max_line_bytes``, one flat JSON object and nothing else, checked by a regular expression
  of JSON's grammar (Spark's parser, like many, reads the first value of a text and ignores
  what follows, where Python's refuses the text); and Spark parses it too (it refuses
  duplicate names, which go to Python). Objects with nested objects or arrays, and texts
  over ``_REGEX_BYTES``, go to Python;
- the key is a string of printable ASCII with a character other than a space, at most
  ``MAX_KEY_LENGTH`` long (so ``str.strip`` leaves something and it encodes as UTF-8);
- the event time is an integer inside ``(-2**62, 2**62)``;
- the value is absent, null, or an integer or decimal literal (no exponent) that
  ``DECIMAL(38, 9)`` holds once rounded half up, Spark's cast rounding as Python's rule does.
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.streams.landing.batch import INVALID_UTF8, IngestRules
from jobs.streams.landing.parsing import (
    EVENT_TIME_BOUND,
    MAX_KEY_LENGTH,
    ParsedEvent,
    Rejection,
    decode_record,
    parse_line,
    parse_record,
)

NULL_VALUE = "null_value"

_BOUND = EVENT_TIME_BOUND
_REGEX_BYTES = 2_000
"""Longer values go to Python: Java's regular expressions recurse per repetition."""
_STRING = r'"(?:[ !#-\[\]-~]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"'
_NUMBER = r"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][-+]?[0-9]++)?"
_SCALAR = rf"(?:{_STRING}|{_NUMBER}|true|false|null)"
_MEMBER = rf"{_STRING} *+: *+{_SCALAR}"
FLAT_OBJECT = rf"^ *+\{{ *+(?:{_MEMBER} *+(?:, *+{_MEMBER} *+)*+)?\}} *+\z"
"""One JSON object of scalars in printable ASCII, spaces allowed between tokens (JSON's other
whitespace is not printable: such texts go to Python)."""
_KEY = rf"^(?=[ -~]{{0,{MAX_KEY_LENGTH}}}\z) *+[!-~]"
"""Printable ASCII with something besides spaces, at most ``MAX_KEY_LENGTH`` long."""


def with_jvm_events(frame: DataFrame, max_bytes: int, key_from_record: bool,
                    time_from_record: bool) -> DataFrame:
    """``frame`` (the Kafka source's columns ``value``, ``key`` and ``stamp``, the timestamp in
    ms) with ``jvm_event`` (the record is a plain good event, parsed here), for those
    ``jvm_key``, ``jvm_time_ms``, ``jvm_value`` and ``jvm_text`` (the value as text, the
    arrival log's payload), and ``raw``: the value of every other record, for Python.

    Each step is a projection of its own so that the parsed variant and the verdict are
    computed once per record: Spark does not fold a projection into the next where that would
    evaluate an expensive expression more than once (one ``select`` evaluated the verdict once
    per output column, 2.5 times the cost)."""
    text = F.col("value").cast("string")
    readable = (F.col("value").isNotNull()
                & (F.octet_length("value") <= min(max_bytes, _REGEX_BYTES))
                & text.rlike(FLAT_OBJECT))
    parsed = frame.select("*", F.try_parse_json(F.when(readable, text)).alias("_variant"))
    variant = F.col("_variant")
    if key_from_record:
        key, key_type = F.col("key").cast("string"), F.lit("STRING")
    else:
        key = F.try_variant_get(variant, "$.key", "string")
        key_type = F.schema_of_variant(F.variant_get(variant, "$.key", "variant"))
    if time_from_record:
        event_time, time_type = F.col("stamp"), F.lit("BIGINT")
    else:
        event_time = F.try_variant_get(variant, "$.event_time", "bigint")
        time_type = F.schema_of_variant(F.variant_get(variant, "$.event_time", "variant"))
    value = F.variant_get(variant, "$.value", "variant")
    fields = parsed.select(
        "*", key.alias("_key"), key_type.alias("_key_type"), event_time.alias("_time"),
        time_type.alias("_time_type"), F.schema_of_variant(value).alias("_value_type"),
        F.try_variant_get(variant, "$.value", "decimal(38,9)").alias("_number"))
    value_type = F.col("_value_type")
    # absent (SQL NULL), JSON null (VOID), or an integer or decimal as written (a literal
    # with an exponent, or too long for a decimal, is a double, which Python reads exactly)
    # that DECIMAL(38, 9) holds once rounded half up, as Python's rule rounds it
    value_ok = value_type.isNull() | (value_type == "VOID") | (
        ((value_type == "BIGINT") | value_type.startswith("DECIMAL("))
        & F.col("_number").isNotNull())
    event = (variant.isNotNull() & F.col("_key").isNotNull()
             & (F.col("_key_type") == "STRING") & F.col("_key").rlike(_KEY)
             & (F.col("_time_type") == "BIGINT") & (F.col("_time") > -_BOUND)
             & (F.col("_time") < _BOUND) & value_ok)
    judged = fields.select("*", F.coalesce(event, F.lit(False)).alias("jvm_event"))
    is_event = F.col("jvm_event")
    out = judged.select(
        *(c for c in frame.columns if c != "value"), "jvm_event",
        F.when(is_event, F.col("_key")).alias("jvm_key"),
        F.when(is_event, F.col("_time")).alias("jvm_time_ms"),
        F.when(is_event, F.col("_number")).alias("jvm_value"),
        F.when(is_event, F.col("value").cast("string")).alias("jvm_text"),
        F.when(~is_event, F.col("value")).alias("raw"))
    return out


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
