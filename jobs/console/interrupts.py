"""One way to stop every command: SIGINT or SIGTERM, one line, no traceback, 130 or 143.

A terminal's Ctrl-C reaches the whole process group, and raising ``KeyboardInterrupt`` in the
middle of a call into the JVM leaves py4j and PySpark to print their own tracebacks while
Spark's threads die under them. So the command line handles both signals itself: before Spark
runs, a signal interrupts at once (the Python code in between commits nothing half-done);
once Spark runs, a signal cancels Spark's jobs from another thread and lets the call in
progress return or fail on its own, and the command then ends with the one line. The
long-running live job instead stops its streams between micro-batches (it passes
:attr:`StopRequests.event` to them). Exit status follows the shell's convention, 128 + the
signal: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop by ``signum``: a ``KeyboardInterrupt``, so that no
    ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def status(self) -> int:
        return STATUS.get(signal.Signals(self.signum), 128 + self.signum)


class StopRequests:
    """SIGINT and SIGTERM for the main thread: :meth:`install` once, then
    :meth:`cancel_with` when Spark runs."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self._cancel: Callable[[], None] | None = None

    def install(self) -> StopRequests:
        for signum in STATUS:
            signal.signal(signum, self._handle)
        return self

    def cancel_with(self, cancel: Callable[[], None] | None) -> None:
        """From now on a signal calls ``cancel`` (in a thread of its own) instead of
        interrupting the main thread; None interrupts it again."""
        self._cancel = cancel

    def raise_if_stopped(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        self.event.set()
        if self._cancel is None or not first:  # a second signal does not wait any more
            raise Interrupted(self.signum)
        threading.Thread(target=self._cancel, name="cancel-spark-jobs", daemon=True).start()
