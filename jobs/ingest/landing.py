"""The landing folder: which files a collector has finished, and what changed since ingest.

Files land as ``<landing>/<source_partition>/<name>.jsonl`` (``.tmp`` while in flight). A file
that does not end with a newline and changed within ``settle_ms`` may still be being written:
it waits for a later ingest (once settled it is taken as it is, and a cut-off last line is
quarantined as malformed). The landing sensor uses the same rule, so it never launches a run
for a file ingest would leave.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True, slots=True)
class LandedFile:
    name: str
    """``<partition>/<file>.jsonl``, relative to the landing folder."""
    size: int
    mtime_ns: int

    @property
    def partition(self) -> str:
        return self.name.split("/", 1)[0]


def list_landing(landing: Path, settle_ms: int) -> tuple[list[LandedFile], int]:
    """The finished landing files (sorted by name) and how many look half-written."""
    if not landing.is_dir():
        return [], 0
    finished: list[LandedFile] = []
    deferred = 0
    now = time.time()
    with os.scandir(landing) as partitions:
        folders = sorted(entry.name for entry in partitions if entry.is_dir())
    for folder in folders:
        try:
            entries = list(os.scandir(landing / folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if not entry.name.endswith(".jsonl"):
                continue
            try:
                if not entry.is_file():
                    continue
                status = entry.stat()
                if status.st_size and (now - status.st_mtime) * 1000 < settle_ms \
                        and not _ends_with_newline(Path(entry.path)):
                    deferred += 1
                    continue
            except FileNotFoundError:  # renamed or removed while we looked
                continue
            finished.append(LandedFile(f"{folder}/{entry.name}", status.st_size,
                                       status.st_mtime_ns))
    finished.sort(key=lambda f: f.name)
    return finished, deferred


def landing_files(landing: Path, settle_ms: int) -> tuple[dict[str, int], int]:
    """``<partition>/<name>.jsonl`` -> modification time (ns) of the finished files, and how
    many look half-written (the landing sensor's view)."""
    files, deferred = list_landing(landing, settle_ms)
    return {f.name: f.mtime_ns for f in files}, deferred


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"


def read_range(landing: Path, name: str, offset: int, size: int) -> bytes:
    """The bytes ``[offset, size)`` of a landing file: exactly what a plan recorded, even if
    the file grew since."""
    with (landing / name).open("rb") as handle:
        handle.seek(offset)
        return handle.read(size - offset)


def sha256_prefix(landing: Path, name: str, size: int) -> str:
    """The SHA-256 of the first ``size`` bytes of a landing file."""
    digest = hashlib.sha256()
    remaining = size
    with (landing / name).open("rb") as handle:
        while remaining > 0:
            chunk = handle.read(min(1 << 20, remaining))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
    return digest.hexdigest()
