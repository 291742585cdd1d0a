"""Spark's own output goes to a log file; the console keeps the platform's lines.

The JVM and every Python worker it starts (executors' workers, transformWithState's driver
runner, which prints a dozen "Streaming TransformWithStateInPandas Python worker ..." lines
per query) write to the file descriptors the JVM inherited when it was launched. Pointing
descriptors 1 and 2 at the log only while the JVM is launched sends all of that to the log
for the session's whole life, while this process's own output goes back to the console.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext

LOG_NAME = "spark.log"


def jvm_log(home: str) -> str | None:
    """``<home>/logs/spark.log`` for a local home (None for a URI: the console keeps it)."""
    if "://" in home:
        return None
    return str(Path(home) / "logs" / LOG_NAME)


@contextmanager
def jvm_output_to(log: str | None) -> Iterator[None]:
    """Launch the JVM inside this block with its output in ``log``; nothing changes when the
    JVM runs already (its output goes where it went) or ``log`` is None."""
    if log is None or SparkContext._gateway is not None:
        yield
        return
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for descriptor in (*saved, target):
            os.close(descriptor)
