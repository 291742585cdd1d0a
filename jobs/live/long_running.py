"""The long-running live job: one process, one Spark, ingesting a stream's new records as they
arrive while its cohorts turn them into the pipelines' tables, until stopped.

Ingest waits while every query already has its next micro-batch in the arrival log
(jobs.live.backpressure); a pipeline added to the folder starts a cohort of its own within
``registry_poll_s``; a pending version is switched to once it is within one poll of the live
position. A stop lets each query run the batch without data its last watermark owes, so the
checkpoints keep a place from which a restart loses and duplicates nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from jobs.config.errors import SettingsError
from jobs.config.registry import Pipeline
from jobs.config.streams import Stream
from jobs.lifecycle import rollout, versions
from jobs.live import cohorts
from jobs.live.backpressure import IngestBackpressure, TriggerLimit
from jobs.live.cohorts import CohortRun, member_of
from jobs.live.queries import (
    DEFAULT_BUCKETS,
    LiveReport,
    live_pipelines,
    plan_runs,
    raise_failure,
    start_cohort,
    trigger_limits,
)
from jobs.live.sink import StreamSink
from jobs.store.delta_io import table_exists

STREAM_SETTINGS = {
    # adaptive query execution re-plans every small micro-batch job and Delta MERGE: measured
    # 2.3 s against 1.7 s per results MERGE on 2 cores (benchmarks/history.md)
    "spark.sql.adaptive.enabled": "false",
}
"""Session settings of the long-running job (its own process): none changes a result."""


def _drain(query: StreamingQuery, timeout_s: float = 30.0) -> None:
    """Before a polite stop, let the stream run the batch without data that fires what the
    last batch's watermark made due: Spark keeps a batch's watermark only in the next batch's
    offsets, so a stop right after a data batch would leave those timers for whenever new data
    comes (a restart with nothing new runs no batch at all)."""
    deadline = time.monotonic() + timeout_s
    seen = (query.lastProgress or {}).get("batchId", -1)
    while query.isActive and time.monotonic() < deadline:
        progress = query.lastProgress or {}
        if progress.get("batchId", -1) > seen and not progress.get("numInputRows"):
            return  # a batch without input ran: the timers it could fire have fired
        if progress.get("batchId", -1) > seen:
            seen = progress["batchId"]
        time.sleep(0.2)


def run_stream(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None = None,
               *, trigger: str = "1 second", poll_s: float = 0.5, duration_s: float = 0.0,
               max_batches: int = 0, metrics_interval_s: float = 60.0,
               checkpoint: str | None = None, stop: threading.Event | None = None,
               progress: Callable[[str], None] = print,
               on_ingest: Callable[[object], None] | None = None,
               on_flush: Callable[[list[dict]], None] | None = None,
               on_batch: Callable[[dict], None] | None = None,
               buckets: int = DEFAULT_BUCKETS,
               on_switch: Callable[[rollout.Switched], None] | None = None,
               registry_poll_s: float = 10.0,
               max_files_per_trigger: int | None = None) -> LiveReport:
    """The long-running live job of a stream: ingest its new landing files every ``poll_s``
    (batch after batch while a backlog remains) while its cohorts run the live versions of
    ``pipelines`` (default: every pipeline of the stream, and every pipeline added while it
    runs: the folder is read again every ``registry_poll_s``), until ``stop`` is set,
    ``duration_s`` passed or ``max_batches`` micro-batches were written; the checkpoints keep
    their place for the next start. A pending version is switched to once it has caught up
    (``on_switch`` hears of it). ``max_files_per_trigger``: the arrival-log files a
    micro-batch takes at most (default: a cohort of pending versions alone takes
    ``PLATFORM_ROLLOUT_MAX_FILES_PER_TRIGGER``, others as many as the stream's byte limit
    allows)."""
    stop = stop or threading.Event()
    previous = {key: spark.conf.get(key, None) for key in STREAM_SETTINGS}
    for key, value in STREAM_SETTINGS.items():
        spark.conf.set(key, value)
    try:
        return _run_stream(spark, stream, pipelines, trigger, poll_s, duration_s, max_batches,
                           metrics_interval_s, checkpoint, stop, progress, on_ingest, on_flush,
                           on_batch, buckets, on_switch, registry_poll_s,
                           max_files_per_trigger)
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@dataclass
class _Running:
    """One cohort's query inside the long-running job."""

    run: CohortRun
    query: StreamingQuery
    sink: StreamSink
    limit: TriggerLimit
    """How much of the log one of its micro-batches reads."""


