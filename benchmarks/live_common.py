"""What the live benchmarks share, whatever the source: the pipelines they run, plain Spark's
side, one run's figures and the machine's CPU clock (``bench_live.py`` from landing files,
``live_kafka.py`` from a Kafka topic; both import this module, neither imports the other's)."""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

WINDOWS = {
    "tumbling": ("window: {type: tumbling, size: 1m}", ("1 minute", None)),
    "sliding": ("window: {type: sliding, size: 5m, slide: 1m}", ("5 minutes", "1 minute")),
    "session": ("window: {type: session, gap: 4m}", ("session", "4 minutes")),
}


PIPELINE = """
source: events
{window}
allowed_lateness: 30s
aggregates:
  - {{name: events, fn: count}}
  - {{name: value_sum, fn: sum, field: value}}
"""
"""The project's stream ``events`` gives the watermark: bounded out-of-orderness of 5 s, idle
after 1 min, a tick on every record."""


MIXES = {
    "demo": ("tumbling", "sliding", "session"),
    "standard": ("tumbling", "sliding", "tumbling_1h"),
}
"""The pipelines beside the configuration's window: the demo's three kinds (sessions run the
operator library per record), or three windows Spark's closed form computes (the vectorised
engines)."""


EXTRA_WINDOWS = {"tumbling_1h": "window: {type: tumbling, size: 1h}"}


PROCESSES = ("daily_totals", "spend_spike")
"""The repository's process pipelines (a user's KeyedProcessFunction each): ``--windows
daily_totals`` runs one; plain Spark's side is then its tumbling one-minute query."""


def pipelines_for(window: str, count: int, mix: str = "demo") -> dict[str, str]:
    """``count`` pipelines over the one stream: the configuration's window first, then the
    mix's others in order."""
    order = [window, *(w for w in MIXES[mix] if w != window)]
    if count > len(order):
        raise SystemExit(f"--pipelines: at most {len(order)} with --mix {mix}")
    repo = Path(__file__).resolve().parents[1]
    return {name: (repo / "pipelines" / f"{name}.yaml").read_text() if name in PROCESSES
            else PIPELINE.format(window=WINDOWS[name][0] if name in WINDOWS
                                 else EXTRA_WINDOWS[name]) for name in order[:count]}


