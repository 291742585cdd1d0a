"""The windowed output tables as sorted frames, and their row-for-row comparison: what every
"same result however it was computed" test (determinism, faults) asserts."""

from __future__ import annotations

import pandas as pd

from jobs import tables
from jobs.config.registry import Pipeline

OUTPUTS = (tables.WINDOW_RESULTS, tables.LATE_RECORDS, tables.LATE_DATA_METRICS)


def output_tables(spark, pipeline: Pipeline) -> dict[str, pd.DataFrame]:
    """A pipeline's output tables, columns and rows in a fixed order (row order in Delta means
    nothing)."""
    frames = {}
    for name in OUTPUTS:
        frame = spark.read.format("delta").load(pipeline.table_path(name)).toPandas()
        frame = frame[sorted(frame.columns)]
        frames[name] = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return frames


def assert_same(expected: dict[str, pd.DataFrame], actual: dict[str, pd.DataFrame]) -> None:
    for name in OUTPUTS:
        pd.testing.assert_frame_equal(expected[name], actual[name], check_exact=True, obj=name)
