"""What the driver makes of the file facts Spark's executors send back for planning: a file
they could not find is skipped only when it is gone for the driver too; one the driver still
sees means the executors read other storage (a local landing folder on a cluster), which must
stop the ingest rather than plan nothing and report success."""

from __future__ import annotations

import pytest

from jobs.streams.landing.folder import LandingFolder, file_facts
from jobs.streams.landing.on_spark import facts_from_executors


def _row(name: str, **found) -> dict:
    row = {"name": name, "sha256": None, "lines": None, "complete": None,
           "prefix_sha256": None, "missing": False, "errno": None, "strerror": None,
           "filename": None}
    row.update(found)
    return row


@pytest.fixture
def landing(tmp_path) -> LandingFolder:
    (tmp_path / "p0").mkdir()
    (tmp_path / "p0" / "seen.jsonl").write_bytes(b'{"key": "a", "event_time": 1}\n')
    (tmp_path / "p0" / "still-here.jsonl").write_bytes(b'{"key": "b", "event_time": 2}\n')
    return LandingFolder(tmp_path)


def test_found_files_become_facts_and_files_gone_everywhere_are_skipped(landing):
    seen = file_facts(landing, "p0/seen.jsonl", 30)
    facts = facts_from_executors(
        [_row("p0/seen.jsonl", sha256=seen.sha256, lines=1, complete=True),
         _row("p0/removed.jsonl", missing=True)], landing.has, str(landing))
    assert facts == {"p0/seen.jsonl": seen}


def test_a_file_only_the_driver_sees_stops_the_ingest(landing):
    with pytest.raises(OSError, match=r"executors do not find 1 landing files the driver "
                                      r"lists \(first: p0/still-here.jsonl\).*"
                                      r"PLATFORM_INGEST_READER=driver"):
        facts_from_executors([_row("p0/still-here.jsonl", missing=True)], landing.has,
                             str(landing))


def test_an_executors_read_error_keeps_its_errno_and_file(landing):
    with pytest.raises(PermissionError) as raised:
        facts_from_executors([_row("p0/seen.jsonl", errno=13, strerror="Permission denied",
                                   filename="/landing/p0/seen.jsonl")], landing.has,
                             str(landing))
    assert raised.value.filename == "/landing/p0/seen.jsonl"
