"""A part of plain lines read by Arrow's C++ JSON reader, straight into columns.

Profiled offline on bench_live's lines, the msgspec path of :mod:`fast_parse` spent a third of
its time decoding and two thirds in Python building a list per field from the decoded records
(benchmarks/RESULTS.md, "Ingest through Arrow's JSON reader"). Arrow's reader decodes a whole
part into typed columns in C++, without the interpreter lock.

Arrow's reader is not the json module, so only the lines on which the two cannot differ are
read here; the caller judges every other line with ``parse_line``, exactly as before:

- lines that begin with ``{`` and end with ``}`` (the part is ASCII and has no blank line:
  :class:`~jobs.streams.landing.lines.Lines`);
- without a backslash (an escape could spell a non-ASCII or lone-surrogate key, or a field's
  name), without ``NaN`` or ``Inf`` anywhere (Arrow's reader takes them as numbers, the json
  module refuses them), with at most :data:`MAX_BRACKETS` brackets (the json module refuses
  deep nesting; Arrow's parser recurses);
- whose event time, value and clock's field are not texts (Arrow would read a value ``"5"``
  as the number 5, where the json module's record holds a text that ``parse_line`` refuses;
  ISO-8601 times are msgspec's to read).

A part where more than one line in :data:`MOSTLY` is not Arrow's goes the msgspec way whole.
Otherwise every other line is blanked to ``{}`` before Arrow reads the part, so row ``i`` is
still line ``i``. What Arrow itself refuses (an event time that is not an integer, a value
with more than nine decimals, two values on one line, a name given twice, malformed JSON)
fails the read; the line it names, if it names one, is blanked too and the part read again, a
few times at most, and otherwise the whole part goes the msgspec way. A row is a plain record
only when its key is a non-blank string within the length limit and its event time an integer
within range; its value, when Arrow read one, is exact (Arrow refuses to round).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from jobs.streams.landing.lines import Lines
from jobs.streams.landing.parsing import EVENT_TIME_BOUND, MAX_KEY_LENGTH

MAX_BRACKETS = 64
"""Brackets (``{`` and ``[``) a line may hold and still be read by Arrow: far below the
nesting at which the json module gives up."""
RETRIES = 4
"""Lines Arrow refuses that are blanked and the part read again, before it goes the msgspec
way (a part with many such lines is better read there)."""
_OPEN, _CLOSE, _BRACKET, _BACKSLASH, _SPACE = (ord(c) for c in "{}[\\ ")
SAMPLE = 256
SLICE_BYTES = 1 << 20
MOSTLY = 8
"""A part goes the msgspec way unless all but one line in ``MOSTLY`` are Arrow's to read (half
the demo generator's event times are ISO texts: msgspec reads those, ``parse_line`` one by one
is slower)."""
_NEEDLES = (b"\\", b"NaN", b"Inf")
_REFUSED_ROW = re.compile(r"in row (\d+)")
_DECIMAL = pa.decimal128(38, 9)


@dataclass
class PlainRead:
    """A part's columns as Arrow read them, one row per line; only rows where ``plain`` is
    set hold a record (the others are for ``parse_line``)."""

    plain: np.ndarray
    """bool: the line is a plain good record, read here."""
    keys: pa.Array
    """string (null where not plain)."""
    events: np.ndarray
    """int64 event times (0 where not plain)."""
    values: pa.Array
    """DECIMAL(38, 9) (null: no value, or not plain)."""
    clock: pa.Array | None
    """int64: the ingest clock's field (null where missing), when the stream has one."""


def read_plain(lines: Lines, clock_field: str | None) -> PlainRead | None:
    """The part's plain lines as columns, or ``None`` when Arrow's reader cannot read the part
    (its lines then go the msgspec way)."""
    count = len(lines)
    if not count:
        return None
    data = np.frombuffer(lines.data, dtype=np.uint8)
    starts, ends = lines.starts[:-1], lines.starts[1:] - 1  # ends: each line's newline
    lengths = ends - starts
    readable = (data[starts] == _OPEN) & (data[ends - 1] == _CLOSE) & (lengths >= 2)
    if (lengths[~readable] < 2).any():  # too short to blank to "{}"
        return None
    if _mostly_not(lines, readable, clock_field):
        return None
    # the searches below run over the part with the lines already left out blanked (a
    # producer's truncated lines hold a text event time, say): most parts then hold nothing
    # they look for, and no line is searched alone
    text = _blanked(lines, lines.data, ~readable)
    unsure = _unsure(lines, text, clock_field)
    if unsure.any():
        readable &= ~unsure
        text = _blanked(lines, text, unsure)
    if np.count_nonzero(~readable) * MOSTLY > count:  # ISO times, say: msgspec reads them
        return None
    schema = pa.schema([("key", pa.string()), ("event_time", pa.int64()),
                        ("value", _DECIMAL)] + ([(clock_field, pa.int64())] if clock_field
                                                else []))
    tables, retries = [], RETRIES
    for first, end in _slices(lines):
        while True:
            table, refused = _read(text, int(lines.starts[first]), int(lines.starts[end]),
                                   schema)
            if table is not None:
                break
            if refused is None or not retries or not 0 <= refused < end - first or \
                    not readable[first + refused]:
                return None
            retries -= 1
            readable[first + refused] = False
            text = _blanked(lines, text, np.arange(count) == first + refused)
        if table.num_rows != end - first:  # a line held two values: not ours to split
            return None
        tables.append(table)
    return _plain_rows(pa.concat_tables(tables), readable, clock_field)


def _slices(lines: Lines) -> list[tuple[int, int]]:
    """The part's lines in runs of about :data:`SLICE_BYTES` (``(first, end)``), each read on
    its own: Arrow's reader went faster over slices of a megabyte than over a whole part of
    several (its working set stays in the caches), and a line it refuses is then named within
    its slice."""
    total = int(lines.starts[-1])
    cuts = np.searchsorted(lines.starts, np.arange(SLICE_BYTES, total, SLICE_BYTES))
    bounds = np.unique(np.concatenate([[0], cuts, [len(lines)]])).tolist()
    return list(itertools.pairwise(bounds))


def _mostly_not(lines: Lines, readable: np.ndarray, clock_field: str | None) -> bool:
    """Whether the part is not mostly Arrow's, judged before any search over it: by the lines
    left out so far, or by texts for typed fields in its first :data:`SAMPLE` lines (the demo
    generator writes every other event time as ISO-8601)."""
    if np.count_nonzero(~readable) * MOSTLY > len(lines):
        return True
    head = lines.column.slice(0, SAMPLE)
    texts = pc.match_substring_regex(head, _typed_texts(clock_field))
    return pc.sum(texts.cast(pa.int64())).as_py() * MOSTLY > len(head)


def _unsure(lines: Lines, text: bytes, clock_field: str | None) -> np.ndarray:
    """The lines of ``text`` (the part's, some blanked) on which Arrow's reader and the json
    module could differ (see the module): each search runs over the whole part first."""
    unsure = np.zeros(len(lines), dtype=bool)
    for needle in _NEEDLES:
        if needle[:1] in text and needle in text:  # the first byte's search is a memchr
            unsure |= _to_numpy(pc.match_substring(lines.column, needle.decode()))
    typed_texts = _typed_texts(clock_field)
    if pc.any(pc.match_substring_regex(_one_string(text), typed_texts)).as_py():
        unsure |= _to_numpy(pc.match_substring_regex(lines.column, typed_texts))
    data = np.frombuffer(text, dtype=np.uint8)
    opening = data == _OPEN
    if b"[" in text or np.count_nonzero(opening) > len(lines):  # nesting: count
        brackets = opening | (data == _BRACKET)
        unsure |= np.add.reduceat(brackets, lines.starts[:-1], dtype=np.int64) > MAX_BRACKETS
    return unsure


def _typed_texts(clock_field: str | None) -> str:
    """A pattern for a text given for the event time, the value or the clock's field (at any
    depth: with no backslash on the line a string token holds no quote, so this is a name and
    its value). Arrow would read ``"5"`` as the value 5, where the json module's record holds
    a text; texts for the integer fields make Arrow's read fail."""
    names = ["event_time", "value", *([re.escape(clock_field)] if clock_field else [])]
    return rf'"(?:{"|".join(names)})"\s*:\s*"'


def _one_string(text: bytes) -> pa.Array:
    """The part's bytes as one Arrow string (no copy), for one RE2 pass over all of them."""
    offsets = pa.py_buffer(np.array([0, len(text)], dtype=np.int64))
    return pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(text))


