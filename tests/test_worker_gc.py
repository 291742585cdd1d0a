"""Spark's Python workers spare the objects alive at a task's start from the full collection
PySpark runs after every task (jobs/runtime/worker_gc.py), and give them back to it now and
then, so a reference cycle frozen while alive is still freed. Run in a fresh interpreter: the
freeze is process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import gc, time, weakref
    from jobs.runtime import worker_gc

    class Node:
        pass

    # alive when a task starts: frozen, so the collection after the task skips it
    node = Node(); node.me = node
    alive = weakref.ref(node)
    worker_gc.spare_live_objects()
    frozen = gc.get_freeze_count()
    assert frozen > 1000, frozen  # the imports, not only the cycle
    started = time.perf_counter(); gc.collect(); spared_s = time.perf_counter() - started
    del node
    gc.collect()  # PySpark's collection after the task
    assert alive() is not None, "a frozen cycle waits for the thaw"
    for _ in range(worker_gc.THAW_EVERY - 2):  # tasks 2 .. THAW_EVERY - 1
        worker_gc.spare_live_objects()
        gc.collect()
    assert gc.get_freeze_count() > 0 and alive() is not None
    worker_gc.spare_live_objects()  # task THAW_EVERY: everything back to the collector
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None, "the thawed cycle is freed by the task's collection"
    started = time.perf_counter(); gc.collect(); full_s = time.perf_counter() - started
    worker_gc.spare_live_objects()  # the next task freezes again
    assert gc.get_freeze_count() > 1000
    print(spared_s, full_s)
""")


def test_a_task_spares_what_was_alive_and_a_thaw_frees_frozen_cycles():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    spared_s, full_s = map(float, done.stdout.split())
    assert spared_s < full_s, "a collection after a freeze walks fewer objects"
