"""Bad input never stops ingest, never moves a watermark, and is never lost: every line lands
in the arrival log or in quarantine with a reason. The parser is fuzzed with generated garbage;
ingest gets a file of every kind of bad line a collector can deliver, duplicate, empty and
half-written files."""

from __future__ import annotations

import json
import os
import random
import time
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.streams.landing import parsing
from jobs.streams.landing.batch import BAD_INGEST_STAMP, DUPLICATE_FILE, INVALID_UTF8
from jobs.streams.landing.ingestor import ingest
from jobs.streams.landing.parsing import ParsedEvent, Rejection, parse_line
from tests.depth import examples

REASONS = {parsing.MALFORMED_JSON, parsing.NOT_AN_OBJECT, parsing.LINE_TOO_LONG,
           parsing.MISSING_KEY, parsing.BAD_KEY, parsing.MISSING_EVENT_TIME,
           parsing.UNPARSABLE_EVENT_TIME, parsing.BAD_VALUE}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)
field_values = (json_values | st.integers(-(2**70), 2**70)
                | st.sampled_from(["2026-01-01T00:00:00Z", "2026-13-40", "last tuesday", "",
                                   "1e400", "9999-12-31T23:59:59.999Z", "-inf"]))
records = st.dictionaries(st.sampled_from(["key", "event_time", "value", "received_at",
                                           "payload", "type"]) | st.text(max_size=6),
                          field_values, max_size=6)


def _check(result: ParsedEvent | Rejection) -> None:
    if isinstance(result, Rejection):
        assert result.reason in REASONS, result
        assert isinstance(result.detail, str)
        result.detail.encode("utf-8")  # storable in the quarantine
        return
    assert isinstance(result.key, str) and result.key.strip()
    result.key.encode("utf-8")  # storable in the arrival log (Arrow refuses lone surrogates)
    assert len(result.key) <= parsing.MAX_KEY_LENGTH
    assert isinstance(result.event_time_ms, int) and abs(result.event_time_ms) < 2**62
    assert result.value is None or isinstance(result.value, Decimal)


