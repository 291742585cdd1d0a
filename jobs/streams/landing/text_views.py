"""A batch's lines as Arrow string views into the parts' own bytes, so that taking them into
arrival order copies each line's characters once, into the payload column itself.

The payload column used to be made in three copies of every line: each part's lines sliced
out of its bytes (without their newlines), the parts' columns joined into one array, and that
array taken into arrival order. At 600,000 lines a batch those copies were about a quarter of
the ingest thread's time under the live stream's load (benchmarks/history.md). A string view
(Arrow's ``string_view`` layout: 16 bytes a line, its length and either the line itself when
it is at most 12 bytes or its first 4 bytes, its part and its offset) is made here with numpy
from where each line starts, and arrival order is a numpy take of those 16-byte rows; the one
copy is the cast back to Arrow's plain strings, which the arrival log's schema stores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from jobs.streams.landing.lines import Lines

_INLINE = 12
"""Bytes a view holds in itself (Arrow's columnar format): a longer line is referenced."""
_STRING_LIMIT = 2**31 - 1
"""The characters one Arrow string array (32-bit offsets) or one view buffer can address."""


class TextViews:
    """Lines of several parts, each a 16-byte view into its part's bytes, in batch order
    (the parts laid end to end)."""

    __slots__ = ("rows", "buffers")

    def __init__(self, rows: np.ndarray, buffers: list[pa.Buffer]) -> None:
        self.rows = rows
        """``(lines, 4)`` int32: Arrow's view of each line."""
        self.buffers = buffers
        """The bytes the views point into; a view's third word says which."""

    @classmethod
    def of(cls, parts: Sequence[Sequence[str]]) -> TextViews:
        """The lines of ``parts`` (each a :class:`Lines` or a list of strings), in order."""
        rows: list[np.ndarray] = []
        buffers: list[pa.Buffer] = []
        for texts in parts:
            for data, begin, lengths in _runs(texts):
                rows.append(_view_rows(data, begin, lengths, len(buffers)))
                buffers.append(pa.py_buffer(data))
        together = np.concatenate(rows) if rows else np.zeros((0, 4), dtype=np.int32)
        return cls(together, buffers)

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, at: np.ndarray) -> pa.Array | pa.ChunkedArray:
        """The lines at ``at`` (indexes in batch order) as Arrow strings, in that order; in
        chunks when they hold more characters than one string array can."""
        rows = self.rows[at]
        lengths = rows[:, 0].astype(np.int64)
        pieces = _pieces(lengths)
        chunks = [self._strings(rows[start:stop]) for start, stop in pieces]
        if len(chunks) == 1:
            return chunks[0]
        return pa.chunked_array(chunks, pa.string())

    def _strings(self, rows: np.ndarray) -> pa.Array:
        views = pa.Array.from_buffers(pa.string_view(), len(rows),
                                      [None, pa.py_buffer(np.ascontiguousarray(rows)),
                                       *self.buffers])
        return views.cast(pa.string())


def _runs(texts: Sequence[str]) -> list[tuple[bytes | pa.Buffer, np.ndarray, np.ndarray]]:
    """A part's lines as runs of bytes, each with where its lines start and how long they are
    (in bytes); a run holds less than :data:`_STRING_LIMIT` bytes."""
    if isinstance(texts, Lines):  # one run: Lines.of keeps a part below the limit
        return [(texts.data, texts.starts[:-1], np.diff(texts.starts) - 1)]
    column = pa.array(texts, pa.string())  # a part the parser split into strings
    runs = []
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        _, offsets, data = chunk.buffers()
        bounds = np.frombuffer(offsets, dtype=np.int32)[chunk.offset:chunk.offset + len(chunk) + 1]
        runs.append((data if data is not None else b"", bounds[:-1].astype(np.int64),
                     np.diff(bounds).astype(np.int64)))
    return runs


def _view_rows(data: bytes | pa.Buffer, begin: np.ndarray, lengths: np.ndarray,
               buffer_index: int) -> np.ndarray:
    """Arrow's 16-byte view of each line (``lengths[i]`` bytes of ``data`` from ``begin[i]``),
    pointing into buffer ``buffer_index``."""
    count = len(begin)
    rows = np.zeros((count, 4), dtype=np.int32)
    if not count:
        return rows
    rows[:, 0] = lengths
    referenced = lengths > _INLINE
    if referenced.any():
        # a line's first 4 bytes as one little-endian word, read where the line starts
        words = np.ndarray((len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
        rows[referenced, 1] = words[begin[referenced]].view(np.int32)
        rows[referenced, 2] = buffer_index
        rows[referenced, 3] = begin[referenced]
    inline = np.flatnonzero(~referenced)
    if len(inline):
        raw = np.frombuffer(data, dtype=np.uint8)
        at = begin[inline, None] + np.arange(_INLINE)
        kept = np.arange(_INLINE) < lengths[inline, None]
        held = np.where(kept, raw[np.minimum(at, max(len(raw) - 1, 0))] if len(raw) else 0, 0)
        rows.view(np.uint8)[inline, 4:] = held.astype(np.uint8)
    return rows


def _pieces(lengths: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges of consecutive lines, each under :data:`_STRING_LIMIT`
    characters in all (one range unless the lines hold 2 GiB or more)."""
    total = int(lengths.sum())
    if total < _STRING_LIMIT:
        return [(0, len(lengths))]
    ends = np.cumsum(lengths)
    pieces: list[tuple[int, int]] = []
    start, before = 0, 0
    while start < len(lengths):
        stop = int(np.searchsorted(ends, before + _STRING_LIMIT - 1, side="right"))
        stop = max(stop, start + 1)
        pieces.append((start, stop))
        before = int(ends[stop - 1])
        start = stop
    return pieces
