"""A real Delta table (written with delta-rs, no Spark) for tests of code that reads file
statistics only."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake


def write_arrival_log_stats(table: Path, max_watermark_ms: int) -> None:
    """A table whose live files say ``max(watermark_ms)``; a file with a larger maximum was
    written, then removed by a delete, and must not count."""
    write_deltalake(str(table), pa.table({"watermark_ms": pa.array([0, max_watermark_ms],
                                                                   pa.int64())}),
                    mode="overwrite")
    write_deltalake(str(table), pa.table({"watermark_ms": pa.array([max_watermark_ms + 5],
                                                                   pa.int64())}), mode="append")
    DeltaTable(str(table)).delete(f"watermark_ms > {max_watermark_ms}")
