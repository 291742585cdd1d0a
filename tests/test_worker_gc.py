"""Spark's Python workers spare the objects alive at a task's start from the full collection
PySpark runs after every task (jobs.runtime.worker_gc), and give them back to it now and
then, so a reference cycle frozen while alive is still freed; outside a reused worker they
freeze nothing. Run in fresh interpreters: the freeze is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from jobs.runtime.worker_gc import REUSED_WORKER

REPO = Path(__file__).resolve().parents[1]

IN_A_REUSED_WORKER = textwrap.dedent("""
    import gc, weakref
    from jobs.runtime import worker_gc

    class Node:
        pass

    # alive when a task starts: frozen, so the collection after the task skips it
    node = Node(); node.me = node
    alive = weakref.ref(node)
    walked_before = len(gc.get_objects())  # what a full collection walks
    worker_gc.spare_live_objects()
    frozen = gc.get_freeze_count()
    assert frozen > 1000, frozen  # the imports, not only the cycle
    assert len(gc.get_objects()) < walked_before / 10, "a collection walks what came after"
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
    worker_gc.spare_live_objects()  # the next task freezes again
    assert gc.get_freeze_count() > 1000
""")

ELSEWHERE = textwrap.dedent("""
    import gc
    from jobs.runtime import worker_gc

    worker_gc.spare_live_objects()
    assert gc.get_freeze_count() == 0, "nothing collects after a task here: nothing to spare"
""")


def _run(script: str, reused: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != REUSED_WORKER}
    if reused:
        env[REUSED_WORKER] = "1"
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_task_spares_what_was_alive_and_a_thaw_frees_frozen_cycles():
    done = _run(IN_A_REUSED_WORKER, reused=True)
    assert done.returncode == 0, done.stderr


def test_nothing_is_frozen_outside_a_reused_worker():
    done = _run(ELSEWHERE, reused=False)
    assert done.returncode == 0, done.stderr
