"""Append new landing files to the arrival log (bronze) and bad lines to quarantine.

This is the one sequential step of the platform: it fixes each record's arrival position
(``ingest_time``, ``arrival_seq``) and the watermark in force at its arrival, once and for all.
Everything downstream is a pure function of what it writes.

Crash safety: a batch's file list is first written to the ingest manifest as *planned*; its
appends carry Delta transaction ids (``txnAppId``/``txnVersion`` = batch id), and only then is
the batch marked *committed*. A crash anywhere re-runs exactly the planned batch, and an append
that had already landed is skipped by Delta, so nothing is lost or doubled.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.delta_io import append_idempotent, read_table_or_none
from jobs.parsing import (
    ParsedEvent,
    Rejection,
    check_event_time_bounds,
    parse_line,
)
from jobs.settings import PlatformSettings
from operators.time import MIN_WATERMARK, parse_timestamp_ms
from operators.watermarks import ArrivalWatermarks

INVALID_UTF8 = "invalid_utf8"
BAD_INGEST_STAMP = "bad_ingest_stamp"
DUPLICATE_FILE = "duplicate_file"
_CLOCK_RANGE = (0, 253_402_300_799_999)  # 1970 .. 9999-12-31: a collector stamp we can trust


class ConcurrentIngestError(RuntimeError):
    """Two ingests ran at once; the other one owns the batch (nothing was written twice)."""


@dataclass
class IngestReport:
    batch_id: int | None
    files: int = 0
    records: int = 0
    quarantined: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    resumed: bool = False
    watermark_ms: int = MIN_WATERMARK
    deferred: int = 0
    """Files that may still be being written (no final newline, recently changed)."""

    def summary(self) -> str:
        if self.batch_id is None:
            waiting = f" ({self.deferred} still being written)" if self.deferred else ""
            return f"ingest: no new landing files{waiting}"
        verb = "re-ran planned" if self.resumed else "ingested"
        waiting = f"; {self.deferred} files still being written" if self.deferred else ""
        return (f"ingest: {verb} batch {self.batch_id}: {self.files} files, "
                f"{self.records} records, {self.quarantined} quarantined {self.reasons}"
                f"{waiting}")


@dataclass(slots=True)
class _Line:
    source_file: str
    source_partition: str
    line_number: int
    clock_ms: int | None
    text: str | None
    parsed: ParsedEvent | Rejection


@dataclass
class _Plan:
    batch_id: int
    files: list[str]
    first_seq: int
    planned_at_ms: int
    start_state: dict
    resumed: bool
    hashes: list[str] = field(default_factory=list)
    duplicates: dict[str, str] = field(default_factory=dict)
    """File -> an earlier file with the very same content: a collector delivered it twice."""
    deferred: int = 0


def landing_files(landing: Path, settle_ms: int) -> tuple[dict[str, int], int]:
    """Files a collector has finished, ``<partition>/<name>.jsonl`` -> modification time (ns)
    (``.tmp`` is in flight), and how many look half-written: a file that does not end with a
    newline and changed within ``settle_ms`` waits for a later ingest (once settled it is
    taken as it is, and a cut-off last line is quarantined as malformed). The landing sensor
    uses the same rule, so it never launches a run for a file ingest would leave."""
    if not landing.is_dir():
        return {}, 0
    finished, deferred = {}, 0
    now = time.time()
    for path in sorted(landing.glob("*/*.jsonl")):
        try:
            if not path.is_file():
                continue
            status = path.stat()
            if status.st_size and (now - status.st_mtime) * 1000 < settle_ms:
                with path.open("rb") as handle:
                    handle.seek(-1, 2)
                    if handle.read(1) != b"\n":
                        deferred += 1
                        continue
        except FileNotFoundError:  # renamed or removed while we looked
            continue
        finished[str(path.relative_to(landing))] = status.st_mtime_ns
    return finished, deferred


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _duplicates(files: list[str], hashes: list[str], known: dict[str, str]) -> dict[str, str]:
    """New files whose content an earlier file already had (empty files never duplicate)."""
    seen = dict(known)
    duplicates = {}
    for name, digest in zip(files, hashes, strict=True):
        if digest == EMPTY_SHA256:
            continue
        if digest in seen:
            duplicates[name] = seen[digest]
        else:
            seen[digest] = name
    return duplicates


def _plan(spark: SparkSession, settings: PlatformSettings) -> _Plan:
    """The batch to ingest: a planned one that did not commit (a crash), else the new landing
    files; ``batch_id`` -1 when there is nothing to do."""
    manifest = read_table_or_none(spark, settings.table_path(tables.INGEST_MANIFEST))
    rows = manifest.toPandas() if manifest is not None else pd.DataFrame(
        columns=[f.name for f in tables.INGEST_MANIFEST_SCHEMA.fields])
    if "hashes" not in rows.columns:  # a manifest from before duplicate detection
        rows["hashes"] = None
    committed = rows[rows.status == "committed"].sort_values("batch_id")
    planned = rows[rows.status == "planned"]
    pending = planned[~planned.batch_id.isin(committed.batch_id)]
    start_state: dict = {}
    first_seq = 0
    if len(committed):
        last = committed.iloc[-1]
        start_state = json.loads(last.watermark_state or "{}")
        first_seq = int(last.first_seq + last.records)
    known_hashes = {digest: name for files, hashes in zip(committed.files, committed.hashes,
                                                          strict=True)
                    if hashes is not None for name, digest in zip(files, hashes, strict=True)}
    if len(pending):
        batch = pending.sort_values("batch_id").iloc[0]
        files = list(batch.files)
        hashes = list(batch.hashes) if batch.hashes is not None else \
            [_sha256(settings.landing / f) for f in files]
        return _Plan(int(batch.batch_id), files, int(batch.first_seq), int(batch.planned_at_ms),
                     start_state, True, hashes,
                     _duplicates(files, hashes, known_hashes))
    known = {f for files in committed.files for f in files}
    landed, deferred = landing_files(settings.landing, settings.landing_settle_ms)
    landed = sorted(landed)
    new_files = [f for f in landed if f not in known]
    if not new_files:
        return _Plan(-1, [], first_seq, 0, start_state, False, deferred=deferred)
    batch_id = int(rows.batch_id.max()) + 1 if len(rows) else 0
    hashes = [_sha256(settings.landing / f) for f in new_files]
    plan = _Plan(batch_id, new_files, first_seq, int(time.time() * 1000), start_state, False,
                 hashes, _duplicates(new_files, hashes, known_hashes), deferred)
    _write_manifest(spark, settings, plan, "planned", 0, 0, None)
    recorded = (spark.read.format("delta").load(settings.table_path(tables.INGEST_MANIFEST))
                .where(f"batch_id = {batch_id} AND status = 'planned'").first())
    if list(recorded.files) != new_files or recorded.planned_at_ms != plan.planned_at_ms:
        # another ingest planned this batch first (Delta kept its manifest row, skipped ours by
        # the transaction id): it owns the batch; ours would only write rows Delta skips too
        raise ConcurrentIngestError(
            f"another ingest planned batch {batch_id} at the same time; it will ingest its "
            "files, and the rest are picked up by the next ingest")
    return plan


def _write_manifest(spark: SparkSession, settings: PlatformSettings, plan: _Plan, status: str,
                    records: int, quarantined: int, state: dict | None) -> None:
    row = [(plan.batch_id, status, plan.files, plan.first_seq, records, quarantined,
            plan.planned_at_ms, None if state is None else json.dumps(state), plan.hashes)]
    frame = spark.createDataFrame(row, tables.INGEST_MANIFEST_SCHEMA)
    append_idempotent(frame, settings.table_path(tables.INGEST_MANIFEST),
                      app_id=f"ingest-manifest-{status}", version=plan.batch_id,
                      merge_schema=True)


def _clock_of(record_clock: object) -> int | None:
    try:
        value = parse_timestamp_ms(record_clock)
    except (ValueError, OverflowError):
        return None
    return value if _CLOCK_RANGE[0] <= value <= _CLOCK_RANGE[1] else None


def _read_lines(settings: PlatformSettings, plan: _Plan) -> list[_Line]:
    clock_field = settings.ingest_clock.split(":", 1)[1] if settings.ingest_clock != "wall" \
        else None
    lines: list[_Line] = []
    stamp_limit = plan.planned_at_ms + settings.max_future_ms
    for relative in plan.files:
        partition = relative.split("/", 1)[0]
        if relative in plan.duplicates:
            # it arrived when this batch was planned; its own lines are never read
            lines.append(_Line(relative, partition, 0, plan.planned_at_ms, "", Rejection(
                DUPLICATE_FILE, f"same content as {plan.duplicates[relative]}, already "
                                "ingested; its lines are not read again")))
            continue
        raw = (settings.landing / relative).read_bytes()
        chunks = raw.split(b"\n")
        if chunks and chunks[-1] == b"":
            chunks.pop()
        file_lines: list[_Line] = []
        for number, chunk in enumerate(chunks, start=1):
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as error:
                file_lines.append(_Line(relative, partition, number, None,
                                        chunk.decode("utf-8", errors="replace"),
                                        Rejection(INVALID_UTF8, str(error)[:200])))
                continue
            if not text.strip():
                continue  # blank lines carry nothing; they are not records
            parsed = parse_line(text, settings.max_line_bytes)
            clock = None
            if clock_field is not None and isinstance(parsed, ParsedEvent):
                clock = _clock_of(parsed.fields.get(clock_field))
            elif clock_field is not None:
                clock = _clock_from_text(text, clock_field)
            if clock is not None and clock > stamp_limit:
                # a collector stamp from the future would drag the ingest clock (and with it
                # idleness and interval ticks, hence watermarks) forward for every later record
                if isinstance(parsed, ParsedEvent):
                    parsed = Rejection(BAD_INGEST_STAMP,
                                       f"{clock_field}={clock} is more than max_future_ms after "
                                       f"the wall clock when the batch was planned "
                                       f"({plan.planned_at_ms})", parsed.event_time_ms)
                clock = None
            file_lines.append(_Line(relative, partition, number, clock, text, parsed))
        _fill_clock(file_lines, plan.planned_at_ms)
        lines.extend(file_lines)
    return lines


def _clock_from_text(text: str, clock_field: str) -> int | None:
    """A rejected line may still carry the collector's stamp (say, a bad value)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _clock_of(record.get(clock_field)) if isinstance(record, dict) else None


