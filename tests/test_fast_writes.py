"""Appends from the driver keep their idempotency: a batch appended again under its
transaction id changes nothing, whether the table is new or has many commits."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable

from jobs.store import fast_writes


def _rows(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table().column("n").to_pylist())


def test_an_append_under_a_version_already_applied_changes_nothing(tmp_path):
    path = str(tmp_path / "table")
    batch = pa.table({"n": [1, 2]})
    assert fast_writes.append(path, batch, app_id="ingest", version=1)  # creates the table
    assert not fast_writes.append(path, batch, app_id="ingest", version=1)
    assert fast_writes.append(path, pa.table({"n": [3]}), app_id="ingest", version=2)
    assert not fast_writes.append(path, batch, app_id="ingest", version=1)  # an older one
    assert fast_writes.append(path, pa.table({"n": [4]}), app_id="other", version=1)
    assert _rows(path) == [1, 2, 3, 4]
    assert fast_writes.applied_version(path, "ingest") == 2
    assert fast_writes.applied_version(str(tmp_path / "none"), "ingest") is None
