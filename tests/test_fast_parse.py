"""The fast parser (msgspec, in batches) against ``parse_line`` (the json module, line by line):
for any text, any JSON object and any bytes, alone or mixed with others in one batch, the same
record (key, event time, exact value, the fields ingest reads) or the same rejection (reason,
detail, event time). The ingest tests and the on-executors equality test then hold the whole
batch's rows to what they were."""

from __future__ import annotations

import json
from datetime import UTC, timedelta, timezone

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.streams.landing.fast_parse import FastParser
from jobs.streams.landing.lines import Lines
from jobs.streams.landing.parsing import ParsedEvent, parse_line
from tests.depth import examples
from tests.faults.test_bad_input import records

PARSER = FastParser(300, ("received_at", "mark"), native_scan=False)
"""msgspec's decoding, here for a part's bytes too (PLATFORM_NATIVE_SCAN=false, or where the
native scanner is not built; tests/test_native_scan.py holds the scanner's way)."""
NATIVE = FastParser(300, ("received_at", "mark"))
CHUNKED = [FastParser(300, ("received_at", "mark"), chunk_lines=size, native_scan=False)
           for size in (1, 2, 5)]
"""After a failing line the rest is decoded in chunks: small ones, so the batches here span
several."""
READING_ROLES = FastParser(300, ("value", "event_time"))
"""A stream whose ingest clock or punctuation reads the value or the event time: the value is
then decoded as a number, not as its text."""
DECIMAL = pa.decimal128(38, 9)
ZONES = st.sampled_from([None, UTC, timezone(timedelta(hours=5, minutes=30)),
                         timezone(timedelta(hours=-14))])
TEXT_TIMES = st.one_of(
    st.builds(lambda moment, sep, zulu: moment.isoformat(sep)
              + ("Z" if zulu and moment.tzinfo is None else ""),
              st.datetimes(timezones=ZONES), st.sampled_from(["T", " "]), st.booleans()),
    st.sampled_from(["2026-01-01T00:00:00z", " 2026-01-01 ", "2026-13-40", "", "20260101",
                     "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.999999-14:00"]),
    st.text(max_size=12))
"""Event times as text: ISO-8601 in its forms, and texts that are not."""
LINES = st.one_of(
    st.text(max_size=120),
    records.map(json.dumps),
    records.map(lambda r: json.dumps(r, separators=(",", ":"))),
    st.binary(max_size=120).map(lambda b: b.decode("utf-8", errors="surrogateescape")),
    st.builds(lambda k, t, v, r: json.dumps({"key": k, "event_time": t, "value": v,
                                             "received_at": r}),
              st.text(max_size=12), st.integers(-(2**63), 2**63),
              st.one_of(st.none(), st.integers(-(2**100), 2**100),
                        st.decimals(allow_nan=False, allow_infinity=False).map(float),
                        st.booleans(), st.text(max_size=3)),
              st.one_of(st.none(), st.integers(), st.text(max_size=5))),
    st.from_regex(r'\{"key": ?"[a-z]{1,5}", ?"event_time": ?-?\d{1,20}, ?"value": ?'
                  r'-?\d{1,35}(\.\d{1,20})?([eE][+-]?\d{1,3})?\}', fullmatch=True),
    st.builds(lambda k, t, v: json.dumps({"key": k, "event_time": t, "value": v}),
              st.sampled_from(["k", "user-1", " "]), TEXT_TIMES,
              st.one_of(st.none(), st.integers(-1000, 1000))),
)


def _same(fast, slow, parser: FastParser = PARSER) -> None:
    if isinstance(slow, ParsedEvent):
        assert isinstance(fast, ParsedEvent), (fast, slow)
        assert (fast.key, fast.event_time_ms) == (slow.key, slow.event_time_ms)
        # the value as read is what the arrival log stores: exactly the rounded one
        assert pa.array([fast.value], DECIMAL) == pa.array([slow.value], DECIMAL)
        for name in parser.extras:  # the fields ingest reads besides these three
            assert fast.fields.get(name) == slow.fields.get(name), name
    else:
        assert fast == slow


@settings(max_examples=examples(600), deadline=None)
@given(st.lists(LINES, min_size=1, max_size=24),
       st.sampled_from([PARSER, NATIVE, *CHUNKED, READING_ROLES]))
def test_a_batch_of_any_lines_parses_as_each_line_alone(lines, parser):
    """One ``decode_lines`` over the batch, resumed in chunks after a line it cannot take;
    from a list of lines and from a part's bytes (:class:`Lines`) alike."""
    fast = parser.parse_many(lines)
    assert len(fast) == len(lines)
    for line, result in zip(lines, fast, strict=True):
        _same(result, parse_line(line, 300), parser)
    if all(line and line.isascii() and "\n" not in line for line in lines):  # a part's bytes
        block = Lines.of("\n".join(lines).encode("ascii"))
        if block is not None:
            assert list(block) == lines
            for line, result in zip(lines, parser.parse_many(block), strict=True):
                _same(result, parse_line(line, 300), parser)