@settings(max_examples=examples(750), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_the_parser_survives_any_text(text):
    _check(parse_line(text, max_line_bytes=200))


@settings(max_examples=examples(750), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_the_parser_survives_any_json_object(record):
    result = parse_line(json.dumps(record))
    _check(result)
    if isinstance(result, ParsedEvent):
        assert result.key == record["key"]


@settings(max_examples=examples(150), deadline=None)
@given(st.binary(max_size=200))
def test_the_parser_survives_any_bytes_that_decode(data):
    _check(parse_line(data.decode("utf-8", errors="surrogateescape")))


@pytest.mark.parametrize("key", ["\\ud800", "a\\udfffb", "\\udc00\\ud800"])
def test_a_key_that_utf8_cannot_hold_is_a_bad_key_not_a_stuck_batch(key):
    """JSON may escape a lone surrogate ("\\ud800"); such a key cannot be written to the
    arrival log (UTF-8 has no encoding for it), and accepting it made every re-run of the
    batch fail the same way."""
    result = parse_line(f'{{"key": "{key}", "event_time": 1}}')
    _check(result)
    assert result.reason == parsing.BAD_KEY
    assert parse_line('{"key": "\\ud83d\\ude00", "event_time": 1}').key == "\U0001f600"


def test_pathological_lines_are_rejected_not_crashed_on():
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_line(deep).reason == parsing.MALFORMED_JSON  # RecursionError inside json
    assert parse_line('{"key": "k", "event_time": NaN}').reason == parsing.MALFORMED_JSON
    assert parse_line('{"key": "k", "event_time": 1, "value": 1e999}').reason \
        == parsing.BAD_VALUE
    assert parse_line("x" * 2_000_001).reason == parsing.LINE_TOO_LONG
    assert parse_line('{"key": "k", "event_time": 10000000000000000000000}').reason \
        == parsing.UNPARSABLE_EVENT_TIME


# -- through ingest, with Spark --------------------------------------------------------------

START = 1_767_225_600_000


def _garbage(rng: random.Random, index: int) -> bytes:
    """One bad line of a random kind (a collector's worst day)."""
    stamp = START + index * 1_000
    kinds = [
        lambda: b'{"key": "user-1", "event_time": 17672256',  # cut off
        lambda: b"\xff\xfe\x00 not utf-8 \xc3\x28",
        lambda: b'["user-1", 1767225600000]',
        lambda: json.dumps({"event_time": stamp, "received_at": stamp}).encode(),
        lambda: json.dumps({"key": None, "event_time": stamp, "received_at": stamp}).encode(),
        lambda: json.dumps({"key": 42, "event_time": stamp, "received_at": stamp}).encode(),
        lambda: json.dumps({"key": "   ", "event_time": stamp, "received_at": stamp}).encode(),
        lambda: json.dumps({"key": "k" * 5000, "event_time": stamp}).encode(),
        lambda: json.dumps({"key": "user-2", "received_at": stamp}).encode(),
        lambda: json.dumps({"key": "user-2", "event_time": "yesterday-ish",
                            "received_at": stamp}).encode(),
        lambda: json.dumps({"key": "user-2", "event_time": [1, 2],
                            "received_at": stamp}).encode(),
        lambda: json.dumps({"key": "user-3", "event_time": "2091-06-01T00:00:00Z",
                            "received_at": stamp}).encode(),  # decades in the future
        lambda: json.dumps({"key": "user-3", "event_time": "1931-06-01T00:00:00Z",
                            "received_at": stamp}).encode(),  # decades in the past
        lambda: json.dumps({"key": "user-4", "event_time": stamp, "value": "twelve",
                            "received_at": stamp}).encode(),
        lambda: json.dumps({"key": "user-4", "event_time": stamp, "value": True,
                            "received_at": stamp}).encode(),
        lambda: json.dumps({"key": "user-5", "event_time": stamp,
                            "received_at": 253_402_300_000_000}).encode(),  # stamp: year 9999
        lambda: b'{"key": "user-6", "event_time": 1, "pad": "' + b"x" * 1_200_000 + b'"}',
        lambda: b"null",
        lambda: b'{"key": "user-7", "event_time": Infinity}',
    ]
    return kinds[index % len(kinds)]()


def _good(index: int) -> bytes:
    stamp = START + index * 1_000
    return json.dumps({"key": f"user-{index % 7}", "event_time": stamp - (index % 5) * 700,
                       "value": index % 13, "received_at": stamp + 300}).encode()


@pytest.mark.spark
def test_a_file_of_every_bad_kind_is_fully_accounted_for(spark, tmp_path):
    """Good and bad lines interleaved: the good ones give exactly the log they give alone
    (same positions, ingest times and watermarks), every bad one is in quarantine with a
    reason, and nothing stops the ingest."""
    rng = random.Random(3)
    good = [_good(i) for i in range(300)]
    bad = [_garbage(rng, i) for i in range(190)]

    def land(home: Path, lines: list[bytes]) -> Stream:
        stream = platform_of(PlatformSettings.from_env({"PLATFORM_HOME": str(home)})) \
            .streams["events"]
        folder = stream.landing_dir / "producer-0"
        folder.mkdir(parents=True)
        (folder / "batch.jsonl").write_bytes(b"\n".join(lines) + b"\n\n")
        ingest(spark, stream, progress=lambda _: None)
        return stream

    mixed = list(good)
    for line in bad:
        mixed.insert(rng.randrange(len(mixed) + 1), line)
    clean = land(tmp_path / "clean", good)
    dirty = land(tmp_path / "dirty", mixed)
    columns = ["arrival_seq", "key", "event_time_ms", "ingest_time_ms", "watermark_ms", "value"]

    def log(settings):
        frame = spark.read.format("delta").load(settings.table_path(tables.ARRIVAL_LOG))
        return frame.toPandas().sort_values("arrival_seq")[columns].reset_index(drop=True)

    assert log(dirty).equals(log(clean))
    quarantine = spark.read.format("delta").load(
        dirty.table_path(tables.QUARANTINE)).toPandas()
    assert len(quarantine) == len(bad)
    assert sorted(quarantine.line_number) == sorted(
        i + 1 for i, line in enumerate(mixed) if line not in good)
    reasons = set(quarantine.reason)
    assert reasons == REASONS | {INVALID_UTF8, BAD_INGEST_STAMP, parsing.TOO_FAR_IN_FUTURE,
                                 parsing.TOO_FAR_IN_PAST}
    assert (quarantine.raw_line.str.len() <= 10_000).all()  # huge lines are cut in quarantine


@pytest.mark.spark
def test_duplicate_empty_and_half_written_files(spark, tmp_path):
    settings = platform_of(PlatformSettings.from_env(
        {"PLATFORM_HOME": str(tmp_path / "platform")})).streams["events"]
    folder = settings.landing_dir / "producer-0"
    folder.mkdir(parents=True)
    content = b"\n".join(_good(i) for i in range(20)) + b"\n"
    (folder / "a.jsonl").write_bytes(content)
    (folder / "empty.jsonl").write_bytes(b"")
    first = ingest(spark, settings, progress=lambda _: None)
    assert (first.records, first.quarantined) == (20, 0)

    # the collector delivers a.jsonl again under another name, plus an empty file and a
    # file it is still writing (no final newline yet)
    (folder / "a-redelivered.jsonl").write_bytes(content)
    (folder / "also-empty.jsonl").write_bytes(b"")
    in_flight = folder / "c.jsonl"
    in_flight.write_bytes(b"\n".join(_good(i) for i in range(20, 25)) + b'\n{"key": "us')
    second = ingest(spark, settings, progress=lambda _: None)
    assert (second.records, second.quarantined, second.deferred) == (0, 1, 1)
    assert second.reasons == {DUPLICATE_FILE: 1}

    # nothing more arrives: once the file has not changed for the settle time, it is taken
    # as it is and its cut-off line quarantined
    old = time.time() - 3_600
    os.utime(in_flight, (old, old))
    third = ingest(spark, settings, progress=lambda _: None)
    assert (third.records, third.quarantined, third.deferred) == (5, 1, 0)
    assert third.reasons == {parsing.MALFORMED_JSON: 1}
    log = spark.read.format("delta").load(settings.table_path(tables.ARRIVAL_LOG))
    assert log.count() == 25 and log.select("arrival_seq").distinct().count() == 25
    assert ingest(spark, settings, progress=lambda _: None).batch_id is None
