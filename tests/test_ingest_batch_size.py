"""A landing backlog is ingested in batches of bounded size (``max_bytes_per_batch``), the files
that landed first first, with nothing lost, doubled or reordered within a file, and the
watermark state carried from batch to batch. Ingest writes through ``deltalake``: only the
last test, of the tables an increment computes after such a catch-up, needs Spark."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from jobs import tables
from jobs.backfill import run_backfill
from jobs.config.errors import SettingsError
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.increment import run_increment
from jobs.store.storage import Files
from jobs.streams.ingestors import ingest
from jobs.streams.landing.ingestor import Ingestor
from jobs.streams.landing.log import IngestLog
from operators.watermarks import assign_watermarks
from tests.output_tables import output_tables
from tests.platform_home import PER_MINUTE, write_pipelines

START = 1_767_225_600_000  # 2026-01-01
WATERMARK = {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s",
             "idle_timeout": "1m"}


def _home(tmp_path: Path, **stream: object) -> dict[str, str]:
    streams = tmp_path / "streams"
    streams.mkdir(exist_ok=True)
    (streams / "events.yaml").write_text(json.dumps({"watermark": WATERMARK, **stream}))
    pipelines = write_pipelines(tmp_path / "pipelines", {"per_minute": PER_MINUTE})
    return {"PLATFORM_HOME": str(tmp_path / "home"), "PLATFORM_STREAMS": str(streams),
            "PLATFORM_PIPELINES": str(pipelines)}


def _land(stream, name: str, lines: list[dict], landed_s_ago: float) -> int:
    """A finished landing file, modified ``landed_s_ago`` (past the settle time); its size."""
    path = stream.landing_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    when = time.time() - landed_s_ago
    os.utime(path, (when, when))
    return path.stat().st_size


def _lines(producer: int, file: int, count: int) -> list[dict]:
    return [{"key": f"user-{(producer * 7 + i) % 5}",
             "event_time": START + file * 60_000 + producer * 1_000 - i * 700,
             "value": round(producer + i / 100, 2)} for i in range(count)]


def _log(stream) -> list[dict]:
    table = DeltaTable(stream.table_path(tables.ARRIVAL_LOG)).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda row: row["arrival_seq"])


def test_a_backlog_beyond_the_limit_is_ingested_in_bounded_batches_landed_first_first(
        tmp_path):
    stream = platform_of(PlatformSettings.from_env(
        _home(tmp_path, max_bytes_per_batch=2_500))).streams["events"]
    landed: dict[str, tuple[float, int]] = {}
    for file in range(4):
        for producer in range(3):
            name = f"producer-{producer}/f-{file}.jsonl"
            # the files landed in turn, producer by producer; names do not sort that way
            ago = 600.0 - file * 30 - producer * 10
            landed[name] = (ago, _land(stream, name, _lines(producer, file, 16), ago))
    assert all(800 < size <= 1_250 for _, size in landed.values())  # two files a batch

    report = ingest(None, stream, progress=lambda _: None)

    assert (report.records, report.files, report.quarantined) == (192, 12, 0)
    assert ingest(None, stream, progress=lambda _: None).batch_id is None
    log = IngestLog(Files(None), stream.folder)
    batches = log.batch_ids(log.commits_folder)
    assert len(batches) == 6
    taken = [[part.name for part in log.plan(batch).files] for batch in batches]
    assert all(sum(landed[name][1] for name in names) <= 2_500 for names in taken)
    by_landing = sorted(landed, key=lambda name: -landed[name][0])
    assert [name for names in taken for name in sorted(names, key=by_landing.index)] == \
        by_landing
    rows = _log(stream)
    assert [row["arrival_seq"] for row in rows] == list(range(192))
    assert sorted((row["source_file"], row["line_number"]) for row in rows) == \
        sorted((name, n) for name in landed for n in range(1, 17))
    for name in landed:  # a file's lines arrive in their order
        numbers = [row["line_number"] for row in rows if row["source_file"] == name]
        assert numbers == sorted(numbers)
    # the watermark state carried between batches gives what one pass over the log gives
    assert [row["watermark_ms"] for row in rows] == assign_watermarks(stream.watermark, [
        (row["source_partition"], row["event_time_ms"], row["ingest_time_ms"],
         json.loads(row["payload"])) for row in rows])


def test_a_file_larger_than_the_limit_is_one_batch_of_its_own(tmp_path):
    stream = platform_of(PlatformSettings.from_env(
        _home(tmp_path, max_bytes_per_batch="1KB"))).streams["events"]
    big = _land(stream, "producer-0/big.jsonl", _lines(0, 0, 40), 300)
    _land(stream, "producer-1/small.jsonl", _lines(1, 0, 2), 200)
    assert big > 1_000

    report = ingest(None, stream, progress=lambda _: None)

    assert (report.records, report.files) == (42, 2)
    log = IngestLog(Files(None), stream.folder)
    assert [[part.name for part in log.plan(batch).files]
            for batch in log.batch_ids(log.commits_folder)] == \
        [["producer-0/big.jsonl"], ["producer-1/small.jsonl"]]


def test_a_file_that_grew_waits_from_when_it_was_last_taken_not_behind_newer_files(tmp_path):
    """Each append moves a file's modification time on; under a backlog it would stay behind
    every file landing after it. It counts from when a batch last took it: its new lines go
    in the first batch, before the files that landed since."""
    stream = platform_of(PlatformSettings.from_env(
        _home(tmp_path, max_bytes_per_batch=2_500))).streams["events"]
    grows = stream.landing_dir / "producer-0" / "grows.jsonl"
    _land(stream, "producer-0/grows.jsonl", _lines(0, 0, 16), 900)
    assert ingest(None, stream, progress=lambda _: None).records == 16
    for file in range(6):
        _land(stream, f"producer-1/f-{file}.jsonl", _lines(1, file, 16), 600 - file * 10)
    with grows.open("a") as out:
        out.write("".join(json.dumps(line) + "\n" for line in _lines(0, 1, 16)))
    when = time.time() - 100  # the newest of all now
    os.utime(grows, (when, when))

    report = ingest(None, stream, progress=lambda _: None)

    assert (report.records, report.appended) == (7 * 16, 1)
    log = IngestLog(Files(None), stream.folder)
    taken = [[part.name for part in log.plan(batch).files]
             for batch in log.batch_ids(log.commits_folder)[1:]]
    assert "producer-0/grows.jsonl" in taken[0] and len(taken) == 4
    assert sorted((row["source_file"], row["line_number"]) for row in _log(stream)) == sorted(
        [("producer-0/grows.jsonl", n) for n in range(1, 33)]
        + [(f"producer-1/f-{file}.jsonl", n) for file in range(6) for n in range(1, 17)])


def test_a_stop_asked_for_between_batches_ends_the_catch_up_with_each_batch_committed(
        tmp_path):
    """A command asked to stop while Spark runs (its jobs cancelled, jobs.console.interrupts) says
    so through ``check_stop``: the catch-up ends before its next batch rather than at the end
    of the backlog, and the next ingest takes the rest, every line once."""
    stream = platform_of(PlatformSettings.from_env(
        _home(tmp_path, max_bytes_per_batch="1KB"))).streams["events"]
    for file in range(3):
        _land(stream, f"producer-0/f-{file}.jsonl", _lines(0, file, 12), 300 - file * 10)
    asked: list[int] = []

    def stop_after_the_first() -> None:  # asked before each batch
        asked.append(1)
        if len(asked) == 2:
            raise KeyboardInterrupt("SIGTERM")

    with pytest.raises(KeyboardInterrupt):
        ingest(None, stream, progress=lambda _: None, check_stop=stop_after_the_first)
    log = IngestLog(Files(None), stream.folder)
    assert (len(asked), log.batch_ids(log.commits_folder)) == (2, [0])
    assert len(_log(stream)) == 12  # the first file, committed

    rest = ingest(None, stream, progress=lambda _: None)
    assert (rest.records, rest.batch_ids) == (24, (1, 2))
    assert sorted((row["source_file"], row["line_number"]) for row in _log(stream)) == \
        sorted((f"producer-0/f-{file}.jsonl", n) for file in range(3) for n in range(1, 13))


@pytest.mark.parametrize(("stream", "said"), [
    ({"max_bytes_per_batch": 0}, "max_bytes_per_batch: Input should be greater than 0"),
    ({"max_bytes_per_batch": "lots"}, "max_bytes_per_batch: could not parse value and unit"),
    ({"kind": "kafka", "kafka": {"bootstrap_servers": "127.0.0.1:9092", "topics": ["t"]},
      "max_bytes_per_batch": "1MiB"},
     "max_bytes_per_batch belongs to kind: landing; a Kafka stream's batches are bounded by "
     "kafka.max_records_per_batch"),
])
def test_a_bad_limit_is_refused_naming_the_setting_and_the_file(tmp_path, stream, said):
    with pytest.raises(SettingsError) as refused:
        platform_of(PlatformSettings.from_env(_home(tmp_path, **stream))).streams  # noqa: B018
    assert "events.yaml" in str(refused.value) and said in str(refused.value)


def test_files_touched_but_unchanged_do_not_keep_a_large_file_waiting(tmp_path):
    """Files ingested before and touched since (their bytes unchanged) are looked at again
    but bring no new bytes: a file larger than the limit that landed after them is still a
    batch of its own, even for a one-shot ingest, which looks at them again each time."""
    env = _home(tmp_path, max_bytes_per_batch="1KB")
    stream = platform_of(PlatformSettings.from_env(env)).streams["events"]
    for producer in range(2):
        _land(stream, f"producer-{producer}/early.jsonl", _lines(producer, 0, 3), 900)
    assert ingest(None, stream, progress=lambda _: None).records == 6
    for producer in range(2):  # touched: a later time, still before the large file's
        path = stream.landing_dir / f"producer-{producer}/early.jsonl"
        os.utime(path, (time.time() - 800, time.time() - 800))
    big = _land(stream, "producer-0/large.jsonl", _lines(0, 1, 40), 300)
    assert big > 1_000

    report = ingest(None, stream, progress=lambda _: None)

    assert (report.records, report.files) == (40, 1)
    assert len(_log(stream)) == 46


def test_a_catch_up_takes_only_the_files_that_landed_before_it_started(tmp_path):
    """A one-shot ingest that catches up in several batches leaves a file modified after it
    started to the next ingest (a folder that keeps filling does not keep it going)."""
    stream = platform_of(PlatformSettings.from_env(
        _home(tmp_path, max_bytes_per_batch="1KB"))).streams["events"]
    for file in range(3):
        _land(stream, f"producer-0/f-{file}.jsonl", _lines(0, file, 12), 600 - file * 10)
    _land(stream, "producer-1/later.jsonl", _lines(1, 0, 5), -120)  # modified after the start

    caught_up = ingest(None, stream, progress=lambda _: None)

    assert (caught_up.records, caught_up.files, caught_up.batch_ids) == (36, 3, (0, 2))
    later = stream.landing_dir / "producer-1/later.jsonl"
    os.utime(later, (time.time() - 1, time.time() - 1))  # as it was before the next ingest
    assert ingest(None, stream, progress=lambda _: None).records == 5


def test_a_batch_parsed_ahead_is_planned_only_once_the_one_before_it_committed(tmp_path):
    """Under a backlog the next batch is parsed while one is appended (read_ahead.py), but
    it enters the ingest log only after that one commits: a crash in between leaves no plan
    behind, and the next ingest takes the rest, giving every row an ingest that never read
    ahead gives (a new process a batch)."""
    def landed(root: Path):
        stream = platform_of(PlatformSettings.from_env(
            _home(root, max_bytes_per_batch="1KB"))).streams["events"]
        for file in range(4):
            _land(stream, f"producer-{file % 2}/f-{file}.jsonl", _lines(file % 2, file, 12),
                  600 - file * 10)
        return stream

    def planned_at() -> int:
        return START + 3_600_000

    (tmp_path / "crashed").mkdir()
    (tmp_path / "reference").mkdir()
    crashed, reference = landed(tmp_path / "crashed"), landed(tmp_path / "reference")
    first = Ingestor(None, crashed, progress=lambda _: None, clock_ms=planned_at)
    assert first.run_once().batch_id == 0 and first.capped  # batch 1 parsed meanwhile
    log = IngestLog(Files(None), crashed.folder)
    assert log.batch_ids(log.plans_folder) == log.batch_ids(log.commits_folder) == [0]
    del first  # killed here: the batch parsed ahead is gone with the process

    after = Ingestor(None, crashed, progress=lambda _: None, clock_ms=planned_at)
    assert after.run_until_caught_up().batch_ids == (1, 3)
    while Ingestor(None, reference, progress=lambda _: None,
                   clock_ms=planned_at).run_once().batch_id is not None:
        pass

    assert _log(crashed) == _log(reference) and len(_log(crashed)) == 48


def test_a_batch_parsed_ahead_gives_way_to_a_batch_another_ingest_planned_meanwhile(tmp_path):
    stream = platform_of(PlatformSettings.from_env(
        _home(tmp_path, max_bytes_per_batch="1KB"))).streams["events"]
    for file in range(3):
        _land(stream, f"producer-0/f-{file}.jsonl", _lines(0, file, 12), 600 - file * 10)
    first = Ingestor(None, stream, progress=lambda _: None)
    assert first.run_once().batch_id == 0  # f-1 parsed ahead

    assert Ingestor(None, stream, progress=lambda _: None).run_once().batch_id == 1  # f-1

    again = first.run_once()  # what it parsed ahead is taken: it plans anew
    assert (again.batch_id, again.files) == (2, 1)
    log = IngestLog(Files(None), stream.folder)
    assert [[part.name for part in log.plan(batch).files]
            for batch in log.batch_ids(log.commits_folder)] == \
        [[f"producer-0/f-{file}.jsonl"] for file in range(3)]
    assert sorted((row["source_file"], row["line_number"]) for row in _log(stream)) == \
        sorted((f"producer-0/f-{file}.jsonl", n) for file in range(3) for n in range(1, 13))


@pytest.mark.spark
def test_the_backfill_engine_after_a_catch_up_equals_a_backfill(spark, tmp_path):
    """``run_increment`` (the landing sensor's job with the vectorised engine) recomputes the
    days every batch of its ingest reached, not only the last batch's."""
    env = _home(tmp_path, max_bytes_per_batch=1_500)  # two files a batch
    stream = platform_of(PlatformSettings.from_env(env)).streams["events"]
    for day in range(3):
        for producer in range(2):
            lines = [{"key": f"user-{producer}", "value": 1.5,
                      "event_time": START + day * 86_400_000 + i * 61_000} for i in range(10)]
            _land(stream, f"producer-{producer}/day-{day}.jsonl", lines, 900 - day * 60)

    increment = run_increment(spark, stream, progress=lambda _: None, engine="backfill")

    assert increment.ingest.batch_ids == (0, 2)
    pipeline = platform_of(stream.settings).pipelines["per_minute"]
    written = output_tables(spark, pipeline)
    assert written[tables.WINDOW_RESULTS].window_end_date.nunique() == 3
    run_backfill(spark, pipeline, progress=lambda _: None)
    backfilled = output_tables(spark, pipeline)
    for name in (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS):
        pd.testing.assert_frame_equal(written[name], backfilled[name], check_like=True)
