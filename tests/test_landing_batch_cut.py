"""A landing backlog ingested in batches of any ``max_bytes_per_batch`` gives the arrival log
and quarantine one uncapped ingest gives: every line at the same arrival position with the
same ingest time and watermark (jobs.streams.landing.cut).

The backlogs hold what made a capped batch's records late before the cut: a partition whose
event times lag minutes behind its stamps, one going quiet for minutes, one that starts
later, files of one partition taken in a later batch than the others', and bad lines. Every
line carries its collector's stamp (``received_at``), rising in each partition's files, as
collectors write them. Ingest writes through ``deltalake`` alone (no Spark).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs import tables
from jobs.config.registry import platform_of
from jobs.config.settings import PlatformSettings
from jobs.store.storage import Files
from jobs.streams.ingestors import ingest
from jobs.streams.landing.log import IngestLog
from tests.depth import examples
from tests.platform_home import PER_MINUTE, write_pipelines

REPO = Path(__file__).resolve().parents[1]
START = 1_767_225_600_000
MINUTE = 60_000


@st.composite
def landings(draw):
    """Files per partition: each a list of (stamp, event time, bad) lines, stamps rising."""
    partitions = {}
    for number in range(draw(st.integers(2, 3))):
        clock = START + draw(st.sampled_from([0, 0, 20_000, 3 * MINUTE]))  # starts later
        lag = draw(st.sampled_from([0, 2_000, 8 * MINUTE]))
        files = []
        for _ in range(draw(st.integers(1, 4))):
            lines = []
            for _ in range(draw(st.integers(1, 12))):
                clock += draw(st.integers(0, 15_000))
                lines.append((clock, clock - lag - draw(st.integers(0, 6_000)),
                              draw(st.integers(0, 19)) == 0))
            files.append(lines)
            if draw(st.booleans()):
                clock += draw(st.integers(0, 3 * MINUTE))  # goes quiet between files
        partitions[f"producer-{number}"] = files
    return partitions


def _home(root: Path, cap: int | None) -> dict[str, str]:
    streams = root / "streams"
    streams.mkdir(parents=True)
    stream = {"watermark": {"strategy": "bounded_out_of_orderness",
                            "max_out_of_orderness": "5s", "idle_timeout": "40s"}}
    if cap is not None:
        stream["max_bytes_per_batch"] = cap
    (streams / "events.yaml").write_text(json.dumps(stream))
    pipelines = write_pipelines(root / "pipelines", {"per_minute": PER_MINUTE})
    return {"PLATFORM_HOME": str(root / "home"), "PLATFORM_STREAMS": str(streams),
            "PLATFORM_PIPELINES": str(pipelines)}


def _land(stream, partitions, landed_order) -> None:
    """Each file written, modified in ``landed_order`` (long past the settle time)."""
    now = time.time() - 3_600
    for rank, (partition, index) in enumerate(landed_order):
        path = stream.landing_dir / partition / f"f-{index:02d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        # a bad line is a record without a key: quarantined, its stamp still its clock; no
        # two files alike (a duplicate's quarantine row takes the wall clock of its batch)
        text = "".join(json.dumps({"key": None if bad else f"{partition}-{i % 3}",
                                   "event_time": event, "value": i, "received_at": stamp,
                                   "producer": partition, "file": index})
                       + "\n" for i, (stamp, event, bad) in
                       enumerate(partitions[partition][index]))
        path.write_text(text)
        os.utime(path, (now + rank, now + rank))


def _tables(stream) -> tuple[list, list]:
    log = DeltaTable(stream.table_path(tables.ARRIVAL_LOG)).to_pyarrow_table().to_pylist()
    quarantine = DeltaTable(stream.table_path(tables.QUARANTINE)).to_pyarrow_table() \
        .to_pylist()
    columns = ("arrival_seq", "source_partition", "source_file", "line_number", "key",
               "event_time_ms", "ingest_time_ms", "watermark_ms")
    return (sorted(tuple(row[c] for c in columns) for row in log),
            sorted((row["source_file"], row["line_number"], row["ingest_time_ms"],
                    row["reason"]) for row in quarantine))


def _ingested(root: Path, partitions, landed_order, cap: int | None):
    stream = platform_of(PlatformSettings.from_env(_home(root, cap))).streams["events"]
    _land(stream, partitions, landed_order)
    report = ingest(None, stream, progress=lambda _: None)
    return _tables(stream), report


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(landings(), st.integers(120, 1_500), st.randoms(use_true_random=False))
def test_a_capped_backlog_arrives_as_one_uncapped_batch(tmp_path_factory, partitions, cap,
                                                        random):
    files = [(partition, index) for partition, found in partitions.items()
             for index in range(len(found))]
    # files land in turn across partitions, each partition's in their order
    landed_order = sorted(files, key=lambda f: (f[1] + random.random() * 0.9, f[0]))
    root = tmp_path_factory.mktemp("cut")
    once, _ = _ingested(root / "once", partitions, landed_order, None)
    capped, report = _ingested(root / "capped", partitions, landed_order, cap)
    assert capped == once
    assert len(capped[0]) + len(capped[1]) == sum(len(f) for fs in partitions.values()
                                                   for f in fs)


def _cli_ingest(env: dict[str, str], **options):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORM_")}
    command = [sys.executable, "-m", "jobs", "ingest"]
    if options.pop("background", False):
        return subprocess.Popen(command, cwd=REPO, env={**environment, **env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return subprocess.run(command, cwd=REPO, env={**environment, **env}, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.cli
def test_a_capped_ingest_killed_again_and_again_arrives_as_one_uncapped_batch(tmp_path):
    """``python -m jobs ingest`` over a backlog of three partitions (one lagging 8 minutes in
    event time, one quiet for minutes, one starting later) in batches of 16 KB, SIGKILLed at
    random points and run again to the end: the same arrival log and quarantine, row for row,
    as one uncapped ingest of the same files."""
    rng = random.Random(int(os.environ.get("FAULT_SEED", "11")))
    partitions: dict[str, list] = {}
    for number, (begins, lag, quiet) in enumerate([(0, 8 * MINUTE, False), (0, 1_000, True),
                                                   (4 * MINUTE, 0, False)]):
        clock, files = START + begins, []
        for index in range(12):
            lines = []
            for _ in range(60):
                clock += rng.randrange(1_500)
                lines.append((clock, clock - lag - rng.randrange(4_000), rng.random() < 0.02))
            files.append(lines)
            if quiet and index == 4:
                clock += 3 * MINUTE
        partitions[f"producer-{number}"] = files
    files = [(p, i) for p in partitions for i in range(12)]
    landed_order = sorted(files, key=lambda f: (f[1] + rng.random() * 0.9, f[0]))
    once, _ = _ingested(tmp_path / "once", partitions, landed_order, None)

    env = _home(tmp_path / "capped", 16_000)
    stream = platform_of(PlatformSettings.from_env(env)).streams["events"]
    _land(stream, partitions, landed_order)
    for _ in range(4):
        process = _cli_ingest(env, background=True)
        time.sleep(rng.uniform(1.5, 4.0))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finished = _cli_ingest(env)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert _tables(stream) == once
    log = IngestLog(Files(None), stream.folder)
    assert len(log.batch_ids(log.commits_folder)) > 10
