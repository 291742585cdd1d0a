"""Records packed by bucket before the stateful stage (jobs.runtime.packing) reach each
bucket's engine as exactly that bucket's records, with the largest recorded watermark on the
packed row: checked against a plain filter of the records, for any records cut into any
Arrow batches."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.runtime.packing import (
    BATCH_BYTES_SETTING,
    PACK_BYTES,
    PACKED_COLUMN,
    PACKED_OUTPUT,
    PACKED_WATERMARK,
    UNSIZED,
    is_tick,
    output_table,
    pack_output,
    packed,
    rows_only_arrow_batches,
    unpack,
    unpack_output,
    with_ticks,
)

SCHEMA = pa.schema([("key", pa.string()), ("arrival_seq", pa.int64()),
                    ("watermark_ms", pa.int64()), ("value", pa.decimal128(38, 9)),
                    ("_bucket", pa.int32())])

records = st.lists(st.tuples(
    st.text(max_size=6),
    st.integers(-2**62, 2**62),
    st.one_of(st.none(), st.decimals(min_value=Decimal("-1e20"), max_value=Decimal("1e20"),
                                     places=9, allow_nan=False, allow_infinity=False)),
    st.integers(0, 5)), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(records, st.lists(st.integers(1, 20), min_size=1, max_size=8))
def test_each_bucket_gets_exactly_its_records(rows, cuts):
    table = pa.Table.from_pylist([
        {"key": key, "arrival_seq": seq, "watermark_ms": watermark, "value": value,
         "_bucket": bucket} for seq, (key, watermark, value, bucket) in enumerate(rows)],
        schema=SCHEMA)
    batches, start = [], 0
    for size in cuts * len(rows):  # the partition arrives as Arrow batches of any sizes
        if start >= len(rows):
            break
        batches.extend(table.slice(start, size).to_batches())
        start += size
    packs = packed(batches, "_bucket", "watermark_ms").to_pandas()

    assert packs["_bucket"].is_unique  # one packed row per bucket of the partition
    expected = table.to_pandas()
    assert sorted(packs["_bucket"]) == sorted(expected["_bucket"].unique())
    for _, pack in packs.iterrows():
        mine = expected[expected["_bucket"] == pack["_bucket"]].drop(columns="_bucket")
        got = unpack(pd.DataFrame({PACKED_COLUMN: [pack[PACKED_COLUMN]]}))
        pd.testing.assert_frame_equal(got.reset_index(drop=True),
                                      mine.reset_index(drop=True), check_exact=True)
        assert pack[PACKED_WATERMARK] == mine["watermark_ms"].max()


def test_a_buckets_packs_from_several_partitions_unpack_together():
    """The stateful stage may get one pack per input partition for a bucket: all of them."""
    first = pa.Table.from_pylist([{"key": "a", "arrival_seq": 1, "watermark_ms": 5,
                                   "value": Decimal("1.5"), "_bucket": 2}], schema=SCHEMA)
    second = pa.Table.from_pylist([{"key": "b", "arrival_seq": 2, "watermark_ms": 7,
                                    "value": None, "_bucket": 2}], schema=SCHEMA)
    packs = pd.concat([packed(t.to_batches(), "_bucket", "watermark_ms").to_pandas()
                       for t in (first, second)], ignore_index=True)
    got = unpack(packs)
    assert got["key"].tolist() == ["a", "b"]
    assert got["value"].tolist() == [Decimal("1.5"), None]
    assert packs[PACKED_WATERMARK].tolist() == [5, 7]


@settings(max_examples=100, deadline=None)
@given(records, st.integers(6, 9))
def test_a_partitions_ticks_tell_every_bucket_its_largest_watermark(rows, buckets):
    """After a partition's packs, one tick per bucket (no records, the partition's largest
    recorded watermark), whether or not the bucket had records; the records unpack as
    before; a partition without packs sends no ticks."""
    table = pa.Table.from_pylist([
        {"key": key, "arrival_seq": seq, "watermark_ms": watermark, "value": value,
         "_bucket": bucket} for seq, (key, watermark, value, bucket) in enumerate(rows)],
        schema=SCHEMA)
    packs = [packed(table.to_batches(), "_bucket", "watermark_ms")]
    sent = pa.Table.from_batches(list(with_ticks(packs, "_bucket", buckets))).to_pandas()
    ticks = sent[sent[PACKED_COLUMN].map(is_tick)]
    assert ticks["_bucket"].tolist() == list(range(buckets))
    assert (ticks[PACKED_WATERMARK] == max(row[1] for row in rows)).all()
    for bucket, mine in sent.groupby("_bucket"):
        whole = table.to_pandas()
        expected = whole[whole["_bucket"] == bucket].drop(columns="_bucket")
        if len(expected):
            pd.testing.assert_frame_equal(unpack(mine).reset_index(drop=True),
                                          expected.reset_index(drop=True), check_exact=True)
    assert list(with_ticks([], "_bucket", buckets)) == []


@pytest.mark.spark
def test_a_narrow_stream_starts_with_batches_cut_by_rows_only(spark):
    """The byte limit is lifted only while a narrow stream starts, and put back as it was
    (unset, or the user's own value); a stream with payloads keeps it."""
    setting = BATCH_BYTES_SETTING
    default = spark.conf.get(setting)
    with rows_only_arrow_batches(spark, narrow=True):
        assert spark.conf.get(setting) == UNSIZED
    assert spark.conf.get(setting) == default
    with rows_only_arrow_batches(spark, narrow=False):
        assert spark.conf.get(setting) == default
    spark.conf.set(setting, "1048576")
    try:
        with pytest.raises(RuntimeError), rows_only_arrow_batches(spark, narrow=True):
            assert spark.conf.get(setting) == UNSIZED
            raise RuntimeError("the query failed to start")
        assert spark.conf.get(setting) == "1048576"
    finally:
        spark.conf.unset(setting)


OUTPUT = pa.schema([("kind", pa.string()), ("window_end_ms", pa.int64()),
                    ("pane_index", pa.int32()), ("is_last", pa.bool_()),
                    ("value", pa.decimal128(38, 9)), ("agg_mean", pa.float64())])
DTYPES = {"kind": "object", "window_end_ms": "Int64", "pane_index": "Int32",
          "is_last": "boolean", "value": "object", "agg_mean": "Float64"}
output_rows = st.lists(st.fixed_dictionaries({
    "kind": st.one_of(st.none(), st.text(max_size=5)),
    "window_end_ms": st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
    "pane_index": st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)),
    "is_last": st.one_of(st.none(), st.booleans()),
    "value": st.one_of(st.none(), st.decimals(min_value=Decimal("-1e28"),
                                              max_value=Decimal("1e28"), places=9,
                                              allow_nan=False, allow_infinity=False)),
    "agg_mean": st.one_of(st.none(), st.floats(allow_nan=False)),
}), max_size=12)