def machine_cpu_seconds() -> float:
    """CPU seconds the machine spent busy (user, nice, system, interrupts), from /proc/stat.

    Nothing else runs during a benchmark, so the difference over a period is what the run's
    processes used: the JVM, Spark's Python workers (which come and go, and whose time a walk
    over the live process tree loses once they are gone: it printed negative figures), the
    producer. Both engines are measured the same way."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    name: str
    offered: int = 0
    seconds: float = 0.0
    processed_in_time: int = 0
    backlog_s: float = 0.0
    steady_rate: float = 0.0
    """Records processed per second over the last 70 % of the offered period."""
    backlog_growth: float = 0.0
    """How the backlog (landed, not yet processed) grew over that period, records/s: about 0
    when the stream keeps up."""
    latencies: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    """CPU seconds the machine spent on the run over its period (:func:`machine_cpu_seconds`)."""
    rollout_s: float | None = None
    """--rollout-after: from the pipeline's change to readers' switch."""
    rollout_latencies: list[float] = field(default_factory=list)
    """--rollout-after: latencies of the files completed between the change and the switch."""
    batch_seconds: list[float] = field(default_factory=list)
    small_batch_seconds: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.processed_in_time / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies, q)) if self.latencies else float("nan")

    def steady(self, landed: list[tuple[float, int]], processed: list[tuple[float, int]],
               start: float, end: float) -> None:
        """Steady-state rate and backlog growth from cumulative (time, records) samples."""
        def at(samples: list[tuple[float, int]], moment: float) -> int:
            before = [n for t, n in samples if t <= moment]
            return max(before, default=0)

        begin = start + 0.3 * (end - start)
        if end <= begin:
            return
        self.steady_rate = (at(processed, end) - at(processed, begin)) / (end - begin)
        # sampled every second, not at the commits: an engine far behind commits a few long
        # batches, and with fewer than two commits in the period the fit had nothing to fit
        # (it printed +0 for a stream tens of seconds behind)
        times = np.linspace(begin, end, max(2, int(end - begin) + 1))
        values = np.array([at(landed, t) - at(processed, t) for t in times], dtype=float)
        self.backlog_growth = float(np.polyfit(times - times[0], values, 1)[0])

    def rollout_line(self) -> str:
        during = np.percentile(self.rollout_latencies, [50, 99]) if self.rollout_latencies \
            else (float("nan"), float("nan"))
        return (f"rollout: change -> switch {self.rollout_s:.1f} s; latency while it caught up "
                f"p50 {during[0]:.2f} s p99 {during[1]:.2f} s "
                f"({len(self.rollout_latencies)} files)")

    @property
    def cpu_per_event_us(self) -> float:
        return 1e6 * self.cpu_seconds / self.processed_in_time if self.processed_in_time \
            else float("nan")

    def kept_up(self, rate: int) -> bool:
        """The backlog (landed minus processed, sampled every second) not growing by more than
        5 % of the offered rate. Not the processed rate against the offered one: over the
        measured period the producer itself may land less than offered, and one commit more
        or less at its edge moves the processed rate by a batch, so plain Spark at 40,000 with
        a shrinking backlog once counted as behind (37,871 events/s, 94.7 %)."""
        return self.backlog_growth <= 0.05 * rate

    def line(self) -> str:
        overhead = statistics.median(self.small_batch_seconds) if self.small_batch_seconds \
            else float("nan")
        median = statistics.median(self.batch_seconds) if self.batch_seconds else 0.0
        return (f"{self.name:<12} {self.steady_rate:>9,.0f} ev/s steady (offered "
                f"{self.offered:,}; backlog growth {self.backlog_growth:+,.0f} rec/s, at stop "
                f"{self.backlog_s:4.1f} s), latency p50 {self.percentile(50):5.2f}"
                f" s p99 {self.percentile(99):5.2f} s max {max(self.latencies, default=0):5.2f}"
                f" s, batches {len(self.batch_seconds)} (median {median:.2f} s, "
                f"fixed overhead {overhead:.2f} s), CPU {self.cpu_per_event_us:.1f} us/event")


EVENT_SCHEMA = "key string, event_time long, value double, received_at long"
"""The events' fields as plain Spark reads them (a landing line, a Kafka value)."""


def plain_counts(events, window: str):
    """Plain Spark's aggregation, whatever the source: ``withWatermark`` +
    ``groupBy(window, key)`` (``session_window`` for sessions) with count and sum."""
    from pyspark.sql import functions as F

    size, slide = WINDOWS[window if window in WINDOWS else "tumbling"][1]
    events = (events.where(F.col("key").isNotNull() & F.col("event_time").isNotNull())
              .withColumn("ts", F.timestamp_millis("event_time"))
              .withWatermark("ts", "5 seconds"))
    grouping = F.session_window("ts", slide) if size == "session" else \
        F.window("ts", size, slide) if slide else F.window("ts", size)
    return (events.groupBy(grouping.alias("w"), "key")
            .agg(F.count(F.lit(1)).alias("events"),
                 F.sum(F.col("value").cast("decimal(38,9)")).alias("value_sum")))


def start_plain_query(events, window: str, args, checkpoint: Path, table: Path):
    """Plain Spark's side (:func:`plain_counts`) into Delta in append mode; started and through
    its warm-up batch."""
    counts = plain_counts(events, window)
    query = (counts.writeStream.format("delta").outputMode("append")
             .option("checkpointLocation", str(checkpoint))
             .trigger(processingTime=args.trigger).start(str(table)))
    while not any(p.get("numInputRows") for p in query.recentProgress):  # the warm-up batch
        time.sleep(0.2)
    return query
