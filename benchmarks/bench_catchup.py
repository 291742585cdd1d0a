"""The live stage's ceiling on a backlog, against plain Spark Structured Streaming on the same
files in the same run (not a test).

Run: ``.venv/bin/python benchmarks/bench_catchup.py`` (``--quick``: sessions, 6 chunks of
200,000 records; ``--windows tumbling sliding session --chunks 12 --per-chunk 400000`` to
choose, about 5 minutes a window). ``bench_live.py`` offers a rate and
measures latency, and at its ceiling its figures move with the machine by a third from run to
run; here nothing is offered in real time. The same landing files (bench_live's lines: 10,000
keys, event times a few seconds apart with a tail up to a minute late, 0.5 % bad lines) are
landed in ``--chunks`` chunks of ``--per-chunk`` records, four files each, and then:

- **platform**: each chunk ingested into the arrival log (one arrival file each, the ingest's
  own rate printed apart), then ``jobs.live.run_live`` over the whole log, one micro-batch per
  chunk (``max_files_per_trigger=1``): the windowed tables, late records and window
  assignments, with the late-data metrics written once at the end;
- **plain Spark**: ``readStream.json`` over the same files, one chunk per micro-batch
  (``maxFilesPerTrigger=4``), bench_live's ``groupBy(window(...), key).agg(count, sum)`` into
  Delta (``availableNow``).

Figures: records per second and CPU per record (every process of the run, from /proc: Spark's
JVM, its Python workers, the driver) over the micro-batches after the first, which warms each
query up. Each engine's first micro-batch also starts its JIT compilation: the JVM's compiler
threads are printed apart, since they still take a fifth of its CPU a minute later.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks.bench_live import landing_lines  # noqa: E402
from benchmarks.live_common import (  # noqa: E402
    EVENT_SCHEMA,
    WINDOWS,
    pipelines_for,
    plain_counts,
)

PARTITIONS = 4
START_MS = 1_795_730_000_000
CHUNK_MS = 10_000
"""Event time a chunk spans: a chunk of 400,000 records is 40,000 events/s."""


def write_chunks(folder: Path, chunks: int, per_chunk: int, keys: int) -> list[list[Path]]:
    """``chunks`` chunks of ``PARTITIONS`` files each, the same for any run (seeded)."""
    rng = np.random.default_rng(7)
    written = []
    for chunk in range(chunks):
        files = []
        now = START_MS + chunk * CHUNK_MS
        for partition in range(PARTITIONS):
            count = per_chunk // PARTITIONS
            delay = rng.exponential(500, count)
            delay += (rng.random(count) < 0.05) * rng.uniform(0, 60_000, count)
            event = now + np.sort(rng.integers(0, CHUNK_MS, count)) - delay.astype(np.int64)
            key = rng.integers(0, keys, count)
            value = np.round(rng.gamma(2.0, 10.0, count), 2)
            bad = rng.random(count) < 0.005
            path = folder / f"producer-{partition}" / f"f-{chunk:05d}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(landing_lines(key, event, value, bad, now + CHUNK_MS))
            files.append(path)
        written.append(files)
    return written


# -- CPU per process, from /proc ------------------------------------------------------------------


def _kind(pid: str, command: str) -> str | None:
    if pid == str(os.getpid()):
        return "driver"
    if "java" in command:
        return "JVM"
    if "pyspark" in command and ("daemon" in command or "worker" in command):
        return "workers"
    return None


def cpu_snapshot() -> dict[str, tuple[str, float]]:
    """CPU seconds so far of each process of the run (pid -> kind, seconds) and of the JVM's
    compiler threads (``jit``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, tuple[str, float]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
            kind = _kind(pid, command)
            if kind is None:
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            found[pid] = (kind, (int(fields[11]) + int(fields[12])) / ticks)
            if kind == "JVM":
                for tid in os.listdir(f"/proc/{pid}/task"):
                    stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                    if "CompilerThre" in stat[:stat.rindex(")")]:
                        parts = stat.rsplit(")", 1)[1].split()
                        found[f"{pid}/{tid}"] = ("jit", (int(parts[11]) + int(parts[12]))
                                                 / ticks)
        except (OSError, ValueError):
            continue
    return found


def cpu_between(before: dict, after: dict) -> dict[str, float]:
    spent: dict[str, float] = {}
    for pid, (kind, seconds) in after.items():
        spent[kind] = spent.get(kind, 0.0) + seconds - before.get(pid, (kind, 0.0))[1]
    return spent


@dataclass
class Mark:
    """The end of a micro-batch: when, and the CPU spent so far."""

    at: float
    cpu: dict


@dataclass
class Figures:
    name: str
    records: int
    seconds: float
    cpu: dict[str, float]

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    def cpu_us(self, kind: str | None = None) -> float:
        spent = sum(v for k, v in self.cpu.items() if k != "jit") if kind is None \
            else self.cpu.get(kind, 0.0)
        return 1e6 * spent / self.records if self.records else float("nan")

    def line(self) -> str:
        parts = ", ".join(f"{kind} {self.cpu_us(kind):.1f}" for kind in
                          ("JVM", "workers", "driver") if kind in self.cpu)
        return (f"{self.name:<12} {self.rate:>9,.0f} records/s over {self.records:,} records "
                f"({self.seconds:.1f} s); CPU {self.cpu_us():.1f} us/record ({parts}; of the "
                f"JVM's, its JIT compiler {self.cpu_us('jit'):.1f})")


def steady(name: str, marks: list[Mark], per_batch: list[int]) -> Figures:
    """The micro-batches after the first: from its end to the last one's."""
    if len(marks) < 2:
        raise SystemExit(f"{name}: fewer than two micro-batches; raise --chunks")
    first, last = marks[0], marks[-1]
    return Figures(name, sum(per_batch[1:len(marks)]), last.at - first.at,
                   cpu_between(first.cpu, last.cpu))


# -- the two engines ------------------------------------------------------------------------------


def run_platform(spark, root: Path, window: str, chunks: list[list[Path]]
                 ) -> tuple[Figures, Figures]:
    from jobs.config.registry import platform_of
    from jobs.config.settings import PlatformSettings
    from jobs.live import run_live
    from jobs.streams.landing.ingestor import ingest

    home = root / f"platform-{window}"
    folder = home / "pipelines"
    folder.mkdir(parents=True)
    for name, text in pipelines_for(window, 1).items():
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home),
                                          "PLATFORM_PIPELINES": str(folder),
                                          "PLATFORM_LANDING_SETTLE": "1ms"})
    stream = platform_of(settings).streams["events"]
    counts = []
    before, started = cpu_snapshot(), time.time()
    for files in chunks:  # one ingest batch, one arrival file, per chunk
        for path in files:
            target = stream.landing_dir / path.parent.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        counts.append(ingest(spark, stream, lambda message: None).records)
    ingested = Figures("ingest", sum(counts), time.time() - started,
                       cpu_between(before, cpu_snapshot()))
    marks: list[Mark] = []

    def progress(message: str) -> None:
        if ": batch " in message:
            marks.append(Mark(time.time(), cpu_snapshot()))

    run_live(spark, stream, max_files_per_trigger=1, progress=progress)
    return ingested, steady("platform", marks, counts)


