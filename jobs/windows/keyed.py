"""Windowed outputs through the operator library, one key at a time.

Spark's expressions cannot replay a session window (sessions merge as records arrive, and a
record late for its own session may still bridge two live ones), a count or delta trigger, an
evictor or a continuous trigger. For those pipelines the backfill runs the very runtime the live
stream runs (:class:`jobs.runtime.key_runner.KeyRunner`) over each key's whole history in
arrival order (jobs.runtime.key_partitions: one Python call per partition), then fires the
key's timers at the log's last recorded watermark, which is where the live stream's final
``AvailableNow`` batch fires them. Keys are independent, so Spark spreads them over its
cores; there is no replay of micro-batches.

Late-data metrics need every record's fate in every window it reached, which only the operator
knows here (the window a record joins depends on what arrived before it). The runtime therefore
emits one *assignment* row per (record, window) (``fate``: on time, late within lateness,
dropped), kept in the ``window_assignments`` table; per-day metrics are a function of that
table, so the live stream, which appends to it batch by batch, and the backfill, which replaces
a range of it, compute them identically.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.lateness.aggregates import day_metrics, quarantine_days
from jobs.runtime import INPUT_COLUMNS, check_runnable, plain_sessions
from jobs.runtime.key_partitions import (
    map_keys,
    map_keys_to_arrow,
    map_whole_keys_to_arrow,
)
from jobs.runtime.key_runner import KeyRunner, arrow_schema, output_schema
from jobs.tables.days import spanning, window_end_date
from jobs.tables.window_tables import WindowOutputs, assignment_rows, late_rows, pane_results
from operators.pipeline import PipelineSpec
from operators.time import MIN_WATERMARK


def _key_function(spec: PipelineSpec, log_watermark: int
                  ) -> Callable[[str, pd.DataFrame], list[dict]]:
    def run_key(key: str, frame: pd.DataFrame) -> list[dict]:
        return KeyRunner(spec, record_assignments=True).history(key, frame, log_watermark)

    return run_key


def emitted_rows(arrivals: DataFrame, spec: PipelineSpec, log_watermark: int) -> DataFrame:
    """Panes (the latest per key and window), late rows and assignment rows of every key;
    straight into Arrow where the rows' values allow (:func:`arrow_schema`). Sessions' plain
    groups are computed over whole columns (jobs.runtime.plain_sessions)."""
    columns, run_key = arrivals.select(*INPUT_COLUMNS), _key_function(spec, log_watermark)
    schema = arrow_schema(spec)
    if schema is None:
        return map_keys(columns, "key", run_key, KeyRunner(spec).frame, output_schema(spec))
    if plain_sessions.computes_plain_groups(spec):
        return map_whole_keys_to_arrow(
            columns, "key", partial(plain_sessions.rows, spec=spec, log_watermark=log_watermark,
                                    schema=schema, run_key=run_key), output_schema(spec))
    return map_keys_to_arrow(columns, "key", run_key, output_schema(spec), schema)


def compute_keyed_windows(arrivals: DataFrame, quarantine: DataFrame | None, spec: PipelineSpec,
                          time_zone: str = "UTC", first_day: str | None = None,
                          last_day: str | None = None,
                          log_ranges: dict[str, tuple] | None = None) -> WindowOutputs:
    """Results, late records, metrics and assignments for the windows whose end day is within
    ``[first_day, last_day]`` (all days when omitted: those windows end on and those lines
    were quarantined on), from the operator library per key.

    The emitted rows are persisted (every output derives from them, and computing them runs
    Python per record); :meth:`WindowOutputs.release` frees them. ``log_ranges``: the log's
    ``(min, max)`` per column when known from file statistics (its last watermark without a
    Spark job).
    """
    check_runnable(spec)
    log_watermark = log_ranges["watermark_ms"][1] if log_ranges else \
        arrivals.agg(F.max("watermark_ms")).first()[0]
    emitted = emitted_rows(arrivals, spec,
                           log_watermark if log_watermark is not None else MIN_WATERMARK)
    emitted = (emitted.withColumn("window_end_date",
                                  window_end_date(F.col("window_end_ms"), time_zone))
               .persist(StorageLevel.MEMORY_AND_DISK))
    if first_day is None or last_day is None:
        bounds = emitted.agg(F.min("window_end_date"), F.max("window_end_date")).first()
        windows = (str(bounds[0]), str(bounds[1])) if bounds[0] else None
        first, last = spanning(windows, quarantine_days(quarantine, time_zone, log_ranges))
        first_day, last_day = first_day or first, last_day or last
    in_range = emitted.where(F.col("window_end_date").between(first_day, last_day))
    results = pane_results(in_range.where(F.col("kind") == "pane").drop("window_end_date"),
                           [a.name for a in spec.aggregates], time_zone)
    late = late_rows(in_range.where(F.col("kind") == "late").drop("window_end_date"), time_zone)
    assignments = assignment_rows(in_range.drop("window_end_date"), time_zone)
    metrics = day_metrics(assignments.withColumnRenamed("fate", "_class"), quarantine,
                          time_zone, first_day, last_day)
    return WindowOutputs(results, late, metrics, first_day, last_day, assignments,
                         persisted=emitted)
