"""The arrival log of Nexmark landing files, built in pure Python exactly as ingest builds it.

Ingest (jobs.streams.landing) orders a batch's lines by ``(ingest clock, source file, line
number)`` with the clock ``field:received_at``, makes ``ingest_time`` non-decreasing, and stamps
each record with the watermark computed from the records before it
(:func:`operators.watermarks.assign_watermarks`, per source partition). Doing the same here lets
the tests and the benchmark feed the queries the very stream a Spark run would read from the
arrival log, without Spark.

A *record* (what every query consumes) is a flat dict: the landing line's Nexmark fields plus
``arrival_seq``, ``source_partition``, ``key``, ``event_time_ms``, ``ingest_time_ms``,
``watermark_ms`` and ``value`` (a float, as in the arrival log).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nexmark.generator import LandingPlan
from operators.pipeline import WatermarkSpec
from operators.watermarks import assign_watermarks

Record = dict[str, Any]


def _record(fields: Mapping[str, Any], arrival_seq: int, partition: str, ingest_time_ms: int,
            watermark_ms: int) -> Record:
    record = dict(fields)
    value = fields.get("value")
    record.update(arrival_seq=arrival_seq, source_partition=partition, key=fields["key"],
                  event_time_ms=int(fields["event_time"]), ingest_time_ms=ingest_time_ms,
                  watermark_ms=watermark_ms, value=None if value is None else float(value))
    return record


def arrival_log(plan: LandingPlan, watermark: WatermarkSpec, *,
                first_seq: int = 0) -> list[Record]:
    """All landing lines as one ingest batch would append them, in arrival order."""
    lines = []
    for source_file, file_lines in plan.items():
        partition = source_file.split("/", 1)[0]
        for number, fields in enumerate(file_lines, start=1):
            lines.append((int(fields["received_at"]), source_file, number, partition, fields))
    lines.sort(key=lambda line: line[:3])
    ingest_times = []
    last = None
    for clock, *_ in lines:
        last = clock if last is None else max(last, clock)
        ingest_times.append(last)
    marks = assign_watermarks(
        watermark, ((line[3], int(line[4]["event_time"]), ingest, line[4])
                    for line, ingest in zip(lines, ingest_times, strict=True)))
    return [_record(line[4], first_seq + i, line[3], ingest, mark)
            for i, (line, ingest, mark) in enumerate(zip(lines, ingest_times, marks,
                                                         strict=True))]


def record_from_arrival_row(row: Mapping[str, Any]) -> Record:
    """A query record from an arrival-log row (what the Spark runtime reads): the JSON
    ``payload`` gives the Nexmark fields, the row's columns the arrival position."""
    fields = json.loads(row["payload"])
    return _record(fields, int(row["arrival_seq"]), row["source_partition"],
                   int(row["ingest_time_ms"]), int(row["watermark_ms"])) | {
        "key": row["key"], "event_time_ms": int(row["event_time_ms"])}
