"""The long-running live stream at a steady offered rate, against plain Spark Structured
Streaming on the same files at the same rate, in the same run (not a test).

Run: ``.venv/bin/python benchmarks/bench_live.py`` (``--quick``: one configuration, about 6.5
minutes; ``--rates 5000 10000 20000 --keys 1000 10000 100000 --windows tumbling sliding
session --seconds 180`` to choose). For each configuration a producer process writes JSON-lines
files into a fresh landing folder at a steady rate (several source partitions, one file per
partition every ``--file-seconds``, each written as ``.tmp`` and renamed when complete): events
of ``--keys`` keys whose event times trail the wall clock by an exponential delay (mean 0.5 s),
5 % later by up to a minute, 1 % by 10 to 30 minutes, and 0.5 % bad lines. Then, one after the
other on identical files:

- **platform**: ``jobs.live.run_stream``, the long-running job (ingest + the windowed tables,
  late records, per-batch and per-day late-data metrics), one process, one SparkSession;
- **plain Spark**: ``readStream.json(landing)`` with ``withWatermark`` + ``groupBy(window(...),
  key).agg(count, sum)`` (``session_window`` for sessions) written to Delta in append mode: no
  arrival log, no lateness semantics, no late records, no metrics.

Before the measured runs each engine runs once for ``--warm-up`` seconds (30 by default), not
counted: the two share one JVM, and whichever ran first in it paid for compiling Spark's own
code while the other found it compiled (see :func:`warm_jvm`).

Figures: the records per second each kept up with (processed over the offered period), the
backlog left when the producer stopped (in seconds of input: kept up when it does not grow),
end-to-end latency from a file being complete to the commit of the micro-batch that processed
its last record (p50, p99, max), and the micro-batches' fixed overhead (the duration of
batches with few records). The last line is the summary the issue asks for.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks.live_common import (  # noqa: E402
    EVENT_SCHEMA,
    MIXES,
    PROCESSES,
    WINDOWS,
    Run,
    machine_cpu_seconds,
    pipelines_for,
    start_plain_query,
)

# -- the producer (its own process: the stream's driver keeps its GIL) -----------------------------


def landing_lines(key: np.ndarray, event: np.ndarray, value: np.ndarray, bad: np.ndarray,
                   now_ms: int) -> bytes:
    """A file's JSON lines, built by Arrow's string kernels: formatted one by one in Python
    they cost the producer 14 µs a line on a slow hour of this machine, most of a core at
    80,000 events/s, taken from the engines it measures."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = pc.utf8_lpad(pc.cast(pa.array(key), pa.string()), 6, "0")
    lines = pc.binary_join_element_wise(
        '{"key":"user-', names, '","event_time":', pc.cast(pa.array(event), pa.string()),
        ',"value":', pc.cast(pa.array(value), pa.string()), f',"received_at":{now_ms}}}\n',
        "")
    lines = pc.if_else(pa.array(bad), '{"key": "user-bad", "event_time": "sometime"\n', lines)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    first, last = offsets[lines.offset], offsets[lines.offset + len(lines)]
    return lines.buffers()[2].to_pybytes()[first:last]


def produce(landing: str, rate: int, keys: int, partitions: int, file_seconds: float,
            seconds: float, seed: int, manifest: str) -> None:
    """Write files at ``rate`` events/s for ``seconds``; record each file's completion time."""
    rng = np.random.default_rng(seed)
    per_file = max(1, int(rate * file_seconds / partitions))
    start = time.time()
    completed = []
    tick = 0
    while True:
        due = start + tick * file_seconds
        now = time.time()
        if due > now:
            time.sleep(due - now)
        if time.time() - start >= seconds:
            break
        for partition in range(partitions):
            now_ms = int(time.time() * 1000)
            delay = rng.exponential(500, per_file)
            late = rng.random(per_file) < 0.05
            delay += late * rng.uniform(0, 60_000, per_file)
            very_late = rng.random(per_file) < 0.01
            delay += very_late * rng.uniform(600_000, 1_800_000, per_file)
            event = now_ms - delay.astype(np.int64)
            key = rng.integers(0, keys, per_file)
            value = np.round(rng.gamma(2.0, 10.0, per_file), 2)
            bad = rng.random(per_file) < 0.005
            folder = Path(landing) / f"producer-{partition}"
            folder.mkdir(parents=True, exist_ok=True)
            name = f"f-{tick:07d}.jsonl"
            tmp = folder / (name + ".tmp")
            tmp.write_bytes(landing_lines(key, event, value, bad, now_ms))
            os.replace(tmp, folder / name)
            completed.append((f"producer-{partition}/{name}", time.time(), per_file))
        tick += 1
    Path(manifest).write_text(json.dumps(completed), encoding="utf-8")


