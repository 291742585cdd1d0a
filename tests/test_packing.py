"""Records packed by bucket before the stateful stage (jobs/runtime/packing.py) reach each
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
    PACKED_COLUMN,
    PACKED_WATERMARK,
    UNSIZED,
    packed,
    rows_only_arrow_batches,
    unpack,
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
