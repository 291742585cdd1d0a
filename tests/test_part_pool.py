"""Landing parts parsed by worker processes or threads (jobs.streams.landing.part_pool) give
the very rows the ingest process gives itself: for any files of good, bad, blank, non-UTF-8
and oddly stamped lines, over every watermark strategy; through a whole ingest (arrival log
and quarantine, row by row); and when a worker process dies between batches."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.streams.landing import native_scan, part_pool
from jobs.streams.landing.batch import IngestRules, arrival_rows, batch_rows
from jobs.streams.landing.ingestor import Ingestor
from jobs.streams.landing.log import FilePart, Plan
from operators.pipeline import WatermarkSpec
from tests.depth import examples
from tests.test_ingest_columns import (
    FILES,
    MAX_FUTURE,
    MAX_PAST,
    PLANNED_AT,
    WATERMARKS,
    _rows,
    landed_parts,
)

SMALL = GeneratorConfig(events=3_000, duration_ms=3 * 3_600_000, keys=8, producers=3,
                        bad_fraction=0.05, flush_interval_ms=600_000)


@pytest.fixture(scope="module", autouse=True)
def _workers_stopped():
    yield
    part_pool.shutdown()


@settings(max_examples=examples(40), deadline=None)
@given(files=FILES.filter(lambda files: len(files) >= 2), watermark=WATERMARKS,
       last_ingest=st.sampled_from([None, PLANNED_AT - 50_000]))
def test_parts_parsed_by_workers_give_the_rows_parsed_here(files, watermark, last_ingest):
    rules = IngestRules("field:received_at", MAX_FUTURE, MAX_PAST, 90, watermark)
    start_state = {} if last_ingest is None else {"last_ingest_ms": last_ingest}
    with tempfile.TemporaryDirectory() as home:
        folder = Path(home)
        plan = Plan(7, tuple(landed_parts(folder, files)), 100, PLANNED_AT, start_state)
        reads = part_pool.read_parts(folder, plan, rules, 2, progress=pytest.fail)
        # keys come back as Arrow from a worker only (a read here keeps its list)
        assert all(isinstance(read.parsed.keys, pa.Array) for read in reads)
        by_workers = arrival_rows(reads, start_state, rules)
        assert _rows(by_workers) == _rows(batch_rows(folder, plan, rules))


@settings(max_examples=examples(40), deadline=None)
@given(files=FILES.filter(lambda files: len(files) >= 2), watermark=WATERMARKS,
       last_ingest=st.sampled_from([None, PLANNED_AT - 50_000]),
       scanned=st.booleans())
def test_parts_parsed_by_threads_give_the_rows_parsed_here(files, watermark, last_ingest,
                                                           scanned):
    rules = IngestRules("field:received_at", MAX_FUTURE, MAX_PAST, 90, watermark,
                        native_scan=scanned)
    start_state = {} if last_ingest is None else {"last_ingest_ms": last_ingest}
    with tempfile.TemporaryDirectory() as home:
        folder = Path(home)
        plan = Plan(7, tuple(landed_parts(folder, files)), 100, PLANNED_AT, start_state)
        reads = part_pool.read_parts(folder, plan, rules, 2, progress=pytest.fail,
                                     threads=True)
        by_threads = arrival_rows(reads, start_state, rules)
        assert _rows(by_threads) == _rows(batch_rows(folder, plan, rules))


def test_auto_parses_in_threads_only_where_the_native_scanner_parses():
    """The scanner runs outside the interpreter lock; msgspec's decoding and the Python around
    it do not, and would hold up the live job's driver."""
    rules = IngestRules("wall", MAX_FUTURE, MAX_PAST, 90, WatermarkSpec())
    assert native_scan.available()  # ./platform setup builds it
    assert part_pool.in_threads("auto", rules)
    assert not part_pool.in_threads("auto", IngestRules("wall", MAX_FUTURE, MAX_PAST, 90,
                                                        WatermarkSpec(), native_scan=False))
    assert part_pool.in_threads("threads", rules) and not part_pool.in_threads("processes",
                                                                               rules)


