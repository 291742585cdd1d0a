"""Run Python once per key over a whole history, with one Python call per Spark partition.

``groupBy(key).applyInPandas`` serialises every key as its own Arrow batch and calls Python
once per key; with thousands of small keys (Nexmark's auctions and bidders, a platform's users)
that per-key round trip costs more than the records themselves. Here the rows are hash
partitioned by key and sorted by ``(key, arrival_seq)`` inside each partition, and a single
``mapInPandas`` (or ``mapInArrow``) call walks the partition's Arrow batches, cutting them at
key boundaries (a key that continues into the next batch is carried over), so each key's
records still arrive together and in arrival order. Keys stay independent and spread over
Spark's cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from jobs.runtime.worker_gc import spare_live_objects

KeyFunction = Callable[[Any, Any], list]
"""``(key, the key's rows in arrival order) -> output items``; the rows are a frame, or the
list ``convert`` made of them."""


def map_keys(frame: DataFrame, key_column: str, run_key: KeyFunction,
             to_frame: Callable[[list], pd.DataFrame], schema: str,
             order_column: str = "arrival_seq",
             convert: Callable[[pd.DataFrame], list] | None = None) -> DataFrame:
    """``run_key`` over every key's rows of ``frame``; ``to_frame`` turns output items into a
    pandas frame of ``schema``. With ``convert``, each Arrow batch is converted once (to a
    list, one item per row) and a key gets its slice of that list: slicing a pandas frame
    per key costs about a quarter of a millisecond, more than a small key's records do."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        spare_live_objects()  # a task's start in the worker
        for items in _per_key(batches, key_column, run_key, convert):
            yield to_frame(items)

    return _key_ordered(frame, key_column, order_column).mapInPandas(run, schema)


def map_keys_to_arrow(frame: DataFrame, key_column: str,
                      run_key: Callable[[Any, pd.DataFrame], list[dict[str, Any]]],
                      schema: str, arrow_schema: pa.Schema,
                      order_column: str = "arrival_seq") -> DataFrame:
    """:func:`map_keys` for a ``run_key`` whose output rows are dicts of values of their
    columns' own types (``arrow_schema``, the DDL ``schema`` in Arrow): the rows go straight
    into Arrow batches. A pandas frame of them would first turn every row's Python objects into
    columns, and Spark would then convert that frame to Arrow again: three times the cost,
    measured on the keyed backfill's rows."""

    def run_keys(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        yield arrow_rows_per_key(batch, key_column, run_key, arrow_schema)

    return map_whole_keys_to_arrow(frame, key_column, run_keys, schema, order_column)


def map_whole_keys_to_arrow(frame: DataFrame, key_column: str,
                            run_keys: Callable[[pa.RecordBatch], Iterator[pa.RecordBatch]],
                            schema: str, order_column: str = "arrival_seq") -> DataFrame:
    """``run_keys`` over Arrow batches of whole keys (a key's rows together, in ``order_column``
    order), for work that is cheaper over many keys' columns at once than key by key."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spare_live_objects()  # a task's start in the worker
        for batch in whole_keys(batches, key_column):
            yield from run_keys(batch)

    return _key_ordered(frame, key_column, order_column).mapInArrow(run, schema)


def arrow_rows_per_key(batch: pa.RecordBatch, key_column: str, run_key: KeyFunction,
                       arrow_schema: pa.Schema) -> pa.RecordBatch:
    """``run_key``'s output rows (dicts of ``arrow_schema``'s columns) over each key of
    ``batch`` (whole keys, adjacent), each key's records as a pandas frame."""
    items: list = []
    if batch.num_rows:
        frame = batch.to_pandas()
        keys = frame[key_column].to_numpy()
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        for start, end in zip(starts, np.append(starts[1:], len(frame)), strict=True):
            items.extend(run_key(keys[start], frame.iloc[start:end]))
    return pa.RecordBatch.from_pylist(items, schema=arrow_schema)


def whole_keys(batches: Iterator[pa.RecordBatch], key_column: str
                ) -> Iterator[pa.RecordBatch]:
    """The batches cut at key boundaries: each batch's last key is held back and joined to
    the next batch (it may go on there); after the last batch, what is held back comes out."""
    carried: pa.RecordBatch | None = None
    for batch in batches:
        if carried is not None:
            batch = pa.concat_batches([carried, batch])
        if batch.num_rows == 0:
            continue
        last_start = _last_key_start(batch.column(key_column))
        carried = batch.slice(last_start)
        if last_start:
            yield batch.slice(0, last_start)
    if carried is not None and carried.num_rows:
        yield carried


def _last_key_start(keys: pa.Array) -> int:
    last = keys[len(keys) - 1]
    same = pc.is_null(keys) if not last.is_valid else pc.fill_null(pc.equal(keys, last), False)
    differs = np.flatnonzero(~same.to_numpy(zero_copy_only=False))
    return int(differs[-1]) + 1 if len(differs) else 0


def _key_ordered(frame: DataFrame, key_column: str, order_column: str) -> DataFrame:
    return frame.repartition(key_column).sortWithinPartitions(key_column, order_column)


def _per_key(batches: Iterator[pd.DataFrame], key_column: str, run_key: KeyFunction,
             convert: Callable[[pd.DataFrame], list] | None) -> Iterator[list]:
    """The output items of each batch's whole keys (a key that goes on into the next batch
    is carried over), then of the last key."""

    def rows_of(batch: pd.DataFrame):
        return batch if convert is None else convert(batch)

    carried: pd.DataFrame | None = None
    for batch in batches:
        if carried is not None:
            batch = pd.concat([carried, batch], ignore_index=True)
        if batch.empty:
            continue
        keys = batch[key_column].to_numpy()
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        items: list = []
        rows = rows_of(batch.iloc[:starts[-1]])
        for start, end in zip(starts[:-1], starts[1:], strict=True):
            items.extend(run_key(keys[start], rows[start:end]))
        carried = batch.iloc[starts[-1]:]  # the last key may go on in the next batch
        if items:
            yield items
    if carried is not None and not carried.empty:
        yield run_key(carried[key_column].iloc[0], rows_of(carried))