def _blanked(lines: Lines, text: bytes, which: np.ndarray) -> bytes:
    """``text`` (the part's lines, some blanked) with the lines ``which`` blanked to ``{}``
    and spaces (each holds two bytes at least), so that Arrow reads an empty row for each."""
    if not which.any():
        return text
    blanked = np.frombuffer(text, dtype=np.uint8).copy()
    others = np.flatnonzero(which)
    starts, ends = lines.starts[others], lines.starts[others + 1] - 1
    blanked[np.repeat(starts, ends - starts) + _ranges(ends - starts)] = _SPACE
    blanked[starts] = _OPEN
    blanked[starts + 1] = _CLOSE
    return blanked.tobytes()


def _read(text: bytes, begin: int, stop: int, schema: pa.Schema
          ) -> tuple[pa.Table | None, int | None]:
    """Arrow's read of the part's bytes from ``begin`` to ``stop`` (whole lines): the table,
    or the row Arrow refused (``None`` when it names none)."""
    try:
        table = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(text).slice(begin, stop - begin)),
            read_options=pa_json.ReadOptions(use_threads=False,
                                             block_size=max(stop - begin + 1, 1 << 16)),
            parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                               unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        found = _REFUSED_ROW.search(str(error))
        return None, int(found.group(1)) if found else None
    return table, None


def _ranges(lengths: np.ndarray) -> np.ndarray:
    """``0 .. length - 1`` for each length, laid end to end."""
    total = int(lengths.sum())
    firsts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total, dtype=np.int64) - firsts


def _plain_rows(table: pa.Table, readable: np.ndarray, clock_field: str | None) -> PlainRead:
    keys = table.column("key").combine_chunks()
    times = table.column("event_time").combine_chunks()
    key_lengths = pc.binary_length(keys)  # ASCII without escapes: bytes are characters
    blank = pc.equal(key_lengths, 0)  # or spaces only (no other whitespace is unescaped)
    if pc.any(pc.starts_with(keys, " ")).as_py():
        blank = pc.or_(blank, pc.match_substring_regex(keys, "^ +$"))
    plain = readable & _to_numpy(pc.and_(pc.less_equal(key_lengths, MAX_KEY_LENGTH),
                                         pc.invert(blank)))
    events = pc.fill_null(times, 0).to_numpy().copy()
    plain &= _to_numpy(pc.is_valid(times)) & (events > -EVENT_TIME_BOUND) \
        & (events < EVENT_TIME_BOUND)
    events[~plain] = 0
    clock = table.column(clock_field).combine_chunks() if clock_field else None
    return PlainRead(plain, keys, events, table.column("value").combine_chunks(), clock)


def _to_numpy(mask: pa.Array) -> np.ndarray:
    """A boolean column as numpy, null as false."""
    return pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
