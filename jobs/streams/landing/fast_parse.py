"""Landing lines parsed at C speed, with the very results of :func:`parsing.parse_line`.

Profiled at 80,000 events/s offered, ingest was the live job's ceiling: one core of Python
decoding and checking lines one by one (benchmarks/history.md, "Ingest at Spark's ceiling").
Here ``msgspec`` decodes a file part's lines in one C call (``decode_lines``, newline-delimited
JSON) into the few fields ingest reads (key, event time, value, and the ingest clock's and
punctuation's fields when configured), the other fields skipped unbuilt. The value is kept
as its JSON text and a part's values become ``DECIMAL(38, 9)`` in one Arrow cast, which also
tells which ones it holds exactly; numbers in the other fields are exact ``Decimal`` from
their literal text, as ``parse_line`` reads them.

Only a line whose outcome is a plain good record takes this path: ASCII text within the size
limit, valid JSON, a non-blank string key, an event time within range (an integer, or a text
read as ``parse_line`` reads it: the usual ISO-8601 shape for a whole part in one Arrow cast,
``iso_times.py``, any other by the very function ``parse_line`` reads it with), a number or
no value that
``DECIMAL(38, 9)`` holds exactly. Every other line (a rejection, a non-ASCII line, a value to
round or out of range) goes through ``parse_line`` itself, so its
record or its rejection, reason and detail are what they always were
(tests/test_fast_parse.py fuzzes both with the same inputs).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from operator import attrgetter
from typing import Annotated, Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.streams.landing import native_scan as native_scan_module
from jobs.streams.landing.iso_times import text_times_ms
from jobs.streams.landing.lines import Lines
from jobs.streams.landing.parsing import (
    EVENT_TIME_BOUND,
    MAX_KEY_LENGTH,
    ParsedEvent,
    Rejection,
    json_decimal,
    parse_line,
)
from operators.numbers import to_exact
from operators.time import parse_timestamp_ms

_BOUND = EVENT_TIME_BOUND
_KEY = Annotated[str, msgspec.Meta(max_length=MAX_KEY_LENGTH)]
"""A key the fast path takes: a string of at most ``MAX_KEY_LENGTH`` characters (code points,
as ``len`` counts them); whether it is blank is checked after decoding."""
_EVENT_TIME = Annotated[int, msgspec.Meta(gt=-_BOUND, lt=_BOUND)] | str
"""An event time the fast path takes: epoch milliseconds within ``±2**62``, or a text read
as ``parse_line`` reads it (ISO-8601, ``iso_times.py``)."""
_NO_VALUE = msgspec.Raw(b"")
"""A record without a value: no JSON text is empty."""
_DECIMAL = pa.decimal128(38, 9)
_AT_BYTE = re.compile(r"\(byte (\d+)\)")
_AT_INDEX = re.compile(r"\$\[(\d+)\]")


class FastParser:
    """``parse_line`` for many lines at once; ``extra_fields`` are the record's fields ingest
    reads besides key, event time and value (the ingest clock's, a punctuated watermark's)."""

    def __init__(self, max_line_bytes: int, extra_fields: Iterable[str | None] = (),
                 chunk_lines: int = 64, native_scan: bool = True) -> None:
        self.max_line_bytes = max_line_bytes
        self.chunk_lines = chunk_lines
        names = list(dict.fromkeys(["key", "event_time", "value",
                                    *(f for f in extra_fields if f)]))
        self.names = names
        self._extras = list(dict.fromkeys(f for f in extra_fields if f))
        # the value as its JSON text, unless another role reads that field too: Arrow turns
        # a part's texts into DECIMAL(38, 9) at once (a Decimal per value, made while
        # decoding and again converted to Arrow, was a fifth of ingest's time)
        self._raw_values = "value" not in self._extras
        # key and event time typed: msgspec checks a string key within the length limit and
        # an integer event time within range in C, and a line it refuses goes to
        # ``parse_line`` as any line it cannot decode (a check per line in Python was a
        # fifth of a part's parse)
        typed = {"key": _KEY, "event_time": _EVENT_TIME}
        record = msgspec.defstruct("LandedRecord", [
            (name, msgspec.Raw, _NO_VALUE) if name == "value" and self._raw_values else
            (name, typed[name]) if name in typed else
            (name, object, None) for name in names],
            gc=False)  # JSON makes trees, never cycles: untracked, decoded and freed sooner
        decoder = msgspec.json.Decoder(record, float_hook=json_decimal)
        self._decode = decoder.decode
        self._decode_lines = decoder.decode_lines
        # a line msgspec cannot decode stands as a record whose blank key marks it (not a
        # plain record), so that every field is read with one C getter over all the records
        # (a ``getattr`` with a default per record and field was a third of a part's parse)
        self._undecoded = record("", 0)
        self._getters = {name: attrgetter(name) for name in names}
        # the native scanner reads the value as its text and the key and event time itself
        self._scannable = native_scan and native_scan_module.available() and \
            self._raw_values and not {"key", "event_time"} & set(self._extras)

    @property
    def extras(self) -> list[str]:
        """The fields besides key, event time and value that ingest reads (the ingest clock's,
        the punctuation's), even when one of them is the key, event time or value itself."""
        return self._extras

    def parse(self, line: str) -> ParsedEvent | Rejection:
        """Exactly ``parse_line(line, max_line_bytes)`` (a value as read, not yet rounded)."""
        return self.parse_many([line])[0]

    def parse_many(self, lines: Sequence[str]) -> list[ParsedEvent | Rejection]:
        """``[parse_line(line) for line in lines]``, the values as read (a ``Decimal`` or an
        ``int`` that ``DECIMAL(38, 9)`` holds exactly), every outcome the same."""
        parsed = self.parse_columns(lines)
        return [parsed.verdict(index) for index in range(len(lines))]

    def parse_columns(self, lines: Sequence[str]) -> ParsedLines:
        """:meth:`parse_many` as columns: a plain good record costs no Python object of its
        own beyond its decoded fields (at 80,000 lines a second, a ``ParsedEvent`` and a dict
        per line were most of ingest's time)."""
        count = len(lines)
        limit = self.max_line_bytes
        candidates: Sequence[int] = range(count)
        if isinstance(lines, Lines) and self._scannable:
            scanned = self._scanned(lines)
            if scanned is not None:
                return scanned
        if isinstance(lines, Lines) and lines.longest <= limit:  # ASCII, none blank
            records = self._decoded(memoryview(lines.data), lines.starts.tolist(), lines)
        else:
            if isinstance(lines, Lines):
                lines = list(lines)
            if all(map(str.isascii, lines)) and all(map(str.strip, lines)) and \
                    (not count or max(map(len, lines)) <= limit):
                chosen = list(lines)
            else:
                candidates = [i for i, line in enumerate(lines)
                              if len(line) <= limit and line.isascii() and line.strip()]
                chosen = [lines[i] for i in candidates]
            records = self._records(chosen)
        keys = self._column(records, "key")  # "": not decoded
        times = self._column(records, "event_time")
        # decoded (so key and event time are as typed) with a key that is not blank and an
        # event time in milliseconds
        plain = np.fromiter(map(bool, map(str.strip, keys)), dtype=bool, count=len(records))
        if set(map(type, times)) - {int}:  # some ISO-8601 texts: read as ingest reads them
            in_ms = np.fromiter(map(isinstance, times, itertools.repeat(int)), dtype=bool,
                                count=len(records))
            text_at = np.flatnonzero(plain & ~in_ms).tolist()
            _read_text_times(text_at, [times[j] for j in text_at], times, plain)
        if self._raw_values:
            texts = self._column(records, "value")
            value_array, exact = _raw_values(texts)
            plain &= exact
            values: list[Any] | pa.Array = value_array
        else:
            raw = self._column(records, "value")
            plain &= np.fromiter(map(_plain_value, raw), dtype=bool, count=len(records))
            valued = [j for j in np.flatnonzero(plain).tolist() if raw[j] is not None]
            for j in _inexact([raw[j] for j in valued], valued):  # parse_line rounds these
                plain[j] = False
            values = raw
        extras = {name: self._column(records, name) for name in self._extras}
        if len(records) == count and plain.all():  # every line a plain good record
            return ParsedLines(np.ones(count, dtype=bool), keys,
                               np.array(times, dtype=np.int64), values, extras, {})
        if isinstance(values, pa.Array) and len(records) == count:
            return self._with_slow(lines, plain, keys, times, values, extras)
        if isinstance(values, pa.Array):
            values = values.to_pylist()
        if len(records) == count:  # every line decoded in place: clear the few others
            is_event, events, out_keys, out_values, out_extras = _in_place(
                plain, keys, times, values, extras)
        else:
            is_event, events, out_keys, out_values, out_extras = _placed(
                count, candidates, plain, keys, times, values, extras)
        slow, others, found = self._judged(lines, is_event, events, out_keys, out_extras)
        for i, value in zip(others, found, strict=True):
            out_values[i] = value
        return ParsedLines(is_event, out_keys, events, out_values, out_extras, slow)

    def _scanned(self, lines: Lines) -> ParsedLines | None:
        """:meth:`parse_columns` of a part's bytes through the native scanner, or ``None``
        when it is not available or failed (:func:`native_scan.scan`): the scanned lines'
        text event times and values checked as msgspec's are, every other line judged by
        ``parse_line``."""
        scan = native_scan_module.scan(lines, self.max_line_bytes, MAX_KEY_LENGTH, self._extras)
        if scan is None:
            return None
        plain = scan.status != native_scan_module.NOT_SCANNED
        events = scan.times
        text_at = np.flatnonzero(scan.status == native_scan_module.TEXT_TIME).tolist()
        if text_at:
            _read_text_times(text_at, scan.text_times.take(text_at).to_pylist(), events, plain)
        values, exact = _scanned_values(scan)
        plain &= exact
        extras = scan.extras
        if plain.all():
            return ParsedLines(plain, scan.keys, events, values, extras, {})
        _clear_others(plain, events, extras)
        found_keys: dict[int, str] = {}  # the records parse_line finds among those lines
        is_event = plain.copy()
        slow, others, found = self._judged(lines, is_event, events, found_keys, extras)
        keys = _patched(scan.keys, others, [found_keys.get(i) for i in others], pa.string())
        values = _patched(values, others, found, _DECIMAL)
        return ParsedLines(is_event, keys, events, values, extras, slow)

    def _judged(self, lines: Sequence[str], is_event: np.ndarray, events: np.ndarray,
                keys: list[Any] | dict[int, Any], extras: dict[str, list[Any]]
                ) -> tuple[dict[int, ParsedEvent | Rejection], list[int], list[Any]]:
        """``parse_line`` for every line not yet a record: its outcome by line, the records
        it found put in place (all but their values), and those lines with their values
        (``None`` for a rejection), for the caller's list or array of values."""
        slow: dict[int, ParsedEvent | Rejection] = {}
        others = np.flatnonzero(~is_event).tolist()
        found: list[Any] = []
        for i in others:
            verdict = parse_line(lines[i], self.max_line_bytes)
            slow[i] = verdict
            found.append(None)
            if type(verdict) is ParsedEvent:
                is_event[i] = True
                events[i] = verdict.event_time_ms
                keys[i], found[-1] = verdict.key, verdict.value
                for name in self._extras:
                    extras[name][i] = verdict.fields.get(name)
        return slow, others, found

    def _with_slow(self, lines: Sequence[str], plain: np.ndarray, keys: list[Any],
                   times: list[Any], values: pa.Array, extras: dict[str, list[Any]]
                   ) -> ParsedLines:
        """Every line decoded in place, values as Arrow's: the lines that are not plain
        records go through ``parse_line``, their values put in place in the array."""
        is_event, events, keys, _, extras = _in_place(plain, keys, times, [None] * len(keys),
                                                      extras)
        slow, others, found = self._judged(lines, is_event, events, keys, extras)
        return ParsedLines(is_event, keys, events, _patched(values, others, found, _DECIMAL),
                           extras, slow)

    def _column(self, records: list[Any], name: str) -> list[Any]:
        return list(map(self._getters[name], records))

    def _records(self, lines: list[str]) -> list[Any]:
        """Each line decoded, or the undecoded record where it is not valid JSON of an object
        (those go to ``parse_line``): one ``decode_lines`` over all; after a line it cannot
        take, the rest in chunks of ``chunk_lines``, so that the lines before the next
        failing one are decoded again only back to their chunk's start (not back to the last
        failure: a part with a bad line every 200 decoded most of its lines twice)."""
        if not lines:
            return []
        starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
        joined = memoryview("\n".join(lines).encode("ascii"))  # slices without copies
        return self._decoded(joined, starts, lines)

    def _decoded(self, joined: memoryview, starts: list[int], lines: Sequence[str]
                 ) -> list[Any]:
        """:meth:`_records` of ``lines``, which are ``joined`` (ASCII, each line ``i`` at
        ``starts[i]`` up to the newline before ``starts[i + 1]``)."""
        count = len(lines)
        if not count:
            return []
        found: list[Any] = [self._undecoded] * count
        begin, chunk = 0, count
        while begin < count:
            end = min(count, begin + chunk)
            try:
                decoded = self._decode_lines(joined[starts[begin]:starts[end] - 1])
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                failed = self._failing_line(str(error), begin, starts)
                if failed is None or failed >= end:  # no usable position: one at a time
                    found[begin:end] = [self._one(lines[i]) for i in range(begin, end)]
                    begin = end
                else:
                    if failed > begin:
                        found[begin:failed] = self._lines_between(joined, starts, begin, failed)
                    begin = failed + 1  # the failing line goes to ``parse_line``
                chunk = self.chunk_lines
                continue
            except RecursionError:
                found[begin:end] = [self._one(lines[i]) for i in range(begin, end)]
            else:
                if len(decoded) == end - begin:
                    found[begin:end] = decoded
                else:  # a line held two values: be careful
                    found[begin:end] = [self._one(lines[i]) for i in range(begin, end)]
            begin = end
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
            return self._undecoded

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


_Columns = tuple[np.ndarray, np.ndarray, list[Any], list[Any], dict[str, list[Any]]]


def _in_place(plain: np.ndarray, keys: list[Any], times: list[Any], values: list[Any],
              extras: dict[str, list[Any]]) -> _Columns:
    """The plain records' columns when line ``i`` is decoded record ``i``: the decoded
    columns themselves, the few lines that are not plain records emptied (a part with one bad
    line in 200 paid a Python step per line to copy the rest)."""
    for i in _clear_others(plain, times, extras):
        keys[i] = values[i] = None
    return plain.copy(), np.array(times, dtype=np.int64), keys, values, extras


def _clear_others(plain: np.ndarray, times: list[Any] | np.ndarray,
                  extras: dict[str, list[Any]]) -> list[int]:
    """The lines that are not plain records, their event times (0) and extra fields emptied
    in place, for ``parse_line`` to fill those it finds records in (a loop over the few, not
    a copy of every column; a decoded time may still be a text it did not read)."""
    others = np.flatnonzero(~plain).tolist()
    for i in others:
        times[i] = 0
        for column in extras.values():
            column[i] = None
    return others


def _patched(column: pa.Array, others: list[int], found: list[Any],
             kind: pa.DataType) -> pa.Array:
    """``column`` with the entries at ``others`` (ascending) replaced by ``found``: what
    ``parse_line`` read of those lines (``None`` for a rejection)."""
    if not others:
        return column
    mask = np.zeros(len(column), dtype=bool)
    mask[others] = True
    return pc.replace_with_mask(column, pa.array(mask), pa.array(found, kind))


def _read_text_times(at: list[int], texts: list[str], times: list[Any] | np.ndarray,
                     plain: np.ndarray) -> None:
    """The text event times of lines ``at`` read into ``times`` in milliseconds, as
    ``parse_line`` reads them; a line whose text it rejects is no longer plain (time 0), so
    ``parse_line`` judges it and says why."""
    for j, ms in zip(at, text_times_ms(texts, _text_time_ms, _BOUND), strict=True):
        if ms is None:
            times[j], plain[j] = 0, False
        else:
            times[j] = ms


def _placed(count: int, candidates: Sequence[int], plain: np.ndarray, keys: list[Any],
            times: list[Any], values: list[Any], extras: dict[str, list[Any]]) -> _Columns:
    """The plain records' columns when only ``candidates`` were decoded (record ``j`` is line
    ``candidates[j]``)."""
    fast = np.flatnonzero(plain)
    at = np.asarray(candidates, dtype=np.int64)[fast].tolist()
    picked = fast.tolist()
    is_event = np.zeros(count, dtype=bool)
    is_event[at] = True
    events = np.zeros(count, dtype=np.int64)
    events[at] = [times[j] for j in picked]
    out_keys: list[Any] = [None] * count
    out_values: list[Any] = [None] * count
    out_extras: dict[str, list[Any]] = {name: [None] * count for name in extras}
    for i, j in zip(at, picked, strict=True):
        out_keys[i] = keys[j]
        out_values[i] = values[j]
        for name, column in extras.items():
            out_extras[name][i] = column[j]
    return is_event, events, out_keys, out_values, out_extras


_JSON_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
# Numbers Arrow's text-to-decimal cast takes without rescaling down or an exponent: at most
# 29 digits before the point and 9 after. Beyond that the cast (pyarrow 26) can wrap
# silently instead of refusing: "5.68e34", or 29 digits before the point and 10 after,
# came out as other numbers. Those go through ``Decimal`` one by one.
_CASTABLE_NUMBER = r"^-?(0|[1-9][0-9]{0,28})(\.[0-9]{1,9})?$"


def _raw_values(raw: list[msgspec.Raw]) -> tuple[pa.Array, np.ndarray]:
    """Each record's value (its JSON text, empty when absent) as ``DECIMAL(38, 9)`` (null
    where absent, ``null`` or not a plain value), and which records have a plain one: absent,
    ``null``, or a number ``DECIMAL(38, 9)`` holds exactly (any other goes to ``parse_line``,
    as a decoded value of another type or one to round did)."""
    return _text_values(_text_array(raw))


def _text_values(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """:func:`_raw_values` of the values' JSON texts as an Arrow column."""
    absent = pc.or_(pc.equal(texts, "null"), pc.equal(texts, ""))
    castable = pc.match_substring_regex(texts, _CASTABLE_NUMBER)
    values = pc.cast(pc.if_else(castable, texts, pa.scalar(None, texts.type)), _DECIMAL)
    # the few texts left (a line not decoded, a string, a long number) matched again as
    # JSON numbers, not the whole column
    rest = np.flatnonzero(~pc.or_(castable, absent).to_numpy(zero_copy_only=False))
    if len(rest):
        numeric = pc.match_substring_regex(texts.take(rest), _JSON_NUMBER)
        others = rest[numeric.to_numpy(zero_copy_only=False)]
        if len(others):
            decimals = [json_decimal(t) for t in texts.take(others).to_pylist()]
            held = [d if isinstance(d, Decimal) and to_exact(d) == d and _fits(d) else None
                    for d in decimals]
            mask = np.zeros(len(texts), dtype=bool)
            mask[others] = True
            values = pc.replace_with_mask(values, pa.array(mask), pa.array(held, _DECIMAL))
    plain = pc.or_(absent, pc.is_valid(values)).to_numpy(zero_copy_only=False)
    return values, plain


def _scanned_values(scan: native_scan_module.Scan) -> tuple[pa.Array, np.ndarray]:
    """:func:`_text_values` of a scanned part: the decimals the scanner read, and the few
    values it left as texts read here (a string, a number to round, a long one)."""
    other = scan.value_status == native_scan_module.VALUE_OTHER
    if not other.any():
        return scan.decimals, np.ones(len(other), dtype=bool)
    at = np.flatnonzero(other)
    found, exact = _text_values(scan.values.take(at))
    plain = ~other
    plain[at] = exact
    return pc.replace_with_mask(scan.decimals, pa.array(other), found), plain


def _text_array(raw: list[msgspec.Raw]) -> pa.Array:
    """JSON texts as one Arrow column, copied once into one buffer (a ``bytes`` object per
    text first cost a third as much again as decoding the lines)."""
    lengths = np.fromiter(map(len, raw), dtype=np.int64, count=len(raw))
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    binary = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(raw), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))])
    return binary.view(pa.large_string())  # decoded from ASCII lines only: valid UTF-8


