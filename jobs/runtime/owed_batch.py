"""The micro-batch without data that a restarted query owes its timers, run all the same.

The live stream's micro-batches now fire what their watermark makes due themselves
(jobs.runtime.packing's ticks), so only the Nexmark queries (whose input is not packed) and a
live cohort's batches from before that (its record's ``fires_due_from_batch``) can owe one.

After a micro-batch whose rows raise the watermark, Spark runs one more without data so that
event-time timers up to the new watermark fire: a bucket that got no rows is woken only so
(docs/runtime.md, "Timers"). Spark decides on that batch from the batch it last ran *in this
process* (``MicroBatchExecution.constructNextBatch`` asks the previous execution, which a
restart leaves empty). So a query stopped or killed between a batch with data and that batch
without it comes back owing timers: a long-running stream fires them only when new records
arrive, and an ``available now`` run (an increment, a rollout) ends without them. A rollout
killed there switched readers to a version 6 panes short of its backfill
(tests/faults/test_rollout_kills.py).

Before a query starts, a checkpoint whose last batch is committed with a watermark for the
next batch above the one that batch ran at has that batch's commit entry removed. Spark then
runs the batch again, as after a kill just before its commit (the same offsets, watermark and
state, so the same rows, which the sink writes once), and goes on to the batch without data
as it would have.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.store import storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BATCHES_WITHOUT_DATA = "spark.sql.streaming.noDataMicroBatches.enabled"
"""Spark's setting for batches without data (on unless set to ``false``)."""
_BATCH_FILE = re.compile(r"^\d+$")
_LOG_VERSION = re.compile(r"^v\d+$")


@dataclass(frozen=True)
class LastBatch:
    """The last micro-batch of a checkpoint, committed."""

    batch_id: int
    ran_at_watermark_ms: int
    """The watermark it ran at (its offset log entry's ``batchWatermarkMs``)."""
    next_watermark_ms: int
    """The watermark its rows make for the next batch (its commit's ``nextBatchWatermarkMs``)."""

    @property
    def owes_timers(self) -> bool:
        """Whether Spark would have run a batch without data after it: the rule of its
        stateful operator with event-time timers (the watermark moved past the one the batch
        ran at)."""
        return self.next_watermark_ms > self.ran_at_watermark_ms


def last_committed_batch(checkpoint: str) -> LastBatch | None:
    """The checkpoint's last batch if it is committed (``None``: no batch yet, or the last
    one is not committed, so Spark runs it again anyway)."""
    offsets = _batch_ids(storage.join(checkpoint, "offsets"))
    commits = _batch_ids(storage.join(checkpoint, "commits"))
    if not offsets or not commits or offsets[-1] != commits[-1]:
        return None
    batch_id = commits[-1]
    ran_at = _entry(storage.join(checkpoint, "offsets", str(batch_id)), "batchWatermarkMs")
    next_at = _entry(storage.join(checkpoint, "commits", str(batch_id)), "nextBatchWatermarkMs")
    if ran_at is None or next_at is None:
        return None
    return LastBatch(batch_id, ran_at, next_at)


def next_batch_id(checkpoint: str) -> int:
    """The micro-batch the query of ``checkpoint`` runs first when it starts: its last one
    again if that is not committed, else the one after it (0 for a new checkpoint)."""
    offsets = _batch_ids(storage.join(checkpoint, "offsets"))
    if not offsets:
        return 0
    commits = _batch_ids(storage.join(checkpoint, "commits"))
    return offsets[-1] + 1 if commits and commits[-1] == offsets[-1] else offsets[-1]


def run_owed_batch_again(checkpoint: str, progress: Callable[[str], None], what: str,
                         batches_without_data: bool = True,
                         fires_due_from_batch: int | None = None) -> LastBatch | None:
    """Before the query of ``checkpoint`` starts: if its last batch owes a batch without
    data, remove that batch's commit entry so that the query runs it again and then the one
    without data; the batch, or ``None`` when nothing is owed. Nothing is owed when Spark
    runs no batches without data (``batches_without_data``: its
    ``spark.sql.streaming.noDataMicroBatches.enabled``), or the last batch would run again
    at every start, nor by a batch from ``fires_due_from_batch`` on (one that fired
    what its watermark made due itself, jobs.runtime.packing's ticks)."""
    last = last_committed_batch(checkpoint)
    if last is None or not last.owes_timers or not batches_without_data:
        return None
    if fires_due_from_batch is not None and last.batch_id >= fires_due_from_batch:
        return None
    commits = storage.join(checkpoint, "commits")
    # Hadoop's checksum first, as Hadoop deletes: a checksum left without its file would
    # make Spark's rename of the entry written again fail
    storage.delete_file(storage.join(commits, f".{last.batch_id}.crc"))
    storage.delete_file(storage.join(commits, str(last.batch_id)))
    progress(f"{what}: batch {last.batch_id} raised the watermark to {last.next_watermark_ms} "
             f"and the query stopped before the batch without data that fires the timers due "
             f"by then; batch {last.batch_id} runs again (the same rows, written once), then "
             "that one")
    return last


def runs_batches_without_data(spark: SparkSession) -> bool:
    """Whether the session's queries run batches without data (Spark's default)."""
    return spark.conf.get(BATCHES_WITHOUT_DATA, "true").strip().lower() != "false"


def _batch_ids(folder: str) -> list[int]:
    return sorted(int(name) for name in storage.list_file_names(folder)
                  if _BATCH_FILE.match(name))


def _entry(location: str, field: str) -> int | None:
    """A number from a Structured Streaming log entry's metadata (``v1``, then one JSON line);
    ``None`` for a layout this does not know, which leaves the checkpoint as it is."""
    text = storage.read_small_text(location)
    lines = (text or "").splitlines()
    if len(lines) < 2 or not _LOG_VERSION.match(lines[0].strip()):
        return None
    try:
        value = json.loads(lines[1]).get(field)
    except (json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, int) else None