def test_the_hard_cases_take_parse_lines_way():
    cases = ['{"key": "k", "event_time": 1, "value": 1.0000000005}',  # rounds half up
             '{"key": "k", "event_time": 1, "value": 1e28}', '{"key": "k", "event_time": 1,'
             ' "value": 1e29}', '{"key": "\\ud800", "event_time": 1}',
             '{"key": "k", "event_time": "2026-01-01T00:00:00Z"}', '{"key": "k"} {"x": 1}',
             '{"key": "k", "event_time": NaN}', '{"key": "k", "event_time": 1, "key": "j"}',
             '{"key": "k\t", "event_time": 1}', "[1, 2]", '{"key": " ", "event_time": 1}',
             '{"key": "k", "event_time": 01}', '{"key": "é", "event_time": 1}']
    cases += ['{"key": 5, "key": "k", "event_time": 1}',  # the last of a name counts
              '{"key": "k", "event_time": 4611686018427387904}',  # event times' range
              '{"key": "k", "event_time": -4611686018427387903}',
              '{"key": "k", "event_time": 1e3}', '{"key": "k", "event_time": true}',
              # numbers Decimal cannot hold: ingest stopped on them
              '{"key": "k", "event_time": 1, "value": 1e1000000000000000000}',
              '{"key": "k", "event_time": 1, "other": 1e1000000000000000000}',
              '{"key": "k", "event_time": 1, "mark": 1e1000000000000000000}',
              '{"key": "k", "event_time": 1e1000000000000000000}']
    for line in cases:
        _same(PARSER.parse(line), parse_line(line, 300))
        _same(READING_ROLES.parse(line), parse_line(line, 300), READING_ROLES)
    roomy = FastParser(20_000, ("received_at", "mark"))
    for key in ("k" * 1024, "k" * 1025, "\u00e9" * 1024, "\U0001F600" * 1025):
        # the key's length limit in characters, within the line's (escaped in JSON)
        line = json.dumps({"key": key, "event_time": 1})
        _same(roomy.parse(line), parse_line(line, 20_000))


def test_values_beyond_what_arrows_cast_reads_right_take_the_rules_in_a_batch():
    """Numbers Arrow's text-to-decimal cast turned into other numbers (an exponent past
    the precision, 39 digits), numbers at DECIMAL(38, 9)'s bounds, and exact ones written with
    more than nine decimals, each in a batch of plain ones."""
    values = ["5.68261855221e34", "-17197626909691908115077384790.6981304066", "12.5",
              "99999999999999999999999999999.999999999", "1.10000000000", "1e28", "1e-9",
              "1.5e-10", "-0", "100000000000000000000000000000", "7"]
    for value in values:  # each alone among plain ones, so no other decides the batch's way
        lines = [f'{{"key": "k", "event_time": 1, "value": {v}}}' for v in ("1", value, "2.5")]
        for line, result in zip(lines, PARSER.parse_many(lines), strict=True):
            _same(result, parse_line(line, 300))


def test_a_parts_bytes_hold_the_line_length_limit():
    """A part kept as its bytes: a line one character over the limit is refused, as
    ``parse_line`` refuses it, and one at the limit is read."""
    at_limit = '{"key": "k", "event_time": 1, "x": "aa"}'
    over = '{"key": "k", "event_time": 1, "x": "aaa"}'
    assert (len(at_limit), len(over)) == (40, 41)
    for native_scan in (False, True):
        parser = FastParser(40, ("received_at", "mark"), native_scan=native_scan)
        for lines in ([at_limit], [at_limit, over], [over, at_limit]):
            block = Lines.of(("\n".join(lines) + "\n").encode("ascii"))
            for line, result in zip(lines, parser.parse_many(block), strict=True):
                _same(result, parse_line(line, 40))


SHAPED_TIMES = st.builds(
    lambda y, mo, d, h, mi, s, fraction, zone:
        f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{fraction}{zone}",
    st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25),
    st.integers(0, 61), st.integers(0, 61),
    st.one_of(st.just(""), st.from_regex(r"[.,]\d{1,9}", fullmatch=True)),
    st.one_of(st.sampled_from(["", "Z", "z", "+00:00", "-00:00", " ", "\n", "Z\n", "\x00",
                               "\u0661"]),
              st.from_regex(r"[+-]\d{2}:\d{2}(:\d{2})?", fullmatch=True)))
"""Texts of the usual shape, each field anywhere from valid to just past it: a 30th of
February, 24 o'clock, a 60th second, seven digits of fraction, an offset of 25 hours, a
trailing newline, NUL or Arabic-Indic digit."""


@settings(max_examples=examples(600), deadline=None)
@given(st.lists(st.one_of(SHAPED_TIMES, SHAPED_TIMES, TEXT_TIMES, st.integers(), st.none()),
                max_size=40))
def test_text_event_times_read_in_bulk_are_read_as_one_at_a_time(texts):
    """Arrow reads the usual shape for a whole column; every other text, and every text Arrow
    refuses, goes to ``fromisoformat`` alone: the same millisecond or the same refusal."""
    from jobs.streams.landing.fast_parse import _text_time_ms
    from jobs.streams.landing.iso_times import text_times_ms
    from jobs.streams.landing.parsing import EVENT_TIME_BOUND

    assert text_times_ms(texts, _text_time_ms, EVENT_TIME_BOUND) == \
        [_text_time_ms(text) for text in texts]


def test_a_column_of_impossible_dates_is_read_one_at_a_time_with_the_same_refusals():
    """A producer writing dates that do not exist: every one refused as alone, among good
    ones (the bulk cast fails for a column; the refused texts are found by halving)."""
    from jobs.streams.landing.fast_parse import _text_time_ms
    from jobs.streams.landing.iso_times import text_times_ms
    from jobs.streams.landing.parsing import EVENT_TIME_BOUND

    texts = [f"2023-0{2 + i % 3}-{29 + i % 3}T00:00:00.{i:03d}Z" for i in range(500)]
    found = text_times_ms(texts, _text_time_ms, EVENT_TIME_BOUND)
    assert found == [_text_time_ms(text) for text in texts]
    # 29 February 2023 and 31 April refused, 30 March read
    assert [ms is None for ms in found] == [i % 3 != 1 for i in range(500)]