def run_plain(spark, root: Path, window: str, chunks: list[list[Path]]) -> Figures:
    landing = chunks[0][0].parents[1]
    events = (spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", PARTITIONS)
              .option("pathGlobFilter", "*.jsonl").option("recursiveFileLookup", "true")
              .json(str(landing)))
    counts = plain_counts(events, window)
    query = (counts.writeStream.format("delta").outputMode("append")
             .option("checkpointLocation", str(root / f"plain-{window}" / "checkpoint"))
             .trigger(availableNow=True).start(str(root / f"plain-{window}" / "table")))
    marks: list[Mark] = []
    batches: list[int] = []
    while True:  # a mark at the end of each micro-batch with records
        active = query.isActive
        progress = query.lastProgress
        if progress and progress.get("numInputRows") and progress["batchId"] not in batches:
            marks.append(Mark(time.time(), cpu_snapshot()))
            batches.append(progress["batchId"])
        if not active:
            break
        time.sleep(0.05)
    query.awaitTermination()
    read = {p["batchId"]: p["numInputRows"] for p in query.recentProgress}
    rows = [read.get(batch, 0) for batch in batches]
    return steady("plain Spark", marks, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", nargs="+", default=["session"], choices=sorted(WINDOWS))
    parser.add_argument("--chunks", type=int, default=12)
    parser.add_argument("--per-chunk", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true",
                        help="sessions, 6 chunks of 200,000 records (about 3 minutes)")
    args = parser.parse_args()
    if args.quick:
        args.windows, args.chunks, args.per_chunk = ["session"], 6, 200_000

    from benchmarks.engine import bench_spark

    spark = bench_spark("bench-catchup", shuffle_partitions=2)
    root = Path(tempfile.mkdtemp(prefix="bench-catchup-"))
    try:
        chunks = write_chunks(root / "landing", args.chunks, args.per_chunk, args.keys)
        for window in args.windows:
            print(f"\n== {window} windows, {args.chunks} chunks of {args.per_chunk:,} records",
                  flush=True)
            ingested, platform = run_platform(spark, root, window, chunks)
            print(ingested.line(), flush=True)
            print(platform.line(), flush=True)
            plain = run_plain(spark, root, window, chunks)
            print(plain.line(), flush=True)
            print(f"catch-up ({window}): platform {platform.rate:,.0f} records/s, plain Spark "
                  f"{plain.rate:,.0f} records/s, ratio {platform.rate / plain.rate:.2f}; CPU "
                  f"per record {platform.cpu_us() / plain.cpu_us():.2f}x plain's; ingest "
                  f"{ingested.rate:,.0f} records/s", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
