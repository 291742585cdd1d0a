"""A minimal Delta transaction log, for tests of code that reads file statistics only."""

from __future__ import annotations

import json
from pathlib import Path


def write_arrival_log_stats(table: Path, max_watermark_ms: int) -> None:
    """One commit adding one file whose statistics say ``max(watermark_ms)``."""
    log = table / "_delta_log"
    log.mkdir(parents=True)
    stats = {"numRecords": 10, "minValues": {"watermark_ms": 0},
             "maxValues": {"watermark_ms": max_watermark_ms}}
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"add": {"path": "part-0.parquet", "size": 1, "modificationTime": 0,
                        "dataChange": True, "stats": json.dumps(stats)}},
               {"add": {"path": "part-1.parquet", "size": 1, "modificationTime": 0,
                        "dataChange": True, "stats": json.dumps({**stats, "maxValues": {
                            "watermark_ms": max_watermark_ms + 5}})}},
               {"remove": {"path": "part-1.parquet", "dataChange": True}}]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
