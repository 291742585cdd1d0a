"""A Kafka stream's ingest: the records its topics received since the last batch, read by
Spark's own Kafka source, appended to the arrival log and quarantine exactly once.

Each batch is planned in the ingest log before anything is read (as a landing stream's is):
per partition, the offsets ``[from, until)`` it takes, ``from`` being where the last batch
stopped (a new partition: its first offset). The appends carry Delta transaction ids, and
the commit is written after them; a crash anywhere re-runs exactly the planned offsets, so
every ``(topic, partition, offset)`` below the committed position is in the arrival log or
the quarantine once (docs/contract.md, section 8).

Records are ordered as landing lines are, the partition standing for the file and the offset
for the line: by ``(ingest clock, partition, offset)``, the ingest clock being the record's
Kafka timestamp, kept non-decreasing within its partition, so a partition's records arrive in
offset order. Each record's value is parsed by the landing rules (the same fast parser), its
watermark computed per Kafka partition (the stream's strategy, minimum over the non-idle
partitions, as Flink's ``KafkaSource``). The arrival log and the quarantine gain
``kafka_partition``, ``kafka_offset`` (and the log ``kafka_timestamp``).

Offsets that retention deleted before they were read stop the ingest with the partitions and
offsets named (:class:`KafkaDataLossError`); with ``accept_data_loss: true`` each gap is
recorded as a quarantine row (``offsets_lost``) and counted, never skipped silently.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.config.streams import Stream
from jobs.console.progress import heartbeat
from jobs.store import fast_writes
from jobs.store.storage import Files
from jobs.streams.batch_cut import kept_lines, unread_after
from jobs.streams.checks import check_stream_mark
from jobs.streams.kafka.admin import PartitionOffsets, partition_offsets
from jobs.streams.kafka.values import python_verdicts, with_jvm_events
from jobs.streams.landing.batch import (
    _CLOCK_RANGE,
    BAD_INGEST_STAMP,
    IngestRules,
    PartRead,
    arrival_rows,
)
from jobs.streams.landing.fast_parse import ParsedLines
from jobs.streams.landing.log import Commit, IngestLog
from jobs.streams.landing.parsing import (
    ParsedEvent,
    Rejection,
)
from jobs.streams.log_rows import ARRIVAL_SCHEMA, QUARANTINE_SCHEMA, arrival_table, quarantine_table
from jobs.streams.report import IngestReport, until_caught_up
from operators.pipeline import WatermarkSpec
from operators.time import MIN_WATERMARK
from operators.watermarks import initial_snapshot

OFFSETS_LOST = "offsets_lost"
PARTITION_CLOCKS = "partition_clocks"
"""The start state's entry of each partition's ingest clock after the batch before."""
_NO_CLOCK = np.iinfo(np.int64).min
KAFKA_ARRIVAL_SCHEMA = pa.schema([*ARRIVAL_SCHEMA, pa.field("kafka_partition", pa.int32()),
                                  pa.field("kafka_offset", pa.int64()),
                                  pa.field("kafka_timestamp", pa.timestamp("us", tz="UTC"))])
KAFKA_QUARANTINE_SCHEMA = pa.schema([*QUARANTINE_SCHEMA,
                                     pa.field("kafka_partition", pa.int32()),
                                     pa.field("kafka_offset", pa.int64())])


class KafkaDataLossError(RuntimeError):
    """Offsets were deleted by retention before ingest read them."""


@dataclass(frozen=True)
class KafkaPlan:
    batch_id: int
    ranges: dict[str, list[int]]
    """``"topic-partition"`` -> ``[from, until)`` offsets."""
    first_seq: int
    planned_at_ms: int
    start_state: dict[str, Any] = field(default_factory=dict)
    gaps: dict[str, list[int]] = field(default_factory=dict)
    """Offsets retention deleted before they were read (``accept_data_loss``)."""
    partitions: list[str] = field(default_factory=list)
    """Every partition of the topics when planned: one that has delivered nothing yet still
    holds the watermark back (at its minimum) until it goes idle, as in Flink."""
    capped: list[str] = field(default_factory=list)
    """The partitions whose range stopped short of what the topic held: the batch ends where
    their unread records could begin (:func:`cut_short`)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KafkaPlan:
        return cls(**json.loads(text))

    @property
    def records(self) -> int:
        return sum(until - start for start, until in self.ranges.values())