def warm_up(landing: Path) -> None:
    """A small first file, so both engines start (JVM, Python workers) before the clock."""
    produce(str(landing), 2_000, 100, 1, 1.0, 0.5, 1, str(landing.parent / "warm-up.json"))
    for path in landing.glob("*/*.jsonl"):
        path.rename(path.with_name("warm-up-" + path.name))


def start_producer(landing: Path, args, rate: int, keys: int, seconds: float
                   ) -> tuple[multiprocessing.Process, Path]:
    manifest = landing.parent / f"produced-{time.time_ns()}.json"
    process = multiprocessing.get_context("spawn").Process(
        target=produce, args=(str(landing), rate, keys, args.partitions, args.file_seconds,
                              seconds, 7, str(manifest)))
    process.start()
    return process, manifest


# -- measurements ---------------------------------------------------------------------------------






def _latencies(files: list, batches: list[tuple[int, float]], file_last: dict[str, int]
               ) -> list[float]:
    """Per file: the commit time of the first batch that processed its last record, minus
    the time the file was complete. ``batches``: (last position processed, commit time)."""
    batches = sorted(batches)
    positions = [b[0] for b in batches]
    result = []
    for name, completed, _ in files:
        last = file_last.get(name)
        if last is None:
            continue
        index = int(np.searchsorted(positions, last))
        if index < len(batches):
            result.append(batches[index][1] - completed)
    return result