def _run_stream(spark: SparkSession, stream: Stream, pipelines: list[Pipeline] | None,
                trigger: str, poll_s: float, duration_s: float, max_batches: int,
                metrics_interval_s: float, checkpoint: str | None, stop: threading.Event,
                progress: Callable[[str], None], on_ingest: Callable[[object], None] | None,
                on_flush: Callable[[list[dict]], None] | None,
                on_batch: Callable[[dict], None] | None, buckets: int,
                on_switch: Callable[[rollout.Switched], None] | None,
                registry_poll_s: float, max_files_per_trigger: int | None) -> LiveReport:
    from jobs.streams.ingestors import ingestor as ingestor_for

    quiet_since = [time.monotonic()]

    def ingest_progress(message: str) -> None:
        # an idle ingest says so every 10 s, not every poll
        if "no new landing files" not in message or time.monotonic() - quiet_since[0] >= 10:
            progress(message)
            quiet_since[0] = time.monotonic()

    ingestor = ingestor_for(spark, stream, ingest_progress, patient=True)
    report = LiveReport(stream=stream.name)
    arrival_end = [0]

    def ingest_once() -> bool:
        """One ingest batch; whether it left landing bytes (or topic records) for the next,
        which then starts without waiting for the poll."""
        result = ingestor.run_once()
        if result.batch_id is None:
            return False
        arrival_end[0] = max(arrival_end[0], result.first_seq + result.records)
        report.ingested += result.records
        if on_ingest is not None:
            on_ingest(result)
        return ingestor.capped

    ingest_once()  # the stream needs an arrival log: wait for the first landing file
    deadline = time.monotonic() + duration_s if duration_s else None
    said = time.monotonic() - 10
    while not table_exists(spark, stream.arrival_log):
        if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
            progress(f"live {stream.name} stopped: "
                     f"{stream.nothing_yet.removesuffix(' yet').replace(' has ', ' ')}")
            return report
        if time.monotonic() - said >= 10:
            first = f"the first landing file in {stream.landing}" \
                if stream.spec.kind == "landing" else f"the first record from {stream.origin}"
            progress(f"live {stream.name}: waiting for {first}")
            said = time.monotonic()
        stop.wait(poll_s)
        ingest_once()
    if not arrival_end[0]:  # restarted over a log ingested before
        from jobs.store.table_stats import max_column_value

        last = max_column_value(stream.arrival_log, "arrival_seq")
        arrival_end[0] = int(last) + 1 if last is not None else 0
    running: list[_Running] = []
    catching_up: dict[str, rollout.CatchUp] = {}

    def start(run: CohortRun) -> None:
        pending = [p for p in run.pipelines if not p.recorded and versions.pending(p)]
        throttle = max_files_per_trigger or (
            stream.settings.rollout_max_files_per_trigger
            if pending and len(pending) == len(run.pipelines) else None)
        query, sink = start_cohort(spark, stream, run, trigger=trigger,
                                   max_files_per_trigger=throttle, progress=progress,
                                   metrics_interval_s=metrics_interval_s, buckets=buckets,
                                   on_flush=on_flush, on_batch=on_batch)
        sink.arrival_end = lambda: arrival_end[0]
        running.append(_Running(run, query, sink,
                                TriggerLimit.of(*trigger_limits(stream, throttle, None))))
        for pipeline in pending:
            catching_up[pipeline.name] = rollout.CatchUp(
                pipeline, lambda s=sink: s.written_through)
            progress(f"{pipeline.name}: version {pipeline.version} is computed from the "
                     f"arrival log beside the serving one (cohort {run.checkpoint}); readers "
                     "switch to it once it has caught up")

    for run in plan_runs(stream, pipelines, buckets, checkpoint, progress):
        start(run)
    selected = None if pipelines is None else {p.name for p in pipelines}
    watcher = _RegistryWatcher(stream, selected, registry_poll_s, progress) \
        if checkpoint is None else None
    last_said = time.monotonic()
    backpressure = IngestBackpressure(stream.arrival_log)
    behind = False
    held_said = time.monotonic() - 10
    try:
        while not stop.is_set():
            failed = next((r for r in running if not r.query.isActive), None)
            if failed is not None:
                break
            if max_batches and sum(len(r.sink.batches) for r in running) >= max_batches:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            held = behind and backpressure.holds((r.sink.written_through, r.limit)
                                                 for r in running)
            if not held:
                behind = ingest_once()  # an idle ingest says so every 10 s (ingest_progress)
            elif time.monotonic() - held_said >= 10:
                progress(f"live {stream.name}: ingest waits: every query has its next "
                         "micro-batch waiting in the arrival log")
                held_said = time.monotonic()
            for name, catch_up in list(catching_up.items()):
                if catch_up.check(arrival_end[0]):
                    done = rollout.switch_if_pending(catch_up.pipeline,
                                                     "caught up with the live position")
                    if isinstance(done, rollout.Waiting):
                        if catch_up.waiting != done.reason:  # said once, then on each change
                            catch_up.waiting = done.reason
                            progress(done.said())
                        continue
                    del catching_up[name]
                    if done is not None:
                        report.note(done)
                        progress(done.said())
                        if on_switch is not None:
                            on_switch(done)
                elif time.monotonic() - last_said >= 10:
                    progress(catch_up.progress_text(arrival_end[0]))
            if catching_up and time.monotonic() - last_said >= 10:
                last_said = time.monotonic()
            if watcher is not None:
                for run in watcher.new_runs(running, buckets):
                    start(run)
            if held or not behind:
                stop.wait(poll_s)
        for each in running:
            raise_failure(each.query)
        for each in running:
            _drain(each.query)
    finally:
        for each in running:
            each.query.stop()  # between micro-batches or not, the checkpoint keeps its place
        for each in running:
            each.sink.close()
            report.add(each.sink)
    progress(f"live {stream.name} stopped: {report.summary()}; {report.ingested} records "
             "ingested")
    return report


