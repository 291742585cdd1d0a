"""Landing lines scanned into columns by native code (``native/landing_scan``, Rust with
serde_json), for :class:`fast_parse.FastParser`.

At Spark's ceiling most of ingest's cost was Python's, not JSON's: msgspec decoded a line in
0.18 µs, then reading its fields into lists, checking them and turning keys into Arrow cost
0.6 µs more (benchmarks/history.md, "Ingest scanned natively"). The scanner writes a part's
keys, event times and the value's and extra fields' JSON texts straight into buffers that
become Arrow and numpy columns with no Python object per line.

The scanner reads the usual line (a flat object of names and values written without escapes)
in one pass of its own, and any other through serde_json; and where a value is a number
``DECIMAL(38, 9)`` holds as written, it writes the decimal itself, so that only the other
values' texts come back to be read here (on the benchmark's lines the parse of a part took
about 450 ns a line before, 250 after: benchmarks/history.md, "Landing lines read flat").

It never decides a rejection. A line is *scanned* only when it is a JSON object whose key
is an ASCII string written without escapes, not blank and within the key length limit, whose
event time is an integer within range or a text written without escapes, and which holds
none of these fields twice; a line longer than :data:`MAX_SCANNED_BYTES` is not scanned (no
number in it can pass Python's 4,300-digit limit on ints), nor one with more than 128
opening brackets (serde_json skips the values it does not build at any depth, where the json
module stops at its recursion limit). Every other line goes to ``parse_line``,
whose outcome it is. The fast parser then checks the scanned lines' values and text event
times as it checks msgspec's (fast_parse.py), and tests/test_fast_parse.py fuzzes the whole
against ``parse_line``.

The library is built by ``./platform setup`` (``cargo build``); without it, or with
``PLATFORM_NATIVE_SCAN=false``, the fast parser decodes with msgspec as before, with the same
outcomes.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa

from jobs.streams.landing.lines import Lines
from jobs.streams.landing.parsing import json_decimal

MAX_SCANNED_BYTES = 4000
"""The longest line the scanner reads (longer ones are rare, and the json module's limits
on digits and nesting cannot be reached below it)."""
INT_TIME, TEXT_TIME, NOT_SCANNED = 0, 1, 2
"""A line's status: a record with an integer event time, a record whose event time is a text
(read in Python), a line for ``parse_line``."""
VALUE_ABSENT, VALUE_HELD, VALUE_OTHER = 0, 1, 2
"""A scanned record's value: none or ``null``; a number ``DECIMAL(38, 9)`` holds as written
(the scanner gives the decimal); any other text (the fast parser reads it)."""
ABI_VERSION = 2
"""The arguments of ``landing_scan`` this module passes: a library built from older sources
(``cargo build`` not run since) is not called, and ingest decodes with msgspec."""
LIBRARY = Path(__file__).resolve().parents[3] / "native" / "landing_scan" / "target" / \
    "release" / ("liblanding_scan.dylib" if sys.platform == "darwin" else "liblanding_scan.so")
"""Where ``cargo build --release`` leaves the library (``./platform setup`` runs it)."""

_P = ctypes.c_void_p
_DECIMAL = pa.decimal128(38, 9)
_SIZE = ctypes.c_size_t


@dataclass
class Scan:
    """A part's lines as the scanner left them, one entry per line."""

    status: np.ndarray
    """uint8: :data:`INT_TIME`, :data:`TEXT_TIME` or :data:`NOT_SCANNED`."""
    times: np.ndarray
    """int64: the integer event times (0 elsewhere)."""
    keys: pa.StringArray
    """The keys ("" where not scanned)."""
    text_times: pa.StringArray
    """The event times written as texts ("" elsewhere)."""
    value_status: np.ndarray
    """uint8: :data:`VALUE_ABSENT`, :data:`VALUE_HELD` or :data:`VALUE_OTHER` (absent where
    not scanned)."""
    decimals: pa.Decimal128Array
    """The held values as ``DECIMAL(38, 9)`` (null elsewhere)."""
    values: pa.LargeStringArray
    """The other values' JSON texts ("" elsewhere)."""
    extras: dict[str, list]
    """The extra fields' values as msgspec decodes their texts (``None`` where absent or
    not scanned)."""


