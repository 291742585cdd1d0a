"""The native scanner (native/landing_scan, serde_json) inside the fast parser, against
``parse_line``: a part's bytes of ASCII lines, the usual part, give for every line the same
record (key, event time, exact value, the fields ingest reads) or the same rejection, and the
columns ingest ships (keys, event times, values) hold exactly those records. The lines are
made to sit on the scanner's edges: escapes in names and keys, names given twice, blank and
over-long keys, event times at their range's bounds or written as text, values of every JSON
type, text after the object, nesting, long numbers and lines past the scanned length."""

from __future__ import annotations

import json
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.streams.landing import native_scan
from jobs.streams.landing.fast_parse import FastParser
from jobs.streams.landing.lines import Lines
from jobs.streams.landing.parsing import EVENT_TIME_BOUND, ParsedEvent, parse_line
from tests.depth import examples
from tests.test_fast_parse import TEXT_TIMES, _same

LIMIT = 6000
"""Above :data:`native_scan.MAX_SCANNED_BYTES`: lines past it are the rules' again."""
PARSER = FastParser(LIMIT, ("received_at", "mark"))
DECIMAL = pa.decimal128(38, 9)

NAMES = st.sampled_from(['"key"', '"event_time"', '"value"', '"received_at"', '"mark"',
                         '"other"', '"k\\u0065y"', '"event_tim\\u0065"', '"va\\u006cue"',
                         '"Key"', '""', '"key "'])
KEYS = st.one_of(
    st.from_regex(r'"[a-z0-9 _-]{0,8}"', fullmatch=True),
    st.from_regex(r'"[a-z0-9 _-]{0,8}"', fullmatch=True),
    st.sampled_from(['"  "', '""', '"k\\u0065"', '"\\u00e9"', '"\\ud800"', '"a\\tb"',
                     '"\\u2003"', '"\\u001c"', '" k "', '"\\/"', f'"{"k" * 1024}"',
                     f'"{"k" * 1025}"', '5', 'null', 'true', '["k"]', '{"k": 1}']))
TIMES = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from([str(EVENT_TIME_BOUND - 1), str(EVENT_TIME_BOUND), str(-EVENT_TIME_BOUND),
                     str(1 - EVENT_TIME_BOUND), "-0", "1.0", "1e3", "01", "true", "null",
                     "NaN", '"1"', '"2026-01-01T00:00:00Z\\u0020"']),
    TEXT_TIMES.map(lambda text: json.dumps(text)))
VALUES = st.one_of(
    st.from_regex(r"-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,12})?([eE][+-]?[0-9]{1,2})?", fullmatch=True),
    st.sampled_from(["null", "true", "false", '"5"', "[]", "{}", "NaN", "-Infinity",
                     "[[[[1]]]]", "1" * 4400, "1e400", '{"a": [1, {"b": null}]}',
                     "[" * 200 + "]" * 200, "[" * 1000 + "]" * 1000, "[" * 128 + "]" * 128,
                     "1e1000000000000000000", "-2.5E+999999999999999999",
                     '"\\ud800"', '"a\\"b"']))
SPACE = st.sampled_from(["", " ", "\t", "\r", "  "])


@st.composite
def lines(draw) -> str:
    """A JSON-ish object line: most often a key and an event time, each drawn from its edges,
    with a value and other fields (some names given twice, some values fit for another name),
    in any order, then perhaps text after it."""
    fields = []
    for name, values in (('"key"', KEYS), ('"event_time"', TIMES), ('"value"', VALUES)):
        if draw(st.integers(0, 5)):
            fields.append((name, draw(values)))
    for _ in range(draw(st.integers(0, 3))):
        fields.append((draw(NAMES), draw(st.one_of(KEYS, TIMES, VALUES))))
    order = draw(st.permutations(range(len(fields))))
    line = "{" + ",".join(f"{fields[i][0]}{draw(SPACE)}:{draw(SPACE)}{fields[i][1]}"
                          for i in order) + "}"
    line += draw(st.sampled_from(["", "", "", " ", "\r", " {}", "}", ",", "x", "\x0c"]))
    if draw(st.integers(0, 20)) == 0:  # past the scanned length, padded in an ignored field
        line = "{" + f'"pad": "{"p" * native_scan.MAX_SCANNED_BYTES}", ' + line[1:]
    return line


PLAIN = st.builds(lambda k, t, v, r: json.dumps({"key": k, "event_time": t, "value": v,
                                                 "received_at": r}),
                  st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                  st.integers(-(2**62) + 1, 2**62 - 1),
                  st.one_of(st.none(), st.integers(-(10**20), 10**20),
                            st.decimals(-10**6, 10**6, places=3).map(str)
                            .map(lambda d: json.loads(d, parse_float=str))),
                  st.integers(0, 2**50))


def _part(texts: list[str]) -> Lines:
    block = Lines.of("\n".join(texts).encode("ascii"))
    assert block is not None and list(block) == texts
    return block