def _fill_clock(lines: list[_Line], default_ms: int) -> None:
    """Lines without a stamp take the previous line's, else the next one's, else the batch's."""
    last = None
    for line in lines:
        if line.clock_ms is None:
            line.clock_ms = last
        else:
            last = line.clock_ms
    following = None
    for line in reversed(lines):
        if line.clock_ms is None:
            line.clock_ms = following if following is not None else default_ms
        else:
            following = line.clock_ms


def ingest(spark: SparkSession, settings: PlatformSettings,
           progress: Callable[[str], None] = print) -> IngestReport:
    """Ingest the landing files not yet in the arrival log, as one batch."""
    plan = _plan(spark, settings)
    if plan.batch_id < 0:
        report = IngestReport(batch_id=None, deferred=plan.deferred)
        if plan.deferred:
            progress(report.summary())
        return report
    progress(f"ingest: batch {plan.batch_id}, {len(plan.files)} files"
             f"{' (resuming a planned batch)' if plan.resumed else ''}")
    lines = _read_lines(settings, plan)
    lines.sort(key=lambda line: (line.clock_ms, line.source_file, line.line_number))

    watermarks = ArrivalWatermarks.restore(settings.pipeline.watermark,
                                           plan.start_state.get("watermarks"))
    last_ingest = plan.start_state.get("last_ingest_ms", MIN_WATERMARK)
    good: dict[str, list] = {name: [] for name in (
        "source_partition", "source_file", "line_number", "key", "event_time_ms",
        "ingest_time_ms", "watermark_ms", "value", "payload")}
    bad: dict[str, list] = {name: [] for name in (
        "source_partition", "source_file", "line_number", "ingest_time_ms", "reason", "detail",
        "event_time_ms", "raw_line")}
    for line in lines:
        # only a good record moves the ingest clock: a quarantined line never moves a watermark
        clock = max(last_ingest, line.clock_ms)
        parsed = line.parsed
        if isinstance(parsed, ParsedEvent):
            parsed = check_event_time_bounds(parsed.event_time_ms, clock,
                                             settings.max_future_ms, settings.max_past_ms) or parsed
        if isinstance(parsed, Rejection):
            for name, value in (("source_partition", line.source_partition),
                                ("source_file", line.source_file),
                                ("line_number", line.line_number),
                                ("ingest_time_ms", clock), ("reason", parsed.reason),
                                ("detail", parsed.detail), ("event_time_ms", parsed.event_time_ms),
                                ("raw_line", (line.text or "")[:10_000])):
                bad[name].append(value)
            continue
        last_ingest = clock
        good["watermark_ms"].append(watermarks.watermark_for(line.source_partition, last_ingest))
        watermarks.observe(line.source_partition, parsed.event_time_ms, last_ingest,
                           parsed.fields)
        for name, value in (("source_partition", line.source_partition),
                            ("source_file", line.source_file), ("line_number", line.line_number),
                            ("key", parsed.key), ("event_time_ms", parsed.event_time_ms),
                            ("ingest_time_ms", last_ingest), ("value", parsed.value),
                            ("payload", line.text)):
            good[name].append(value)

    records = len(good["key"])
    arrivals = _arrival_frame(spark, good, plan)
    rejects = _quarantine_frame(spark, bad, plan)
    # one file per batch, rows in arrival_seq order: a stream over the log then reads it in
    # arrival order (Delta serves commits in order, but a commit's files in any order)
    append_idempotent(arrivals.coalesce(1), settings.table_path(tables.ARRIVAL_LOG),
                      app_id="ingest-arrival-log", version=plan.batch_id)
    append_idempotent(rejects.coalesce(1), settings.table_path(tables.QUARANTINE),
                      app_id="ingest-quarantine", version=plan.batch_id)
    state = {"watermarks": watermarks.snapshot(), "last_ingest_ms": last_ingest}
    _write_manifest(spark, settings, plan, "committed", records, len(bad["reason"]), state)
    reasons = pd.Series(bad["reason"], dtype="object").value_counts().to_dict()
    report = IngestReport(plan.batch_id, len(plan.files), records, len(bad["reason"]),
                          {str(k): int(v) for k, v in sorted(reasons.items())}, plan.resumed,
                          watermarks.current, plan.deferred)
    progress(report.summary())
    return report