def run_platform(spark, root: Path, args, window: str, rate: int, keys: int,
                 pipelines: int = 1, rollout_after: float = 0.0) -> Run:
    from pyspark.sql import functions as F

    from jobs.config.registry import platform_of
    from jobs.config.settings import PlatformSettings
    from jobs.live import run_stream

    home = root / f"platform-{window}-{rate}-{keys}-{pipelines}-{rollout_after:g}"
    folder = home / "pipelines"
    folder.mkdir(parents=True)
    for name, text in pipelines_for(window, pipelines, args.mix).items():
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
    settings = PlatformSettings.from_env({"PLATFORM_HOME": str(home),
                                          "PLATFORM_PIPELINES": str(folder),
                                          "PLATFORM_LANDING_SETTLE": "1s"})
    stream = platform_of(settings).streams["events"]
    stream.landing_dir.mkdir(parents=True)
    warm_up(stream.landing_dir)
    committed: list[tuple[int, float, float, int]] = []
    stop = threading.Event()

    def on_batch(summary: dict) -> None:
        if any("@" in label for label in summary.get("pipelines", {})):
            return  # a new version catching up (--rollout-after): not what readers see yet
        if summary.get("last_arrival_seq") is not None:
            committed.append((summary["last_arrival_seq"], summary["written_at"],
                              summary["seconds"], summary["records"]))

    started = time.time()
    report: dict = {}
    log_lines: list[str] = []

    def progress(message: str) -> None:
        log_lines.append(f"{time.time() - started:7.2f} {message}")
        if args.verbose:
            print(log_lines[-1], flush=True)

    def live_job() -> None:
        try:
            report["live"] = run_stream(spark, stream, trigger=args.trigger, poll_s=0.25,
                                        metrics_interval_s=args.metrics_interval, stop=stop,
                                        on_batch=on_batch, progress=progress,
                                        registry_poll_s=1.0)
        except Exception as error:  # the figures say it; the message says why
            report["error"] = str(error)[:2000]
            print(f"platform stream failed: {report['error']}", flush=True)

    thread = threading.Thread(target=live_job, daemon=True)
    thread.start()
    while not committed and thread.is_alive():  # the warm-up batch
        time.sleep(0.2)
    warm = len(committed)
    started = time.time()
    cpu_before = machine_cpu_seconds()
    producer, manifest = start_producer(stream.landing_dir, args, rate, keys, args.seconds)
    edited = None
    if rollout_after:  # change the first pipeline: its new version catches up beside it
        time.sleep(rollout_after)
        first = next(iter(sorted(folder.glob("*.yaml"))))
        first.write_text(first.read_text().replace("allowed_lateness: 30s",
                                                   "allowed_lateness: 45s"))
        edited = time.time()
    producer.join()
    offered_until = time.time()
    cpu_offered = machine_cpu_seconds() - cpu_before
    files = json.loads(manifest.read_text())
    processed_at_stop = max((c[0] + 1 for c in committed if c[1] <= offered_until), default=0)
    time.sleep(args.drain)
    stop.set()
    thread.join()
    log = spark.read.format("delta").load(stream.arrival_log)
    per_file = {row[0]: (row[1], row[2]) for row in log.groupBy("source_file")
                .agg(F.max("arrival_seq"), F.count(F.lit(1))).collect()}
    file_last = {name: last for name, (last, _) in per_file.items()}
    offered = sum(n for _, _, n in files)
    warm_records = min((c[0] for c in committed[warm:]), default=0)
    run = Run("platform" if pipelines == 1 else f"platform x{pipelines}", offered,
              offered_until - started)
    run.processed_in_time = max(0, processed_at_stop - warm_records)
    run.cpu_seconds = cpu_offered
    # what was offered and is good, ingested or not yet (when ingest itself lags, the log
    # does not hold it all): every file's lines at the log's share of good lines
    ingested_lines = sum(n for name, _, n in files if name in per_file)
    good_share = sum(per_file[name][1] for name, _, _ in files if name in per_file) \
        / ingested_lines if ingested_lines else 1.0
    offered_good = good_share * sum(n for _, _, n in files)
    run.backlog_s = max(0.0, offered_good - (processed_at_stop - warm_records)) / rate
    run.latencies = _latencies(files, [(c[0], c[1]) for c in committed], file_last)
    run.batch_seconds = [c[2] for c in committed[warm:]]
    run.small_batch_seconds = [c[2] for c in committed[warm:] if c[3] <= rate * 0.2]
    landed, total = [], 0.0
    for _, completed, count in sorted(files, key=lambda f: f[1]):
        total += count * good_share  # offered, whether ingested yet or not
        landed.append((completed, total))
    run.steady(landed, [(c[1], c[0] + 1 - warm_records) for c in committed[warm:]], started,
               offered_until)
    if edited is not None:
        switched = [s for s in (report["live"].switched if "live" in report else [])
                    if s.from_version is not None]  # not the first version's own first serve
        run.rollout_s = (switched[0].at_ms / 1000 - edited) if switched else float("nan")
        until = edited + run.rollout_s if switched else offered_until
        files_during = [f for f in files if edited <= f[1] <= until]
        run.rollout_latencies = _latencies(files_during, [(c[0], c[1]) for c in committed],
                                           file_last)
        run.name = "platform+rollout"
    return run


def _query_batch_of_source_offset(checkpoint: Path) -> dict[int, int]:
    """The file source's log offset -> the first query micro-batch that read up to it, from
    the checkpoint's ``offsets/<batch id>`` files (a version line, the batch's metadata, then
    one offset per source: ``{"logOffset": N}`` for the file source)."""
    first: dict[int, int] = {}
    for path in (checkpoint / "offsets").glob("*"):
        if not path.name.isdigit():
            continue
        lines = path.read_text().splitlines()
        if len(lines) < 3:
            continue
        offset = json.loads(lines[2]).get("logOffset")
        if offset is not None:
            batch = int(path.name)
            first[offset] = min(batch, first.get(offset, batch))
    return first








