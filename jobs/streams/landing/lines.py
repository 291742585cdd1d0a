"""A file part's lines kept as the part's own bytes: the bytes the arrival log's payload is
taken from (text_views.py) and the parser decodes, with no Python string per line.

At 80,000 lines a second the driver made a ``str`` of every line (splitting the decoded part),
joined them again for the parser, and converted them back to Arrow for the payload column:
about a tenth of its time (benchmarks/history.md). Here a part's line boundaries are found
once with numpy; a line becomes a ``str`` only when something reads it alone (a line the
parser's rules judge one by one, a quarantined line's text).

Only the usual part takes this form: ASCII (hence UTF-8) bytes, every line starting with a
byte that is not whitespace (so none is blank), within Arrow's 2 GiB of text. Any other part is
split into a list of strings, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_NEWLINE = ord("\n")
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[ord(c) for c in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "]] = True
"""The ASCII characters ``str.strip`` removes."""
_ARROW_LIMIT = 2**31 - 1


class Lines(Sequence[str]):
    """The lines of ``data`` (split at ``\\n``, the last one's newline optional), in order."""

    __slots__ = ("data", "starts", "_column")

    def __init__(self, data: bytes, starts: np.ndarray) -> None:
        self.data = data
        """The lines, each followed by a newline."""
        self.starts = starts
        """int64: where each line starts in ``data``, then ``len(data)``."""
        self._column: pa.StringArray | None = None

    @classmethod
    def of(cls, raw: bytes) -> Lines | None:
        """``raw``'s lines, or ``None`` when it is not the usual part (see the module)."""
        if not raw or len(raw) >= _ARROW_LIMIT or not raw.isascii():
            return None
        data = raw if raw[-1] == _NEWLINE else raw + b"\n"
        ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE)
        starts = np.empty(len(ends) + 1, dtype=np.int64)
        starts[0] = 0
        starts[1:] = ends + 1
        first_bytes = np.frombuffer(data, dtype=np.uint8)[starts[:-1]]
        if _WHITESPACE[first_bytes].any():  # a blank line, or one that starts with a space
            return None
        return cls(data, starts)

    def __reduce__(self) -> tuple:
        """The bytes and where lines start, not the column made from them (a part read by
        a worker process comes back at half the size: jobs.streams.landing.part_pool)."""
        return (Lines, (self.data, self.starts))

    def __len__(self) -> int:
        return len(self.starts) - 1

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return self.column[index].to_pylist()
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.data[self.starts[index]:self.starts[index + 1] - 1].decode("ascii")

    def __iter__(self) -> Iterator[str]:
        return iter(self.column.to_pylist())

    def head(self, count: int) -> Lines:
        """The first ``count`` lines, still as their bytes."""
        return Lines(self.data[:int(self.starts[count])], self.starts[:count + 1].copy())

    @property
    def longest(self) -> int:
        """The longest line's length in characters (bytes: the lines are ASCII)."""
        return int(np.diff(self.starts).max()) - 1 if len(self) else 0

    @property
    def column(self) -> pa.StringArray:
        """The lines as Arrow strings, newlines left out."""
        if self._column is None:
            with_newlines = pa.BinaryArray.from_buffers(
                pa.binary(), len(self),
                [None, pa.py_buffer(self.starts.astype(np.int32)), pa.py_buffer(self.data)])
            # ASCII, hence valid UTF-8: a view, no second check
            self._column = pc.binary_slice(with_newlines, 0, -1).view(pa.string())
        return self._column