def _frame(rows: list[dict]) -> pd.DataFrame:
    """An output frame as the engines build it: nullable dtypes, decimals as objects."""
    return pd.DataFrame({name: pd.array([row[name] for row in rows], dtype=dtype)
                         for name, dtype in DTYPES.items()})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(output_rows, max_size=3), max_size=5), st.integers(1, 4))
def test_packed_output_reaches_the_driver_row_for_row(calls, chunks):
    """Each call's frames leave as one packed row (none when they hold no row); the driver
    gets every row of every call, in order, with its values unchanged and its nulls null,
    however Spark chunks the packed rows."""
    packs = [pack_output([_frame(rows) for rows in frames], OUTPUT) for frames in calls]
    assert [not p for p in packs] == [not any(frames) for frames in calls]
    blobs = pa.array([blob for call in packs for blob in call], pa.large_binary())
    size = max(1, -(-len(blobs) // chunks))
    collected = pa.table({PACKED_OUTPUT: pa.chunked_array(
        [blobs.slice(at, size) for at in range(0, len(blobs), size)], pa.large_binary())})
    got = unpack_output(collected, OUTPUT)
    assert got.schema == OUTPUT
    expected = [row for frames in calls for rows in frames for row in rows]
    assert got.to_pylist() == expected


def test_a_large_output_leaves_in_packs_the_collector_keeps_small():
    """A call's many rows (a session's assignment per record) leave in several compressed packs
    of about ``PACK_BYTES`` of rows each, and come back whole and in order."""
    rows = [{"kind": "assign", "window_end_ms": i, "pane_index": None, "is_last": None,
             "value": Decimal(i) / 100, "agg_mean": None} for i in range(40_000)]
    packs = pack_output([_frame(rows[:25_000]), _frame(rows[25_000:])], OUTPUT)
    assert len(packs) > 4
    assert max(len(blob) for blob in packs) < 2 * PACK_BYTES
    # mostly null columns compress: the packs are a fraction of the rows' Arrow bytes
    assert sum(map(len, packs)) < output_table(pd.concat([_frame(rows)]), OUTPUT).nbytes / 2
    got = unpack_output(pa.table({PACKED_OUTPUT: pa.array(packs, pa.binary())}), OUTPUT)
    assert got.to_pylist() == rows