def run_plain(spark, root: Path, args, window: str, rate: int, keys: int) -> Run:
    landing = root / f"plain-{window}-{rate}-{keys}" / "landing"
    landing.mkdir(parents=True)
    checkpoint = landing.parent / "checkpoint"
    warm_up(landing)
    events = (spark.readStream.schema(EVENT_SCHEMA)
              .option("pathGlobFilter", "*.jsonl").option("recursiveFileLookup", "true")
              .json(str(landing)))
    query = start_plain_query(events, window, args, checkpoint, landing.parent / "table")
    started = time.time()
    cpu_before = machine_cpu_seconds()
    producer, manifest = start_producer(landing, args, rate, keys, args.seconds)
    producer.join()
    offered_until = time.time()
    cpu_offered = machine_cpu_seconds() - cpu_before
    time.sleep(args.drain)
    query.stop()
    files = json.loads(manifest.read_text())
    progress = [p for p in query.recentProgress if p.get("numInputRows") is not None]
    # which files each batch read: the file source's own log in the checkpoint numbers its
    # entries by the source's log offset, which only advances when new files are found; the
    # query's offsets log says which micro-batch first reached each log offset (no-data
    # batches, which advance the watermark, take query batch ids the source never sees)
    batch_of_offset = _query_batch_of_source_offset(checkpoint)
    batch_of: dict[str, int] = {}
    for log in sorted((checkpoint / "sources" / "0").glob("*")):
        if not log.name.split(".")[0].isdigit():
            continue
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line)
            name = "/".join(Path(entry["path"].replace("file://", "")).parts[-2:])
            if entry["batchId"] in batch_of_offset:
                batch_of[name] = batch_of_offset[entry["batchId"]]
    ends = {}
    for p in progress:
        start = datetime.fromisoformat(p["timestamp"]).timestamp()
        took = p["durationMs"].get("triggerExecution", 0) / 1000
        ends[p["batchId"]] = (start + took, took, p["numInputRows"])
    run = Run("plain Spark", sum(n for _, _, n in files), offered_until - started)
    per_file = {n: c for n, c, _ in files}
    for name, batch in batch_of.items():
        if batch in ends and name in per_file:
            run.latencies.append(ends[batch][0] - per_file[name])
    read_by_stop = sum(n for name, _, n in files if name in batch_of
                       and ends.get(batch_of[name], (float("inf"),))[0] <= offered_until)
    run.processed_in_time = read_by_stop
    run.cpu_seconds = cpu_offered
    run.backlog_s = max(0, run.offered - read_by_stop) / rate
    run.batch_seconds = [v[1] for v in ends.values() if v[2]]
    run.small_batch_seconds = [v[1] for v in ends.values() if 0 < v[2] <= rate * 0.2]
    landed, total = [], 0
    for _, completed, count in sorted(files, key=lambda f: f[1]):
        total += count
        landed.append((completed, total))
    counts = {name: count for name, _, count in files}
    done: dict[int, int] = {}
    for name, batch in batch_of.items():
        done[batch] = done.get(batch, 0) + counts.get(name, 0)
    processed, total = [], 0
    for batch in sorted(done):
        if batch in ends:
            total += done[batch]
            processed.append((ends[batch][0], total))
    run.steady(landed, processed, started, offered_until)
    return run


ENGINES = {"platform": run_platform, "plain Spark": run_plain}
"""The two engines, warmed and compared, by the name its lines print."""


