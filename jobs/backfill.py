"""Backfills: recompute a range of days of the windowed tables from the arrival log.

A backfill replaces exactly the day partitions it computed in the results, late-records and
metrics tables (and the window assignments of pipelines the operator library runs per key), so
a repeated or concurrent backfill leaves the tables as one clean run would. It computes from one
pinned snapshot of the log and checks afterwards that nothing reaching its days arrived
meanwhile (see :func:`run_backfill`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import tables
from jobs.config.registry import Pipeline
from jobs.console.progress import heartbeat
from jobs.lateness import assigned
from jobs.lateness.aggregates import QUARANTINE_INGEST
from jobs.lifecycle import effective_from, versions
from jobs.store import fast_writes
from jobs.store.delta_io import read_table_or_none, replace_range
from jobs.store.table_stats import (
    column_ranges,
    latest_version,
    rows_meeting,
    rows_written,
    tagged_version,
)
from jobs.tables.days import DAY_MS, could_reach, reach_bounds
from jobs.tables.window_tables import WindowOutputs
from jobs.windows import compute_windows, driver_tables


@dataclass
class BackfillReport:
    first_day: str
    last_day: str
    results: int
    late: int
    metrics: list[dict]
    pipeline: str = ""
    passes: int = 1
    """How many times the range was computed: more than once when the arrival log received
    records that reach the range while the backfill ran (see :func:`run_backfill`)."""

    @property
    def wrote_nothing(self) -> bool:
        """No record and no quarantined line reaches the range."""
        return not self.results and not self.late and not any(
            m.get("on_time") or m.get("late_within_lateness") or m.get("dropped_late")
            or m.get("quarantined") for m in self.metrics)

    def summary(self) -> str:
        """What this backfill wrote (its own commits' counts, jobs/delta_io.rows_written)."""
        said = f"backfill {self.pipeline}" if self.pipeline else "backfill"
        if self.wrote_nothing:
            return (f"{said}: nothing to do for {self.first_day}..{self.last_day} (no "
                    "arrivals in range)")
        again = f" (computed {self.passes} times: ingest ran meanwhile)" \
            if self.passes > 1 else ""
        return (f"{said} {self.first_day}..{self.last_day}: wrote {self.results} result "
                f"rows, {self.late} late records, {len(self.metrics)} days of metrics{again}")


MAX_BACKFILL_PASSES = 4


class BackfillRaceError(RuntimeError):
    """The arrival log kept receiving records for the backfilled days during every pass."""


def run_backfill(spark: SparkSession, pipeline: Pipeline, first_day: str | None = None,
                 last_day: str | None = None, progress: Callable[[str], None] = print
                 ) -> BackfillReport:
    """Recompute the pipeline's output partitions ``[first_day, last_day]`` from its stream's
    arrival log and replace exactly those partitions in its results, late-records and metrics
    tables.

    A backfill computes from the log as it was when it started, then replaces its days. If
    ingest appended records reaching those days meanwhile, the live job may already have
    written what they changed (a later pane, a late record) and the replacement would erase
    it, for good: the live job does not write it again. So after writing, the backfill looks
    for such records and, if there are any, computes the range again from the newer log.
    Rows the live job derived from the records the backfill saw are the rows the backfill
    writes (determinism), so erasing those loses nothing."""
    log_path = pipeline.table_path(tables.ARRIVAL_LOG)
    if read_table_or_none(spark, log_path) is None:
        raise FileNotFoundError(f"no arrival log at {log_path}: run ingest first")
    if pipeline.recorded:
        versions.record(pipeline)
    else:
        said = versions.reconcile(pipeline).said(pipeline)
        if said:
            progress(said)
    kept = effective_from.kept_before(pipeline)
    if kept is not None and (first_day is None or first_day < kept.isoformat()):
        if last_day is not None and last_day < kept.isoformat():
            report = BackfillReport(str(first_day), str(last_day), 0, 0, [], pipeline.name)
            progress(f"{pipeline.name}: effective_from: {kept}: the days before it keep the "
                     "rows of the version this one replaced; nothing to backfill")
            return report
        progress(f"{pipeline.name}: effective_from: {kept}: computing from {kept} on (the "
                 "days before it keep the rows of the version this one replaced)")
        first_day = kept.isoformat()
    if pipeline.spec.is_process:
        from jobs.process.backfill import run_process_backfill

        return run_process_backfill(spark, pipeline, first_day, last_day, progress)
    if nothing_to_backfill(pipeline, first_day, last_day):
        report = BackfillReport(str(first_day), str(last_day), 0, 0, [], pipeline.name)
        progress(report.summary())
        return report
    for attempt in range(1, MAX_BACKFILL_PASSES + 1):
        # one snapshot for the whole pass: an unpinned Delta DataFrame reads the newest
        # version at each action, so two actions of one pass could see two logs
        version = latest_version(log_path)
        arrivals = spark.read.format("delta").option("versionAsOf", version).load(log_path)
        # the bounds the pass needs, from the snapshot's file statistics (no Spark job; a
        # Spark job when a file has none)
        ranges = column_ranges(log_path, ("arrival_seq", "watermark_ms", "event_time_ms"),
                               version)
        seen = ranges["arrival_seq"][1] if ranges else \
            arrivals.agg(F.max("arrival_seq")).first()[0]
        report = _backfill_pass(spark, pipeline, arrivals, version, first_day, last_day,
                                progress, ranges)
        report.passes = attempt
        if not _reaching_since(spark, pipeline, version, seen, report):
            progress(report.summary())  # the command line's last line, a Dagster run's log
            return report
        progress(f"{pipeline.name}: the arrival log received records reaching "
                 f"{report.first_day} .. {report.last_day} during the backfill; computing the "
                 "range again")
    raise BackfillRaceError(
        f"the arrival log received records reaching {report.first_day} .. {report.last_day} "
        f"during each of {MAX_BACKFILL_PASSES} passes; the tables hold the last pass, which "
        "may have replaced rows the live job wrote from the newest records. Run the backfill "
        "again when ingest is quieter (or with the live job stopped).")


def _reaching_since(spark: SparkSession, pipeline: Pipeline, version: int, seen: int | None,
                    report: BackfillReport) -> bool:
    """Whether the arrival log received records past ``seen`` (the largest arrival position
    of its ``version`` the pass read) that can reach the pass's days. The log's version
    alone answers the usual case, an unchanged log, without a Spark job."""
    log_path = pipeline.table_path(tables.ARRIVAL_LOG)
    if latest_version(log_path) == version:
        return False
    newer = spark.read.format("delta").load(log_path).where(
        F.col("arrival_seq") > F.lit(-1 if seen is None else seen))
    reaching = newer.where(could_reach(report.first_day, report.last_day,
                                        pipeline.spec.window))
    return bool(reaching.limit(1).count())


def _concurrently(writes: dict[str, Callable[[], int]]) -> dict[str, int]:
    """Each table's replacement as its own job, all at once. The tables are independent
    (each replacement is idempotent on its own: a re-run after a failure between any two
    leaves the same tables), and a small range's writes are mostly driver-side waiting (Delta
    snapshot, planning, commit) that overlaps: measured on 2,000 records with a warm session,
    the three writes took 4.3 s together instead of 5.1 s one after the other. The Spark
    jobs share the session's cores as any two jobs do."""
    with ThreadPoolExecutor(max_workers=len(writes), thread_name_prefix="backfill-write") \
            as pool:
        futures = {name: pool.submit(write) for name, write in writes.items()}
        return {name: future.result() for name, future in futures.items()}


def _backfill_pass(spark: SparkSession, pipeline: Pipeline, arrivals: DataFrame,
                   version: int, first_day: str | None, last_day: str | None,
                   progress: Callable[[str], None],
                   ranges: dict[str, tuple] | None = None) -> BackfillReport:
    quarantine_path = pipeline.table_path(tables.QUARANTINE)
    quarantine = read_table_or_none(spark, quarantine_path)
    if ranges is not None and quarantine is not None:
        # the quarantine's ingest days from its file statistics too (a full backfill covers
        # them: jobs.lateness.aggregates.quarantine_days)
        ingested = column_ranges(quarantine_path, ("ingest_time_ms",))
        if ingested is not None:
            ranges = {**ranges, QUARANTINE_INGEST: ingested["ingest_time_ms"]}
    outputs = compute_windows(arrivals, quarantine, pipeline.spec, pipeline.time_zone,
                              first_day, last_day, ranges)
    progress(f"{pipeline.name}: computing partitions {outputs.first_day} .. {outputs.last_day}")
    # no cache of the assigned rows: re-reading columnar Parquet is cheaper than serialising
    # them (measured: sliding windows 1M events, 10.1 s without a cache, 15.4 s with one)
    tag = f"backfill-{uuid.uuid4().hex}"
    days = dict(column="window_end_date", first=outputs.first_day, last=outputs.last_day)

    def through_spark(name: str, frame: DataFrame) -> Callable[[], int]:
        def write() -> int:
            path = pipeline.table_path(name)
            replace_range(frame, path, partition_by="window_end_date", tag=tag, **days)
            return said(name, rows_written(path, tag))
        return write

    def said(name: str, count: int) -> int:
        progress(f"{pipeline.name}: wrote {count} rows to {name}")
        return count

    writes = {tables.WINDOW_RESULTS: through_spark(tables.WINDOW_RESULTS, outputs.results)}
    if _in_driver(pipeline, version, outputs.first_day, outputs.last_day):
        # one task writes both tables; it returns the late rows, which the report counts
        writes[tables.LATE_RECORDS] = lambda: _driver_writes(pipeline, version, outputs, said)
    else:
        writes[tables.LATE_RECORDS] = through_spark(tables.LATE_RECORDS, outputs.late)
        writes[tables.LATE_DATA_METRICS] = through_spark(tables.LATE_DATA_METRICS,
                                                         outputs.metrics)
    written: dict[str, int] = {}
    try:
        with heartbeat(progress, f"{pipeline.name}: computing and writing {outputs.first_day} .. "
                                 f"{outputs.last_day}"):
            if outputs.keeps_assignments:
                emitted = outputs.materialise()
                writes.pop(tables.LATE_DATA_METRICS, None)  # written with the assignments
                write_metrics = through_spark(tables.LATE_DATA_METRICS, outputs.metrics)
                if emitted <= DRIVER_ASSIGNMENTS:
                    writes[tables.WINDOW_ASSIGNMENTS] = lambda: _driver_assignments_write(
                        pipeline, outputs, said)
                else:
                    write_assignments = through_spark(tables.WINDOW_ASSIGNMENTS,
                                                      outputs.assigned)

                    def assignments_then_metrics() -> int:
                        count = write_assignments()
                        if count <= driver_tables.DRIVER_RECORDS:
                            _assigned_metrics_write(pipeline, tag, outputs, said)
                        else:
                            write_metrics()
                        return count

                    writes[tables.WINDOW_ASSIGNMENTS] = assignments_then_metrics
            written.update(_concurrently(writes))
    finally:
        outputs.release()
    metrics = written_metrics(pipeline.table_path(tables.LATE_DATA_METRICS), outputs.first_day,
                              outputs.last_day)
    return BackfillReport(outputs.first_day, outputs.last_day, written[tables.WINDOW_RESULTS],
                          written[tables.LATE_RECORDS], metrics, pipeline.name)


DRIVER_ASSIGNMENTS = 2_000_000
"""The most rows (panes, late rows, assignments) a keyed backfill computed whose assignments
the driver takes to write them and count their metrics itself (about 100 bytes each in
Arrow). Past it Spark writes the assignments, and the driver reads them back for the metrics
(Spark computes those too past ``driver_tables.DRIVER_RECORDS``)."""


def _driver_assignments_write(pipeline: Pipeline, outputs: WindowOutputs,
                              said: Callable[[str, int], int]) -> int:
    """The assignments taken to the driver as Arrow, written through ``deltalake`` (as the
    live sink writes them) and counted into the metrics at once, beside Spark's writes of
    the results and late records: written by Spark first and read back, they held up every
    other write of a sessions backfill."""
    schema = fast_writes.arrow_schema(tables.WINDOW_ASSIGNMENTS_SCHEMA)
    data = outputs.assigned.toArrow().select(schema.names).cast(schema)
    _replace_days(pipeline, tables.WINDOW_ASSIGNMENTS, data, outputs, said)
    metrics = assigned.metrics_of_assignments(
        data.to_batches(),  # the backfill's days only (WindowOutputs.assigned)
        pipeline.table_path(tables.QUARANTINE), pipeline.time_zone, outputs.first_day,
        outputs.last_day, fast_writes.arrow_schema(outputs.metrics.schema))
    _replace_days(pipeline, tables.LATE_DATA_METRICS, metrics, outputs, said)
    return data.num_rows


def _replace_days(pipeline: Pipeline, name: str, data: pa.Table, outputs: WindowOutputs,
                  said: Callable[[str, int], int]) -> int:
    """The table's days of the backfill replaced by ``data`` in one commit through
    ``deltalake`` (rows the driver computed), and said; the rows written."""
    fast_writes.replace_range(pipeline.table_path(name), data, column="window_end_date",
                              first=outputs.first_day, last=outputs.last_day,
                              partition_by=["window_end_date"])
    return said(name, data.num_rows)


def _assigned_metrics_write(pipeline: Pipeline, tag: str, outputs: WindowOutputs,
                            said: Callable[[str, int], int]) -> int:
    """The metrics of a pipeline that keeps its assignments, computed in the driver from the
    ``window_assignments`` rows this backfill just wrote (jobs.windows.driver_tables)."""
    path = pipeline.table_path(tables.WINDOW_ASSIGNMENTS)
    data = assigned.assigned_metrics(
        path, tagged_version(path, tag), pipeline.table_path(tables.QUARANTINE),
        pipeline.time_zone, outputs.first_day, outputs.last_day,
        fast_writes.arrow_schema(outputs.metrics.schema))
    return _replace_days(pipeline, tables.LATE_DATA_METRICS, data, outputs, said)


def _in_driver(pipeline: Pipeline, version: int, first_day: str, last_day: str) -> bool:
    """Whether the driver computes the late records and metrics (jobs.windows
    driver_tables.py): standard windows, a range of at most ``DRIVER_RECORDS`` log records
    by the snapshot's file statistics."""
    if not pipeline.spec.is_standard_window:
        return False
    records = rows_meeting(pipeline.table_path(tables.ARRIVAL_LOG), "event_time_ms",
                           *reach_bounds(first_day, last_day, pipeline.spec.window), version)
    return records is not None and records <= driver_tables.DRIVER_RECORDS


def _driver_writes(pipeline: Pipeline, version: int, outputs: WindowOutputs,
                   said: Callable[[str, int], int]) -> int:
    """The late records and metrics computed in the driver, each table's days replaced in one
    commit through ``deltalake``; returns the late rows written."""
    found = driver_tables.late_and_metrics(pipeline.table_path(tables.ARRIVAL_LOG), version,
                             pipeline.table_path(tables.QUARANTINE), pipeline.spec,
                             pipeline.time_zone, outputs.first_day, outputs.last_day,
                             fast_writes.arrow_schema(outputs.metrics.schema))
    for name, data in ((tables.LATE_RECORDS, found.late),
                       (tables.LATE_DATA_METRICS, found.metrics)):
        _replace_days(pipeline, name, data, outputs, said)
    return found.late.num_rows


def written_metrics(path: str, first_day: str, last_day: str) -> list[dict]:
    """The metrics table's rows of ``[first_day, last_day]`` by day, read in the driver (no
    Spark job): the report's figures are what the table holds."""
    day = pc.field("window_end_date")
    rows = fast_writes.read_columns(path, None, (day >= dt.date.fromisoformat(first_day))
                                    & (day <= dt.date.fromisoformat(last_day))).to_pylist()
    return sorted(rows, key=lambda row: row["window_end_date"])


def nothing_to_backfill(pipeline: Pipeline, first_day: str | None,
                        last_day: str | None) -> bool:
    """True only when a backfill of ``[first_day, last_day]`` would certainly write nothing
    and erase nothing, judged from Delta's file statistics alone: no arrival can have a window
    ending in the range (a day of margin, as :func:`jobs.tables.days.could_reach`), no quarantined
    line was ingested on those days, and no output table holds a row in them. Then the
    command can say so at once instead of after Spark's start-up and a pass over the log
    (``--from 2030-01-01``: the issue's three minutes for nothing). Unknown means False."""
    from jobs.store.table_stats import file_bounds, partition_values

    window = pipeline.spec.window
    if window is None or not first_day or not last_day or window.gap_field:
        return False
    first, last = dt.date.fromisoformat(first_day), dt.date.fromisoformat(last_day)
    epoch = dt.date(1970, 1, 1)
    reach = window.size_ms or window.gap_ms or 0
    low = (first - epoch).days * DAY_MS - DAY_MS - reach
    high = (last - epoch).days * DAY_MS + 2 * DAY_MS
    arrivals = file_bounds(pipeline.table_path("arrival_log"), "event_time_ms")
    if arrivals is None or any(lo <= high and hi >= low for lo, hi in arrivals):
        return False
    margin = dt.timedelta(days=1)
    quarantined = file_bounds(pipeline.table_path("quarantine"), "ingest_date")
    if quarantined is None or any(lo <= last + margin and hi >= first - margin
                                  for lo, hi in quarantined):
        return False
    for name in ("window_results", "late_records", "late_data_metrics", "window_assignments"):
        days = partition_values(pipeline.table_path(name), "window_end_date")
        if days is None or any(first <= dt.date.fromisoformat(str(day)) <= last
                               for day in days):
            return False
    return True
