"""The landing folder: which files a collector has finished, and what changed since ingest.

Files land as ``<landing>/<source_partition>/<name>.jsonl`` (``.tmp`` while in flight). A file
that does not end with a newline and changed within ``settle_ms`` may still be being written:
it waits for a later ingest (once settled it is taken as it is, and a cut-off last line is
quarantined as malformed). The landing sensor uses the same rule, so it never launches a run
for a file ingest would leave.

The folder is a local path or a URI (``s3a://``, ``s3://``, ``gs://``, ``abfss://``,
``hdfs://``): a remote one is listed and read through Apache Arrow's filesystems (the same
object-store clients ``deltalake`` uses, credentials and endpoint from the standard
environment variables, e.g. ``AWS_ACCESS_KEY_ID`` and ``AWS_ENDPOINT_URL``), so ingest needs no
local copy. The same class reads on the driver or on Spark's executors
(``PLATFORM_INGEST_READER``, jobs.streams.landing.on_spark); see docs/operations.md.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from jobs.store import storage

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


class LandingFolder:
    """Where collectors land files: a local folder, or a remote one behind a URI."""

    def __init__(self, location: str | Path) -> None:
        self.location = str(location)
        if storage.is_local(self.location):
            self._filesystem = None
            self._root = str(storage.local_path(self.location))
        else:
            self._filesystem, self._root = storage.arrow_filesystem(self.location)

    def __str__(self) -> str:
        return self.location

    def _path(self, name: str) -> str:
        return f"{self._root}/{name}"

    def exists(self) -> bool:
        if self._filesystem is None:
            return Path(self._root).exists()
        from pyarrow import fs

        return self._filesystem.get_file_info(self._root).type != fs.FileType.NotFound

    def _entries(self, folder: str = "") -> Iterator[tuple[str, bool, int, int]]:
        """(name, is a file, size, modification time in ns) of what is directly in
        ``folder`` (the root if empty); nothing if it is not there (anymore)."""
        path = self._path(folder) if folder else self._root
        if self._filesystem is None:
            try:
                with os.scandir(path) as entries:
                    for entry in entries:
                        try:
                            if entry.is_dir():
                                yield entry.name, False, 0, 0
                            elif entry.is_file():
                                status = entry.stat()
                                yield entry.name, True, status.st_size, status.st_mtime_ns
                        except FileNotFoundError:  # renamed or removed while we looked
                            continue
            except (FileNotFoundError, NotADirectoryError):
                return
            return
        from pyarrow import fs

        try:
            infos = self._filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
        except NotADirectoryError:
            return
        for info in infos:
            if info.type == fs.FileType.Directory:
                yield info.base_name, False, 0, 0
            elif info.type == fs.FileType.File:
                yield info.base_name, True, info.size or 0, info.mtime_ns or 0

    def has(self, name: str) -> bool:
        """Whether the landed file (``<partition>/<file>``) is there now."""
        try:
            with self.open(name):
                return True
        except FileNotFoundError:
            return False

    def open(self, name: str) -> BinaryIO:
        """A landed file (``<partition>/<file>``) for reading, seekable."""
        if self._filesystem is None:
            return open(self._path(name), "rb")  # noqa: SIM115 - the caller closes it
        try:
            return self._filesystem.open_input_file(self._path(name))
        except OSError as error:  # Arrow's messages do not carry the file name
            if error.filename is None:
                error.filename = self.location.rstrip("/") + "/" + name
            raise


def _landing(landing: LandingFolder | str | Path) -> LandingFolder:
    return landing if isinstance(landing, LandingFolder) else LandingFolder(landing)


def list_landing(landing: LandingFolder | str | Path, settle_ms: int
                 ) -> tuple[list[LandedFile], int]:
    """The finished landing files (sorted by name) and how many look half-written."""
    landing = _landing(landing)
    finished: list[LandedFile] = []
    deferred = 0
    now_ns = time.time_ns()
    folders = sorted(name for name, is_file, _, _ in landing._entries() if not is_file)
    for folder in folders:
        for name, is_file, size, mtime_ns in landing._entries(folder):
            if not is_file or not name.endswith(".jsonl"):
                continue
            landed = LandedFile(f"{folder}/{name}", size, mtime_ns)
            try:
                if size and (now_ns - mtime_ns) / 1e6 < settle_ms \
                        and not _ends_with_newline(landing, landed.name):
                    deferred += 1
                    continue
            except FileNotFoundError:  # renamed or removed while we looked
                continue
            finished.append(landed)
    finished.sort(key=lambda f: f.name)
    return finished, deferred


def landing_files(landing: LandingFolder | str | Path, settle_ms: int
                  ) -> tuple[dict[str, int], int]:
    """``<partition>/<name>.jsonl`` -> modification time (ns) of the finished files, and how
    many look half-written (the landing sensor's view)."""
    files, deferred = list_landing(landing, settle_ms)
    return {f.name: f.mtime_ns for f in files}, deferred


def _ends_with_newline(landing: LandingFolder, name: str) -> bool:
    with landing.open(name) as handle:
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"


def read_range(landing: LandingFolder | str | Path, name: str, offset: int, size: int) -> bytes:
    """The bytes ``[offset, size)`` of a landing file: exactly what a plan recorded, even if
    the file grew since."""
    with _landing(landing).open(name) as handle:
        handle.seek(offset)
        return handle.read(size - offset)


def sha256_prefix(landing: LandingFolder | str | Path, name: str, size: int) -> str:
    """The SHA-256 of the first ``size`` bytes of a landing file."""
    digest = hashlib.sha256()
    remaining = size
    with _landing(landing).open(name) as handle:
        while remaining > 0:
            chunk = handle.read(min(1 << 20, remaining))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class FileFacts:
    """What planning needs to know of a landed file's first ``size`` bytes: its hash, its
    shape, and whether it still starts with the bytes an earlier batch ingested."""

    sha256: str
    lines: int
    complete: bool
    """Empty, or ends with a newline."""
    prefix_sha256: str | None = None
    """SHA-256 of the first ``known_size`` bytes, when asked and the file is that long."""


def file_facts(landing: LandingFolder | str | Path, name: str, size: int,
               known_size: int | None = None) -> FileFacts:
    """Read the first ``size`` bytes of a landed file once, in chunks, for its facts."""
    digest = hashlib.sha256()
    prefix: str | None = None
    lines, last, read = 0, b"", 0
    with _landing(landing).open(name) as handle:
        while read < size:
            chunk = handle.read(min(1 << 20, size - read))
            if not chunk:
                break
            if known_size is not None and prefix is None and read + len(chunk) >= known_size:
                cut = known_size - read
                digest.update(chunk[:cut])
                prefix = digest.hexdigest()
                digest.update(chunk[cut:])
            else:
                digest.update(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
            read += len(chunk)
    if known_size == 0:
        prefix = EMPTY_SHA256
    return FileFacts(digest.hexdigest(), lines, read == 0 or last == b"\n", prefix)
