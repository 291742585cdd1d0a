"""Spark's Python workers collect garbage after every task: keep what they imported out of it.

PySpark's daemon reuses a worker process for task after task and runs a full ``gc.collect()``
after each (``pyspark/daemon.py``). A full collection walks every object the process tracks,
almost all of them the modules a task imported (PySpark, pandas, pyarrow, numpy): 25-33 ms
each, and the live stream runs four or more Python tasks per micro-batch. At 320,000 events/s
those collections were 8 % of the Python samples of the whole run (py-spy,
benchmarks/history.md) and found nothing to free.

``gc.freeze()`` moves the objects tracked at that moment to a permanent generation that
collections skip. A task entry calls :func:`spare_live_objects` first: what is alive then
(PySpark's collection after the last task has just freed the rest) is the modules and their
caches, plus what the task itself has unpickled so far (its function or processor), so the
collection after the task walks only what the task made since. An object frozen while alive
that later becomes garbage in a reference cycle is not collected until every
:data:`THAW_EVERY` tasks the permanent generation goes back (``gc.unfreeze()``) and that task's
collection walks everything once. The first freeze also takes what importing left in cycles,
and the thaw frees it; collecting first would cost a one-task worker a full walk for nothing.
Without worker reuse (``spark.python.worker.reuse=false``) nothing collects after a task, and
outside a Spark worker (a test calling a reader directly) nothing should be frozen: both do
nothing.
"""

from __future__ import annotations

import gc
import os

THAW_EVERY = 500
"""Tasks between two full collections of a worker process."""
REUSED_WORKER = "SPARK_REUSE_WORKER"
"""Set by Spark in a Python worker's environment when the daemon reuses it (and collects after
each task)."""

_tasks = 0


def spare_live_objects() -> None:
    """At a task's start in a Spark Python worker: spare the objects alive now from the
    collections after this task (see the module docstring)."""
    global _tasks
    if not os.environ.get(REUSED_WORKER):
        return
    _tasks += 1
    if _tasks % THAW_EVERY == 0:
        gc.unfreeze()
    else:
        gc.freeze()