def _load() -> ctypes.CDLL | None:
    if not LIBRARY.exists():
        return None
    library = ctypes.CDLL(str(LIBRARY))
    try:
        library.landing_scan_abi.restype = ctypes.c_uint32
        version = library.landing_scan_abi()
    except AttributeError:  # built before versions were given
        version = None
    if version != ABI_VERSION:
        return None
    library.landing_scan.restype = ctypes.c_int32
    library.landing_scan.argtypes = [_P, _SIZE, _P, _SIZE, _SIZE, _SIZE, _P, _SIZE, _SIZE,
                                     _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P]
    return library


_LIBRARY = _load()
_EXTRAS_DECODER = msgspec.json.Decoder(list, float_hook=json_decimal)
"""The extra fields as the fast parser's msgspec decoder reads them (``object`` fields,
fractions as exact decimals)."""


def available() -> bool:
    """Whether the scanner is built and not turned off."""
    return _LIBRARY is not None


def scan(lines: Lines, max_line_bytes: int, max_key_chars: int,
         extras: list[str]) -> Scan | None:
    """The part's lines scanned, or ``None`` when the scanner is not available, cannot take
    these field names, or failed: the caller then decodes the part the other way."""
    if _LIBRARY is None or any("\n" in name or not name for name in extras):
        return None
    count = len(lines)
    data = lines.data
    size = len(data)
    starts = np.ascontiguousarray(lines.starts, dtype=np.int64)
    status = np.empty(count, dtype=np.uint8)
    times = np.empty(count, dtype=np.int64)
    value_status = np.empty(count, dtype=np.uint8)
    value_units = np.empty(2 * count, dtype=np.int64)  # a little-endian 128-bit integer each
    columns = [(np.empty(max(size, 1), dtype=np.uint8), np.zeros(count + 1, dtype=np.int64))
               for _ in range(3)]  # keys, text times, values: bytes and ends
    arrays = [np.empty(size + 5 * count + 2, dtype=np.uint8) for _ in extras]
    array_pointers = (ctypes.c_void_p * max(len(arrays), 1))(
        *[array.ctypes.data for array in arrays])
    array_lengths = np.zeros(max(len(arrays), 1), dtype=np.int64)
    names = "".join(f"{name}\n" for name in extras).encode("utf-8")
    failed = _LIBRARY.landing_scan(
        data, size, starts.ctypes.data, count, min(max_line_bytes, MAX_SCANNED_BYTES),
        max_key_chars, names, len(names), len(extras), status.ctypes.data, times.ctypes.data,
        *[pointer for text, ends in columns for pointer in
          (text.ctypes.data, ends[1:].ctypes.data)],
        value_status.ctypes.data, value_units.ctypes.data,
        array_pointers, array_lengths.ctypes.data)
    if failed:
        return None
    keys, text_times, values = (_texts(text, ends, count, large) for (text, ends), large
                                in zip(columns, (False, False, True), strict=True))
    try:
        decoded = {name: _EXTRAS_DECODER.decode(array[:length])
                   for name, array, length in zip(extras, arrays, array_lengths.tolist(),
                                                  strict=False)}
    except (msgspec.DecodeError, RecursionError):  # a text serde_json took and msgspec does
        return None  # not: the other way decides
    if any(len(column) != count for column in decoded.values()):
        return None
    held = value_status == VALUE_HELD
    decimals = pa.Array.from_buffers(
        _DECIMAL, count, [pa.py_buffer(np.packbits(held, bitorder="little")),
                          pa.py_buffer(value_units)])
    return Scan(status, times, keys, text_times, value_status, decimals, values, decoded)


def _texts(text: np.ndarray, ends: np.ndarray, count: int, large: bool) -> pa.Array:
    """Texts the scanner wrote one after another (each ending at ``ends[i + 1]``) as an
    Arrow column over the same memory."""
    kind = pa.large_string() if large else pa.string()
    offsets = ends if large else ends.astype(np.int32)
    return pa.Array.from_buffers(kind, count, [None, pa.py_buffer(offsets),
                                               pa.py_buffer(text[:int(ends[-1])])])