def _text_time_ms(text: str) -> int | None:
    """A text event time in epoch milliseconds as ``parse_line`` reads it, or ``None`` where
    it rejects it (``parse_line`` then says why). Half of the demo generator's lines carry one;
    sent to ``parse_line`` whole, they made its files' ingest take twice as long."""
    try:
        ms = parse_timestamp_ms(text)
    except (ValueError, OverflowError):
        return None
    return ms if -_BOUND < ms < _BOUND else None


def _plain_value(value: Any) -> bool:
    """A decoded value ``parse_line`` would take as it is: a number or none (exactness is
    checked in bulk)."""
    return value is None or type(value) is int or type(value) is Decimal


@dataclass
class ParsedLines:
    """Lines' outcomes as columns, one entry per line: what ingest reads of each good record
    (key, event time, value, the extra fields), and the outcome of every line that
    ``parse_line`` itself judged (all rejections, and records it had to read the long way)."""

    is_event: np.ndarray
    """bool: the line is a good record."""
    keys: list[Any] | pa.Array
    """Each line's key (``None`` where not a record), or the same as an Arrow string column
    (a part parsed in a worker process: jobs.streams.landing.part_pool)."""
    events: np.ndarray
    """int64 event times in milliseconds (0 where not a record)."""
    values: list[Any] | pa.Array
    """Each line's value as read (a ``Decimal``, an ``int`` or ``None``), or, where the fast
    path read them in bulk, a ``DECIMAL(38, 9)`` array (null: none)."""
    extras: dict[str, list[Any]]
    """The fields besides key, event time and value ingest reads, as the record holds them."""
    slow: dict[int, ParsedEvent | Rejection]
    """``parse_line``'s outcome by line index, for the lines it judged."""

    def __len__(self) -> int:
        return len(self.is_event)

    def verdict(self, index: int) -> ParsedEvent | Rejection:
        """The line's outcome as ``parse_line`` gives it (a record's fields are the ones
        ingest reads)."""
        judged = self.slow.get(index)
        if judged is not None:
            return judged
        key, event_time = self.keys[index], int(self.events[index])
        if isinstance(key, pa.Scalar):
            key = key.as_py()
        value = self.values[index]
        if isinstance(value, pa.Scalar):
            value = value.as_py()
        fields = {"key": key, "event_time": event_time, "value": value}
        for name, column in self.extras.items():
            fields[name] = column[index]
        return ParsedEvent(key=key, event_time_ms=event_time, value=value, fields=fields)

    def key_column(self) -> pa.Array:
        """The lines' keys as Arrow strings (null: not a record)."""
        if isinstance(self.keys, pa.Array):
            return self.keys
        return pa.array(self.keys, pa.string())

    def value_column(self) -> pa.Array:
        """The lines' values as ``DECIMAL(38, 9)`` (null: none or not a record)."""
        if isinstance(self.values, pa.Array):
            return self.values
        return pa.array(self.values, _DECIMAL)

    def verdicts(self) -> list[ParsedEvent | Rejection]:
        return [self.verdict(index) for index in range(len(self))]

    def rejection(self, index: int) -> Rejection:
        judged = self.slow[index]
        assert type(judged) is Rejection, judged
        return judged

    def head(self, count: int) -> ParsedLines:
        """The outcomes of the first ``count`` lines (a batch cut short:
        jobs.streams.batch_cut)."""
        keys = self.keys.slice(0, count) if isinstance(self.keys, pa.Array) \
            else self.keys[:count]
        values = self.values.slice(0, count) if isinstance(self.values, pa.Array) \
            else self.values[:count]
        return ParsedLines(self.is_event[:count].copy(), keys, self.events[:count], values,
                           {name: column[:count] for name, column in self.extras.items()},
                           {i: v for i, v in self.slow.items() if i < count})

    def reject(self, index: int, rejection: Rejection) -> None:
        """Turn a good record into a rejection (a stamp from the future, say)."""
        self.is_event[index] = False
        self.slow[index] = rejection

    @classmethod
    def from_verdicts(cls, verdicts: Sequence[ParsedEvent | Rejection],
                      extra_names: Sequence[str] = ()) -> ParsedLines:
        """Columns of outcomes already judged one by one."""
        count = len(verdicts)
        is_event = np.fromiter((type(v) is ParsedEvent for v in verdicts), dtype=bool,
                               count=count)
        events = np.fromiter((v.event_time_ms if type(v) is ParsedEvent else 0
                              for v in verdicts), dtype=np.int64, count=count)
        keys = [v.key if type(v) is ParsedEvent else None for v in verdicts]
        values = [v.value if type(v) is ParsedEvent else None for v in verdicts]
        extras = {name: [v.fields.get(name) if type(v) is ParsedEvent else None
                         for v in verdicts] for name in extra_names}
        return cls(is_event, keys, events, values, extras, dict(enumerate(verdicts)))


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
