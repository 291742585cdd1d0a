"""Landing lines parsed at C speed, with the very results of :func:`parsing.parse_line`.

Profiled at 80,000 events/s offered, ingest was the live job's ceiling: one core of Python
decoding and checking lines one by one (benchmarks/RESULTS.md, "Ingest at Spark's ceiling").
Here ``msgspec`` decodes a file part's lines in one C call (``decode_lines``, newline-delimited
JSON) into the few fields ingest reads (key, event time, value, and the ingest clock's and
punctuation's fields when configured), numbers with a fraction as exact ``Decimal`` from their
literal text as ``parse_line`` reads them, the other fields skipped unbuilt; the values are
checked in bulk by Arrow's ``DECIMAL(38, 9)``.

Only a line whose outcome is a plain good record takes this path: ASCII text within the size
limit, valid JSON, a non-blank string key, an integer event time within range, a number or no
value that ``DECIMAL(38, 9)`` holds exactly. Every other line (a rejection, an ISO event time,
a non-ASCII line, a value to round or out of range) goes through ``parse_line`` itself, so its
record or its rejection, reason and detail are what they always were
(tests/test_fast_parse.py fuzzes both with the same inputs).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import msgspec
import pyarrow as pa

from jobs.streams.landing.parsing import MAX_KEY_LENGTH, ParsedEvent, Rejection, parse_line
from operators.numbers import to_exact

_BOUND = 2**62
_DECIMAL = pa.decimal128(38, 9)
_AT_BYTE = re.compile(r"\(byte (\d+)\)")
_AT_INDEX = re.compile(r"\$\[(\d+)\]")


class FastParser:
    """``parse_line`` for many lines at once; ``extra_fields`` are the record's fields ingest
    reads besides key, event time and value (the ingest clock's, a punctuated watermark's)."""

    def __init__(self, max_line_bytes: int, extra_fields: Iterable[str | None] = ()) -> None:
        self.max_line_bytes = max_line_bytes
        names = list(dict.fromkeys(["key", "event_time", "value",
                                    *(f for f in extra_fields if f)]))
        self.names = names
        record = msgspec.defstruct("LandedRecord", [(name, object, None) for name in names])
        decoder = msgspec.json.Decoder(record, float_hook=Decimal)
        self._decode = decoder.decode
        self._decode_lines = decoder.decode_lines
        self._extras = names[3:]

    def parse(self, line: str) -> ParsedEvent | Rejection:
        """Exactly ``parse_line(line, max_line_bytes)`` (a value as read, not yet rounded)."""
        return self.parse_many([line])[0]

    def parse_many(self, lines: Sequence[str]) -> list[ParsedEvent | Rejection]:
        """``[parse_line(line) for line in lines]``, the values as read (a ``Decimal`` or an
        ``int`` that ``DECIMAL(38, 9)`` holds exactly), every outcome the same."""
        limit = self.max_line_bytes
        candidates = [i for i, line in enumerate(lines)
                      if len(line) <= limit and line.isascii() and line.strip()]
        records = self._records([lines[i] for i in candidates])
        results: list[Any] = [None] * len(lines)
        values: list[Any] = []
        valued: list[int] = []
        extras = self._extras
        for index, record in zip(candidates, records, strict=True):
            if record is None:
                continue
            key, event_time, value = record.key, record.event_time, record.value
            if type(key) is not str or not key.strip() or len(key) > MAX_KEY_LENGTH or \
                    type(event_time) is not int or not -_BOUND < event_time < _BOUND:
                continue
            if value is not None:
                if type(value) is not int and type(value) is not Decimal:
                    continue
                values.append(value)
                valued.append(index)
            fields = {"key": key, "event_time": event_time, "value": value}
            for name in extras:
                fields[name] = getattr(record, name)
            results[index] = ParsedEvent(key=key, event_time_ms=event_time, value=value,
                                         fields=fields)
        for index in _inexact(values, valued):  # rounded or out of range: parse_line's rule
            results[index] = None
        return [parse_line(line, limit) if result is None else result
                for line, result in zip(lines, results, strict=True)]

    def _records(self, lines: list[str]) -> list[Any]:
        """Each line decoded, or ``None`` where it is not valid JSON of an object (those go
        to ``parse_line``): one ``decode_lines`` over all, resumed after a failing line."""
        if not lines:
            return []
        starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
        joined = memoryview("\n".join(lines).encode("ascii"))  # slices without copies
        found: list[Any] = [None] * len(lines)
        begin = 0
        while begin < len(lines):
            try:
                decoded = self._decode_lines(joined[starts[begin]:])
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                failed = self._failing_line(str(error), begin, starts)
                if failed is None:  # no position given: one line at a time from here
                    for index in range(begin, len(lines)):
                        found[index] = self._one(lines[index])
                    return found
                if failed > begin:
                    found[begin:failed] = self._lines_between(joined, starts, begin, failed)
                begin = failed + 1
                continue
            except RecursionError:
                for index in range(begin, len(lines)):
                    found[index] = self._one(lines[index])
                return found
            if len(decoded) != len(lines) - begin:  # a line held two values: be careful
                for index in range(begin, len(lines)):
                    found[index] = self._one(lines[index])
                return found
            found[begin:] = decoded
            return found
        return found

    def _lines_between(self, joined: memoryview, starts: list[int], begin: int,
                       end: int) -> list:
        try:
            decoded = self._decode_lines(joined[starts[begin]:starts[end] - 1])
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            decoded = []
        if len(decoded) != end - begin:
            return [self._one(bytes(joined[starts[i]:starts[i + 1] - 1]))
                    for i in range(begin, end)]
        return decoded

    def _one(self, line: str) -> Any:
        try:
            return self._decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None

    @staticmethod
    def _failing_line(message: str, begin: int, starts: list[int]) -> int | None:
        """The index of the line an error points at (a byte offset, or ``$[i]``), from the
        slice starting at line ``begin``."""
        match = _AT_INDEX.search(message)
        if match:
            return begin + int(match.group(1))
        match = _AT_BYTE.search(message)
        if match:
            offset = starts[begin] + int(match.group(1))
            line = max(begin, bisect.bisect_right(starts, offset) - 1)
            if offset == starts[line] and line > begin:
                # the error is at the very start of a line: the line before it is the one
                # left open (a truncated object runs on into the next line)
                return line - 1
            return line
        return None


def _inexact(values: list[Any], indexes: list[int]) -> list[int]:
    """The lines whose value ``DECIMAL(38, 9)`` does not hold as read (Arrow checks them all
    at once; one by one only when some do not fit)."""
    if not values:
        return []
    try:
        pa.array(values, _DECIMAL)
        return []
    except (pa.ArrowInvalid, OverflowError, TypeError):
        return [index for index, value in zip(indexes, values, strict=True)
                if to_exact(value) != value or not _fits(value)]


def _fits(value: Any) -> bool:
    try:
        pa.array([value], _DECIMAL)
        return True
    except (pa.ArrowInvalid, OverflowError, TypeError):
        return False
