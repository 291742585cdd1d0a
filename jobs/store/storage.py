"""Locations of the platform's data: a local folder or any Hadoop filesystem URI.

The warehouse, the landing folder and checkpoints are *locations*: a local path (made absolute)
or a URI such as ``s3a://bucket/wh``, ``abfss://...`` or ``gs://...``. Spark and Delta read
and write either through Hadoop's FileSystem; the few files the platform keeps itself (the
ingest log, checkpoint metadata) are read and written here, by Python for a local folder and
through the JVM's Hadoop FileSystem otherwise, so no code assumes a local disk.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(location: str) -> bool:
    """True for ``scheme://...`` (``file://`` included), False for a plain path."""
    return bool(_SCHEME.match(location))


def is_local(location: str) -> bool:
    return not is_uri(location) or location.startswith("file:")


def normalise(location: str | Path) -> str:
    """A plain path made absolute (``~`` expanded); a URI with ``.`` and ``..`` resolved and
    no trailing slash. ``file://`` URIs become plain paths."""
    text = str(location)
    if text.startswith("file:"):
        text = urlsplit(text).path
    if not is_uri(text):
        return str(Path(text).expanduser().absolute())
    parts = urlsplit(text)
    path = posixpath.normpath(parts.path or "/")
    return f"{parts.scheme}://{parts.netloc}{'' if path == '/' else path}"


def join(base: str, *parts: str) -> str:
    """``base`` and ``parts`` joined with ``/`` (a URI stays a URI)."""
    if not is_uri(base):
        return str(Path(base, *parts))
    return "/".join([base.rstrip("/"), *[p.strip("/") for p in parts]])


def local_path(location: str) -> Path:
    """The local folder of a local location; a ``ValueError`` for a remote one."""
    if not is_local(location):
        raise ValueError(f"{location} is not on the local filesystem")
    return Path(normalise(location))


def is_inside(location: str, folder: str) -> bool:
    """Whether ``location`` lies strictly below ``folder`` (both normalised; symlinks of local
    paths resolved), so a configured path cannot reach other files."""
    if is_local(location) and is_local(folder):
        resolved = Path(normalise(location)).resolve()
        return Path(normalise(folder)).resolve() in resolved.parents
    inner, outer = normalise(location), normalise(folder)
    return inner.startswith(outer.rstrip("/") + "/")


def object_store_uri(location: str) -> str:
    """The URI the native object-store clients (delta-rs, Arrow) take: they spell Hadoop's
    ``s3a://`` as ``s3://``; anything else is the same."""
    return "s3://" + location[len("s3a://"):] if location.startswith("s3a://") else location


def arrow_filesystem(location: str):
    """Apache Arrow's filesystem for a remote location and the path inside it; credentials
    and endpoints come from the standard environment variables (``AWS_*``,
    ``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_*``)."""
    from pyarrow import fs

    filesystem, path = fs.FileSystem.from_uri(object_store_uri(location))
    return filesystem, path.rstrip("/")


def read_small_text(location: str) -> str | None:
    """A small text file's content, or ``None`` if there is none; no Spark needed, so the
    command line can check a remote warehouse before it starts a session."""
    if is_local(location):
        path = local_path(location)
        return path.read_text(encoding="utf-8") if path.is_file() else None
    filesystem, path = arrow_filesystem(location)
    try:
        with filesystem.open_input_stream(path) as handle:
            return handle.read().decode("utf-8")
    except FileNotFoundError:
        return None


def write_small_text(location: str, text: str) -> None:
    """Replace a small text file whole: a local one is written beside it and renamed over it,
    so a reader (or a crash) never sees half of it; an object store's put is whole anyway."""
    if is_local(location):
        path = local_path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            partial.write_text(text, encoding="utf-8")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(path)
        return
    filesystem, path = arrow_filesystem(location)
    with filesystem.open_output_stream(path) as handle:
        handle.write(text.encode("utf-8"))


def delete_tree(location: str) -> None:
    """Remove a folder and everything below it (nothing when it is not there); no Spark."""
    if is_local(location):
        shutil.rmtree(local_path(location), ignore_errors=True)
        return
    filesystem, path = arrow_filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_dir(path)


