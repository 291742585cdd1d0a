"""Append new landing files to the arrival log (bronze) and bad lines to quarantine.

This is the one sequential step of the platform: it fixes each record's arrival position
(``ingest_time``, ``arrival_seq``) and the watermark in force at its arrival, once and for all.
Everything downstream is a pure function of what it writes.

Crash safety: a batch is first *planned* in the ingest log (``log.py`` here: its file parts,
exclusive, so two ingests never plan the same batch); its appends carry Delta transaction ids
(``txnVersion`` = batch id); only then is it *committed* in the log. A crash anywhere re-runs
exactly the planned batch, and an append that had already landed is skipped by Delta, so
nothing is lost or doubled. Under a backlog the next batch is parsed while one is appended
(``read_ahead.py``), and planned only once that one has committed. A batch that leaves
bytes of a partition for later ends where that partition's unread lines could begin in the
arrival order (jobs.streams.landing.cut), so the arrival log is the same however a backlog
is batched.

Landing files are immutable, and ingest enforces it rather than trusting it: a known file that
grew with its earlier content unchanged has its new lines ingested (the numbering goes on); a
known file whose earlier content changed has every line quarantined as
``file_changed_after_ingest`` (nothing is skipped, nothing ingested twice); a file with the very
content of one ingested before is quarantined once as ``duplicate_file``. Each is counted in
the report and said in the progress output.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future

from pyspark.sql import SparkSession

from jobs import tables
from jobs.config.streams import Stream
from jobs.console.progress import heartbeat
from jobs.session import shipping
from jobs.store import fast_writes, storage
from jobs.store.storage import Files
from jobs.streams.checks import check_stream_mark
from jobs.streams.landing import on_spark, part_pool
from jobs.streams.landing.batch import (
    BatchRows,
    IngestRules,
    PartRead,
    arrival_rows,
)
from jobs.streams.landing.cut import apply_consumed, cut_batch, first_stamp
from jobs.streams.landing.folder import (
    EMPTY_SHA256,
    FileFacts,
    LandedFile,
    LandingFolder,
    file_facts,
    list_landing,
)
from jobs.streams.landing.gc_pause import cycle_collector_paused
from jobs.streams.landing.log import (
    APPENDED,
    CHANGED,
    DUPLICATE,
    NEW,
    REST,
    Commit,
    FilePart,
    IngestLog,
    Plan,
)
from jobs.streams.landing.read_ahead import ReadAhead
from jobs.streams.log_rows import arrival_table, quarantine_table
from jobs.streams.report import IngestReport, until_caught_up

__all__ = ["ConcurrentIngestError", "Ingestor", "LandingReadError", "StaleWarehouseError",
           "ingest"]


class ConcurrentIngestError(RuntimeError):
    """Two ingests ran at once; the other one owns the batch (nothing was written twice)."""


class LandingReadError(RuntimeError):
    """A landing file or folder cannot be read: the batch is not planned (nothing is written),
    rather than skipping the file and losing its lines without a word."""


class StaleWarehouseError(RuntimeError):
    """The warehouse was written by an older version of the platform."""




class Ingestor:
    """Ingest batch after batch in one process; the ingest log is read once and then kept.

    ``run_once`` plans and appends one batch (or resumes a crashed one) and returns its report.
    Plans written by another process meanwhile are picked up before each batch.
    """

    def __init__(self, spark: SparkSession | None, stream: Stream,
                 progress: Callable[[str], None] = print,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.spark = spark
        self.clock_ms = clock_ms
        """The wall clock a plan records (lines without a collector stamp arrive then)."""
        self.stream = stream
        self.settings = settings = stream.settings
        self.progress = progress
        self.landing = LandingFolder(stream.landing)
        self.log = IngestLog(Files(spark), stream.folder)
        self.rules = IngestRules(settings.ingest_clock, settings.max_future_ms,
                                 settings.max_past_ms, settings.max_line_bytes,
                                 stream.watermark, settings.native_scan)
        self.known: dict[str, FilePart] = {}
        """name -> the file as last planned (its size, modification time and hash), or as far
        as a batch's cut took it."""
        self.cut: set[str] = set()
        """The files whose known part is a prefix a batch's cut left the rest of."""
        self.by_hash: dict[str, str] = {}
        self.verified: dict[str, tuple[int, int]] = {}
        """name -> (size, mtime) seen unchanged since its last part (not re-hashed)."""
        self.plans: dict[int, Plan] = {}
        self.commits: dict[int, Commit] = {}
        self.capped = False
        """Whether the last planned batch left landing bytes for the next one."""
        self.capped_partitions: dict[str, list | None] = {}
        """The source partitions whose landed bytes the last chosen batch did not all take,
        each with its first line left (``[stamp, file, line]``, ``None`` when that line has
        no usable stamp)."""
        self.read_ahead = ReadAhead()
        """The next batch, parsed while this one is appended (read_ahead.py)."""
        self.landed_before_ns: int | None = None
        """During a catch-up (:meth:`run_until_caught_up`): the files modified after it started
        wait for the next ingest, so that a folder that keeps filling does not keep it going."""
        self._check_not_stale()
        check_stream_mark(stream, remember=True)

    # -- the log ---------------------------------------------------------------------------------

    def _check_not_stale(self) -> None:
        """A warehouse of the single-pipeline layout (tables at its top) is not read or
        migrated: say so rather than ingest beside it."""
        earlier = storage.join(self.settings.warehouse, tables.ARRIVAL_LOG, "_delta_log")
        if Files(self.spark).exists(earlier):
            raise StaleWarehouseError(
                f"{self.settings.warehouse} was written by an earlier version of the platform "
                "(one pipeline, its tables at the top of the warehouse); start from a new "
                "PLATFORM_HOME or PLATFORM_WAREHOUSE: streams now live in "
                "<warehouse>/streams/<name>/ and pipelines in <warehouse>/pipelines/<name>/")

    def _refresh(self) -> None:
        """The plans and commits other runs wrote, taken in batch order (a batch's commit
        before the next plan: a file cut short is known up to what that batch kept, and the
        next batch's part of it then supersedes that)."""
        plans = set(self.log.batch_ids(self.log.plans_folder))
        commits = set(self.log.batch_ids(self.log.commits_folder))
        for batch_id in sorted(plans | commits):
            if batch_id in plans and batch_id not in self.plans:
                self._remember(self.log.plan(batch_id))
            if batch_id in commits and batch_id not in self.commits:
                self.commits[batch_id] = commit = self.log.commit(batch_id)
                if batch_id in self.plans:  # a cut file: known up to what the batch kept
                    apply_consumed(self.known, self.cut, self.plans[batch_id],
                                   commit.consumed)

    def _remember(self, plan: Plan) -> None:
        self.plans[plan.batch_id] = plan
        for part in plan.files:
            self.known[part.name] = part
            self.cut.discard(part.name)
            self.verified.pop(part.name, None)
            if part.kind == NEW and part.sha256 != EMPTY_SHA256:
                self.by_hash.setdefault(part.sha256, part.name)

    # -- where the bytes are read --------------------------------------------------------------

    def _on_spark(self, size: int) -> bool:
        """Whether Spark's executors read and parse ``size`` landing bytes rather than this
        process (PLATFORM_INGEST_READER; both give the very same rows)."""
        reader = self.settings.ingest_reader
        if reader != "auto":
            return reader == "spark"
        return (shipping.is_cluster(self.settings.spark_master)
                and not storage.is_local(self.stream.landing)
                and size >= self.settings.ingest_spark_min_bytes)

    def _processes(self, size: int) -> int:
        """How many workers (processes or threads, PLATFORM_INGEST_PARSE_WORKERS) parse a
        batch of ``size`` landing bytes (PLATFORM_INGEST_PROCESSES; 0: the ingest thread)."""
        if size < self.settings.ingest_processes_min_bytes:
            return 0
        setting = self.settings.ingest_processes
        return part_pool.default_processes() if setting == "auto" else setting

    def _spark(self) -> SparkSession:
        if self.spark is None:  # a JVM-free ingest meets a batch big enough for the cluster
            from jobs.session import spark_for

            self.spark = spark_for(self.settings)
        return self.spark

    # -- planning --------------------------------------------------------------------------------

    def _pending(self) -> Plan | None:
        pending = sorted(set(self.plans) - set(self.commits))
        return self.plans[pending[0]] if pending else None

    def _next_position(self) -> tuple[int, int, dict]:
        """(next batch id, next arrival position, state) after the committed batches."""
        if not self.commits:
            return (max(self.plans) + 1 if self.plans else 0), 0, {}
        last = max(self.commits)
        plan, commit = self.plans[last], self.commits[last]
        return max(self.plans) + 1, plan.first_seq + commit.records, commit.end_state

    def _needs_look(self, landed: LandedFile) -> bool:
        """Whether a landed file may hold bytes no batch took (a new or changed file)."""
        part = self.known.get(landed.name)
        return part is None or (landed.size, landed.mtime_ns) not in (
            (part.size, part.mtime_ns), self.verified.get(landed.name))

    def _first_landed(self, looks: list[LandedFile]) -> tuple[list[LandedFile], bool]:
        """The files a batch looks at: those that landed first (by modification time) within
        the stream's ``max_bytes_per_batch`` of new bytes, at least one file with new bytes,
        in name order as ever; and whether any were left for the next batch. A batch that
        Spark's executors read (PLATFORM_INGEST_READER) takes them all, as it always did."""
        if self.landed_before_ns is not None:
            looks = [f for f in looks if f.mtime_ns <= self.landed_before_ns]
        sizes = {f.name: self._new_bytes(f) for f in looks}
        if self._on_spark(sum(sizes.values())):  # the executors hold the batch, not the driver
            self.capped_partitions = {}
            return looks, False
        limit = self.stream.spec.max_bytes_per_batch
        taken: set[str] = set()
        total = 0
        for landed_file in sorted(looks, key=lambda f: (self._waiting_since(f), f.name)):
            new = sizes[landed_file.name]
            if total and total + new > limit:  # files bringing no new bytes do not count
                break
            taken.add(landed_file.name)
            total += new
        left = self._unread_lines([f for f in looks if f.name not in taken and sizes[f.name]])
        stamped = [at for at in left.values() if at is not None]
        if stamped:
            # the batch also reads the first line left in the arrival order (its file, beyond
            # the cap): its cut then keeps at least that line
            taken.add(min(stamped)[1])
            left = self._unread_lines([f for f in looks
                                       if f.name not in taken and sizes[f.name]])
        self.capped_partitions = left
        return [f for f in looks if f.name in taken], len(taken) < len(looks)

    def _unread_lines(self, left: list[LandedFile]) -> dict[str, list | None]:
        """Each partition with files the batch leaves, and the first line of them in the
        partition's order (its first such file by name, from its first new byte): where the
        batch is cut (jobs.streams.landing.cut)."""
        first: dict[str, LandedFile] = {}
        for landed in sorted(left, key=lambda f: f.name):
            first.setdefault(landed.name.split("/", 1)[0], landed)
        clock_field = self.rules.clock_field
        unread: dict[str, list | None] = {}
        for partition, landed in sorted(first.items()):
            part = self.known.get(landed.name)
            grew = part is not None and landed.size >= part.size
            offset, line = (part.size, part.lines + 1) if grew else (0, 1)
            stamp = None if clock_field is None else first_stamp(
                self.landing, landed.name, offset, clock_field, self.rules.max_line_bytes,
                self.clock_ms() + self.rules.max_future_ms)
            unread[partition] = None if stamp is None else [stamp, landed.name, line]
        return unread

    def _waiting_since(self, landed: LandedFile) -> int:
        """When a file's new bytes may have begun to land: a new file's modification time; a
        known file that grew, its modification time when a batch last took it (every
        append moves its time on, so under a backlog it would otherwise stay behind the
        files landing after it, its first new lines waiting longer and longer)."""
        part = self.known.get(landed.name)
        return part.mtime_ns if part is not None else landed.mtime_ns

    def _new_bytes(self, landed: LandedFile) -> int:
        """The bytes of a landed file no batch took: the growth of a known file, else all."""
        part = self.known.get(landed.name)
        return landed.size - part.size if part is not None and landed.size >= part.size \
            else landed.size

    def _part_for(self, landed: LandedFile, facts: FileFacts) -> FilePart | None:
        """The part of a landed file a new batch takes, or None when nothing is new."""
        part = self.known.get(landed.name)
        shape = {"lines": facts.lines, "complete": facts.complete}
        if part is None:
            same = self.by_hash.get(facts.sha256) if facts.sha256 != EMPTY_SHA256 else None
            if same is not None:
                return FilePart(landed.name, landed.size, landed.mtime_ns, facts.sha256,
                                DUPLICATE, same_as=same, **shape)
            return FilePart(landed.name, landed.size, landed.mtime_ns, facts.sha256, NEW,
                            **shape)
        unchanged_prefix = landed.size >= part.size and facts.prefix_sha256 == part.sha256
        if unchanged_prefix and landed.size == part.size:  # touched, not changed
            self.verified[landed.name] = (landed.size, landed.mtime_ns)
            return None
        if unchanged_prefix and part.complete and part.kind != DUPLICATE:
            kind = REST if landed.name in self.cut else APPENDED
            return FilePart(landed.name, landed.size, landed.mtime_ns, facts.sha256, kind,
                            offset=part.size, first_line=part.lines + 1, **shape)
        return FilePart(landed.name, landed.size, landed.mtime_ns, facts.sha256, CHANGED,
                        same_as=f"{landed.name} was {part.size} bytes (sha256 {part.sha256[:12]}) "
                                f"when ingested, now {landed.size} bytes with other content",
                        **shape)

    def _facts(self, looks: list[LandedFile]) -> dict[str, FileFacts]:
        """The facts of the files to look at, read here or by Spark's executors; a file
        removed meanwhile is left out (it had not landed after all)."""
        requests = [(f.name, f.size, self.known[f.name].size if f.name in self.known else None)
                    for f in looks]
        if self._on_spark(sum(f.size for f in looks)):
            try:
                return on_spark.file_facts(self._spark(), self.stream.landing, requests)
            except OSError as error:
                raise LandingReadError(_unreadable(error)) from None
        facts: dict[str, FileFacts] = {}
        for name, size, known_size in requests:
            try:
                facts[name] = file_facts(self.landing, name, size, known_size)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise LandingReadError(_unreadable(error)) from None
        return facts

    def _plan(self) -> tuple[Plan | None, int, bool]:
        """The batch to run, how many files wait, and whether it is a planned one that did not
        commit (a crash); else the new landing bytes."""
        self._refresh()
        pending = self._pending()
        if pending is not None:
            self.capped = True  # files may have landed after it: plan again once it is done
            return pending, 0, True
        parts, deferred = self._choose()
        if not parts:
            return None, deferred, False
        batch_id, first_seq, state = self._next_position()
        plan = Plan(batch_id, tuple(parts), first_seq, self.clock_ms(), state,
                    *self._caps())
        self._record(plan)
        return plan, deferred, False

    def _choose(self) -> tuple[list[FilePart], int]:
        """The file parts of the next batch (none when nothing new landed) and how many files
        wait to settle; ``capped`` says whether it leaves landing bytes for the batch after."""
        try:
            landed, deferred = list_landing(self.landing, self.settings.landing_settle_ms)
        except OSError as error:
            raise LandingReadError(_unreadable(error)) from None
        parts: list[FilePart] = []
        hashes: dict[str, str] = {}
        looks, self.capped = self._first_landed(
            [landed_file for landed_file in landed if self._needs_look(landed_file)])
        facts = self._facts(looks) if looks else {}
        for landed_file in looks:
            if landed_file.name not in facts:
                continue
            part = self._part_for(landed_file, facts[landed_file.name])
            if part is None:
                continue
            if part.kind == NEW and part.sha256 != EMPTY_SHA256:
                same = hashes.get(part.sha256)  # two new files with the same content
                if same is not None:
                    part = FilePart(part.name, part.size, part.mtime_ns, part.sha256, DUPLICATE,
                                    same_as=same)
                else:
                    hashes[part.sha256] = part.name
            parts.append(part)
        if not parts and self.capped:  # the files taken brought nothing (touched, or gone):
            return self._choose()  # the next ones
        return parts, deferred

    def _caps(self) -> tuple[tuple[str, ...], dict[str, list]]:
        """The chosen batch's capped partitions and their first lines left (Plan's)."""
        return (tuple(self.capped_partitions),
                {name: at for name, at in self.capped_partitions.items() if at is not None})

    def _record(self, plan: Plan) -> None:
        """``plan`` written to the ingest log (exclusively) and remembered."""
        try:
            self.log.create_plan(plan)
        except FileExistsError:
            raise ConcurrentIngestError(
                f"another ingest planned batch {plan.batch_id} at the same time; it will ingest "
                "its files, and the rest are picked up by the next ingest") from None
        self._remember(plan)

    def _parse_ahead(self, plan: Plan, rows: BatchRows) -> None:
        """When ``plan`` left landing bytes for the next batch, choose that batch and parse it
        in the background while ``plan``'s rows are appended (read_ahead.py); it is written
        to the log only after ``plan`` commits."""
        if not self.capped:
            return
        parts, deferred = self._choose()
        if not parts:
            return
        size = sum(part.size - part.offset for part in parts)
        if self._on_spark(size):  # the executors read it, planned as ever
            self.capped = True
            return
        ahead = Plan(plan.batch_id + 1, tuple(parts), plan.first_seq + rows.records,
                     self.clock_ms(), rows.end_state, *self._caps())
        self.read_ahead.start(ahead, deferred, self.capped,
                              lambda chosen: self._read(chosen, size))
        self.capped = True  # the next batch is ready

    def _planned_ahead(self) -> tuple[Plan, int, Future[list[PartRead]]] | None:
        """The batch parsed ahead, now written to the log, with its files left waiting and its
        parse; ``None`` (and the parse forgotten) when there is none, or when another
        process planned or committed meanwhile: the batch is then planned again."""
        ahead = self.read_ahead.take()
        if ahead is None:
            return None
        self._refresh()
        last_commit = max(self.commits, default=None)
        if self._pending() is not None or max(self.plans, default=-1) >= ahead.plan.batch_id \
                or (last_commit is not None and last_commit != ahead.plan.batch_id - 1):
            ahead.reads.cancel()
            return None
        self._record(ahead.plan)
        self.capped = ahead.capped
        return ahead.plan, ahead.deferred, ahead.reads

    def _read(self, plan: Plan, size: int) -> list[PartRead]:
        """The plan's parts parsed (by worker processes or threads when it is large)."""
        with cycle_collector_paused():
            return part_pool.read_parts(
                self.landing, plan, self.rules, self._processes(size), self.progress,
                threads=part_pool.in_threads(self.settings.ingest_parse_workers, self.rules))

    # -- running a batch -------------------------------------------------------------------------

    def run_once(self) -> IngestReport:
        """One batch of the landing bytes not yet in the arrival log (at most
        ``max_bytes_per_batch`` of them), or the batch a crash left planned."""
        started = time.monotonic()
        ahead = self._planned_ahead()
        if ahead is not None:
            plan, deferred, parsed = ahead
            resumed = False
        else:
            (plan, deferred, resumed), parsed = self._plan(), None
        if plan is None:
            report = IngestReport(batch_id=None, deferred=deferred, stream=self.stream.name)
            self.progress(report.summary())
            return report
        if resumed:
            self.progress(f"ingest {self.stream.name}: batch {plan.batch_id} was planned but "
                          "not committed (a crash); running it again")
        parse_started = time.monotonic()
        size = sum(part.size - part.offset for part in plan.files)
        on_executors = parsed is None and self._on_spark(size)
        try:
            with heartbeat(self.progress, f"ingest {self.stream.name}: batch {plan.batch_id}, "
                                          f"{len(plan.files)} files"):
                if on_executors:
                    commit, phases = self._run_on_spark(plan)
                else:
                    reads = parsed.result() if parsed is not None else self._read(plan, size)
                    order_started = time.monotonic()
                    reads, consumed = cut_batch(self.landing, plan, reads)
                    with cycle_collector_paused():
                        rows = arrival_rows(reads, plan.start_state, self.rules)
                    del reads
                    append_started = time.monotonic()
                    # what the next batch takes of the files cut short
                    apply_consumed(self.known, self.cut, plan, consumed)
                    self._parse_ahead(plan, rows)
                    self._append(plan, rows)
                    commit = Commit(plan.batch_id, rows.records, rows.quarantined, rows.end_state,
                                    rows.reasons, rows.watermark_ms, consumed)
                    phases = {"parse": order_started - parse_started,
                              "order": append_started - order_started,
                              "append": time.monotonic() - append_started}
            self.timings = {"plan": parse_started - started, **phases}
            self.log.write_commit(commit)
        except BaseException:
            self.read_ahead.drop()  # chosen after a batch that did not commit
            raise
        self.commits[plan.batch_id] = commit
        kinds = [p.kind for p in plan.files]
        report = IngestReport(plan.batch_id, len(plan.files), commit.records,
                              commit.quarantined, commit.reasons, resumed, commit.watermark_ms,
                              deferred, kinds.count(APPENDED), kinds.count(CHANGED),
                              plan.first_seq, time.monotonic() - started, dict(self.timings),
                              on_executors, self.stream.name)
        self.progress(report.summary())
        return report

    def run_until_caught_up(self, check_stop: Callable[[], None] | None = None
                            ) -> IngestReport:
        """Batches until the landing folder holds nothing more than the last one took (a
        backlog beyond ``max_bytes_per_batch`` takes several), reported as one; files modified
        after it started wait for the next ingest (as Spark's ``Trigger.AvailableNow``).
        ``check_stop`` runs between batches and raises to stop there."""
        self.landed_before_ns = time.time_ns()
        try:
            return until_caught_up(self, files=sum, check_stop=check_stop)
        finally:
            self.landed_before_ns = None

    def _run_on_spark(self, plan: Plan) -> tuple[Commit, dict[str, float]]:
        """Read, parse and append the batch with Spark's executors (``on_spark.py``)."""
        done = on_spark.ingest_batch(
            self._spark(), self.stream.landing, plan, self.rules, self.settings.time_zone,
            self.stream.arrival_log, self.stream.quarantine)
        return Commit(plan.batch_id, done.records, done.quarantined, done.end_state,
                      done.reasons, done.watermark_ms), done.timings

    def _append(self, plan: Plan, rows: BatchRows) -> None:
        """The batch's rows into the arrival log and quarantine, from the driver (no Spark
        job: jobs.store.fast_writes), each under the batch's transaction id; one file per table
        and batch, rows in arrival order (a stream over the log reads a commit's files in any
        order)."""
        writes = [(arrival_table(rows.good, plan), tables.ARRIVAL_LOG, "ingest-arrival-log"),
                  (quarantine_table(rows.bad, plan, self.settings.time_zone), tables.QUARANTINE,
                   "ingest-quarantine")]
        for data, name, app_id in writes:
            location = self.stream.table_path(name)
            if data.num_rows or not fast_writes.table_exists(location):
                fast_writes.append(location, data, app_id=app_id, version=plan.batch_id,
                                   encodings=tables.ENCODINGS.get(name))






def ingest(spark: SparkSession | None, stream: Stream,
           progress: Callable[[str], None] = print) -> IngestReport:
    """Ingest the stream's landing files not yet in its arrival log: one batch, or as many as
    ``max_bytes_per_batch`` makes it. ``spark`` may be None for a local warehouse (only remote
    files need the JVM's Hadoop FileSystem)."""
    return Ingestor(spark, stream, progress).run_until_caught_up()


def _unreadable(error: OSError) -> str:
    if error.filename is None:  # an object store's listing: its message names the place
        return f"cannot read the landing folder: {error}; nothing was ingested"
    return (f"cannot read the landing file {error.filename}: {error.strerror or error}; "
            "nothing was ingested (fix its permissions, then run ingest again)")