def warm_jvm(spark, root: Path, args, window: str, rate: int, keys: int) -> None:
    """Each engine once, not counted, before the measured runs (``--warm-up`` seconds at the
    first configuration). Both engines share one JVM, and the first run in it paid for the
    JIT compiling Spark's own code (task serialisation, closures, shuffle, Parquet, Delta)
    while the second found it compiled: at 120,000 events/s the engine that ran first had
    1.5-2.3 times the p50 latency and up to 23 % more CPU an event, whichever it was
    (benchmarks/RESULTS.md). A stream runs for days, so both are measured warm.

    The warm-up reads landing files with one pipeline, also before ``--source kafka``: code
    only the Kafka source or more pipelines run is still compiled in the first measured run."""
    if args.warm_up <= 0:
        return
    warm = argparse.Namespace(**{**vars(args), "seconds": args.warm_up,
                                 "drain": min(args.drain, 5.0), "verbose": False})
    for engine in ENGINES.values():
        run = engine(spark, root / "warm-up", warm, window, rate, keys)
        print(f"warm-up, not counted: {run.line()}", flush=True)
    shutil.rmtree(root / "warm-up", ignore_errors=True)  # millions of lines at high rates


def find_max(spark, root: Path, args) -> None:
    """Per window, each engine's ceiling: the highest offered rate it keeps up with
    (:meth:`Run.kept_up`), found by doubling from ``--rates[0]`` and then halving the gap
    between the last rate kept up with and the first one behind ``--refine`` times
    (benchmarks/ceiling_search.py). Where both engines are offered a rate, they run one
    after the other. An engine falls behind at a rate only if it does so twice: plain
    Spark's sliding windows once stopped at 40,000 on a single noisy run, a third of their
    ceiling (benchmarks/RESULTS.md). The most each processed in any run is printed too."""
    from benchmarks.ceiling_search import CeilingSearch

    keys = args.keys[0]
    warm_jvm(spark, root, args, args.windows[0], args.rates[0], keys)
    for window in args.windows:
        searches = {engine: CeilingSearch(args.rates[0], args.refine) for engine in ENGINES}
        while True:
            offers = {engine: search.next_rate() for engine, search in searches.items()}
            offers = {engine: rate for engine, rate in offers.items() if rate is not None}
            if not offers:
                break
            for rate in sorted(set(offers.values())):
                print(f"\n== {window} windows, {rate:,} events/s offered, {keys:,} keys",
                      flush=True)
                for engine in [e for e, r in offers.items() if r == rate]:
                    kept_up, processed = _attempts(spark, root, args, engine, window, rate, keys)
                    searches[engine].record(rate, kept_up, processed)
        platform, plain = searches["platform"], searches["plain Spark"]
        ratio = platform.ceiling / plain.ceiling if plain.ceiling else float("nan")
        print(f"ceiling ({window}): platform {platform.ceiling:,} events/s, plain Spark "
              f"{plain.ceiling:,} events/s, ratio {ratio:.2f}", flush=True)
        print(f"  where: platform {platform.bounds()}; plain Spark {plain.bounds()}",
              flush=True)
        drained = platform.most_processed / plain.most_processed if plain.most_processed \
            else float("nan")
        print(f"  most processed in a run: platform {platform.most_processed:,.0f} events/s, "
              f"plain Spark {plain.most_processed:,.0f} events/s, ratio {drained:.2f}",
              flush=True)


def _attempts(spark, root: Path, args, engine: str, window: str, rate: int, keys: int
              ) -> tuple[bool, float]:
    """One run of ``engine`` at ``rate``, and a second one if it fell behind: whether either
    kept up, and the most either processed. Each run's files go once it is measured (a
    45-s run at 1,280,000 events/s lands about 5 GB)."""
    processed = 0.0
    for attempt in ("", "again"):
        runs_root = root / f"{engine.replace(' ', '-')}-{rate}-{attempt or 'first'}"
        try:
            run = ENGINES[engine](spark, runs_root, args, window, rate, keys)
        finally:
            shutil.rmtree(runs_root, ignore_errors=True)
        print(f"{attempt + ': ' if attempt else ''}{run.line()}", flush=True)
        processed = max(processed, run.steady_rate)
        if run.kept_up(rate):
            return True, processed
    return False, processed


