"""The live query's source by arrival position (jobs.live.log_source): the same buckets as
Spark's ``pmod(xxhash64(key), n)``, and over a log of many commits read in any slices, every
record exactly once, in the pack of its bucket, as Spark's Delta source and
``pack_by_bucket`` pack it; the limits of a micro-batch and of an available-now run."""

from __future__ import annotations

import json
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles

from jobs.config.errors import SettingsError
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.config.streams import Stream
from jobs.live.cohorts import CohortRecord
from jobs.live.log_source import OFFSET, ArrivalLogReader, bucket_of_keys, byte_count
from jobs.live.queries import trigger_limits
from jobs.runtime.buckets import BUCKET_COLUMN, bucket_column
from jobs.runtime.packing import PACKED_COLUMN, PACKED_WATERMARK, is_tick, pack_by_bucket, unpack
from jobs.store import fast_writes
from jobs.streams.log_rows import ARRIVAL_SCHEMA

COLUMNS = ["key", "arrival_seq", "event_time_ms", "ingest_time_ms", "watermark_ms", "value"]
keys = st.lists(st.text(max_size=12), min_size=1, max_size=200)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys, st.sampled_from([1, 2, 7, 16, 1000]))
def test_buckets_are_sparks(spark, drawn, buckets):
    expected = [row[0] for row in spark.createDataFrame([(k,) for k in drawn], "key string")
                .select(bucket_column(buckets)).collect()]
    assert bucket_of_keys(pa.array(drawn, pa.string()), buckets).tolist() == expected


def _commit(location: str, first_seq: int, size: int, rng) -> pa.Table:
    """One append of ``size`` records from position ``first_seq``."""
    rows = []
    for seq in range(first_seq, first_seq + size):
        event = rng.randrange(10**12, 10**12 + 10**6)
        stamp = pd.Timestamp(event, unit="ms", tz="UTC")
        rows.append({
            "arrival_seq": seq, "ingest_batch": first_seq, "source_partition": "p",
            "source_file": "f", "line_number": seq, "key": rng.choice(["a", "b", "ü", "k9", ""]),
            "event_time_ms": event, "event_time": stamp, "ingest_time_ms": event,
            "ingest_time": stamp, "watermark_ms": event - rng.randrange(0, 5000),
            "watermark": stamp, "payload": "{}",
            "value": rng.choice([None, Decimal("1.5"), Decimal(rng.randrange(-10**6, 10**6))
                                 / 1000, Decimal("123456789012.000000001")])})
    table = pa.Table.from_pylist(rows, schema=ARRIVAL_SCHEMA)
    fast_writes.append(location, table)
    return table


def _log(location: str, commits: list[int], seed: int) -> pa.Table:
    """A log of ``commits`` appends of that many records each, positions in order."""
    import random

    rng, tables, seq = random.Random(seed), [], 0
    for size in commits:
        tables.append(_commit(location, seq, size, rng))
        seq += size
    return pa.concat_tables(tables)


def _records(packs: pd.DataFrame) -> pd.DataFrame:
    """Each pack's records with the pack's bucket; each pack's watermark checked."""
    frames = []
    for _, pack in packs.iterrows():
        if is_tick(pack[PACKED_COLUMN]):
            continue
        records = unpack(pd.DataFrame({PACKED_COLUMN: [pack[PACKED_COLUMN]]}))
        assert pack[PACKED_WATERMARK] == records["watermark_ms"].max()
        frames.append(records.assign(**{BUCKET_COLUMN: pack[BUCKET_COLUMN]}))
    found = pd.concat(frames, ignore_index=True)
    found["value"] = found["value"].astype(str)
    return found.sort_values("arrival_seq").reset_index(drop=True)