def _with_timestamps(frame: DataFrame, columns: dict[str, str]) -> DataFrame:
    for target, source in columns.items():
        frame = frame.withColumn(target, F.timestamp_millis(F.col(source)))
    return frame


def _arrival_frame(spark: SparkSession, good: dict[str, list], plan: _Plan) -> DataFrame:
    count = len(good["key"])
    pdf = pd.DataFrame(good)
    pdf.insert(0, "arrival_seq", pd.Series(range(plan.first_seq, plan.first_seq + count),
                                           dtype="int64"))
    pdf.insert(1, "ingest_batch", pd.Series([plan.batch_id] * count, dtype="int64"))
    for name in ("line_number",):
        pdf[name] = pdf[name].astype("int32")
    for name in ("event_time_ms", "ingest_time_ms", "watermark_ms"):
        pdf[name] = pdf[name].astype("int64")
    schema = ("arrival_seq long, ingest_batch long, source_partition string, source_file string, "
              "line_number int, key string, event_time_ms long, ingest_time_ms long, "
              "watermark_ms long, value decimal(38,9), payload string")
    frame = spark.createDataFrame(pdf, schema)
    frame = _with_timestamps(frame, {"event_time": "event_time_ms",
                                     "ingest_time": "ingest_time_ms"})
    frame = frame.withColumn("watermark", F.when(F.col("watermark_ms") != MIN_WATERMARK,
                                                 F.timestamp_millis("watermark_ms")))
    return frame.select(*tables.ARRIVAL_LOG_SCHEMA.fieldNames())


def _quarantine_frame(spark: SparkSession, bad: dict[str, list], plan: _Plan) -> DataFrame:
    count = len(bad["reason"])
    pdf = pd.DataFrame(bad)
    pdf.insert(0, "ingest_batch", pd.Series([plan.batch_id] * count, dtype="int64"))
    pdf["line_number"] = pdf["line_number"].astype("int32")
    pdf["ingest_time_ms"] = pdf["ingest_time_ms"].astype("int64")
    pdf["event_time_ms"] = pdf["event_time_ms"].astype("Int64")
    schema = ("ingest_batch long, source_partition string, source_file string, line_number int, "
              "ingest_time_ms long, reason string, detail string, event_time_ms long, "
              "raw_line string")
    frame = spark.createDataFrame(pdf, schema)
    frame = _with_timestamps(frame, {"ingest_time": "ingest_time_ms"})
    frame = frame.withColumn("ingest_date", F.to_date("ingest_time"))
    return frame.select(*tables.QUARANTINE_SCHEMA.fieldNames())