def test_the_scanner_is_built():
    """``./platform setup`` builds it; without it ingest decodes with msgspec, slower."""
    assert native_scan.available(), f"no {native_scan.LIBRARY}: run ./platform setup (cargo)"
    part = _part(['{"key": "k", "event_time": 5, "value": 1.25, "mark": [1, 2.5]}', "x"])
    scan = native_scan.scan(part, 100, 1024, ["mark"])
    assert scan is not None
    assert scan.status.tolist() == [native_scan.INT_TIME, native_scan.NOT_SCANNED]
    assert scan.keys.to_pylist() == ["k", ""] and scan.times[0] == 5
    assert scan.value_status.tolist() == [native_scan.VALUE_HELD, native_scan.VALUE_ABSENT]
    assert scan.decimals.to_pylist() == [Decimal("1.25"), None]
    assert [type(v).__name__ for v in scan.extras["mark"][0]] == ["int", "Decimal"]


@settings(max_examples=examples(800), deadline=None)
@given(st.lists(st.one_of(lines(), PLAIN), min_size=1, max_size=30))
def test_a_part_scanned_natively_parses_as_each_line_alone(texts):
    texts = [text for text in texts if text and text[0] not in " \t\r\x0c"] or ["x"]
    parsed = PARSER.parse_columns(_part(texts))
    keys = parsed.key_column().to_pylist()
    values = parsed.value_column()
    for index, text in enumerate(texts):
        reference = parse_line(text, LIMIT)
        _same(parsed.verdict(index), reference)
        is_record = isinstance(reference, ParsedEvent)
        assert bool(parsed.is_event[index]) == is_record
        assert keys[index] == (reference.key if is_record else None)
        assert int(parsed.events[index]) == (reference.event_time_ms if is_record else 0)
        expected = pa.array([reference.value if is_record else None], DECIMAL)
        assert values.slice(index, 1) == expected


def test_a_part_of_plain_lines_is_all_columns():
    """The usual part: no line for ``parse_line``, keys and values as Arrow columns."""
    texts = [json.dumps({"key": f"user-{i}", "event_time": 1_700_000_000_000 + i,
                         "value": i / 4, "received_at": 5}) for i in range(500)]
    parsed = PARSER.parse_columns(_part(texts))
    assert parsed.slow == {} and parsed.is_event.all()
    assert isinstance(parsed.keys, pa.Array) and isinstance(parsed.values, pa.Array)
    assert parsed.keys.to_pylist() == [f"user-{i}" for i in range(500)]
    assert np.array_equal(parsed.events, 1_700_000_000_000 + np.arange(500))
    assert parsed.extras["received_at"] == [5] * 500


def test_lines_the_json_module_cannot_read_deep_or_huge_are_judged_alike_in_a_part():
    """Nesting past the json module's recursion limit, in a field ingest skips and in one it
    reads (serde_json skips such values at any depth), and numbers ``Decimal`` cannot hold,
    among good lines: each line's outcome as alone, with the scanner and without it."""
    deep = "[" * 1000 + "]" * 1000
    texts = ['{"key": "a", "event_time": 1}',
             f'{{"key": "k", "event_time": 1, "x": {deep}}}',
             f'{{"key": "k", "event_time": 1, "mark": {"[" * 995 + "]" * 995}}}',
             '{"key": "k", "event_time": 1, "x": 1e1000000000000000000}',
             '{"key": "k", "event_time": 1, "value": 1e1000000000000000000}',
             '{"key": "k", "event_time": 1, "mark": -1E+1000000000000000000}',
             '{"key": "k", "event_time": 1, "value": 1e999999999999999999}',
             '{"key": "k", "event_time": 1e999999999999999999}',
             '{"key": "b", "event_time": 2}']
    assert parse_line(texts[1], LIMIT).reason == "malformed_json"
    good = texts[0]
    for parser in (PARSER, FastParser(LIMIT, ("received_at", "mark"), native_scan=False)):
        for part in [texts, *([good, text, good] for text in texts[1:])]:  # alone, so that
            # no other line sends the part another way
            for text, parsed in zip(part, parser.parse_many(_part(part)), strict=True):
                _same(parsed, parse_line(text, LIMIT))


def test_field_names_the_scanner_cannot_take_leave_the_part_to_msgspec():
    assert native_scan.scan(_part(['{"key": "k", "event_time": 1}']), 100, 1024,
                            ["a\nb"]) is None


def test_the_scanners_own_tests_pass():
    """The flat reader against serde_json's path, line by line, and the decimals against the
    texts (``cargo test``: Rust's unit tests, in `native/landing_scan/src`)."""
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    manifest = native_scan.LIBRARY.parents[2] / "Cargo.toml"
    done = subprocess.run([cargo, "test", "--release", "--locked", "--quiet", "--manifest-path",
                           str(manifest)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "test result: ok" in done.stdout
