"""Appends written by Arrow's Parquet writer (jobs.store.delta_files): the same rows, transaction
ids and errors as delta-rs's own write, and statistics a reader can skip files by without
ever skipping a file that holds a wanted row."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.store import delta_files, fast_writes
from tests.depth import examples

UTC = dt.UTC
SCHEMA = pa.schema([
    pa.field("seq", pa.int64(), False),
    pa.field("line", pa.int32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("day", pa.date32()),
    pa.field("key", pa.string()),
    pa.field("value", pa.decimal128(38, 9)),
    pa.field("ratio", pa.float64()),
])
MS = 1_000


def _last_adds(path: str) -> list[dict]:
    """The add actions of the table's latest commit."""
    log = sorted((Path(path) / "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in log.read_text().split("\n") if line]
    return [action["add"] for action in actions if "add" in action]


def _last_add(path: str) -> dict:
    """The one add action of the table's latest commit."""
    adds = _last_adds(path)
    assert len(adds) == 1
    return adds[0]


def _writer(path: str) -> str:
    """Which Parquet writer made the files of the latest commit."""
    writers = {pq.ParquetFile(Path(path) / add["path"]).metadata.created_by
               for add in _last_adds(path)}
    assert len(writers) == 1
    return writers.pop()


def _comparable(name: str, value):
    """A bound as a value (timestamps are written with or without milliseconds)."""
    if name == "at":
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


rows = st.lists(st.tuples(
    st.integers(-2**63, 2**63 - 1),
    st.none() | st.integers(-2**31, 2**31 - 1),
    st.none() | st.integers(-62_135_596_800_000, 253_402_300_799_999),  # years 1..9999, ms
    st.none() | st.integers(-719_162, 2_932_896),  # days, years 1..9999
    st.none() | st.text(max_size=40),
    st.none() | st.decimals(min_value=-10**20, max_value=10**20, places=9, allow_nan=False),
    st.none() | st.floats(allow_nan=False),
), min_size=1, max_size=30)


def _table(generated: list[tuple]) -> pa.Table:
    seq, line, at, day, key, value, ratio = map(list, zip(*generated, strict=True))
    return pa.table({
        "seq": pa.array(seq, pa.int64()), "line": pa.array(line, pa.int32()),
        "at": pa.array([None if ms is None else ms * MS for ms in at],
                       pa.timestamp("us", tz="UTC")),
        "day": pa.array(day, pa.date32()), "key": pa.array(key, pa.string()),
        "value": pa.array(value, pa.decimal128(38, 9)), "ratio": pa.array(ratio, pa.float64()),
    }, schema=SCHEMA)


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=rows)
def test_the_statistics_bound_every_value_exactly_where_they_are_written(tmp_path_factory,
                                                                         generated):
    """Against delta-rs's own write of the same rows: the row count and null counts agree, and
    every bound written is the column's true minimum or maximum (delta-rs's, where it writes
    one); bounds are missing only where they would not be exact."""
    data = _table(generated)
    ours, reference = (str(tmp_path_factory.mktemp("t")) for _ in range(2))
    write_deltalake(ours, SCHEMA.empty_table())
    assert fast_writes.append(ours, data)
    write_deltalake(reference, data)
    assert _writer(ours).startswith("parquet-cpp-arrow")
    stats = json.loads(_last_add(ours)["stats"])
    expected = json.loads(_last_add(reference)["stats"])
    assert stats["numRecords"] == expected["numRecords"] == data.num_rows
    assert stats["nullCount"] == expected["nullCount"]
    assert set(stats["minValues"]) == set(stats["maxValues"])
    for name in SCHEMA.names:
        values = [v for v in data.column(name).to_pylist() if v is not None]
        if name not in stats["minValues"]:
            assert name in ("value", "ratio") or not values or \
                (name == "key" and max(map(len, values)) > 32), name
            continue
        low, high = (_comparable(name, stats[b][name]) for b in ("minValues", "maxValues"))
        if name == "day":
            low, high = dt.date.fromisoformat(low), dt.date.fromisoformat(high)
        assert (low, high) == (min(values), max(values)), name
        assert low == _comparable(name, expected["minValues"][name]) if name != "day" \
            else low.isoformat() == expected["minValues"][name], name


def test_spark_skipping_files_by_their_statistics_finds_every_row(spark, tmp_path):
    """Files with neighbouring ranges, read with filters on each file's exact bounds: a bound
    off by a millisecond, a time zone or a character would skip a file holding a wanted row."""
    path = str(tmp_path / "table")
    write_deltalake(path, SCHEMA.empty_table())
    base = 1_795_000_000_000
    for file in range(3):
        n = 50
        seq = list(range(file * n, file * n + n))
        data = pa.table({
            "seq": pa.array(seq, pa.int64()), "line": pa.array(seq, pa.int32()),
            "at": pa.array([(base + s * 7) * MS for s in seq], pa.timestamp("us", tz="UTC")),
            "day": pa.array([19_000 + s // 10 for s in seq], pa.date32()),
            "key": pa.array([f"user-{s:05d}" for s in seq], pa.string()),
            "value": pa.array([Decimal(s) / 4 for s in seq], pa.decimal128(38, 9)),
            "ratio": pa.array([s / 3 for s in seq], pa.float64()),
        }, schema=SCHEMA)
        assert fast_writes.append(path, data)
        assert _writer(path).startswith("parquet-cpp-arrow")
    table = spark.read.format("delta").load(path)
    for seq in (49, 50, 99, 100):  # the last and first rows of neighbouring files
        at = dt.datetime.fromtimestamp((base + seq * 7) / 1000, UTC)
        for condition in (f"seq = {seq}",
                          f"at = timestamp'{at.strftime('%Y-%m-%d %H:%M:%S.%f')}Z'",
                          f"key = 'user-{seq:05d}'", f"line = {seq}"):
            found = [row.seq for row in table.where(condition).select("seq").collect()]
            assert found == [seq], condition
        day = 19_000 + seq // 10
        found = sorted(row.seq for row in
                       table.where(f"day = date_add(date'1970-01-01', {day})").collect())
        assert found == list(range((seq // 10) * 10, (seq // 10) * 10 + 10))


def test_an_append_whose_transaction_landed_writes_no_file(tmp_path):
    path = tmp_path / "table"
    write_deltalake(str(path), SCHEMA.empty_table())
    data = _table([(1, 2, 3, 4, "a", Decimal("1.5"), 0.5)])
    assert fast_writes.append(str(path), data, app_id="ingest", version=3)
    files = sorted(path.glob("*.parquet"))
    assert not fast_writes.append(str(path), data, app_id="ingest", version=3)
    assert not fast_writes.append(str(path), data, app_id="ingest", version=2)
    assert sorted(path.glob("*.parquet")) == files
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 1
    assert DeltaTable(str(path)).transaction_version("ingest") == 3


def test_rows_the_table_refuses_are_refused_as_delta_rs_refuses_them(tmp_path):
    """A null where the table allows none, or another schema, goes to delta-rs's write and
    its error; nothing is committed."""
    path = tmp_path / "table"
    write_deltalake(str(path), SCHEMA.empty_table())
    nulls = pa.Table.from_arrays([pa.array([None], pa.int64()), *(
        pa.nulls(1, field.type) for field in list(SCHEMA)[1:])], schema=SCHEMA)
    with pytest.raises(DeltaError, match="non-nullable"):
        fast_writes.append(str(path), nulls)
    other = pa.table({"seq": pa.array([1], pa.int64()), "extra": pa.array(["x"])})
    with pytest.raises(DeltaError):
        fast_writes.append(str(path), other)
    assert DeltaTable(str(path)).version() == 0
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 0


def test_a_partitioned_table_is_appended_by_delta_rs(tmp_path):
    path = str(tmp_path / "table")
    data = _table([(1, 2, 3, 4, "a", Decimal("1.5"), 0.5), (2, 2, 3, 5, "b", None, None)])
    assert fast_writes.append(path, data.slice(0, 0), partition_by=["day"])
    assert fast_writes.append(path, data, partition_by=["day"])
    table = DeltaTable(path)
    assert table.metadata().partition_columns == ["day"]
    assert sorted(table.to_pyarrow_table().column("seq").to_pylist()) == [1, 2]
    assert len(table.file_uris()) == 2
    assert _writer(path).startswith("delta-rs")


def test_appends_as_arrow_files_keep_delta_checkpoints_coming(tmp_path):
    """The live job appends twice a second: without Delta's checkpoints (every 100 commits)
    each load of the table would replay its whole log."""
    path = tmp_path / "table"
    write_deltalake(str(path), SCHEMA.empty_table())
    for version in range(1, 101):
        data = _table([(version, None, None, None, None, None, None)])
        assert fast_writes.append(str(path), data, app_id="ingest", version=version)
    assert _writer(str(path)).startswith("parquet-cpp-arrow")
    assert (path / "_delta_log" / "_last_checkpoint").is_file()
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("seq").to_pylist()) == \
        list(range(1, 101))


@settings(max_examples=examples(25), deadline=None)
@given(generated=rows, group=st.integers(1, 5))
def test_a_files_row_groups_give_the_bounds_of_the_whole_file(generated, group):
    data = _table(generated)
    whole, grouped = pa.BufferOutputStream(), pa.BufferOutputStream()
    footers: list[pq.FileMetaData] = []
    pq.write_table(data, whole, metadata_collector=footers)
    pq.write_table(data, grouped, row_group_size=group, metadata_collector=footers)
    assert footers[1].num_row_groups == -(-data.num_rows // group)
    assert delta_files.file_statistics(footers[1], data.schema) == \
        delta_files.file_statistics(footers[0], data.schema)


def test_nested_or_unsigned_columns_are_appended_by_delta_rs(tmp_path):
    """Their Parquet form is not Delta's own (a struct's leaves, unsigned integers): delta-rs
    writes them (casting, or refusing, as it always did), and a footer with nested columns
    gives the row count only."""
    nested = pa.schema([pa.field("s", pa.struct([("x", pa.int64()), ("y", pa.int64())])),
                        pa.field("s.y", pa.int64())])
    data = pa.table({"s": [{"x": 1, "y": 100}], "s.y": [5]}, schema=nested)
    path = str(tmp_path / "nested")
    write_deltalake(path, nested.empty_table())
    assert fast_writes.append(path, data)
    assert _writer(path).startswith("delta-rs")
    footers: list[pq.FileMetaData] = []
    pq.write_table(data, pa.BufferOutputStream(), metadata_collector=footers)
    assert delta_files.file_statistics(footers[0], nested) == {"numRecords": 1}
    signed = pa.schema([pa.field("n", pa.int32())])
    path = str(tmp_path / "signed")
    write_deltalake(path, signed.empty_table())
    unsigned = pa.table({"n": pa.array([3_000_000_000], pa.uint32())})
    with pytest.raises(Exception):  # noqa: B017 - delta-rs's own refusal, whatever its type
        fast_writes.append(path, unsigned)
    assert DeltaTable(path).to_pyarrow_table().num_rows == 0


def test_a_commit_whose_answer_was_lost_keeps_its_file(tmp_path, monkeypatch):
    """The commit landed but the writer was told it failed (an object store's lost answer):
    run again, the append finds its transaction applied and leaves the table readable."""
    path = str(tmp_path / "table")
    write_deltalake(path, SCHEMA.empty_table())
    commit = DeltaTable.create_write_transaction
    lost = []

    def landed_but_failed(self, *args, **kwargs):
        commit(self, *args, **kwargs)
        if not lost:
            lost.append(True)
            raise CommitFailedError("the answer of a commit that landed, lost")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", landed_but_failed)
    monkeypatch.setattr("jobs.store.delta_io.time.sleep", lambda _: None)
    data = _table([(1, 2, 3, 4, "a", Decimal("1.5"), 0.5)])
    fast_writes.append(path, data, app_id="ingest", version=1)
    assert lost
    table = DeltaTable(path)
    assert table.to_pyarrow_table().column("seq").to_pylist() == [1]
    assert table.transaction_version("ingest") == 1


def test_a_table_changed_during_the_append_gets_delta_rs_checks(tmp_path, monkeypatch):
    """A constraint added between the file's write and its commit: the commit conflicts, and
    the reloaded table, which no longer takes Arrow files, gets delta-rs's write, which refuses
    the row that breaks the constraint."""
    path = str(tmp_path / "table")
    write_deltalake(path, SCHEMA.empty_table())
    write_file = delta_files.write_file

    def written_then_constrained(location, data, encodings=None):
        written = write_file(location, data, encodings)
        DeltaTable(path).alter.add_constraint({"positive": "seq > 0"})
        return written

    monkeypatch.setattr(delta_files, "write_file", written_then_constrained)
    monkeypatch.setattr("jobs.store.delta_io.time.sleep", lambda _: None)
    with pytest.raises(DeltaError, match="failed validation"):
        fast_writes.append(path, _table([(-1, 2, 3, 4, "a", Decimal("1.5"), 0.5)]))
    assert DeltaTable(path).to_pyarrow_table().num_rows == 0


ENCODED = delta_files.ColumnEncodings(plain=frozenset({"key", "value", "absent"}),
                                      deltas=frozenset({"seq", "line", "at", "missing"}))


@settings(max_examples=examples(8), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=rows)
def test_columns_encoded_as_deltas_or_without_a_dictionary_read_back_the_same(
        spark, tmp_path_factory, generated):
    """The arrival log's layout (jobs.tables): rising integers as deltas, rare values
    without a dictionary. Any values (64-bit extremes, nulls), read back by Spark and by
    delta-rs, are the rows written; columns it names that a table lacks change nothing."""
    path = str(tmp_path_factory.mktemp("encoded") / "table")
    write_deltalake(path, SCHEMA.empty_table())
    data = _table(generated)
    assert fast_writes.append(path, data, encodings=ENCODED)
    footer = pq.ParquetFile(Path(path) / _last_add(path)["path"]).metadata
    encodings = {footer.schema.column(i).name: footer.row_group(0).column(i).encodings
                 for i in range(footer.num_columns)}
    assert all("DELTA_BINARY_PACKED" in encodings[name] for name in ("seq", "line", "at"))
    assert not any("RLE_DICTIONARY" in encodings[name] for name in ("seq", "key", "value"))
    assert "RLE_DICTIONARY" in encodings["day"] or data.column("day").null_count == len(data)
    assert DeltaTable(path).to_pyarrow_table().sort_by("seq") == data.sort_by("seq")
    read = spark.read.format("delta").load(path).orderBy("seq") \
        .selectExpr("seq", "line", "unix_micros(at) AS at", "value").collect()
    expected = sorted(generated, key=lambda row: row[0])
    assert [tuple(row) for row in read] == [
        (seq, line, None if ms is None else ms * MS, value)
        for seq, line, ms, _, _, value, _ in expected]


def test_the_arrival_logs_files_are_encoded_as_its_layout_says(tmp_path):
    """What ingest writes: positions and times as deltas, payload and value without a
    dictionary, keys with one."""
    from jobs import tables
    options = tables.ARRIVAL_LOG_ENCODINGS.writer_options(
        [field.name for field in tables.ARRIVAL_LOG_SCHEMA.fields])
    assert options["column_encoding"] == dict.fromkeys(
        ["arrival_seq", "event_time", "event_time_ms", "line_number"], "DELTA_BINARY_PACKED")
    assert "key" in options["use_dictionary"] and "payload" not in options["use_dictionary"]
    assert delta_files.ColumnEncodings().writer_options(["a"]) == {}
