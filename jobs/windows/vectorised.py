"""Standard windows from the arrival log with Spark's own expressions: no Python per record.

For tumbling or sliding windows with the event-time trigger and built-in aggregates, every pane
the window operator would emit is a closed-form function of the arrival log, because each
record carries the watermark in force when it arrived (docs/semantics.md):

- a record is dropped as late for a window iff ``max_timestamp + lateness <= watermark``;
- the on-time pane fires once a recorded watermark reaches ``max_timestamp``; it holds the
  records that arrived before (``watermark < max_timestamp``), and is the only ON_TIME pane;
- each record arriving later but within lateness fires a LATE pane (the window's first pane
  too, when no record arrived on time: Beam's PaneInfo);
- once a recorded watermark reaches ``max_timestamp + lateness`` the cleanup timer emits the
  closing pane (with lateness 0 the on-time pane is that pane).

So the latest pane per key and window is one ``groupBy`` over Spark's own expressions and the
log's last watermark (:func:`pane_fields` states the rule once; the live stream applies the same
rule to its incremental state, jobs.live.standard). That is what lets a backfill of any
range equal the live stream and run at plain Spark's speed.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import tables
from jobs.lateness.aggregates import day_metrics, quarantine_days
from jobs.tables.days import could_reach, day_of, spanning, window_end_date
from jobs.tables.window_tables import WindowOutputs
from operators.build import build_assigner
from operators.numbers import SPARK_TYPE
from operators.pipeline import AggregateSpec, PipelineSpec, WindowSpec
from operators.time import MIN_WATERMARK
from operators.window_operator import DROPPED, LATE_WITHIN, ON_TIME, ON_TIME_CLASS


def slide_ms(window: WindowSpec) -> int:
    return window.slide_ms if window.type == "sliding" else window.size_ms


def assign_windows(arrivals: DataFrame, window: WindowSpec) -> DataFrame:
    """Add ``window_start_ms``/``window_end_ms``: one row per (record, window), as Flink's
    ``TumblingEventTimeWindows``/``SlidingEventTimeWindows`` assign them."""
    size, slide, offset = window.size_ms, slide_ms(window), window.offset_ms
    t = F.col("event_time_ms")
    last_start = t - F.pmod(t - F.lit(offset), F.lit(slide))
    if window.type == "sliding":
        # starts last_start, last_start - slide, ... while start > t - size
        count = (size + slide - 1) // slide
        arrivals = (arrivals
                    .withColumn("_k", F.explode(F.sequence(F.lit(0), F.lit(count - 1))))
                    .withColumn("window_start_ms", last_start - F.col("_k") * F.lit(slide))
                    .where(F.col("window_start_ms") > t - F.lit(size))
                    .drop("_k"))
    else:
        arrivals = arrivals.withColumn("window_start_ms", last_start)
    return arrivals.withColumn("window_end_ms", F.col("window_start_ms") + F.lit(size))


def classify(arrivals: DataFrame, spec: PipelineSpec, time_zone: str = "UTC") -> DataFrame:
    """One row per (record, window) with ``window_end_date`` and ``_class``: on_time,
    late_within_lateness or dropped_late (docs/semantics.md)."""
    lateness = spec.allowed_lateness_ms
    assigned = assign_windows(arrivals, spec.window).withColumn(
        "window_end_date", window_end_date(F.col("window_end_ms"), time_zone))
    max_ts = F.col("window_end_ms") - F.lit(1)
    w = F.col("watermark_ms")
    return assigned.withColumn(
        "_class",
        F.when(max_ts + F.lit(lateness) <= w, F.lit(DROPPED))
        .when(w < max_ts, F.lit(ON_TIME_CLASS))
        .otherwise(F.lit(LATE_WITHIN)),
    )


def field_column(name: str) -> Column:
    """An aggregated field as an exact decimal: ``value`` is a column of the log, any other
    field is read from the payload (null when absent or not a number)."""
    if name == "value":
        return F.col("value")
    return F.expr(f"try_cast(get_json_object(payload, '$.{name}') AS {SPARK_TYPE})")


def aggregate_column(spec: AggregateSpec) -> Column:
    """Exact decimal aggregates, as the operator library computes them (operators.numbers):
    no result depends on how rows were partitioned or ordered."""
    if spec.fn == "count":
        if spec.field is None:
            return F.count(F.lit(1)).alias(spec.name)
        present = F.col("value") if spec.field == "value" else F.get_json_object(
            F.col("payload"), f"$.{spec.field}")
        return F.count(present).alias(spec.name)
    source = field_column(spec.field)
    if spec.fn == "mean":
        return (F.sum(source).cast("double") / F.count(source)).alias(spec.name)
    function = {"sum": F.sum, "min": F.min, "max": F.max}[spec.fn]
    return function(source).alias(spec.name)


def pane_fields(on_time: Column, late: Column, max_ts: Column, log_end: Column,
                lateness: int) -> dict[str, Column]:
    """The latest pane of a window from its counts of on-time and late-within-lateness
    records and the watermark that has been reached: ``_panes`` (how many were emitted),
    ``pane_index``, ``timing``, ``is_last``."""
    on_time_pane = (on_time > 0) & (log_end >= max_ts)
    closing = F.lit(lateness > 0) & (log_end >= max_ts + F.lit(lateness))
    panes = on_time_pane.cast("int") + late + closing.cast("int")
    return {
        "_panes": panes,
        "pane_index": (panes - 1).cast("int"),
        # ON_TIME only for the pane the watermark fired at the window's end, while it is the
        # latest one; a first pane fired by a late record is LATE
        "timing": F.when(on_time_pane & (panes == 1), F.lit(ON_TIME)).otherwise(F.lit("LATE")),
        "is_last": closing | (on_time_pane & F.lit(lateness == 0)),
    }


def log_column_ranges(arrivals: DataFrame) -> dict[str, tuple]:
    """``(min, max)`` of the log's ``watermark_ms`` and ``event_time_ms``, in one Spark job."""
    row = arrivals.agg(F.min("watermark_ms"), F.max("watermark_ms"), F.min("event_time_ms"),
                       F.max("event_time_ms")).first()
    return {"watermark_ms": (row[0], row[1]), "event_time_ms": (row[2], row[3])}


