"""The payload column taken through string views: the same strings, in the order asked, as
taking from the lines themselves, whatever form a part's lines are kept in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jobs.streams.landing.lines import Lines
from jobs.streams.landing.text_views import _STRING_LIMIT, TextViews, _pieces
from tests.depth import examples

# lines around the 12 bytes a view holds in itself, and some far longer
ascii_lines = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1,
                      max_size=40) | st.sampled_from(["x" * 12, "y" * 13, "z" * 11, "{}"])
any_lines = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\n"),
                    max_size=30)


@st.composite
def parts(draw: st.DrawFn) -> list[list[str]]:
    """Parts of lines: ASCII ones the reader keeps as their bytes, others as strings."""
    return draw(st.lists(st.lists(ascii_lines, min_size=1, max_size=20)
                         | st.lists(any_lines, max_size=20), max_size=5))


def kept(lines: list[str]) -> Lines | list[str]:
    """A part's lines in the form the reader keeps them (jobs.streams.landing.batch)."""
    as_bytes = Lines.of("\n".join(lines).encode("utf-8")) if lines else None
    # a last line that is empty is no line of the bytes: such a part stays strings
    return as_bytes if as_bytes is not None and len(as_bytes) == len(lines) else lines


@settings(max_examples=examples(300), deadline=None)
@given(parts(), st.data())
def test_taken_lines_are_the_lines_at_those_places(lines_of_parts, data):
    every = [line for lines in lines_of_parts for line in lines]
    at = data.draw(st.lists(st.integers(0, max(len(every) - 1, 0)),
                            max_size=3 * len(every)) if every else st.just([]))
    views = TextViews.of([kept(lines) for lines in lines_of_parts])

    taken = views.take(np.array(at, dtype=np.int64))

    assert len(views) == len(every)
    assert taken.type == pa.string()
    taken.validate(full=True)
    assert taken.to_pylist() == [every[i] for i in at]
    inline = views.rows[:, 0] <= 12  # a short line's view holds it, zero-padded (Arrow's format)
    for row, length in zip(views.rows[inline].view(np.uint8), views.rows[inline, 0], strict=True):
        assert not row[4 + length:].any()


def test_a_part_kept_as_bytes_is_not_copied_into_the_views():
    raw = b'{"key":"a","event_time_ms":1}\n{"key":"bb","event_time_ms":22}\nshort\n'
    lines = Lines.of(raw)

    views = TextViews.of([lines])

    assert lines is not None and views.buffers[0].address == pa.py_buffer(lines.data).address
    assert views.take(np.array([2, 0])).to_pylist() == ["short", raw.split(b"\n")[0].decode()]


@given(st.lists(st.integers(0, _STRING_LIMIT), max_size=12))
@example([_STRING_LIMIT - 1, 1])  # together exactly one more than an array holds
@example([])
def test_pieces_cover_the_lines_in_order_each_within_one_string_array(lengths):
    pieces = _pieces(np.array(lengths, dtype=np.int64))

    assert [i for start, stop in pieces for i in range(start, stop)] == list(range(len(lengths)))
    for start, stop in pieces:
        assert stop > start or not lengths  # no lines: one empty piece
        assert sum(lengths[start:stop]) < _STRING_LIMIT or stop - start == 1