def kafka_main(spark, root: Path, args) -> None:
    """Each configuration with a Kafka topic as the source: the platform, then plain Spark."""
    from benchmarks.live_kafka import run_plain_kafka, run_platform_kafka
    from jobs.streams.kafka.broker import running_broker

    summary = []
    warm_jvm(spark, root, args, args.windows[0], args.rates[0], args.keys[0])
    with running_broker(root / "kafka", progress=lambda _: None) as broker:
        for window in args.windows:
            for rate in args.rates:
                for keys in args.keys:
                    print(f"\n== kafka: {window} windows, {rate:,} events/s offered, "
                          f"{keys:,} keys, {args.seconds:.0f} s", flush=True)
                    platform = run_platform_kafka(spark, root, args, window, rate, keys, broker)
                    print(platform.line(), flush=True)
                    plain = run_plain_kafka(spark, root, args, window, rate, keys, broker)
                    print(plain.line(), flush=True)
                    print(f"ratio plain/platform rate "
                          f"{plain.steady_rate / max(platform.steady_rate, 1):.2f}, latency "
                          f"p50 {platform.percentile(50) / plain.percentile(50):.2f}x plain's, "
                          f"CPU per event "
                          f"{platform.cpu_per_event_us / plain.cpu_per_event_us:.2f}x plain's",
                          flush=True)
                    summary.append((window, rate, keys, platform, plain))
    print_summary(summary)