class KafkaIngestLog(IngestLog):
    def plan(self, batch_id: int) -> KafkaPlan:  # type: ignore[override]
        from jobs.store import storage

        return KafkaPlan.from_json(self.files.read_text(
            storage.join(self.plans_folder, f"{batch_id:020d}.json")))


def _split(name: str) -> tuple[str, int]:
    topic, _, number = name.rpartition("-")
    return topic, int(number)


class KafkaIngestor:
    """Ingest a Kafka stream batch after batch (``run_once``), like the landing ingestor."""

    def __init__(self, spark: SparkSession | None, stream: Stream,
                 progress: Callable[[str], None] = print,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 patient: bool = False) -> None:
        self.patient = patient
        """The long-running job's: a broker that stops answering is waited for (said every
        10 s), and the batch it interrupted runs again once it is back; otherwise an error."""
        self._said_waiting = 0.0
        self.stream = stream
        self.kafka = stream.spec.kafka
        self.settings = settings = stream.settings
        self.progress = progress
        self.clock_ms = clock_ms
        self._spark = spark
        self.log = KafkaIngestLog(Files(spark), stream.folder)
        self.rules = IngestRules("wall", settings.max_future_ms, settings.max_past_ms,
                                 settings.max_line_bytes, stream.watermark)
        self.plans: dict[int, KafkaPlan] = {}
        self.capped = False
        """Whether the last planned batch left records of the topics for the next one."""
        self.commits: dict[int, Commit] = {}
        self.catching_up = False
        self.stop_at: dict[str, int] | None = None
        """During a catch-up, each partition's high offset when its first batch was planned:
        records that come after it are left to the next ingest (a partition added since, all
        of its records)."""
        check_stream_mark(stream, remember=True)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from jobs.session import spark_for

            self._spark = spark_for(self.settings)
        return self._spark

    # -- planning --------------------------------------------------------------------------------

    def _refresh(self) -> None:
        for batch_id in self.log.batch_ids(self.log.plans_folder):
            if batch_id not in self.plans:
                self.plans[batch_id] = self.log.plan(batch_id)
        for batch_id in self.log.batch_ids(self.log.commits_folder):
            if batch_id not in self.commits:
                self.commits[batch_id] = self.log.commit(batch_id)

    def _positions(self) -> dict[str, int]:
        """Per partition, the offset the next batch starts at: where the last batch stopped
        reading it (its plan's end, or where its commit says the batch's cut left some of
        the range for the next one; a pending plan is run again before any other)."""
        positions: dict[str, int] = {}
        for batch_id in sorted(self.plans):
            commit = self.commits.get(batch_id)
            consumed = commit.consumed if commit is not None else {}
            for name, (_, until) in self.plans[batch_id].ranges.items():
                positions[name] = consumed.get(name, until)
            for name, (_, until) in self.plans[batch_id].gaps.items():
                positions[name] = max(positions.get(name, until), until)
        return positions

    def _plan(self) -> tuple[KafkaPlan | None, bool]:
        self._refresh()
        pending = sorted(set(self.plans) - set(self.commits))
        if pending:
            self.capped = True  # records may have come after it: plan again once it is done
            return self.plans[pending[0]], True
        positions = self._positions()
        ranges: dict[str, list[int]] = {}
        gaps: dict[str, list[int]] = {}
        lost = []
        known = self._cut_off(partition_offsets(self.kafka.servers(),
                                                self.kafka.client_settings(), self.kafka.topics))
        waiting = sum(1 for part in known if part.high > positions.get(part.name, part.low))
        share = -(-self.kafka.max_records_per_batch // max(1, waiting))  # rounded up
        for part in known:
            start = positions.get(part.name)
            if start is None:
                start = part.low  # a partition not read before (new, or a new stream)
            elif start < part.low:
                lost.append(f"{part.name} offsets {start}..{part.low - 1}")
                gaps[part.name] = [start, part.low]
                start = part.low
            if part.high > start:
                ranges[part.name] = [start, min(part.high, start + share)]
        if lost and not self.kafka.accept_data_loss:
            raise KafkaDataLossError(
                f"stream {self.stream.name}: retention deleted records before ingest read "
                f"them: {'; '.join(lost)}. Nothing was ingested; to go on past the gap and "
                "record it, set kafka.accept_data_loss: true in "
                f"{self.stream.path}")
        capped = sorted(part.name for part in known
                        if part.name in ranges and ranges[part.name][1] < part.high)
        self.capped = bool(capped)
        if not ranges and not gaps:
            return None, False
        batch_id = max(self.plans) + 1 if self.plans else 0
        first_seq, state = 0, {}
        if self.commits:
            last = max(self.commits)
            first_seq = self.plans[last].first_seq + self.commits[last].records
            state = self.commits[last].end_state
        plan = KafkaPlan(batch_id, ranges, first_seq, self.clock_ms(), state, gaps,
                         sorted(part.name for part in known), capped)
        try:
            self.log.create_plan(plan)  # type: ignore[arg-type]
        except FileExistsError:
            from jobs.streams.landing.ingestor import ConcurrentIngestError

            raise ConcurrentIngestError(
                f"another ingest planned batch {batch_id} of stream {self.stream.name} at the "
                "same time; it will ingest those records") from None
        self.plans[batch_id] = plan
        return plan, False

    def _cut_off(self, known: list[PartitionOffsets]) -> list[PartitionOffsets]:
        """The partitions as a catch-up's first plan saw them: a topic that keeps filling
        does not keep a one-shot ingest going (Spark's ``Trigger.AvailableNow`` stops at
        the offsets it found at its start too)."""
        if not self.catching_up:
            return known
        if self.stop_at is None:
            self.stop_at = {part.name: part.high for part in known}
        return [replace(part, high=max(part.low, min(part.high, self.stop_at.get(part.name,
                                                                                 part.low))))
                for part in known]

    # -- one batch -------------------------------------------------------------------------------

    def run_once(self) -> IngestReport:
        """One batch (a planned one a crash left first); the long-running job's ingestor
        waits out a broker that does not answer."""
        if not self.patient:
            return self._run_once()
        try:
            report = self._run_once()
        except Exception as error:  # noqa: BLE001 - only a broker's absence is waited out
            if not _broker_gone(error):
                raise
            if time.monotonic() - self._said_waiting >= 10:
                self.progress(f"ingest {self.stream.name}: the Kafka broker at "
                              f"{self.kafka.bootstrap_servers} does not answer; waiting for "
                              "it (nothing is lost: the interrupted batch runs again)")
                self._said_waiting = time.monotonic()
            return IngestReport(batch_id=None, stream=self.stream.name)
        self._said_waiting = 0.0
        return report

    def run_until_caught_up(self, check_stop: Callable[[], None] | None = None
                            ) -> IngestReport:
        """Batches until the topics hold nothing more than the last one took (a backlog
        larger than ``max_records_per_batch`` takes several), reported as one; records
        produced after its first batch was planned wait for the next ingest; ``check_stop``
        runs between batches and raises to stop there."""
        self.catching_up, self.stop_at = True, None
        try:
            return until_caught_up(self, files=max, check_stop=check_stop)
        finally:
            self.catching_up, self.stop_at = False, None

    def _run_once(self) -> IngestReport:
        started = time.monotonic()
        plan, resumed = self._plan()
        if plan is None:
            report = IngestReport(batch_id=None, stream=self.stream.name)
            self.progress(report.summary().replace("no new landing files",
                                                   "no new records in the topics"))
            return report
        if resumed:
            self.progress(f"ingest {self.stream.name}: batch {plan.batch_id} was planned but not "
                          "committed (a crash); running it again")
        with heartbeat(self.progress, f"ingest {self.stream.name}: batch {plan.batch_id}, "
                                      f"{plan.records} records"):
            read_started = time.monotonic()
            reads, consumed = cut_short(plan, self._reads(plan))
            parsed = time.monotonic()
            gaps = [self._gap(plan, name, span) for name, span in sorted(plan.gaps.items())]
            rows = arrival_rows(gaps + reads, start_state(plan, reads, self.rules.watermark),
                                self.rules)
            rows.end_state[PARTITION_CLOCKS] = partition_clocks(plan, reads)
            self._append(plan, rows)
        commit = Commit(plan.batch_id, rows.records, rows.quarantined, rows.end_state,
                        rows.reasons, rows.watermark_ms, consumed)
        self.log.write_commit(commit)
        self.commits[plan.batch_id] = commit
        report = IngestReport(plan.batch_id, len(plan.ranges), commit.records,
                              commit.quarantined, commit.reasons, resumed, commit.watermark_ms,
                              first_seq=plan.first_seq, seconds=time.monotonic() - started,
                              timings={"read": parsed - read_started,
                                       "append": time.monotonic() - parsed},
                              stream=self.stream.name)
        self.progress(report.summary().replace(" files,", " partitions,"))
        return report

    def _reads(self, plan: KafkaPlan) -> list[PartRead]:
        """The planned records as parts (one per partition, in offset order), parsed."""
        reads: list[PartRead] = []
        if not plan.ranges:
            return reads
        by_topic: dict[str, dict[str, list[int]]] = {}
        for name, (start, until) in plan.ranges.items():
            topic, number = _split(name)
            by_topic.setdefault(topic, {})[str(number)] = [start, until]
        options = {f"kafka.{k}": v for k, v in self.kafka.client_settings().items()}
        frame = (self.spark.read.format("kafka")
                 .option("kafka.bootstrap.servers", self.kafka.servers())
                 # a stable group id lets each executor reuse its consumers from one batch to
                 # the next (Spark's pool is keyed by it); records are read by assignment,
                 # so the group never rebalances, and no offset is committed to it
                 .option("kafka.group.id", f"eventtime-ingest-{self.stream.name}")
                 .option("assign", json.dumps({t: sorted(int(p) for p in parts)
                                               for t, parts in by_topic.items()}))
                 .option("startingOffsets", json.dumps(
                     {t: {p: span[0] for p, span in parts.items()}
                      for t, parts in by_topic.items()}))
                 .option("endingOffsets", json.dumps(
                     {t: {p: span[1] for p, span in parts.items()}
                      for t, parts in by_topic.items()}))
                 .options(**options).load())
        frame = self._parsed(frame.select("topic", "partition", "offset", "key", "value",
                                          F.unix_millis("timestamp").alias("stamp")))
        try:
            table = frame.toArrow()
        except Exception as error:
            if "Some data may have been lost" not in str(error):
                raise
            spans = "; ".join(f"{name} offsets {start}..{until - 1}"
                              for name, (start, until) in sorted(plan.ranges.items()))
            raise KafkaDataLossError(
                f"stream {self.stream.name}: batch {plan.batch_id} was planned for {spans}, and "
                "retention deleted some of them before they were read. Nothing of the batch "
                "was ingested; its plan is kept so that a restart reads exactly those offsets "
                "(a batch cannot change once planned). Restore the topic's records, or start "
                "the stream again from a new home") from None
        table = table.sort_by([("topic", "ascending"), ("partition", "ascending"),
                               ("offset", "ascending")])
        # where (topic, partition) changes in the sorted rows: one part per partition
        topics = table.column("topic").combine_chunks().dictionary_encode()
        codes = topics.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        numbers = table.column("partition").to_numpy().astype(np.int64)
        changes = np.flatnonzero((np.diff(codes) != 0) | (np.diff(numbers) != 0)) + 1
        bounds = [0, *changes.tolist(), table.num_rows]
        for begin, end in itertools.pairwise(bounds):
            if begin < end:
                reads.append(self._part(plan, topics.dictionary[codes[begin]].as_py(),
                                        int(numbers[begin]), table.slice(begin, end - begin)))
        return reads

    def _parsed(self, frame):
        """The values parsed in the JVM where they are plain good events (jobs.streams.kafka
        values.py), the raw bytes of every other record for the landing rules in Python. A
        punctuated watermark reads a field of its own, so its values are all read in Python."""
        if self.rules.punctuation_field is not None:
            return frame.select("topic", "partition", "offset", "key", "stamp",
                                F.lit(False).alias("jvm_event"), F.col("value").alias("raw"))
        return with_jvm_events(frame, self.rules.max_line_bytes, self.kafka.key == "record_key",
                               self.kafka.event_time == "record_timestamp")

    def _part(self, plan: KafkaPlan, topic: str, number: int, part: pa.Table) -> PartRead:
        """One partition's records in offset order: those the JVM parsed as they are, the
        others by the landing rules (the event key and time taken where the stream says);
        the ingest clock is the record's timestamp, kept non-decreasing."""
        count = part.num_rows
        stamps = part.column("stamp").to_numpy()
        jvm = part.column("jvm_event").to_numpy(zero_copy_only=False).astype(bool)
        # the JVM's plain good events as columns (no Python object per record)
        keys = part.column("jvm_key").to_pylist()
        events = pc.fill_null(part.column("jvm_time_ms"), 0).to_numpy().astype(np.int64)
        values = part.column("jvm_value").to_pylist()
        texts = [text if text is not None else "" for text in
                 part.column("jvm_text").to_pylist()]
        judged: dict[int, ParsedEvent | Rejection] = {}
        others = np.flatnonzero(~jvm)
        if len(others):  # only these rows' values and keys come to Python
            for i, (text, verdict) in zip(others.tolist(), python_verdicts(
                    part.column("raw").take(others).to_pylist(),
                    part.column("key").take(others).to_pylist(),
                    stamps[others].tolist(), self.rules, self.kafka.key,
                    self.kafka.event_time), strict=True):
                texts[i], judged[i] = text, verdict
        parsed = ParsedLines(jvm.copy(), keys, events, values,
                             {name: [None] * count for name in self.rules.parser.extras},
                             judged)
        for i, verdict in judged.items():
            if type(verdict) is ParsedEvent:
                parsed.is_event[i] = True
                parsed.keys[i], parsed.events[i], parsed.values[i] = \
                    verdict.key, verdict.event_time_ms, verdict.value
                for name, column in parsed.extras.items():
                    column[i] = verdict.fields.get(name)
        limit = plan.planned_at_ms + self.rules.max_future_ms
        trusted = (stamps >= _CLOCK_RANGE[0]) & (stamps <= _CLOCK_RANGE[1])
        for i in np.flatnonzero(trusted & (stamps > limit) & parsed.is_event).tolist():
            parsed.reject(i, Rejection(BAD_INGEST_STAMP,
                                       f"the record's timestamp {int(stamps[i])} is more than "
                                       "max_future_ms after the wall clock when the batch "
                                       f"was planned ({plan.planned_at_ms})",
                                       int(parsed.events[i])))
        used = trusted & (stamps <= limit)
        # non-decreasing in offset order, from where the partition's clock stood after the
        # batch before (so a batch cut short gives each record the clock one batch would); a
        # record without a usable stamp takes the previous record's clock, else the next
        # one's, else the batch's planning time
        running = np.maximum.accumulate(np.where(used, stamps, _NO_CLOCK))
        floor = plan.start_state.get(PARTITION_CLOCKS, {}).get(f"{topic}-{number}")
        if floor is not None:
            running = np.maximum(running, int(floor))
        first = int(stamps[used][0]) if used.any() else plan.planned_at_ms
        clocks = np.where(running == _NO_CLOCK, first, running)
        # a partition's clocks never fall: what follows the part starts no earlier
        return PartRead(f"{topic}/{number}", f"{topic}-{number}",
                        part.column("offset").to_numpy().astype(np.int64), texts,
                        clocks.astype(np.int64), parsed, stamps.tolist(), stamped=True)

    def _gap(self, plan: KafkaPlan, name: str, span: list[int]) -> PartRead:
        topic, number = _split(name)
        lost = Rejection(OFFSETS_LOST, f"{name}: offsets {span[0]}..{span[1] - 1} "
                                       f"({span[1] - span[0]} records) were deleted by "
                                       "retention before ingest read them "
                                       "(kafka.accept_data_loss)")
        return PartRead.from_verdicts(f"{topic}/{number}", name, [span[0]], [""],
                                      [plan.planned_at_ms], [lost], [None])

    # -- appending -------------------------------------------------------------------------------

    def _append(self, plan: KafkaPlan, rows) -> None:
        good, bad = rows.good, rows.bad
        count = len(good["key"])
        offsets = np.asarray(good["line_number"], dtype="int64")
        good_numbers = _partition_numbers(good["source_partition"])
        stamp = [s if s is not None else 0 for s in good["stamp_ms"]]
        arrival = arrival_table({**good, "line_number": np.zeros(count, dtype="int32")},
                                plan)  # type: ignore[arg-type]
        arrival = (arrival.append_column("kafka_partition", good_numbers)
                   .append_column("kafka_offset", pa.array(offsets))
                   .append_column("kafka_timestamp",
                                  pa.array(np.asarray(stamp, dtype="int64") * 1000,
                                           pa.timestamp("us", tz="UTC"))))
        bad_numbers = _partition_numbers(bad["source_partition"])
        bad_offsets = np.asarray(bad["line_number"], dtype="int64")
        quarantine = quarantine_table(
            {**bad, "line_number": np.zeros(len(bad["reason"]), dtype="int32")}, plan,
            self.settings.time_zone)  # type: ignore[arg-type]
        quarantine = (quarantine.append_column("kafka_partition", bad_numbers)
                      .append_column("kafka_offset", pa.array(bad_offsets)))
        for data, name, app_id in ((arrival, tables.ARRIVAL_LOG, "ingest-arrival-log"),
                                   (quarantine, tables.QUARANTINE, "ingest-quarantine")):
            location = self.stream.table_path(name)
            if data.num_rows or not fast_writes.table_exists(location):
                fast_writes.append(location, data, app_id=app_id, version=plan.batch_id,
                                   encodings=tables.ENCODINGS.get(name))


def start_state(plan: KafkaPlan, reads: list[PartRead], watermark: WatermarkSpec) -> dict:
    """The plan's start state, every known partition in its watermarks: one that has not
    delivered a record yet enters at its minimum, active from the batch's first ingest clock
    (so it goes idle after ``idle_timeout`` of ingest clock without records)."""
    state = json.loads(json.dumps(plan.start_state))  # a copy
    watermarks = state.setdefault("watermarks", {"combined": MIN_WATERMARK,
                                                 "last_tick": None, "partitions": {}})
    clocks = [int(read.clocks[0]) for read in reads if len(read)]
    first = max(min(clocks) if clocks else plan.planned_at_ms,
                state.get("last_ingest_ms", MIN_WATERMARK))
    initial = initial_snapshot(watermark)
    for name in plan.partitions:
        watermarks["partitions"].setdefault(name, [initial, first])
    return state


def partition_clocks(plan: KafkaPlan, reads: list[PartRead]) -> dict[str, int]:
    """Each partition's ingest clock after the batch (its last record's), for the next."""
    clocks = dict(plan.start_state.get(PARTITION_CLOCKS, {}))
    clocks.update({read.partition: int(read.clocks[-1]) for read in reads if len(read)})
    return clocks


def cut_short(plan: KafkaPlan, reads: list[PartRead]) -> tuple[list[PartRead], dict[str, int]]:
    """The reads a batch keeps (jobs.streams.batch_cut: every batch a prefix of the backlog's
    arrival order), and each partition's offset the next batch starts at where the batch
    left some of its planned records."""
    unread = [unread_after(read) for read in reads if read.partition in plan.capped]
    kept = kept_lines(reads, unread)
    consumed = {read.partition: int(read.numbers[count])
                for read, count in zip(reads, kept, strict=True) if count < len(read)}
    return [read.head(count) for read, count in zip(reads, kept, strict=True)], consumed


def _broker_gone(error: BaseException) -> bool:
    """Whether an error is the broker not answering (planning's, or Spark's Kafka source's
    timeouts), which the long-running job waits out."""
    from jobs.streams.kafka.admin import BrokerUnreachable

    if isinstance(error, BrokerUnreachable):
        return True
    text = str(error)
    return any(word in text for word in ("TimeoutException", "Timed out waiting",
                                         "Connection refused", "disconnected", "BrokerNotAvailable",
                                         "No resolvable bootstrap urls"))


def ingest_kafka(spark: SparkSession | None, stream: Stream,
                 progress: Callable[[str], None] = print) -> IngestReport:
    return KafkaIngestor(spark, stream, progress).run_once()


def _partition_numbers(names: Any) -> pa.Array:
    """Each record's partition number, from its source partition (``<topic>-<number>``, an
    Arrow column or a list): read once per partition, not once per record."""
    column = names if isinstance(names, pa.Array | pa.ChunkedArray) \
        else pa.array(names, pa.string())
    encoded = pc.dictionary_encode(column)
    numbers = [int(name.rpartition("-")[2]) for name in encoded.dictionary.to_pylist()]
    return pa.array(numbers, pa.int32()).take(encoded.indices)
