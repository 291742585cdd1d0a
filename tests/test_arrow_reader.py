"""Parts read by Arrow's JSON reader (jobs/streams/landing/arrow_reader.py) against
``parse_line``: for lines shaped like records (ASCII, an object per line) with every way a
field can go wrong, the same record or the same rejection as each line alone; and the lines
Arrow reads are in fact read there (the property would hold as well if none were)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.streams.landing.arrow_reader import read_plain
from jobs.streams.landing.fast_parse import FastParser
from jobs.streams.landing.lines import Lines
from jobs.streams.landing.parsing import ParsedEvent, parse_line
from tests.depth import examples
from tests.test_fast_parse import DECIMAL, TEXT_TIMES, _same

CLOCKED = FastParser(300, ("received_at",))
"""The default stream's parser: the ingest clock reads ``received_at``."""
UNCLOCKED = FastParser(300, ())
"""A stream on the wall clock."""
ROOMY = FastParser(20_000, ("received_at",))
"""Lines long enough for a key past the length limit."""


def _text(value: object) -> str:
    return json.dumps(value)


PRINTABLE = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from([str(2**62), str(2**62 - 1), str(-(2**62) + 1), str(-(2**62)), "-0",
                     "1e3", "1E-9", "1.5e-10", "1.0000000001", "1.10000000000", "0.0000000000",
                     "99999999999999999999999999999.999999999", "1e28", "1e29", "5E-1",
                     "-1.23E+2", "100e-11", "1e999", "1e-400", "NaN", "-Infinity", "Inf",
                     "01", "1.", ".5", "+1", "0x10", "1.5", "1.0"]),
    st.from_regex(r"-?(0|[1-9][0-9]{0,32})(\.[0-9]{1,11})?([eE][+-]?[0-9]{1,2})?",
                  fullmatch=True))
"""JSON numbers (and tokens that are not), as text."""
TOKENS = st.one_of(NUMBERS, PRINTABLE.map(_text), st.sampled_from(
    ["null", "true", "false", "[]", "[1, 2]", '{"a": [1, {"b": null}]}', '"2026-01-01"',
     '"5"', '"a\\u00e9"', '"\\ud800"', "[" * 70 + "]" * 70, "{}", "tru"]))
"""Any field's value, as text."""
KEYS = st.one_of(PRINTABLE.map(_text), st.sampled_from(
    [_text(" "), _text(""), _text("  a "), _text("k" * 1024), _text("k" * 1025),
     _text("NaN"), _text("[x]"), '"a\\tb"', '"\\u00e9"', "5", "null", "true", "[]"]))
FIELDS = st.one_of(
    st.tuples(st.just("key"), KEYS),
    st.tuples(st.just("event_time"), st.one_of(NUMBERS, TEXT_TIMES.map(_text), TOKENS)),
    st.tuples(st.just("value"), st.one_of(NUMBERS, TOKENS)),
    st.tuples(st.just("received_at"), st.one_of(NUMBERS, TOKENS)),
    st.tuples(st.sampled_from(["payload", "value ", "Value", "x"]), TOKENS))


@st.composite
def record_lines(draw) -> str:
    """An object of fields in any order, some missing, some given twice, with any spacing;
    now and then with text around it that makes it something else."""
    fields = [("key", draw(KEYS)), ("event_time", draw(NUMBERS))]
    fields = [field for field in fields if draw(st.integers(0, 9))]  # mostly present
    fields += draw(st.lists(FIELDS, max_size=3))
    order = draw(st.permutations(fields))
    colon, comma = draw(st.sampled_from([(":", ","), (": ", ", "), (" : ", " ,")]))
    body = "{" + comma.join(f'"{name}"{colon}{value}' for name, value in order) + "}"
    return draw(st.sampled_from(["", "", "", "", "", " ", "}", "x", "\r", " {}"])).join(
        ["", body]) if draw(st.booleans()) else body + draw(st.sampled_from(
            ["", "", "", "", " ", "}", "x", "\r", " {}", ",", '{"key":"k"}']))


def _plain(key: int, time: int, value: str, clock: int) -> str:
    return json.dumps({"key": f"user-{key}", "event_time": time, "value": None,
                       "received_at": clock}, separators=(",", ":")).replace(
        '"value":null', f'"value":{value}')


PLAIN = st.builds(_plain, st.integers(0, 99), st.integers(-(2**40), 2**40),
                  st.sampled_from(["1", "2.5", "-0.125", "null", "17.000000001"]),
                  st.integers(0, 2**41))
"""Lines as a producer writes them: all of them read by Arrow."""
ANY_LINE = st.one_of(PLAIN, record_lines(), st.text(st.characters(
    min_codepoint=32, max_codepoint=126), min_size=1, max_size=40).filter(str.strip))


