"""Say something at least every few seconds while a long step runs.

A Spark job over a large range or batch can take minutes between two of the platform's own
progress lines; without a word in between an operator cannot tell a slow run from a hung one
(the command line, and a Dagster run's log, which receives the same lines). :func:`heartbeat`
runs a step and, while it has not finished, reports what it is doing every ``every_s`` seconds
(10 by default), with whatever detail the step can give at that moment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EVERY_S = 10.0


@contextmanager
def heartbeat(progress: Callable[[str], None], what: str, *,
              detail: Callable[[], str] | None = None,
              every_s: float = EVERY_S) -> Iterator[None]:
    """Within the block, ``progress(f"{what}: still running, N s (detail)")`` every
    ``every_s`` seconds; nothing if the block ends sooner. A failing ``detail`` is left out
    rather than allowed to stop the reports."""
    done = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not done.wait(every_s):
            extra = ""
            if detail is not None:
                try:
                    extra = detail()
                except Exception:  # noqa: BLE001 - a report must never fail the step
                    extra = ""
            suffix = f"; {extra}" if extra else ""
            progress(f"{what}: still running, {time.monotonic() - started:.0f} s{suffix}")

    thread = threading.Thread(target=beat, name=f"heartbeat {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=every_s)