def print_summary(summary: list) -> None:
    print("\nwindow     rate    keys  platform ev/s  growth/s  p50 s  p99 s   plain ev/s  "
          "growth/s  p50 s  p99 s  rate ratio")
    for window, rate, keys, platform, plain in summary:
        print(f"{window:<9} {rate:>6} {keys:>7} {platform.steady_rate:>13,.0f} "
              f"{platform.backlog_growth:>9,.0f} {platform.percentile(50):6.2f} "
              f"{platform.percentile(99):6.2f} {plain.steady_rate:>12,.0f} "
              f"{plain.backlog_growth:>9,.0f} {plain.percentile(50):6.2f} "
              f"{plain.percentile(99):6.2f} "
              f"{plain.steady_rate / max(platform.steady_rate, 1):10.2f}")
    window, rate, keys, platform, plain = summary[-1]
    print(f"live: {platform.steady_rate:,.0f} events/s sustained, end-to-end p50 "
          f"{platform.percentile(50):.2f} s, p99 {platform.percentile(99):.2f} s; plain Spark "
          f"{plain.steady_rate:,.0f} events/s; ratio "
          f"{plain.steady_rate / max(platform.steady_rate, 1):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[5_000, 10_000, 20_000])
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--windows", nargs="+", default=["tumbling", "sliding", "session"],
                        choices=sorted([*WINDOWS, *PROCESSES]))
    parser.add_argument("--seconds", type=float, default=180.0, help="offered period")
    parser.add_argument("--drain", type=float, default=15.0, help="seconds after the producer")
    parser.add_argument("--warm-up", type=float, default=30.0,
                        help="seconds each engine runs, not counted, before the measured runs "
                             "(0: none)")
    parser.add_argument("--partitions", type=int, default=4, help="source partitions")
    parser.add_argument("--file-seconds", type=float, default=1.0)
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--metrics-interval", type=float, default=60.0)
    parser.add_argument("--pipelines", type=int, nargs="+", default=[1],
                        help="run the platform with this many pipelines over the one stream "
                             "(the window's, then the other kinds); e.g. 1 3 compares them")
    parser.add_argument("--mix", choices=sorted(MIXES), default="demo",
                        help="which pipelines join the first: the demo's kinds (tumbling, "
                             "sliding, session) or three standard windows")
    parser.add_argument("--rollout-after", type=float, default=0.0,
                        help="also run each configuration with the first pipeline changed this "
                             "many seconds into the offered period (its new version catches up "
                             "beside it, then readers switch): latency with and without")
    parser.add_argument("--source", choices=("landing", "kafka"), default="landing",
                        help="landing files (default), or a topic of the project's own Kafka "
                             "broker for both engines (benchmarks/live_kafka.py)")
    parser.add_argument("--find-max", action="store_true",
                        help="for each window, double the offered rate (from the first of "
                             "--rates) until each engine falls behind twice at one rate, then "
                             "halve the gap --refine times; print the highest rate each kept "
                             "up with (its ceiling) and the most each processed")
    parser.add_argument("--refine", type=int, default=2,
                        help="--find-max: how many times to halve the gap between the last "
                             "rate an engine kept up with and the first it fell behind at")
    parser.add_argument("--verbose", action="store_true", help="print the platform's progress")
    parser.add_argument("--quick", action="store_true",
                        help="10,000 keys at 10,000 events/s, tumbling windows, 75 s each")
    args = parser.parse_args()
    if args.warm_up < 0:
        parser.error(f"--warm-up: {args.warm_up:g} seconds; give 0 (none) or more")
    if args.refine < 0:
        parser.error(f"--refine: {args.refine}; give 0 (doubling alone) or more")
    if args.quick:
        args.rates, args.keys, args.windows = [10_000], [10_000], ["tumbling"]
        args.seconds = min(args.seconds, 75)

    from benchmarks.engine import bench_spark

    spark = bench_spark("bench-live", shuffle_partitions=2,
                        extra={"spark.sql.streaming.numRecentProgressUpdates": "100000",
                             "spark.driver.extraJavaOptions": "-XX:MaxJavaStackTraceDepth=100000"})
    root = Path(tempfile.mkdtemp(prefix="bench-live-"))
    if args.source == "kafka":
        try:
            kafka_main(spark, root, args)
        finally:
            spark.stop()
            shutil.rmtree(root, ignore_errors=True)
        return
    if args.find_max:
        try:
            find_max(spark, root, args)
        finally:
            spark.stop()
            shutil.rmtree(root, ignore_errors=True)
        return
    configs = [(w, r, k) for w in args.windows for r in args.rates for k in args.keys]
    summary = []
    try:
        warm_jvm(spark, root, args, *configs[0])
        for window, rate, keys in configs:
            print(f"\n== {window} windows, {rate:,} events/s offered, {keys:,} keys, "
                  f"{args.seconds:.0f} s", flush=True)
            runs = {}
            for count in args.pipelines:
                runs[count] = run_platform(spark, root, args, window, rate, keys, count)
                print(runs[count].line(), flush=True)
            platform = runs[args.pipelines[0]]
            if args.rollout_after:
                rolled = run_platform(spark, root, args, window, rate, keys,
                                      args.pipelines[0], args.rollout_after)
                print(rolled.line(), flush=True)
                print(rolled.rollout_line(), flush=True)
                during = np.percentile(rolled.rollout_latencies, 99) \
                    if rolled.rollout_latencies else float("nan")
                print(f"rollout: p99 while catching up {during:.2f} s against "
                      f"{platform.percentile(99):.2f} s without a rollout "
                      f"({during / platform.percentile(99):.2f}x)", flush=True)
            for count in args.pipelines[1:]:
                share = runs[count].steady_rate / max(platform.steady_rate, 1)
                print(f"{count} pipelines: {runs[count].steady_rate:,.0f} ev/s, "
                      f"{share:.0%} of {args.pipelines[0]} pipeline's rate", flush=True)
            plain = run_plain(spark, root, args, window, rate, keys)
            print(plain.line(), flush=True)
            ratio = plain.steady_rate / platform.steady_rate if platform.steady_rate else \
                float("inf")
            print(f"ratio plain/platform rate {ratio:.2f}, latency p50 "
                  f"{platform.percentile(50) / plain.percentile(50):.2f}x plain's, CPU per "
                  f"event {platform.cpu_per_event_us / plain.cpu_per_event_us:.2f}x plain's",
                  flush=True)
            summary.append((window, rate, keys, platform, plain))
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_summary(summary)


if __name__ == "__main__":
    main()