def test_an_ingest_parsed_by_threads_starts_no_process_and_writes_the_same_rows(tmp_path):
    part_pool.shutdown()
    settings_ = PlatformSettings(home=str(tmp_path), ingest_processes=2,
                                 ingest_processes_min_bytes=0)  # auto: threads, as built
    ingestor = Ingestor(None, platform_of(settings_).streams["events"], progress=lambda _: None)
    counts = generate(SMALL, ingestor.stream.landing)
    report = ingestor.run_once()
    assert report.records == counts["events"] and report.quarantined > 0
    assert not multiprocessing.active_children()
    # a pool starts a thread per part submitted while none is idle: one or two here
    assert 1 <= sum(thread.name.startswith("ingest-parse")
                    for thread in threading.enumerate()) <= 2
    assert _rows_of_batch(ingestor, report.batch_id) == _expected(ingestor, report.batch_id)


def _ingestor(home: Path, processes: int, said: list[str] | None = None) -> Ingestor:
    settings = PlatformSettings(home=str(home), ingest_processes=processes,
                                ingest_processes_min_bytes=0, ingest_parse_workers="processes")
    return Ingestor(None, platform_of(settings).streams["events"],
                    progress=(said.append if said is not None else lambda _: None))


def _table(ingestor: Ingestor, name: str) -> list[dict]:
    return DeltaTable(ingestor.stream.table_path(name)).to_pyarrow_table().to_pylist()


def _rows_of_batch(ingestor: Ingestor, batch_id: int) -> tuple[list, list]:
    """The batch's arrival-log and quarantine rows, each without its batch's bookkeeping."""
    good = [row for row in _table(ingestor, tables.ARRIVAL_LOG)
            if row["ingest_batch"] == batch_id]
    bad = [row for row in _table(ingestor, tables.QUARANTINE) if row["ingest_batch"] == batch_id]
    return sorted(good, key=lambda row: row["arrival_seq"]), \
        sorted(bad, key=lambda row: (row["source_file"], row["line_number"]))


def _expected(ingestor: Ingestor, batch_id: int) -> tuple[list, list]:
    """The batch as the ingest process reads its saved plan by itself."""
    from jobs.streams.log_rows import arrival_table, quarantine_table

    plan = ingestor.log.plan(batch_id)
    rows = batch_rows(ingestor.landing, plan, ingestor.rules)
    good = arrival_table(rows.good, plan).to_pylist()
    bad = quarantine_table(rows.bad, plan, ingestor.settings.time_zone).to_pylist()
    return good, sorted(bad, key=lambda row: (row["source_file"], row["line_number"]))


def test_an_ingest_parsed_by_workers_writes_the_rows_the_ingest_process_would(tmp_path):
    part_pool.shutdown()
    ingestor = _ingestor(tmp_path, processes=2)
    counts = generate(SMALL, ingestor.stream.landing)
    report = ingestor.run_once()
    assert report.records == counts["events"] and report.quarantined > 0
    assert len(multiprocessing.active_children()) == 2  # the workers it started parsed it
    assert _rows_of_batch(ingestor, report.batch_id) == _expected(ingestor, report.batch_id)


def test_a_worker_killed_between_batches_costs_nothing_but_time(tmp_path):
    said: list[str] = []
    ingestor = _ingestor(tmp_path, processes=2, said=said)
    generate(SMALL, ingestor.stream.landing)
    first = ingestor.run_once()
    workers = multiprocessing.active_children()
    assert workers
    os.kill(workers[0].pid, signal.SIGKILL)
    time.sleep(0.5)  # the pool notices
    later = GeneratorConfig(**{**SMALL.__dict__, "seed": 99,
                               "start_ms": SMALL.start_ms + SMALL.duration_ms})
    counts = generate(later, ingestor.stream.landing)
    second = ingestor.run_once()
    assert second.batch_id == first.batch_id + 1 and second.records == counts["events"]
    assert sum("is parsed in the ingest process" in line for line in said) == 1
    assert _rows_of_batch(ingestor, second.batch_id) == _expected(ingestor, second.batch_id)
    third_batch = GeneratorConfig(**{**SMALL.__dict__, "seed": 5,
                                     "start_ms": SMALL.start_ms + 2 * SMALL.duration_ms})
    generate(third_batch, ingestor.stream.landing)
    third = ingestor.run_once()
    assert {child.pid for child in multiprocessing.active_children()} - {
        worker.pid for worker in workers}  # new workers parsed it
    assert sum("is parsed in the ingest process" in line for line in said) == 1
    assert _rows_of_batch(ingestor, third.batch_id) == _expected(ingestor, third.batch_id)


