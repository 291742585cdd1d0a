"""A full disk said in one line: which configured location ran out of space, and what to do.

A write that finds no space fails deep inside whichever writer was at work: the JVM's Delta
writer or a streaming checkpoint (a ``Py4JJavaError`` or ``StreamingQueryException`` whose
text holds Java's ``IOException: No space left on device``), the Rust Delta writer
(``DeltaError: ... No space left on device (os error 28)``) or Python itself
(``OSError`` with ``errno.ENOSPC``). None of those says which of the platform's folders is
full, and each arrives with a long traceback. The command line recognises the fault in the
error's chain and names the location instead: of the configured folders, the one whose
filesystem has the least space left. Nothing half-written counts (every table commits through
Delta's log, every checkpoint renames its files into place), so the same command, run again
once space is freed, goes on from the last commit.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from jobs.config.errors import causes

NO_SPACE_TEXTS = ("No space left on device", "os error 28", "ENOSPC")
"""How the writers under the platform word the fault (Java, Rust, C)."""


def is_out_of_space(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is a write that found no space."""
    for each in causes(error):
        if isinstance(each, OSError) and each.errno == errno.ENOSPC:
            return True
        if any(text in str(each) for text in NO_SPACE_TEXTS):
            return True
    return False


@dataclass(frozen=True)
class Space:
    """A configured location and the space left on its filesystem."""

    setting: str
    location: str
    free_bytes: int
    total_bytes: int

    def said(self) -> str:
        return (f"{self.setting} {self.location} ({_size(self.free_bytes)} free of "
                f"{_size(self.total_bytes)})")


def fullest(locations: Mapping[str, str]) -> Space | None:
    """Of ``{setting: location}``, the local one whose filesystem has the least space left
    (``None``: none is local). A location not made yet is judged by its nearest parent."""
    spaces = []
    for setting, location in locations.items():
        existing = _nearest_existing(location)
        if existing is None:
            continue
        usage = shutil.disk_usage(existing)
        spaces.append(Space(setting, location, usage.free, usage.total))
    return min(spaces, key=lambda s: s.free_bytes, default=None)


def _nearest_existing(location: str) -> str | None:
    if "://" in location and not location.startswith("file:"):
        return None  # an object store: no disk of ours to measure
    path = os.path.abspath(location.removeprefix("file://").removeprefix("file:"))
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return path


def out_of_space_line(command: str, locations: Mapping[str, str]) -> str:
    """The one line a command ends with when a write found no space."""
    space = fullest(locations)
    where = f"the filesystem of {space.said()}" if space else "a location the command writes"
    return (f"{command}: error: no space left on {where}: free space there and run the same "
            "command again (nothing committed is lost, and nothing half-written counts)")


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"
