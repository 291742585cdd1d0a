"""Spark's Python workers collect garbage after every task: keep what they imported out of it.

PySpark's daemon reuses a worker process for task after task and runs a full ``gc.collect()``
after each (``pyspark/daemon.py``). A full collection walks every object the process tracks,
almost all of them the modules a task imported (PySpark, pandas, pyarrow, numpy): 25-33 ms
each, and the live stream runs four or more Python tasks per micro-batch. At 320,000 events/s
those collections were 8 % of the Python samples of the whole run (py-spy,
benchmarks/RESULTS.md) and found nothing to free.

``gc.freeze()`` moves the objects tracked at that moment to a permanent generation that
collections skip. A task entry calls :func:`spare_live_objects` first: what is alive then
(PySpark's collection after the last task has just freed the rest) is the modules and their
caches, so the collection after the task walks only what the task itself made. An object
frozen while alive that later becomes garbage in a reference cycle would never be collected,
so every :data:`THAW_EVERY` tasks the permanent generation goes back (``gc.unfreeze()``) and
that task's collection walks everything once.
"""

from __future__ import annotations

import gc

THAW_EVERY = 500
"""Tasks between two full collections of a worker process."""

_tasks = 0


def spare_live_objects() -> None:
    """At a task's start in a Spark Python worker: spare the objects alive now from the
    collections after this task (see the module docstring)."""
    global _tasks
    _tasks += 1
    if _tasks == 1:  # what importing left as garbage, before it is frozen with the rest
        gc.collect()
    if _tasks % THAW_EVERY == 0:
        gc.unfreeze()
    else:
        gc.freeze()
