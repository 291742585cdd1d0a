"""Event times written as ISO-8601 text, read many at a time.

``parse_line`` reads a text event time with Python's ``datetime.fromisoformat``
(:func:`operators.time.parse_timestamp_ms`), about 2.7 µs a line: half of the demo generator's
lines carry one, and they made its files' parse take twice as long as epoch milliseconds.
Arrow's cast reads the usual shape (``2026-01-31T12:00:00.250Z``, an offset or none) for a
whole column in C. It is used only where both readers agree, which the pattern below pins
down: a text of any other shape (a comma before the fraction, a lowercase ``z``, surrounding
spaces, more than six digits of fraction, an offset with seconds, ...) is read one at a time
as before, and so is every text of a column Arrow refuses (a 30th of February), found by
halving. tests/test_fast_parse.py holds the two readers equal on any text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_DATE = r"[1-9]\d{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
_TIME = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?"
_OFFSET = r"(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)"
USUAL_SHAPE = f"^{_DATE}T{_TIME}{_OFFSET}?$"
"""What Arrow reads as ``fromisoformat`` does: a date, ``T``, a time to the microsecond at
most, and ``Z``, an offset in hours and minutes, or nothing (UTC)."""
_ZONED = f"{_OFFSET}$"
SEGMENT = 64
"""The fewest texts a refused cast is split into halves for."""


def text_times_ms(texts: Sequence[object], one_at_a_time: Callable[[object], int | None],
                  bound: int) -> list[int | None]:
    """``[one_at_a_time(text) for text in texts]``: each text's event time in epoch
    milliseconds, ``None`` where it is not one or not strictly within ``bound`` of the epoch;
    in bulk where the shape allows."""
    found: list[int | None] = [None] * len(texts)
    strings = [i for i, text in enumerate(texts) if type(text) is str and text.isascii()]
    column = pa.array([texts[i] for i in strings], pa.string())
    fits = pc.match_substring_regex(column, USUAL_SHAPE).to_numpy(zero_copy_only=False)
    zoned = pc.match_substring_regex(column, _ZONED).to_numpy(zero_copy_only=False)
    slow = sorted(set(range(len(texts))) - set(strings)) + \
        [strings[i] for i in np.flatnonzero(~fits).tolist()]
    for kind, chosen in ((pa.timestamp("us", tz="UTC"), fits & zoned),
                         (pa.timestamp("us"), fits & ~zoned)):
        at = np.flatnonzero(chosen)
        micros, refused = _cast(column.take(pa.array(at)), kind)
        ms = micros // 1000  # the floor, as datetime's arithmetic takes it
        within = (-bound < ms) & (ms < bound)
        for position, value, inside, no in zip(at.tolist(), ms.tolist(), within.tolist(),
                                               refused.tolist(), strict=True):
            if no:
                slow.append(strings[position])
            else:
                found[strings[position]] = value if inside else None
    for i in slow:
        found[i] = one_at_a_time(texts[i])
    return found


def _cast(column: pa.Array, kind: pa.DataType) -> tuple[np.ndarray, np.ndarray]:
    """The texts as microseconds since the epoch, and which of them Arrow refused. A cast
    fails for a whole column, so the refused ones are found by halving, down to segments of
    :data:`SEGMENT` texts, which are then all left to the one-at-a-time reader: a producer
    writing many impossible dates (a 31st of April) costs about what it did before, not a
    failed cast per text."""
    micros = np.zeros(len(column), dtype=np.int64)
    refused = np.zeros(len(column), dtype=bool)
    pending = [(0, len(column))] if len(column) else []
    while pending:
        start, stop = pending.pop()
        try:
            cast = pc.cast(column.slice(start, stop - start), kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            if stop - start <= SEGMENT:
                refused[start:stop] = True
            else:
                middle = (start + stop) // 2
                pending += [(start, middle), (middle, stop)]
            continue
        micros[start:stop] = cast.cast(pa.int64()).to_numpy(zero_copy_only=False)
    return micros, refused