def list_folders(location: str) -> list[str]:
    """Names of the folders directly in ``location`` (none when it is not there); no Spark."""
    return _names(location, folders=True)


def list_file_names(location: str) -> list[str]:
    """Names of the files directly in ``location`` (none when it is not there); no Spark."""
    return _names(location, folders=False)


def _names(location: str, folders: bool) -> list[str]:
    if is_local(location):
        path = local_path(location)
        if not path.is_dir():
            return []
        return sorted(e.name for e in os.scandir(path) if (e.is_dir() if folders else e.is_file()))
    from pyarrow import fs

    filesystem, path = arrow_filesystem(location)
    try:
        infos = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
    except FileNotFoundError:
        return []
    wanted = fs.FileType.Directory if folders else fs.FileType.File
    return sorted(info.base_name for info in infos if info.type == wanted)


def delete_file(location: str) -> None:
    """Remove one file (nothing when it is not there); no Spark."""
    if is_local(location):
        local_path(location).unlink(missing_ok=True)
        return
    filesystem, path = arrow_filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_file(path)


class Files:
    """Small whole-file reads and writes at a location (local disk or Hadoop FileSystem).

    ``create`` is exclusive: it fails with ``FileExistsError`` when the file exists, which the
    ingest log uses to let only one of two concurrent ingests plan a batch (as Structured
    Streaming's offset log does).
    """

    def __init__(self, spark: SparkSession | None = None) -> None:
        self._spark = spark

    def _fs(self, location: str):
        if self._spark is None:
            raise ValueError(f"{location}: a Spark session is needed for remote files")
        jvm = self._spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(location)
        return path, path.getFileSystem(self._spark._jsc.hadoopConfiguration())

    def exists(self, location: str) -> bool:
        if is_local(location):
            return local_path(location).exists()
        path, fs = self._fs(location)
        return bool(fs.exists(path))

    def read_text(self, location: str) -> str:
        if is_local(location):
            return local_path(location).read_text(encoding="utf-8")
        path, fs = self._fs(location)
        if not fs.exists(path):
            raise FileNotFoundError(location)
        stream = fs.open(path)
        try:
            data = self._spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def create(self, location: str, text: str) -> None:
        """Write a new file; ``FileExistsError`` if it is already there. A local write that
        fails part-way (a full disk) leaves no file: a half-written one would be taken as
        written by whoever looks next."""
        if is_local(location):
            path = local_path(location)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as handle:
                try:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
                except BaseException:
                    path.unlink(missing_ok=True)
                    raise
            return
        path, fs = self._fs(location)
        try:
            stream = fs.create(path, False)
        except Exception as error:
            if "FileAlreadyExists" in type(error).__name__ or "already exists" in str(error):
                raise FileExistsError(location) from None
            raise
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def names(self, folder: str, suffix: str = "") -> list[str]:
        """Names of the files directly in ``folder`` ending with ``suffix`` (none if it does
        not exist)."""
        if is_local(folder):
            path = local_path(folder)
            if not path.is_dir():
                return []
            return sorted(entry.name for entry in os.scandir(path)
                          if entry.is_file() and entry.name.endswith(suffix))
        path, fs = self._fs(folder)
        if not fs.exists(path):
            return []
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(path)
                      if status.isFile() and str(status.getPath().getName()).endswith(suffix))

    def delete(self, location: str) -> None:
        if is_local(location):
            local_path(location).unlink(missing_ok=True)
            return
        path, fs = self._fs(location)
        fs.delete(path, False)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_S3_CODE = re.compile(r"<Code>([^<]*)</Code>\s*<Message>([^<]*)</Message>")


def describe_error(error: BaseException, limit: int = 400) -> str:
    """An object-store client's error in one line: ``deltalake`` chains its causes over
    coloured, indented lines and ends with the server's XML; a person needs the chain's
    words and the S3 error code."""
    text = _ANSI.sub("", str(error)) or repr(error)
    code = _S3_CODE.search(text)
    text = _S3_CODE.sub("", text.split("<?xml", 1)[0])
    parts = [part.strip(" \n↳") for part in text.splitlines()]
    line = ": ".join(part for part in parts if part)
    if code:
        line += f": {code.group(1)} ({code.group(2)})"
    return line if len(line) <= limit else line[: limit - 3] + "..."