class _RegistryWatcher:
    """Inside the long-running job, every ``poll_s``: the pipelines folder read again, and a
    cohort started for every live version no running cohort computes (a new pipeline, a
    changed one's pending version). A file that does not parse is said once; the running
    versions go on."""

    def __init__(self, stream: Stream, selected: set[str] | None, poll_s: float,
                 progress: Callable[[str], None]) -> None:
        self.stream = stream
        self.selected = selected
        self.poll_s = poll_s
        self.progress = progress
        self.last = time.monotonic()
        self.said: str | None = None

    def new_runs(self, running: list[_Running], buckets: int) -> list[CohortRun]:
        if time.monotonic() - self.last < self.poll_s:
            return []
        self.last = time.monotonic()
        from jobs.config.registry import load_platform

        try:
            platform = load_platform(self.stream.settings)
            mine = [p for p in platform.pipelines_of(self.stream.name)
                    if self.selected is None or p.name in self.selected]
            computed = {member_of(p) for r in running for p in r.run.pipelines}
            fresh = [p for p in mine
                     if any(member_of(v) not in computed for v in versions.live_versions(p))]
            if not fresh:
                return []
            wanted = live_pipelines(self.stream, fresh, self.progress)
        except SettingsError as error:
            if str(error) != self.said:
                self.progress(f"{error} (the running versions go on; fix the file)")
                self.said = str(error)
            return []
        new = [p for p in wanted if member_of(p) not in computed]
        if not new:
            return []
        now = int(time.time() * 1000)
        return [CohortRun(cohorts.new_checkpoint(self.stream, map(member_of, new), buckets,
                                                 now), new, True)]