WATERMARK = {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s"}


def _stream(tmp_path, spec: dict) -> Stream:
    streams = tmp_path / "streams"
    streams.mkdir(parents=True)
    (streams / "events.yaml").write_text(json.dumps({"watermark": WATERMARK, **spec}))
    return platform_of(PlatformSettings.from_env({"PLATFORM_HOME": str(tmp_path / "home"),
                                      "PLATFORM_STREAMS": str(streams)})).streams["events"]


@pytest.mark.parametrize(("spec", "said"), [
    ({"max_bytes_per_micro_batch": 0}, "max_bytes_per_micro_batch: Input should be greater than 0"),
    ({"max_bytes_per_micro_batch": "lots"},
     "max_bytes_per_micro_batch: could not parse value and unit"),
])
def test_a_bad_micro_batch_limit_is_refused_naming_the_setting_and_the_file(tmp_path, spec, said):
    with pytest.raises(SettingsError) as refused:
        _stream(tmp_path, spec)
    assert "events.yaml" in str(refused.value) and said in str(refused.value)


def _reader(location: str, buckets: int, **options: str) -> ArrivalLogReader:
    return ArrivalLogReader({"path": location, "columns": '["' + '", "'.join(COLUMNS) + '"]',
                             "buckets": str(buckets), "tasks": "2", **options})


def _assert_every_bucket_learns_the_watermark(packs: pd.DataFrame, buckets: int) -> None:
    """Every bucket's rows of a micro-batch (its ticks included) carry the micro-batch's
    largest recorded watermark, whichever buckets its records fell in: what lets each fire
    what that watermark makes due in the same micro-batch (jobs.runtime.buckets)."""
    if not len(packs):
        return
    records = _records(packs)
    by_bucket = packs.groupby(BUCKET_COLUMN)[PACKED_WATERMARK].max()
    assert sorted(by_bucket.index) == list(range(buckets))
    assert (by_bucket == records["watermark_ms"].max()).all()


def _read(reader: ArrivalLogReader, start: int, end: int) -> pd.DataFrame:
    batches = [batch for part in reader.partitions({OFFSET: start}, {OFFSET: end})
               for batch in reader.read(part)]
    return pa.Table.from_batches(batches).to_pandas() if batches else pd.DataFrame()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 40), min_size=1, max_size=6),
       st.lists(st.integers(1, 60), min_size=1, max_size=8), st.integers(0, 10**6))
def test_any_slices_read_each_record_once_packed_as_sparks_delta_source(
        spark, tmp_path_factory, commits, slices, seed):
    location = str(tmp_path_factory.mktemp("log") / "arrival_log")
    log = _log(location, commits, seed)
    buckets = 3
    reader = _reader(location, buckets)
    end = reader.latestOffset({OFFSET: 0}, ReadAllAvailable())[OFFSET]
    assert end == log.num_rows

    parts, start = [], 0
    for size in slices * (log.num_rows + 1):  # the log read in micro-batches of any sizes
        if start >= end:
            break
        parts.append(_read(reader, start, min(end, start + size)))
        _assert_every_bucket_learns_the_watermark(parts[-1], buckets)
        start += size
    found = _records(pd.concat([p for p in parts if len(p)], ignore_index=True))

    spark_packs = pack_by_bucket(spark.read.format("delta").load(location).select(*COLUMNS)
                                 .withColumn(BUCKET_COLUMN, bucket_column(buckets)),
                                 BUCKET_COLUMN, buckets).toPandas()
    _assert_every_bucket_learns_the_watermark(spark_packs, buckets)
    expected = _records(spark_packs)
    assert found["arrival_seq"].tolist() == list(range(log.num_rows))  # each once
    pd.testing.assert_frame_equal(found[expected.columns], expected, check_dtype=False)


def test_a_micro_batch_takes_at_most_its_limit_and_available_now_stops_at_its_end(tmp_path):
    location = str(tmp_path / "arrival_log")
    _log(location, [10, 10, 10, 10], seed=1)
    reader = _reader(location, 4)
    assert reader.getDefaultReadLimit() == ReadMaxFiles(1000)
    assert reader.latestOffset({OFFSET: 0}, ReadMaxFiles(2)) == {OFFSET: 20}
    assert reader.latestOffset({OFFSET: 15}, ReadMaxFiles(1)) == {OFFSET: 20}
    assert reader.latestOffset({OFFSET: 40}, ReadMaxFiles(1)) == {OFFSET: 40}  # nothing new
    from deltalake import DeltaTable

    one_file = min(pa.table(DeltaTable(location).get_add_actions(flatten=True))
                   .column("size_bytes").to_pylist())
    assert reader.latestOffset({OFFSET: 0}, ReadMaxBytes(one_file)) == {OFFSET: 10}
    assert _reader(location, 4, max_bytes_per_trigger="1").getDefaultReadLimit() == \
        ReadMaxBytes(1)

    reader.prepareForTriggerAvailableNow()
    import random

    _commit(location, 40, 1, random.Random(2))  # lands after the run started
    assert reader.latestOffset({OFFSET: 0}, ReadAllAvailable()) == {OFFSET: 40}
    assert reader.latestOffset({OFFSET: 40}, ReadAllAvailable()) == {OFFSET: 40}
    assert _reader(location, 4).latestOffset({OFFSET: 0}, ReadAllAvailable()) == {OFFSET: 41}
    assert len(_records(_read(reader, 40, 41))) == 1  # the next run's micro-batch reads it


