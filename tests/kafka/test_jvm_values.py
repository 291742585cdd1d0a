"""Kafka values parsed in the JVM against the landing rules in Python: for any bytes, any text
and any JSON object, a record Spark's parser takes as a plain good event is the very event
``parse_line`` (or, with the record's own key or timestamp, the Python ingest) makes of it;
every other record is left to Python whole. And plain good events are taken by the JVM, so
the fast path is not an empty one."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.streams.kafka.values import python_verdicts, with_jvm_events
from jobs.streams.landing.batch import IngestRules
from jobs.streams.landing.parsing import ParsedEvent
from operators.watermarks import WatermarkSpec
from tests.depth import examples
from tests.test_fast_parse import LINES

pytestmark = pytest.mark.spark

LIMIT = 300
RULES = IngestRules("wall", 10**12, 10**12, LIMIT,
                    WatermarkSpec(max_out_of_orderness_ms=1000))
DECIMAL = pa.decimal128(38, 9)
HARD = ['{"key": "k", "event_time": 1, "value": 1.0000000005}',
        '{"key": "k", "event_time": 1, "value": 1e28}', '{"key": "k", "event_time": 1, '
        '"value": 1e29}', '{"key": "\\ud800", "event_time": 1}',
        '{"key": "k", "event_time": "2026-01-01T00:00:00Z"}', '{"key": "k"} {"x": 1}',
        '{"key": "k", "event_time": 1} x', '{"key": "k", "event_time": 1}]',
        '{"key": "k", "event_time": 1, "x": NaN}', '{"key": "k", "event_time": 1, "x": -Infinity}',
        '{"key": "k", "event_time": 1, "key": "j"}', "{'key': 'k', 'event_time': 1}",
        '{key: "k", "event_time": 1}', '{"key": "k", "event_time": 1} // note',
        '{"key": "k", "event_time": 1, "x": "\\q"}', '{"key": "k", "event_time": 1, "x": 01}',
        '{"key": "k\\t", "event_time": 1}', '{"key": " ", "event_time": 1}', "[1, 2]",
        '{"key": "k", "event_time": 01}', '{"key": "é", "event_time": 1}',
        '{"key": "k", "event_time": 1, "value": true}', '{"key": "k", "event_time": 1.0}',
        '{"key": "k", "event_time": 4611686018427387904}', '{"key": "k", "event_time": 1,}',
        '{"key": "k", "event_time": 1, "value": 12345678901234567890123456789.123456789}',
        '{"key": "k", "event_time": 1, "value": 123456789012345678901234567890.1}',
        '{"key": "k", "event_time": 1, "value": 99999999999999999999999999999.999999999}',
        '{"key": "k", "event_time": 1, "value": 5.68261855221e34}',
        '{"key": "k", "event_time": 1, "value": -0.0}', '{"key": "k", "event_time": 1, '
        '"value": null}', '{"key": "k", "event_time": 1, "x": 1e400}',
        '{"key": "k", "event_time": 1, "x": ' + "[" * 80 + "]" * 80 + "}", "", " ", "null",
        '{"key": "k", "event_time": 1, "x": "' + "a" * 400 + '"}']
PLAIN = st.builds(lambda k, t, v: f'{{"key": "{k}", "event_time": {t}{v}}}',
                  st.from_regex(r"[A-Za-z0-9_:-]{1,20}", fullmatch=True),
                  st.integers(0, 2**45),
                  st.one_of(st.just(""), st.just(', "value": null'),
                            st.integers(-(10**12), 10**12).map(', "value": {}'.format),
                            st.decimals(-(10**6), 10**6, places=3).map(', "value": {}'.format)))
VALUES = st.one_of(LINES.map(lambda line: line.encode("utf-8", "surrogateescape")),
                   st.binary(max_size=40), st.none(), st.sampled_from(HARD).map(str.encode))
MODES = st.sampled_from([("field", "field"), ("record_key", "field"),
                         ("field", "record_timestamp")])


def _jvm(spark, values: list[bytes | None], keys: list[bytes | None], stamps: list[int],
         modes: tuple[str, str]) -> list:
    frame = spark.createDataFrame(list(zip(values, keys, stamps, strict=True)),
                                  "value binary, key binary, stamp long")
    return with_jvm_events(frame, LIMIT, modes[0] == "record_key",
                           modes[1] == "record_timestamp").collect()


@settings(max_examples=examples(6), deadline=None)
@given(st.lists(st.tuples(VALUES, st.one_of(st.none(), st.binary(max_size=6),
                                            st.text(max_size=6).map(str.encode)),
                          st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=120),
       MODES)
def test_what_the_jvm_takes_python_parses_alike(spark, records, modes):
    values, keys, stamps = (list(column) for column in zip(*records, strict=True))
    rows = _jvm(spark, values, keys, stamps, modes)
    expected = python_verdicts(values, keys, stamps, RULES, *modes)
    for row, (text, verdict), value in zip(rows, expected, values, strict=True):
        if not row.jvm_event:
            continue
        assert isinstance(verdict, ParsedEvent), (value, verdict)
        assert (row.jvm_key, row.jvm_time_ms, row.jvm_text) == \
            (verdict.key, verdict.event_time_ms, text), value
        assert pa.array([row.jvm_value], DECIMAL) == pa.array([verdict.value], DECIMAL), value


def test_the_hard_cases_are_left_to_python_or_parsed_alike(spark):
    values = [case.encode() for case in HARD]
    rows = _jvm(spark, values, [None] * len(values), [0] * len(values), ("field", "field"))
    taken = {case for case, row in zip(HARD, rows, strict=True) if row.jvm_event}
    # only these are plain good events; everything else goes to Python
    assert taken == {'{"key": "k", "event_time": 1, "value": 1.0000000005}',  # rounded alike
                     '{"key": "k", "event_time": 1, "value": '
                     '12345678901234567890123456789.123456789}',
                     '{"key": "k", "event_time": 1, "value": '
                     '99999999999999999999999999999.999999999}',  # the largest it holds
                     '{"key": "k", "event_time": 1, "value": -0.0}',
                     '{"key": "k", "event_time": 1, "value": null}',
                     '{"key": "k", "event_time": 1, "x": 1e400}'}, taken
    for case, row in zip(HARD, rows, strict=True):
        if row.jvm_event:
            ((_, verdict),) = python_verdicts([case.encode()], [None], [0], RULES)
            assert (row.jvm_key, row.jvm_time_ms) == (verdict.key, verdict.event_time_ms)
            assert pa.array([row.jvm_value], DECIMAL) == pa.array([verdict.value], DECIMAL)


@settings(max_examples=examples(3), deadline=None)
@given(st.lists(PLAIN, min_size=1, max_size=100))
def test_plain_good_events_are_parsed_in_the_jvm(spark, lines):
    values = [line.encode() for line in lines]
    rows = _jvm(spark, values, [None] * len(values), [0] * len(values), ("field", "field"))
    missed = [v for v, r in zip(values, rows, strict=True) if not r.jvm_event]
    assert not missed, missed
    expected = python_verdicts(values, [None] * len(values), [0] * len(values), RULES)
    assert [(r.jvm_key, r.jvm_time_ms) for r in rows] == \
        [(v.key, v.event_time_ms) for _, v in expected]

