"""The long-running job's ingest waits while every query already has its next micro-batch full
in the arrival log: a record appended then would be read no sooner than the micro-batch after
it (jobs.live.backpressure)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.live import run_stream
from jobs.live.backpressure import IngestBackpressure, TriggerLimit, next_micro_batch_full
from jobs.runtime.log_files import LogFiles
from tests.platform_home import PER_MINUTE, platform_env

RECORDS_PER_FILE = 10
START = 1_767_225_600_000  # 2026-01-01
FILES = 10
LINES_PER_FILE = 12


def _log_files(sizes: list[int]) -> LogFiles:
    first = np.arange(len(sizes), dtype=np.int64) * RECORDS_PER_FILE
    return LogFiles([f"part-{i}.parquet" for i in range(len(sizes))], first,
                    first + RECORDS_PER_FILE - 1, np.asarray(sizes, dtype=np.int64))


def _micro_batch(sizes: list[int], begin: int, max_files: int | None,
                 max_bytes: int) -> list[int]:
    """The files a micro-batch from position ``begin`` reads, one by one as the source takes
    them: in order, until the file limit or the byte limit would be passed, at least one."""
    taken: list[int] = []
    total = 0
    for index, size in enumerate(sizes):
        if (index + 1) * RECORDS_PER_FILE <= begin:
            continue  # read before
        if taken and (len(taken) == (max_files or 1000) or total + size > max_bytes):
            break
        taken.append(index)
        total += size
    return taken


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(1, 50), max_size=12),
       written_files=st.integers(0, 12),
       max_files=st.none() | st.integers(1, 4),
       max_bytes=st.integers(1, 120))
def test_ingest_waits_exactly_when_a_record_appended_now_misses_the_next_micro_batch(
        sizes, written_files, max_files, max_bytes):
    """The query may be running the micro-batch after the last position it wrote, as large
    as its limits let it be. Appended now, a file is read by that micro-batch or the next, or
    only later: ingest waits in that last case alone."""
    written_files = min(written_files, len(sizes))
    written_through = written_files * RECORDS_PER_FILE - 1
    limit = TriggerLimit(max_files, max_bytes)
    with_new = [*sizes, 1]
    running = _micro_batch(with_new, written_through + 1, max_files, max_bytes)
    next_one = _micro_batch(with_new, (running[-1] + 1) * RECORDS_PER_FILE, max_files,
                            max_bytes)
    missed = len(sizes) not in running + next_one
    assert next_micro_batch_full(_log_files(sizes), written_through, limit) == missed


def test_a_query_that_has_written_nothing_yet_holds_no_ingest_back():
    assert not next_micro_batch_full(_log_files([1] * 20), None, TriggerLimit(1, 1))


def _commit(location: str, first: int, count: int) -> None:
    write_deltalake(location, pa.table({"arrival_seq": pa.array(range(first, first + count),
                                                                pa.int64())}), mode="append")


def test_ingest_waits_only_while_every_query_has_its_next_micro_batch_full(tmp_path):
    """A version catching up far behind holds no ingest back while a serving query is near
    the log's end, and it is read from the log's latest commit."""
    location = str(tmp_path / "arrival_log")
    for file in range(6):
        _commit(location, file * 100, 100)
    one_file = TriggerLimit(1, 2**30)
    backpressure = IngestBackpressure(location)
    assert not backpressure.holds([])
    assert backpressure.holds([(99, one_file)])  # files 2-5 wait: running 2, next 3
    assert backpressure.holds([(399, one_file)])  # running 4, next 5
    assert not backpressure.holds([(499, one_file)])  # running 5, next: what comes
    assert not backpressure.holds([(99, one_file), (499, one_file)])
    assert backpressure.holds([(99, one_file), (399, one_file)])
    assert not backpressure.holds([(99, one_file), (None, one_file)])
    assert not backpressure.holds([(99, TriggerLimit(None, 2**30))])  # running: all of it
    _commit(location, 600, 100)
    assert backpressure.holds([(499, one_file)])  # the new commit seen


def _land(stream, first: int, files: int) -> int:
    """``files`` finished landing files from number ``first`` on, each about one ingest batch;
    how many lines they hold."""
    folder = stream.landing_dir / "collector-1"
    folder.mkdir(parents=True, exist_ok=True)
    for file in range(first, first + files):
        lines = [{"key": f"user-{i % 7}", "event_time": START + file * 20_000 + i * 500,
                  "value": i} for i in range(LINES_PER_FILE)]
        (folder / f"part-{file:03d}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines))
    return files * LINES_PER_FILE


@pytest.mark.spark
def test_the_long_running_job_ingests_a_backlog_no_faster_than_its_query_reads_it(spark,
                                                                                   tmp_path):
    """Once its query has written, a landing backlog (one log file per ingest batch and per
    micro-batch) is ingested at most two files ahead of what the query has written: the
    micro-batch it runs and the next. Before, ingest took the whole backlog first. Every
    record is read once."""
    streams = tmp_path / "streams"
    streams.mkdir()
    (streams / "events.yaml").write_text(json.dumps({
        "watermark": {"strategy": "bounded_out_of_orderness", "max_out_of_orderness": "5s"},
        "max_bytes_per_batch": "1KB", "max_bytes_per_micro_batch": 1}))
    env = {**platform_env(tmp_path / "home", {"per_minute": PER_MINUTE}),
           "PLATFORM_STREAMS": str(streams)}
    stream = platform_of(PlatformSettings.from_env(env)).streams["events"]
    first = _land(stream, 0, 2)
    written = [-1]
    ingested: list[tuple[int, int]] = []  # (first, last) position of each ingest batch
    ahead: list[int] = []  # at each commit of the backlog's: its batches the query had not written
    stop = threading.Event()
    first_written = threading.Event()

    def on_ingest(result) -> None:
        ingested.append((result.first_seq, result.first_seq + result.records - 1))
        if first_written.is_set():
            ahead.append(sum(last > written[0] for _, last in ingested))

    def on_batch(batch: dict) -> None:
        if batch.get("last_arrival_seq") is not None:
            written[0] = batch["last_arrival_seq"]
        if written[0] == first - 1:
            first_written.set()
        if written[0] == first + FILES * LINES_PER_FILE - 1:
            stop.set()

    said: list[str] = []
    report: list = []
    job = threading.Thread(target=lambda: report.append(run_stream(
        spark, stream, trigger="1 second", poll_s=0.2, duration_s=300,
        metrics_interval_s=float("inf"), stop=stop, progress=said.append,
        on_ingest=on_ingest, on_batch=on_batch)))
    job.start()
    try:
        assert first_written.wait(120), said
        lines = first + _land(stream, 2, FILES)
        job.join(300)
    finally:
        stop.set()
        job.join()
    assert report, said
    assert len(ingested) == 2 + FILES, said  # one batch a file, each ingested once
    assert report[0].records == report[0].ingested == lines, said
    assert ahead and max(ahead) <= 3, ahead  # 2, or 3 if told of a write late (on_batch)
    assert any("ingest waits: every query has its next micro-batch waiting" in line
               for line in said), said