UNGUARDED_SCRIPT = """
import sys
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.streams.landing.ingestor import Ingestor

settings = PlatformSettings(home=sys.argv[1], ingest_processes=2, ingest_processes_min_bytes=0,
                            ingest_parse_workers="processes")
ingestor = Ingestor(None, platform_of(settings).streams["events"])
for seed in range(4):
    counts = generate(GeneratorConfig(events=500, keys=4, producers=2, seed=seed,
                                      start_ms=1_767_225_600_000 + seed * 3_600_000,
                                      duration_ms=3_600_000), ingestor.stream.landing)
    report = ingestor.run_once()
    assert report.records == counts["events"], (report, counts)
print("every batch ingested")
"""


@pytest.mark.cli
def test_a_script_without_the_main_guard_still_ingests_and_is_told_why(tmp_path):
    """Its workers cannot start (they would run the script again): each batch is parsed in
    the ingest process, and after three failed starts no more are tried."""
    script = tmp_path / "ingest_script.py"
    script.write_text(UNGUARDED_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1],
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve()
                                                               .parents[1])})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "every batch ingested" in done.stdout
    assert done.stdout.count("is parsed in the ingest process") == part_pool.GIVE_UP_AFTER
    assert "__main__" in done.stdout  # the remedy is named


HOLDING_SCRIPT = """
import os, sys, time
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.generator import GeneratorConfig, generate
from jobs.streams.landing.ingestor import Ingestor

if __name__ == "__main__":
    settings = PlatformSettings(home=sys.argv[1], ingest_processes=2,
                                ingest_processes_min_bytes=0, ingest_parse_workers="processes")
    ingestor = Ingestor(None, platform_of(settings).streams["events"], progress=lambda _: None)
    generate(GeneratorConfig(events=500, keys=4, producers=2), ingestor.stream.landing)
    ingestor.run_once()
    import multiprocessing
    print(" ".join(str(child.pid) for child in multiprocessing.active_children()), flush=True)
    time.sleep(600)
"""


@pytest.mark.cli
def test_workers_end_with_an_ingest_process_that_is_killed(tmp_path):
    """No worker outlives a live job stopped by SIGKILL (they would hold memory for ever)."""
    script = tmp_path / "holding.py"
    script.write_text(HOLDING_SCRIPT, encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path / "home")],
                               stdout=subprocess.PIPE, text=True, cwd=root,
                               env={**os.environ, "PYTHONPATH": str(root)})
    try:
        pids = [int(pid) for pid in process.stdout.readline().split()]
        assert len(pids) == 2
    finally:
        process.kill()
        process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][0] not in "ZX"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_record_too_deep_to_travel_back_is_parsed_here_with_the_same_rows(tmp_path):
    """A record nested deeper than pickle goes cannot come back from a worker: the batch is
    read in the ingest process instead, with the rows it always had."""
    rules = IngestRules("field:received_at", MAX_FUTURE, MAX_PAST, 1_000_000,
                        WatermarkSpec(max_out_of_orderness_ms=1_000))
    nested = "[" * 900 + "]" * 900
    deep = f'{{"key": "é", "event_time": {PLANNED_AT}, "value": 1, "x": {nested}}}'
    parts = []
    for index, text in enumerate([deep, f'{{"key": "a", "event_time": {PLANNED_AT}}}']):
        name = f"producer-{index}/f.jsonl"
        (tmp_path / f"producer-{index}").mkdir()
        data = (text + "\n").encode()
        (tmp_path / name).write_bytes(data)
        parts.append(FilePart(name, len(data), 0, "sha"))
    plan = Plan(1, tuple(parts), 0, PLANNED_AT)
    reads = part_pool.read_parts(tmp_path, plan, rules, 2, progress=pytest.fail)
    rows = arrival_rows(reads, {}, rules)
    assert rows.records == 2
    assert _rows(rows) == _rows(batch_rows(tmp_path, plan, rules))