def end_days(event_range: tuple, window: WindowSpec, time_zone: str) -> tuple[str, str]:
    """The first and last day of window end over records with event times in ``event_range``
    (``1970-01-01`` for an empty log). A record's earliest and latest window end grow with its
    event time, so the log's earliest and latest event times bound them all."""
    low, high = event_range
    if low is None or high is None:
        return "1970-01-01", "1970-01-01"
    assigner = build_assigner(window)
    first_end = min(w.end for w in assigner.assign(int(low), None))
    last_end = max(w.end for w in assigner.assign(int(high), None))
    return (day_of(first_end - 1, time_zone).isoformat(),
            day_of(last_end - 1, time_zone).isoformat())


def standard_day_metrics(arrivals: DataFrame, quarantine: DataFrame | None, spec: PipelineSpec,
                         time_zone: str, first_day: str, last_day: str) -> DataFrame:
    """The late-data metrics of ``[first_day, last_day]`` alone: what
    :func:`compute_standard_windows` gives as ``metrics``, without the panes (the live
    stream's metrics refresh needs no pane and no end of the log)."""
    assigned = classify(arrivals.where(could_reach(first_day, last_day, spec.window)), spec,
                        time_zone)
    assigned = assigned.where(F.col("window_end_date").between(first_day, last_day))
    return day_metrics(assigned, quarantine, time_zone, first_day, last_day)


def compute_standard_windows(arrivals: DataFrame, quarantine: DataFrame | None,
                             spec: PipelineSpec, time_zone: str = "UTC",
                             first_day: str | None = None, last_day: str | None = None,
                             log_ranges: dict[str, tuple] | None = None) -> WindowOutputs:
    """Results (latest pane per key and window), late records and metrics for the windows
    whose end day is within ``[first_day, last_day]`` (all days when omitted: those windows
    end on and those lines were quarantined on). ``log_ranges``: ``(min, max)`` of the log's
    ``watermark_ms`` and ``event_time_ms`` (and the quarantine's ingest time,
    ``QUARANTINE_INGEST``) when the caller has them (from Delta's file statistics: no Spark job
    to find them)."""
    lateness = spec.allowed_lateness_ms
    if log_ranges is None:
        log_ranges = log_column_ranges(arrivals)
    log_watermark = log_ranges["watermark_ms"][1]  # the whole log's end
    if first_day is not None and last_day is not None:
        arrivals = arrivals.where(could_reach(first_day, last_day, spec.window))
    assigned = classify(arrivals, spec, time_zone)
    if first_day is None or last_day is None:
        events = log_ranges["event_time_ms"]
        windows = None if events[0] is None else end_days(events, spec.window, time_zone)
        first, last = spanning(windows, quarantine_days(quarantine, time_zone, log_ranges))
        first_day, last_day = first_day or first, last_day or last
    assigned = assigned.where(F.col("window_end_date").between(first_day, last_day))

    late = (assigned.where(F.col("_class") == DROPPED)
            .select(*tables.LATE_RECORDS_SCHEMA.fieldNames()))

    included = assigned.where(F.col("_class") != DROPPED)
    grouped = (included.groupBy("key", "window_start_ms", "window_end_ms", "window_end_date")
               .agg(F.sum(F.when(F.col("_class") == ON_TIME_CLASS, 1).otherwise(0))
                    .alias("_on_time"),
                    F.sum(F.when(F.col("_class") == LATE_WITHIN, 1).otherwise(0))
                    .alias("_late"),
                    *[aggregate_column(a) for a in spec.aggregates]))
    # the end of the log: nothing fires past the last watermark a record carries
    log_end = F.lit(log_watermark if log_watermark is not None else MIN_WATERMARK)
    pane = pane_fields(F.col("_on_time"), F.col("_late"), F.col("window_end_ms") - F.lit(1),
                       log_end, lateness)
    results = grouped
    for name, column in pane.items():
        results = results.withColumn(name, column)
    results = (results.where(F.col("_panes") > 0)
               .withColumn("window_start", F.timestamp_millis("window_start_ms"))
               .withColumn("window_end", F.timestamp_millis("window_end_ms"))
               .select("key", "window_start_ms", "window_end_ms", "window_start", "window_end",
                       "window_end_date", *tables.PANE_COLUMNS,
                       *[a.name for a in spec.aggregates]))

    metrics = day_metrics(assigned, quarantine, time_zone, first_day, last_day)
    return WindowOutputs(results, late, metrics, first_day, last_day, assigned)
