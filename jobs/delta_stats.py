"""The maximum of a column of a Delta table from the file statistics in its log, without Spark.

Schedules and sensors run inside Dagster's code server on every tick; starting a JVM there to
read one number (the arrival log's ``max(watermark_ms)``) would cost seconds of CPU on a
2-core machine each time. Delta records per-file min/max statistics in its transaction log,
so replaying the log (last checkpoint, then the JSON commits after it) gives the exact maximum
over the live files. When a live file has no statistics the answer is unknown (``None``) rather
than guessed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq


def _checkpoint_actions(log: Path) -> tuple[int, dict[str, str | None]]:
    """Live files (path -> stats JSON) at the last checkpoint, and its version (-1: none)."""
    pointer = log / "_last_checkpoint"
    if not pointer.is_file():
        return -1, {}
    info = json.loads(pointer.read_text(encoding="utf-8"))
    version = int(info["version"])
    parts = sorted(log.glob(f"{version:020d}.checkpoint*.parquet"))
    if not parts:
        return -1, {}
    files: dict[str, str | None] = {}
    for part in parts:
        for row in pq.read_table(part, columns=["add"]).column("add").to_pylist():
            if row is not None:
                files[row["path"]] = row.get("stats")
    return version, files


def max_column_value(table_path: str | Path, column: str) -> int | float | None:
    """``max(column)`` over the table's live files, or ``None`` (no table, no rows, or a file
    without statistics)."""
    log = Path(table_path) / "_delta_log"
    if not log.is_dir():
        return None
    version, files = _checkpoint_actions(log)
    commits = sorted(p for p in log.glob("*.json") if p.stem.isdigit() and int(p.stem) > version)
    for commit in commits:
        for line in commit.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                files[action["add"]["path"]] = action["add"].get("stats")
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
    best = None
    for stats in files.values():
        if stats is None:
            return None
        parsed = json.loads(stats)
        if not parsed.get("numRecords"):
            continue
        value = parsed.get("maxValues", {}).get(column)
        if value is None:
            return None
        best = value if best is None else max(best, value)
    return best
