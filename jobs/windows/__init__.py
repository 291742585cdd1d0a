"""The windowed tables computed from the arrival log over a range of days.

Two computations give the same rows the live stream gives: the vectorised one (standard
windows, Spark's own expressions: :mod:`jobs.windows.vectorised`) and the operator library per
key (everything else: :mod:`jobs.windows.keyed`). Neither imports the other; this module picks.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from jobs.tables.window_tables import WindowOutputs
from operators.pipeline import PipelineSpec


def compute_windows(arrivals: DataFrame, quarantine: DataFrame | None, spec: PipelineSpec,
                    time_zone: str = "UTC", first_day: str | None = None,
                    last_day: str | None = None,
                    log_ranges: dict[str, tuple] | None = None) -> WindowOutputs:
    """Results (latest pane per key and window), late records and metrics for the windows
    whose end day is within ``[first_day, last_day]`` (all days when omitted).
    ``log_ranges``: the log's ``(min, max)`` per column when known from file statistics
    (jobs.store.table_stats), which spares the standard windows a Spark job."""
    if spec.is_standard_window:
        from jobs.windows.vectorised import compute_standard_windows

        return compute_standard_windows(arrivals, quarantine, spec, time_zone, first_day,
                                        last_day, log_ranges)
    from jobs.windows.keyed import compute_keyed_windows

    return compute_keyed_windows(arrivals, quarantine, spec, time_zone, first_day, last_day,
                                 log_ranges)
