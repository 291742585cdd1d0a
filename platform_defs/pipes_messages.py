"""Reading the live process's Pipes messages from a file, one whole line at a time.

Dagster's own file reader tails the file with ``readline`` and decodes whatever it returns.
When it catches the writer in the middle of a long message (a stopped stream's report of
every day it touched runs to thousands of characters), ``readline`` returns the line's first
part, the decode fails, the reader thread dies and every later message is lost: the run
succeeds but records no materialisations and no check verdicts. This reader keeps a part
line until its newline arrives, so a message is decoded only when it is whole.
"""

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from threading import Event, Thread

from dagster import PipesMessageHandler, PipesMessageReader, PipesSubprocessClient
from dagster_pipes import PipesDefaultMessageWriter, PipesParams

_MESSAGES_FILE = "messages"
_POLL_SECONDS = 0.01


class PipesMessagesLost(RuntimeError):
    """Some of the external process's messages could not be read (a line that is not a
    message, or a last line cut off); the others were handled."""


def whole_lines(path: str, closed: Event) -> Iterator[str]:
    """The file's lines as the writer completes them; a part line waits for the rest. Once
    ``closed`` is set (after the writer's last write), the lines still in the file are read,
    and a last line the writer never finished is an error: a message was cut off, and
    dropping it silently would lose events."""
    pending = ""
    with open(path, encoding="utf-8", newline="\n") as stream:
        while True:
            # asked before reading: a line written and ``closed`` set while this thread
            # waited after an empty read is still read before it stops
            done = closed.is_set()
            piece = stream.readline()
            if piece:
                pending += piece
                if pending.endswith("\n"):
                    yield pending
                    pending = ""
            elif done:
                break
            else:
                time.sleep(_POLL_SECONDS)
    if pending:
        raise ValueError(f"the external process's last Pipes message was cut off after "
                         f"{len(pending)} characters: {pending[:200]!r}")


class WholeLineTempFileMessageReader(PipesMessageReader):
    """``PipesTempFileMessageReader`` that decodes a message only once its line is complete
    (the external side writes with Dagster's default file writer, unchanged). A line it
    cannot handle does not stop it: the next ones are handled, and when the session closes
    :class:`PipesMessagesLost` says which were not, so the step fails rather than leaving
    events unrecorded."""

    @contextmanager
    def read_messages(self, handler: PipesMessageHandler) -> Iterator[PipesParams]:
        closed = Event()
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, _MESSAGES_FILE)
            open(path, "w", encoding="utf-8").close()
            failures: list[Exception] = []
            thread = Thread(target=self._follow, args=(path, handler, closed, failures),
                            daemon=True)
            thread.start()
            try:
                yield {PipesDefaultMessageWriter.FILE_PATH_KEY: path,
                       PipesDefaultMessageWriter.INCLUDE_STDIO_IN_MESSAGES_KEY: False}
            finally:
                closed.set()
                thread.join()
        if failures:
            raise PipesMessagesLost(
                f"{len(failures)} of the external process's Pipes messages could not be read: "
                + "; ".join(map(str, failures[:3]))) from failures[0]

    @staticmethod
    def _follow(path: str, handler: PipesMessageHandler, closed: Event,
                failures: list[Exception]) -> None:
        def failed(failure: Exception) -> None:
            failures.append(failure)
            handler.report_pipes_framework_exception(
                f"{WholeLineTempFileMessageReader.__name__} reader thread", sys.exc_info())

        lines = whole_lines(path, closed)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except Exception as failure:  # the last line cut off: the file is done
                failed(failure)
                return
            try:
                handler.handle_message(json.loads(line))
            except Exception as failure:
                failed(ValueError(f"line {line[:200]!r}: {failure}"))

    def no_messages_debug_text(self) -> str:
        return "Attempted to read messages from a local temporary file, whole lines only."


def subprocess_client() -> PipesSubprocessClient:
    """The ``pipes_subprocess_client`` resource: Dagster's, reading messages whole."""
    return PipesSubprocessClient(message_reader=WholeLineTempFileMessageReader())
