"""Which checkpoints owe their timers a batch without data, read from Structured Streaming's
offset and commit logs as Spark writes them (tests/test_rollout.py runs the real thing)."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.config.registry import platform_of
from jobs.live import cohorts
from jobs.runtime.owed_batch import last_committed_batch, next_batch_id, run_owed_batch_again
from tests.platform_home import PER_MINUTE, events, settings_for


def _checkpoint(folder: Path, ran_at: dict[int, int], next_at: dict[int, int]) -> str:
    """Offset log entries (batch: the watermark it ran at) and commits (batch: the watermark
    for the next one), with Hadoop's checksum files beside the commits as on a local disk."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    for batch, watermark in ran_at.items():
        (folder / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": watermark, "batchTimestampMs": 1,
                                 "conf": {}}) + '\n{"next_arrival_seq": 10}')
    for batch, watermark in next_at.items():
        (folder / "commits" / str(batch)).write_text(
            "v1\n" + json.dumps({"nextBatchWatermarkMs": watermark}))
        (folder / "commits" / f".{batch}.crc").write_bytes(b"crc")
    return str(folder)


def test_a_last_batch_that_raised_the_watermark_runs_again_and_says_why(tmp_path):
    checkpoint = _checkpoint(tmp_path, {0: 0, 1: 500}, {0: 500, 1: 900})
    said: list[str] = []
    owed = run_owed_batch_again(checkpoint, said.append, "live events")
    assert owed is not None and (owed.batch_id, owed.next_watermark_ms) == (1, 900)
    assert sorted(p.name for p in (tmp_path / "commits").iterdir()) == [".0.crc", "0"]
    assert said == ["live events: batch 1 raised the watermark to 900 and the query stopped "
                    "before the batch without data that fires the timers due by then; batch 1 "
                    "runs again (the same rows, written once), then that one"]
    assert last_committed_batch(checkpoint) is None  # now Spark runs batch 1 itself


def test_nothing_is_owed_after_a_batch_without_data_or_one_not_committed(tmp_path):
    cases = {
        "no data last": ({0: 0, 1: 500, 2: 900}, {0: 500, 1: 900, 2: 900}),
        "not committed": ({0: 0, 1: 500}, {0: 500}),
        "new": ({}, {}),
        "unknown layout": ({0: 0}, {}),
    }
    for name, (ran_at, next_at) in cases.items():
        checkpoint = _checkpoint(tmp_path / name.replace(" ", "-"), ran_at, next_at)
        if name == "unknown layout":
            (tmp_path / "unknown-layout" / "commits" / "0").write_text("v9 something else")
        before = sorted(p.name for p in Path(checkpoint, "commits").iterdir())
        assert run_owed_batch_again(checkpoint, print, "live") is None, name
        assert sorted(p.name for p in Path(checkpoint, "commits").iterdir()) == before, name


def test_nothing_is_owed_where_spark_runs_no_batch_without_data(tmp_path):
    """With Spark's batches without data turned off, the last batch would run again at
    every start and still owe one."""
    checkpoint = _checkpoint(tmp_path, {0: 0, 1: 500}, {0: 500, 1: 900})
    assert run_owed_batch_again(checkpoint, print, "live", batches_without_data=False) is None
    assert last_committed_batch(checkpoint) is not None


def test_a_batch_that_fired_what_was_due_itself_owes_nothing(tmp_path):
    """Batches from ``fires_due_from_batch`` on fired their due panes with their rows (the
    live stream's ticks); one before it, run by an older platform, still owes its batch."""
    checkpoint = _checkpoint(tmp_path / "ticked", {0: 0, 1: 500}, {0: 500, 1: 900})
    assert run_owed_batch_again(checkpoint, print, "live", fires_due_from_batch=0) is None
    assert run_owed_batch_again(checkpoint, print, "live", fires_due_from_batch=1) is None
    assert last_committed_batch(checkpoint) is not None  # nothing removed
    owed = run_owed_batch_again(checkpoint, print, "live", fires_due_from_batch=2)
    assert owed is not None and owed.batch_id == 1


def test_the_first_batch_a_start_runs(tmp_path):
    assert next_batch_id(_checkpoint(tmp_path / "new", {}, {})) == 0
    assert next_batch_id(_checkpoint(tmp_path / "committed", {0: 0, 1: 5}, {0: 5, 1: 9})) == 2
    assert next_batch_id(_checkpoint(tmp_path / "half", {0: 0, 1: 5}, {0: 5})) == 1


def test_a_cohort_record_from_before_the_ticks_learns_where_they_began(tmp_path):
    """A cohort whose record predates the ticks gets, at its next claim, the first batch
    that start runs; a new cohort fires what is due from its first batch."""
    settings = settings_for(tmp_path / "home", {"per_minute": PER_MINUTE})
    stream = events(settings)
    pipeline = platform_of(settings).pipelines["per_minute"]
    old = _checkpoint(tmp_path / "old", {0: 0, 1: 500}, {0: 500, 1: 900})
    record = Path(old, "platform", "stream.json")
    record.parent.mkdir()
    record.write_text(json.dumps({
        "stream": stream.name, "buckets": 16, "created_ms": 1,
        "members": [[pipeline.name, pipeline.version]], "dropped": [],
        "source": "arrival_positions"}))
    assert cohorts.claim(old, stream, [pipeline], 16).fires_due_from_batch == 2
    assert cohorts.read_record(old).fires_due_from_batch == 2  # kept
    new = str(tmp_path / "new")
    assert cohorts.claim(new, stream, [pipeline], 16).fires_due_from_batch == 0