def test_a_live_micro_batch_takes_a_bounded_share_of_a_backlog_unless_told_otherwise(tmp_path):
    """A stream behind took its backlog in micro-batches of up to 1,000 files, or 20 for a
    version catching up, each file an ingest batch of up to 64 MiB of lines: a session
    pipeline's output of a row per record then overflowed the JVM's heap, on every restart
    alike. A micro-batch now also takes at most the stream's ``max_bytes_per_micro_batch`` of
    the log's files (64 MiB unless its file says otherwise) unless a byte limit is given (at
    least one file), whichever limit is reached first."""
    stream = _stream(tmp_path / "default", {})
    assert trigger_limits(stream, None, None) == (None, 64 * 2**20)
    assert trigger_limits(stream, 3, None) == (3, 64 * 2**20)
    assert trigger_limits(stream, None, "1g") == (None, "1g")
    assert trigger_limits(_stream(tmp_path / "set", {"max_bytes_per_micro_batch": "1GiB"}),
                          None, None) == (None, 2**30)
    location = str(tmp_path / "arrival_log")
    _log(location, [10, 10, 10, 10], seed=3)
    _, limit = trigger_limits(stream, None, None)
    reader = _reader(location, 4, max_bytes_per_trigger=str(byte_count(limit)))
    assert reader.getDefaultReadLimit() == ReadMaxBytes(64 * 2**20)
    assert reader.latestOffset({OFFSET: 0}, reader.getDefaultReadLimit()) == {OFFSET: 40}
    assert reader.latestOffset({OFFSET: 0}, ReadMaxBytes(1)) == {OFFSET: 10}  # one file at least

    from deltalake import DeltaTable

    sizes = sorted(pa.table(DeltaTable(location).get_add_actions(flatten=True))
                   .column("size_bytes").to_pylist())
    two_files = sizes[-1] + sizes[-2]  # any two of them (all about equal), not three
    both = _reader(location, 4, max_files_per_trigger="3", max_bytes_per_trigger=str(two_files))
    assert both.getDefaultReadLimit() == ReadMaxFiles(3)  # what Spark hands back to the source
    assert both.latestOffset({OFFSET: 0}, both.getDefaultReadLimit()) == {OFFSET: 20}  # bytes first
    files_first = _reader(location, 4, max_files_per_trigger="1",
                          max_bytes_per_trigger=str(two_files))
    assert files_first.latestOffset({OFFSET: 0}, files_first.getDefaultReadLimit()) == \
        {OFFSET: 10}


def test_sizes_are_read_as_spark_writes_them():
    assert [byte_count(s) for s in ("1048576", "512k", "1g", "2MB", 7)] == \
        [2**20, 512 * 2**10, 2**30, 2 * 2**20, 7]
    with pytest.raises(ValueError, match="max_bytes_per_trigger: '1.5g'"):
        byte_count("1.5g")


def test_a_checkpoint_recorded_before_the_source_existed_keeps_spark_s_delta_source():
    old = CohortRecord.model_validate({"stream": "events", "buckets": 16, "created_ms": 1,
                                       "members": [["a", "v"]], "dropped": []})
    assert old.source == "delta"


def test_the_source_reads_the_value_s_exact_decimals(spark, tmp_path):
    location = str(tmp_path / "arrival_log")
    log = _log(location, [30], seed=5)
    found = _records(_read(_reader(location, 2), 0, 30))
    expected = log.to_pandas().sort_values("arrival_seq")["value"].astype(str).tolist()
    assert found["value"].tolist() == expected
    assert spark.read.format("delta").load(location).where(F.col("value").isNull()).count() == \
        sum(v == "None" for v in expected)


def test_files_written_without_statistics_are_read_for_their_positions(tmp_path):
    import random

    from deltalake import DeltaTable, write_deltalake

    location = str(tmp_path / "arrival_log")
    rng = random.Random(4)
    first = _commit(str(tmp_path / "scratch"), 0, 10, rng)
    write_deltalake(location, first, configuration={"delta.dataSkippingNumIndexedCols": "0"})
    for start in (10, 20):
        _commit(location, start, 10, rng)
    adds = pa.table(DeltaTable(location).get_add_actions(flatten=True))
    assert "min.arrival_seq" not in adds.column_names  # no file has statistics
    reader = _reader(location, 4)
    files = reader._files.current()
    assert files.first.tolist() == [0, 10, 20] and files.last.tolist() == [9, 19, 29]
    assert reader.latestOffset({OFFSET: 0}, ReadMaxFiles(2)) == {OFFSET: 20}
    found = _records(_read(reader, 5, 25))
    assert found["arrival_seq"].tolist() == list(range(5, 25))