def _same_columns(parser: FastParser, lines: list[str]) -> None:
    """The part's columns, which ingest reads (keys, event times, values, the clock's field),
    hold each line's record as ``parse_line`` reads it alone, and its outcome says the same."""
    parsed = parser.parse_columns(_part(lines))
    keys, values = parsed.key_column().to_pylist(), parsed.value_column()
    for i, line in enumerate(lines):
        alone = parse_line(line, parser.max_line_bytes)
        _same(parsed.verdict(i), alone, parser)
        assert bool(parsed.is_event[i]) == isinstance(alone, ParsedEvent)
        if isinstance(alone, ParsedEvent):
            assert (keys[i], int(parsed.events[i])) == (alone.key, alone.event_time_ms)
            assert values[i] == pa.array([alone.value], DECIMAL)[0]
            for name, column in parsed.extras.items():
                held = column[i].as_py() if isinstance(column, pa.Array) else column[i]
                assert held == alone.fields.get(name), name


def _part(lines: list[str]) -> Lines:
    block = Lines.of(("\n".join(lines) + "\n").encode("ascii"))
    assert block is not None and list(block) == lines
    return block


@settings(max_examples=examples(600), deadline=None)
@given(st.lists(ANY_LINE, min_size=1, max_size=24).filter(
           lambda lines: not any(line[0].isspace() for line in lines)),
       st.sampled_from([CLOCKED, UNCLOCKED]))
def test_any_part_of_lines_shaped_like_records_parses_as_each_line_alone(lines, parser):
    """Parts with many lines Arrow does not read go the msgspec way whole."""
    _same_columns(parser, lines)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(ANY_LINE.filter(lambda line: not line[0].isspace()), min_size=1, max_size=3),
       st.lists(PLAIN, min_size=24, max_size=30), st.randoms(use_true_random=False),
       st.sampled_from([CLOCKED, UNCLOCKED]))
def test_a_part_read_by_arrow_parses_as_each_line_alone(others, plain, rng, parser):
    """A producer's part with a few other lines among its records: Arrow reads the plain ones
    (unless a line it cannot place fails the part's read), ``parse_line`` the others."""
    lines = plain + others
    rng.shuffle(lines)
    read = read_plain(_part(lines), "received_at")
    if read is not None:
        is_plain = [lines[i] in plain for i in range(len(lines))]
        assert read.plain[np.array(is_plain)].all()
    _same_columns(parser, lines)


def test_arrow_reads_a_producers_part():
    """The property above would hold as well if Arrow read no part: it reads this one."""
    lines = [_plain(i, 1_000 + i, value, 2_000) for i, value in
             enumerate(["1", "2.5", "null", "-0.125", "17.000000001"] * 4)]
    read = read_plain(_part(lines), "received_at")
    assert read is not None and read.plain.all()
    assert read.keys.to_pylist() == [f"user-{i}" for i in range(20)]
    _same_columns(CLOCKED, lines)


@pytest.mark.parametrize("line", [
    '{"key":"k","event_time":1,"x":NaN}', '{"key":"k","event_time":1,"x":[-Infinity]}',
    '{"key":"k","event_time":1,"value":"5"}', '{"key":"k","event_time":1,"value" : "5"}',
    '{"key":"k","event_time":1,"value":true}', '{"key":"k","event_time":1,"value":{"a":1}}',
    '{"key":"k","event_time":1,"value":1.0000000005}', '{"key":"k","event_time":1.0}',
    '{"key":"k","event_time":"2026-01-01T00:00:00Z"}', '{"key":"k","event_time":1e3}',
    '{"key":"k","event_time":4611686018427387904}', '{"key":"k","event_time":-9223372036854775808}',
    '{"key":"k","key":"j","event_time":1}', '{"key":"k","event_time":1} {"key":"j","event_time":2}',
    '{"key":"k","event_time":1}}', '{"key":"k","event_time":1,"received_at":"2026-01-01"}',
    '{"key":"k","event_time":1,"received_at":1.5}', '{"key":"k","event_time":1,"received_at":true}',
    '{"key":"k","event_time":1,"received_at":123456789012345678901234567890}',
    '{"key":"\\u00e9","event_time":1}', '{"key":"\\ud800","event_time":1}',
    '{"key":"   ","event_time":1}',
    '{"key":"' + "k" * 1025 + '","event_time":1}', '{"key":5,"event_time":1}', "x", "[1]",
    '{"key":"k","event_time":1,"x":' + "[" * 70 + "]" * 70 + "}",
    '{"key":"k","event_time":1,"x":' + '{"a":' * 40 + "1" + "}" * 40 + "}",
    '{"key":"k","event_time":1,"x":' + "[" * 3000 + "]" * 3000 + "}",  # json gives up
    '{"key":"k","event_time":1,"x":1e999}', '{"key":"k","event_time":1} ', '{}'])
def test_a_line_arrow_must_not_read_alone_goes_to_parse_line(line):
    """Each among a producer's lines, before and after them, for each parser."""
    plain = [_plain(i, 5 + i, "2.5" if i % 2 else "null", 7) for i in range(10)]
    for lines in ([*plain[:5], line, *plain[5:]], [line, *plain], [*plain, line]):
        for parser in (CLOCKED, UNCLOCKED, ROOMY):
            _same_columns(parser, lines)
