"""The error every check of a setting, argument or description raises: one line naming it, and
the walk along an error's causes that finds it (or another known fault) inside a wrapper.

Its own module, below everything: the settings, the registry of pipelines and streams, and the
checks all raise it, and none of them need to import another for it."""

from __future__ import annotations

from collections.abc import Iterator


class SettingsError(ValueError):
    """A setting, argument or description is wrong; the message names it (the command line
    prints it as one line and exits with status 2)."""


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what it was raised from or during, outermost first (a cycle ends it):
    Dagster's component tree and Py4J wrap the error a command should say in one line."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
